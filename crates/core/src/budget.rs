//! The window arithmetic of a turn: how many tokens of history fit in the context window
//! beside the system prompt, the tool schemas and the answer, and how far the estimate of
//! them is from what the provider counts.

use std::borrow::Cow;

use nanocrab_schema::{LlmMessage, ToolDef};
use nanocrab_sessions::TokenCounter;

use crate::agent::AgentSettings;

/// Bounds of the learned provider-tokens-per-estimated-token ratio: a wild usage report
/// (a mock, a provider that counts oddly) must not empty or overflow the window.
const MIN_TOKEN_RATIO: f64 = 0.5;
const MAX_TOKEN_RATIO: f64 = 4.0;

/// What `tools` take of a request as `count` has it: each one's name, description and schema.
pub(crate) fn tools_size(tools: &[ToolDef], count: impl Fn(&str) -> usize) -> usize {
    tools
        .iter()
        .map(|t| count(&t.name) + count(&t.description) + count(&t.parameters.to_string()))
        .sum()
}

/// The history budget of one turn, in counted tokens.
pub(crate) struct Budget<'a> {
    counter: TokenCounter,
    system: &'a str,
    /// The tools each request sends: all of them, or, when some are deferred, the ones
    /// offered so far this turn.
    tools: Cow<'a, [ToolDef]>,
    /// What is left of the window once the answer is accounted for, in counted tokens.
    room: usize,
    /// The system prompt and tool schemas, as first bounded.
    fixed: usize,
    history: usize,
    /// Whether the prompt was counted, not only bounded; counting an OpenAI model's prompt
    /// loads its vocabulary, so it waits until the conversation is long enough to matter.
    counted: bool,
    /// The answer's share of the window.
    pub(crate) max_tokens: u32,
}

impl<'a> Budget<'a> {
    /// A model with a smaller window than configured (`model_window`, a small local one) has
    /// the history fitted to its own, and keeps a quarter of it for the answer. An estimate is
    /// scaled by `token_ratio`, what this conversation's provider has been seen to count; an
    /// exact count is not: it already is the provider's, and the ratio, learned against the
    /// estimate, would only distort it.
    pub(crate) fn new(
        counter: TokenCounter,
        system: &'a str,
        tools: Cow<'a, [ToolDef]>,
        settings: &AgentSettings,
        model_window: Option<u32>,
        token_ratio: Option<f64>,
    ) -> Self {
        let (context_window, max_tokens) = match model_window {
            Some(window) => (
                settings.context_window_tokens.min(window),
                settings.max_tokens.min(window / 4),
            ),
            None => (settings.context_window_tokens, settings.max_tokens),
        };
        let ratio = if counter.is_exact() {
            1.0
        } else {
            token_ratio
                .unwrap_or(1.0)
                .clamp(MIN_TOKEN_RATIO, MAX_TOKEN_RATIO)
        };
        let room =
            ((context_window as usize).saturating_sub(max_tokens as usize) as f64 / ratio) as usize;
        let mut budget = Self {
            counter,
            system,
            tools,
            room,
            fixed: 0,
            history: 0,
            counted: !counter.is_exact(),
            max_tokens,
        };
        // First from the free bounds, which never make a budget larger than counting does: a
        // history whose bounds fit it fits the counted budget too. The estimate's bounds are
        // its counts.
        (budget.fixed, budget.history) = budget.measure(|text| counter.bound_text(text));
        budget
    }

    /// The prompt and tool schemas as `count` has them, and what that leaves for history.
    fn measure(&self, count: impl Fn(&str) -> usize) -> (usize, usize) {
        let fixed = count(self.system) + tools_size(&self.tools, &count);
        (fixed, self.room.saturating_sub(fixed).max(1_000))
    }

    /// The tools the requests send.
    pub(crate) fn tools(&self) -> &[ToolDef] {
        &self.tools
    }

    /// Sends `tools` from now on (`tool_search` loaded some): what they take is left out of
    /// the history's share, counted as the rest of the prompt is.
    pub(crate) fn offer(&mut self, tools: Cow<'a, [ToolDef]>) {
        self.tools = tools;
        let counter = self.counter;
        (self.fixed, self.history) = self.measure(|text| counter.bound_text(text));
        if self.counted {
            self.history = self.measure(|text| counter.count_text(text)).1;
        }
    }

    /// The tokens of history that fit.
    pub(crate) fn history(&self) -> usize {
        self.history
    }

    /// The history size past which the older part is compacted.
    pub(crate) fn compaction_trigger(&self) -> usize {
        (self.history as f64 * crate::compaction::TRIGGER_SHARE) as usize
    }

    /// Counts the prompt instead of bounding it once a history bounded at `history_bound`
    /// passes `limit`: only then can the difference matter.
    pub(crate) fn count_past(&mut self, history_bound: usize, limit: usize) {
        if !self.counted && history_bound > limit {
            self.history = self.measure(|text| self.counter.count_text(text)).1;
            self.counted = true;
        }
    }

    /// The estimated size of a request sending `messages`, to learn the provider's ratio
    /// from; `None` for an exact count, which has no error to learn: what the provider adds
    /// around the text (each message's framing, its rendering of the tool schemas) is small,
    /// fixed and already counted, the schemas as their JSON, which is a little longer.
    pub(crate) fn estimate(&self, messages: &[LlmMessage]) -> Option<usize> {
        (!self.counter.is_exact()).then(|| {
            self.fixed
                + messages
                    .iter()
                    .map(|m| self.counter.count_message(m))
                    .sum::<usize>()
        })
    }
}

/// The provider-tokens-per-estimated-token ratio after one request whose size was
/// `estimated` and which the provider billed as `reported`; `None` when `old` stands.
pub(crate) fn learn_ratio(old: Option<f64>, estimated: usize, reported: u64) -> Option<f64> {
    if estimated == 0 || reported == 0 {
        return None;
    }
    let seen = (reported as f64 / estimated as f64).clamp(MIN_TOKEN_RATIO, MAX_TOKEN_RATIO);
    // A moving average: one odd request (a cached prompt reported oddly) moves it little.
    let ratio = old.map_or(seen, |old| old * 0.7 + seen * 0.3);
    old.is_none_or(|old| (old - ratio).abs() > old * 0.05)
        .then_some(ratio)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_offered_later_in_a_turn_take_their_share_of_the_window() {
        let counter = TokenCounter::for_model("claude-sonnet-4-5");
        let settings = AgentSettings {
            max_tokens: 1_000,
            temperature: None,
            max_tool_iterations: 10,
            context_window_tokens: 20_000,
        };
        let loaded = vec![ToolDef {
            name: "github__create_issue".into(),
            description: "Create an issue. ".repeat(200),
            parameters: serde_json::json!({"type": "object"}),
        }];
        let mut budget = Budget::new(counter, "system", Cow::Borrowed(&[]), &settings, None, None);
        let before = budget.history();
        budget.offer(Cow::Borrowed(&loaded));
        let tool = &loaded[0];
        assert_eq!(
            before - budget.history(),
            counter.bound_text(&tool.name)
                + counter.bound_text(&tool.description)
                + counter.bound_text(&tool.parameters.to_string())
        );
        assert_eq!(budget.tools(), &loaded[..]);
    }
}
