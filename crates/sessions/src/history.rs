use nanocrab_schema::LlmMessage;

use crate::tokens::TokenCounter;

/// The messages sent to the model, each sized once as it joins: the window is taken again for
/// every model call of a turn, and an exact count of a long history is not free. Exact counts
/// are made only once the free bounds no longer settle the question, so a short conversation
/// never loads a vocabulary.
#[derive(Debug, Clone)]
pub struct CountedHistory {
    counter: TokenCounter,
    messages: Vec<LlmMessage>,
    /// Each message's [`TokenCounter::bound_message`].
    bounds: Vec<usize>,
    /// Each message's [`TokenCounter::count_message`], once one was needed.
    tokens: Option<Vec<usize>>,
}

impl CountedHistory {
    pub fn new(counter: TokenCounter, messages: Vec<LlmMessage>) -> Self {
        let bounds = messages.iter().map(|m| counter.bound_message(m)).collect();
        Self {
            counter,
            messages,
            bounds,
            tokens: None,
        }
    }

    pub fn push(&mut self, message: LlmMessage) {
        self.bounds.push(self.counter.bound_message(&message));
        if let Some(tokens) = &mut self.tokens {
            tokens.push(self.counter.count_message(&message));
        }
        self.messages.push(message);
    }

    /// At least the tokens of all of it; what they are for the estimate.
    pub fn bound(&self) -> usize {
        self.bounds.iter().sum()
    }

    /// Whether all of it is over `limit` tokens.
    pub fn exceeds(&mut self, limit: usize) -> bool {
        self.bound() > limit
            && counts(self.counter, &self.messages, &mut self.tokens)
                .iter()
                .sum::<usize>()
                > limit
    }

    /// The most recent messages that fit `budget_tokens`. The window always starts at a user
    /// message that is not a tool result, so a tool call is never separated from its result
    /// and the model never sees an answer without its question. The newest user turn is
    /// always kept, even when it alone is over budget.
    pub fn window(&mut self, budget_tokens: usize) -> &[LlmMessage] {
        if self.bound() <= budget_tokens {
            return &self.messages;
        }
        let mut used = 0;
        let mut start = self.messages.len();
        let tokens = counts(self.counter, &self.messages, &mut self.tokens);
        for (i, (message, tokens)) in self.messages.iter().zip(tokens).enumerate().rev() {
            used += tokens;
            if used > budget_tokens && start < self.messages.len() {
                break;
            }
            if message.starts_turn() {
                start = i;
            }
        }
        &self.messages[start..]
    }
}

/// The history's counts, made now if they were not yet; apart from `CountedHistory` so that
/// its messages can be read while its counts are borrowed.
fn counts<'a>(
    counter: TokenCounter,
    messages: &[LlmMessage],
    tokens: &'a mut Option<Vec<usize>>,
) -> &'a [usize] {
    tokens.get_or_insert_with(|| messages.iter().map(|m| counter.count_message(m)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nanocrab_schema::{ContentBlock, Role, ToolCall, ToolResult};
    use pretty_assertions::assert_eq;

    fn call(id: &str) -> LlmMessage {
        LlmMessage {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse(ToolCall {
                id: id.into(),
                name: "list_dir".into(),
                input: serde_json::json!({"path": "."}),
            })],
        }
    }

    fn result(id: &str) -> LlmMessage {
        LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::ok(
                id,
                "x".repeat(400),
            ))],
        }
    }

    fn estimated(messages: &[LlmMessage]) -> CountedHistory {
        CountedHistory::new(TokenCounter::Estimate, messages.to_vec())
    }

    #[test]
    fn keeps_whole_turns_that_fit() {
        let messages = vec![
            LlmMessage::user("a".repeat(400)),
            LlmMessage::assistant("b".repeat(400)),
            LlmMessage::user("second question"),
            call("c1"),
            result("c1"),
            LlmMessage::assistant("answer"),
        ];
        assert_eq!(estimated(&messages).window(10_000), &messages[..]);
        // Room for the last turn only: it starts at its question, not at the tool result.
        assert_eq!(estimated(&messages).window(150), &messages[2..]);
    }

    #[test]
    fn the_newest_turn_is_kept_even_over_budget() {
        let messages = vec![LlmMessage::user("old"), LlmMessage::user("x".repeat(4000))];
        assert_eq!(estimated(&messages).window(10), &messages[1..]);
    }

    #[test]
    fn no_budget_starts_a_window_on_a_tool_result_or_an_answer() {
        let messages = vec![
            LlmMessage::user("first"),
            call("c1"),
            result("c1"),
            LlmMessage::assistant("one"),
            LlmMessage::user("second"),
            call("c2"),
            result("c2"),
            call("c3"),
            result("c3"),
            LlmMessage::assistant("two"),
        ];
        let mut history = estimated(&messages);
        let mut starts = Vec::new();
        for budget in 0..1_000 {
            let kept = history.window(budget);
            starts.push(messages.len() - kept.len());
        }
        starts.dedup();
        assert_eq!(starts, vec![4, 0]);
    }

    #[test]
    fn pushed_messages_are_counted_with_the_rest() {
        let mut history = estimated(&[LlmMessage::user("a".repeat(400))]);
        assert_eq!(history.bound(), 104);
        history.push(LlmMessage::assistant("b".repeat(40)));
        assert_eq!(history.bound(), 104 + 14);
        assert!(history.exceeds(117));
        assert!(!history.exceeds(118));
    }

    /// Long runs of one letter are a few BPE tokens but many estimated ones: the window of an
    /// OpenAI model keeps what the estimate would drop, whether its bounds settle it or its
    /// counts must.
    #[cfg(feature = "tiktoken")]
    #[test]
    fn the_window_counts_with_the_models_counter() {
        let messages = vec![
            LlmMessage::user("x".repeat(8_000)),
            LlmMessage::assistant("ok"),
            LlmMessage::user("x".repeat(8_000)),
        ];
        let counted = 1_004 + 5 + 1_004;
        let exact = || CountedHistory::new(TokenCounter::for_model("gpt-4o"), messages.clone());
        assert_eq!(exact().bound(), 8_004 + 6 + 8_004);
        assert_eq!(exact().window(2_500), &messages[..]);
        assert_eq!(exact().window(16_014), &messages[..]);
        assert_eq!(exact().window(counted - 1), &messages[2..]);
        assert!(exact().exceeds(counted - 1));
        assert!(!exact().exceeds(counted));
        let mut pushed = exact();
        assert!(pushed.exceeds(counted - 1));
        pushed.push(LlmMessage::assistant("ok"));
        assert!(!pushed.exceeds(counted + 5));
        assert!(pushed.exceeds(counted + 4));
        assert_eq!(estimated(&messages).window(2_500), &messages[2..]);
    }
}
