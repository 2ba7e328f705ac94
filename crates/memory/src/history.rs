use nanocrab_schema::LlmMessage;

use crate::tokens::estimate_tokens;

/// The most recent messages that fit `budget_tokens`. The window always starts at a user
/// message that is not a tool result, so a tool call is never separated from its result and
/// the model never sees an answer without its question. The newest user turn is always kept,
/// even when it alone is over budget.
pub fn window(messages: &[LlmMessage], budget_tokens: usize) -> &[LlmMessage] {
    let mut used = 0;
    let mut start = messages.len();
    for (i, message) in messages.iter().enumerate().rev() {
        used += estimate_tokens(message);
        if used > budget_tokens && start < messages.len() {
            break;
        }
        if message.starts_turn() {
            start = i;
        }
    }
    &messages[start..]
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
        assert_eq!(window(&messages, 10_000), &messages[..]);
        // Room for the last turn only: it starts at its question, not at the tool result.
        assert_eq!(window(&messages, 150), &messages[2..]);
    }

    #[test]
    fn the_newest_turn_is_kept_even_over_budget() {
        let messages = vec![LlmMessage::user("old"), LlmMessage::user("x".repeat(4000))];
        assert_eq!(window(&messages, 10), &messages[1..]);
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
        let mut starts = Vec::new();
        for budget in 0..1_000 {
            let kept = window(&messages, budget);
            starts.push(messages.len() - kept.len());
        }
        starts.dedup();
        assert_eq!(starts, vec![4, 0]);
    }
}
