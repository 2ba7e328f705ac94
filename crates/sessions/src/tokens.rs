//! Token counts for sizing what is sent against the context window: exact for OpenAI-family
//! models, whose vocabularies are public and ship packed in this crate (cargo feature
//! `tiktoken`), an estimate of about four characters a token for every other model.

use nanocrab_schema::{ContentBlock, LlmMessage};

/// What a picture is counted as, whatever its byte size: providers bill one at up to about
/// 1,600 tokens (OpenAI's high-detail tiles stay under that too).
const IMAGE_TOKENS: usize = 1_600;
/// Each message's framing (role and delimiters): OpenAI's cookbook counts 3 tokens a message
/// plus the role's one.
const MESSAGE_TOKENS: usize = 4;

/// A rough token count: about four characters a token for English text and JSON. Used only to
/// decide how much history fits; the provider's usage report is the real figure.
pub fn estimate_tokens(message: &LlmMessage) -> usize {
    let chars: usize = message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Thinking { thinking, .. } => thinking.len(),
            ContentBlock::RedactedThinking { data, .. } => data.len(),
            ContentBlock::Image(_) => IMAGE_TOKENS * 4,
            ContentBlock::ToolUse(call) => call.name.len() + call.input.to_string().len(),
            ContentBlock::ToolResult(result) => result.content.len(),
        })
        .sum();
    chars / 4 + MESSAGE_TOKENS
}

/// An OpenAI vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-4.5, GPT-5, the o-series and Codex.
    O200kBase,
    /// GPT-4 and GPT-3.5 Turbo.
    Cl100kBase,
}

impl Encoding {
    /// The vocabulary of an OpenAI model by its name, wherever it is served: `gpt-4o` on
    /// OpenAI, `openai/gpt-4o` on a gateway, `gpt-4o` behind an Azure-style endpoint, and
    /// fine-tunes (`ft:gpt-4o-mini:org::id`). `None` for every other model.
    pub fn for_model(model: &str) -> Option<Self> {
        let name = model
            .rsplit_once('/')
            .map_or(model, |(_, name)| name)
            .to_ascii_lowercase();
        let name = name.strip_prefix("ft:").unwrap_or(&name);
        // A family's name alone or followed by `-`: `o1-mini` is OpenAI's, `o1x` need not be,
        // and `gpt-4.5` must not pass for `gpt-4`.
        let family = |prefix: &str| {
            name.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
        };
        if [
            "gpt-4o",
            "chatgpt-4o",
            "gpt-4.1",
            "gpt-4.5",
            "o1",
            "o3",
            "o4",
        ]
        .into_iter()
        .any(family)
            || ["gpt-5", "codex-"]
                .into_iter()
                .any(|prefix| name.starts_with(prefix))
        {
            Some(Self::O200kBase)
        } else if ["gpt-4", "gpt-3.5-turbo", "gpt-35-turbo"]
            .into_iter()
            .any(family)
        {
            Some(Self::Cl100kBase)
        } else {
            None
        }
    }

    /// The exact count of `text`; `None` when this build has no vocabularies. The first use
    /// of each vocabulary parses it (0.2 to 0.3 s for o200k), once per process.
    #[cfg(feature = "tiktoken")]
    fn count(self, text: &str) -> Option<usize> {
        use std::sync::LazyLock;
        use tiktoken_rs::CoreBPE;

        // Apart, so that a process only ever unpacks the one its model uses. A vocabulary that
        // cannot be unpacked (a broken build) leaves the estimate in charge, not a panic.
        static O200K: LazyLock<Option<CoreBPE>> = LazyLock::new(|| {
            crate::vocabularies::load(Encoding::O200kBase)
                .inspect_err(|err| tracing::warn!("o200k_base: {err}; estimating tokens"))
                .ok()
        });
        static CL100K: LazyLock<Option<CoreBPE>> = LazyLock::new(|| {
            crate::vocabularies::load(Encoding::Cl100kBase)
                .inspect_err(|err| tracing::warn!("cl100k_base: {err}; estimating tokens"))
                .ok()
        });
        let bpe = match self {
            Self::O200kBase => &*O200K,
            Self::Cl100kBase => &*CL100K,
        };
        // Ordinary: `<|endoftext|>` in a user's text is text to the API, not a control token.
        bpe.as_ref().map(|bpe| bpe.encode_ordinary(text).len())
    }

    #[cfg(not(feature = "tiktoken"))]
    fn count(self, _text: &str) -> Option<usize> {
        None
    }
}

/// How one model's tokens are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCounter {
    /// About four characters a token, to be scaled by what the provider's usage reports show
    /// it really counts: other vendors' tokenizers are not public or not shipped.
    Estimate,
    /// The model's own vocabulary: the provider counts the same, so there is nothing to scale.
    Exact(Encoding),
}

impl TokenCounter {
    /// Exact for an OpenAI-family model when this build has the vocabularies, the estimate
    /// otherwise. Nothing is loaded until something is counted.
    pub fn for_model(model: &str) -> Self {
        match Encoding::for_model(model) {
            Some(encoding) if cfg!(feature = "tiktoken") => Self::Exact(encoding),
            Some(_) | None => Self::Estimate,
        }
    }

    pub fn is_exact(self) -> bool {
        match self {
            Self::Estimate => false,
            Self::Exact(_) => true,
        }
    }

    pub fn count_text(self, text: &str) -> usize {
        match self {
            Self::Estimate => text.len() / 4,
            Self::Exact(encoding) => encoding.count(text).unwrap_or(text.len() / 4),
        }
    }

    /// At least [`Self::count_text`], at no cost: a BPE token is never shorter than a byte, so
    /// while the bytes fit, the tokens do, and no vocabulary need be loaded to know it. The
    /// estimate is its own bound.
    pub fn bound_text(self, text: &str) -> usize {
        match self {
            Self::Estimate => text.len() / 4,
            Self::Exact(_) => text.len(),
        }
    }

    /// A message as sent: its text, tool calls and results, and its framing.
    pub fn count_message(self, message: &LlmMessage) -> usize {
        match self {
            Self::Estimate => estimate_tokens(message),
            Self::Exact(_) => Self::sum_message(message, |text| self.count_text(text)),
        }
    }

    /// At least [`Self::count_message`], at no cost.
    pub fn bound_message(self, message: &LlmMessage) -> usize {
        match self {
            Self::Estimate => estimate_tokens(message),
            Self::Exact(_) => Self::sum_message(message, |text| self.bound_text(text)),
        }
    }

    fn sum_message(message: &LlmMessage, count: impl Fn(&str) -> usize) -> usize {
        let content: usize = message
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::Text { text } => count(text),
                ContentBlock::Thinking { thinking, .. } => count(thinking),
                // Opaque (encrypted) reasoning: billed as the reasoning it stands for, which
                // its size only hints at.
                ContentBlock::RedactedThinking { data, .. } => data.len() / 4,
                ContentBlock::Image(_) => IMAGE_TOKENS,
                ContentBlock::ToolUse(call) => count(&call.name) + count(&call.input.to_string()),
                ContentBlock::ToolResult(result) => count(&result.content),
            })
            .sum();
        content + MESSAGE_TOKENS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn openai_models_are_recognised_wherever_they_are_served() {
        for model in [
            "gpt-4o",
            "gpt-4o-mini",
            "openai/gpt-4o-2024-08-06",
            "GPT-4.1-nano",
            "gpt-4.5-preview",
            "gpt-5",
            "gpt-5.1-codex",
            "o1",
            "o3-mini",
            "openai/o4-mini",
            "chatgpt-4o-latest",
            "codex-mini-latest",
            "ft:gpt-4o-mini-2024-07-18:acme::abc123",
        ] {
            assert_eq!(
                Encoding::for_model(model),
                Some(Encoding::O200kBase),
                "{model}"
            );
        }
        for model in [
            "gpt-4",
            "gpt-4-turbo",
            "gpt-4-0613",
            "openai/gpt-3.5-turbo",
            "gpt-35-turbo",
        ] {
            assert_eq!(
                Encoding::for_model(model),
                Some(Encoding::Cl100kBase),
                "{model}"
            );
        }
        for model in [
            "claude-sonnet-4-5",
            "anthropic/claude-sonnet-4.5",
            "gemini-2.5-pro",
            "qwen3",
            "o1x",
            "gpt-oss-120b",
            "llama-3.3-70b",
            "bench-model",
        ] {
            assert_eq!(Encoding::for_model(model), None, "{model}");
        }
    }

    #[test]
    fn other_models_get_the_estimate() {
        let counter = TokenCounter::for_model("anthropic/claude-sonnet-4.5");
        assert_eq!(counter, TokenCounter::Estimate);
        assert!(!counter.is_exact());
        assert_eq!(counter.count_text(&"x".repeat(4_000)), 1_000);
        let message = LlmMessage::user("hello world");
        assert_eq!(counter.count_message(&message), estimate_tokens(&message));
        assert_eq!(estimate_tokens(&message), 11 / 4 + 4);
        assert_eq!(counter.bound_message(&message), estimate_tokens(&message));
    }

    #[cfg(feature = "tiktoken")]
    #[test]
    fn openai_models_get_exact_counts() {
        let o200k = TokenCounter::for_model("openai/gpt-4o");
        let cl100k = TokenCounter::for_model("gpt-4");
        assert_eq!(o200k, TokenCounter::Exact(Encoding::O200kBase));
        assert_eq!(cl100k, TokenCounter::Exact(Encoding::Cl100kBase));
        assert!(o200k.is_exact());
        // "hello" and " world" are single entries of both vocabularies (o200k 24912 and 2375,
        // cl100k 15339 and 1917, as read from the .tiktoken files); "Hello, world!" is
        // Hello|,| world|!.
        for counter in [o200k, cl100k] {
            assert_eq!(counter.count_text("hello world"), 2);
            assert_eq!(counter.count_text("Hello, world!"), 4);
            assert_eq!(counter.count_text(""), 0);
            // Special tokens are text when a user writes them.
            assert!(counter.count_text("<|endoftext|>") > 1);
        }
        // Long runs merge into long tokens: far from four characters each.
        assert_eq!(o200k.count_text(&"x".repeat(8_000)), 1_000);

        let call = LlmMessage {
            role: nanocrab_schema::Role::Assistant,
            content: vec![ContentBlock::ToolUse(nanocrab_schema::ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                input: serde_json::json!({"path": "hello world"}),
            })],
        };
        assert_eq!(
            o200k.count_message(&call),
            o200k.count_text("read_file")
                + o200k.count_text(r#"{"path":"hello world"}"#)
                + MESSAGE_TOKENS
        );
        let result = LlmMessage {
            role: nanocrab_schema::Role::User,
            content: vec![
                ContentBlock::ToolResult(nanocrab_schema::ToolResult::ok("c1", "hello world")),
                ContentBlock::text("hello world"),
            ],
        };
        assert_eq!(o200k.count_message(&result), 2 + 2 + MESSAGE_TOKENS);
        assert_eq!(o200k.bound_message(&result), 11 + 11 + MESSAGE_TOKENS);
        for message in [&call, &result] {
            assert!(o200k.bound_message(message) >= o200k.count_message(message));
        }
    }

    #[cfg(not(feature = "tiktoken"))]
    #[test]
    fn without_the_vocabularies_openai_models_get_the_estimate() {
        assert_eq!(TokenCounter::for_model("gpt-4o"), TokenCounter::Estimate);
    }
}
