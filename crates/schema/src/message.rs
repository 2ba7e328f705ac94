use serde::{Deserialize, Serialize};

use crate::tool::{ToolCall, ToolResult};

/// Who wrote a message. The system prompt is not a message: it travels beside the history
/// (Anthropic's shape), and adapters for APIs that want a system message add it themselves.
/// Tool results are user-side content blocks (again Anthropic's shape); the OpenAI adapter
/// turns each into a `role: "tool"` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One piece of a message, the same for every provider. Written with its `type` first; read
/// by hand (`content_block_de.rs`), in the same shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    /// Model reasoning, kept apart from the answer. `signature` is the provider's opaque
    /// token that must be sent back unchanged for the reasoning to be accepted in a later turn.
    Thinking {
        thinking: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// The provider that signed it: a signature goes back only to the provider that made
        /// it (another one rejects it), e.g. after a failover. `None`: unknown, sent as is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// Reasoning the provider encrypted; only ever echoed back, and only to `origin`.
    RedactedThinking {
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    Image(Image),
    ToolUse(ToolCall),
    ToolResult(ToolResult),
}

/// An image the user sent. In memory the bytes are inline (`data`, base64); a transcript keeps
/// them in a file beside it instead (`file`), so a photo does not bloat every line read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// Base64 (standard alphabet, padded).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
    /// Where the bytes are kept, relative to the sessions directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl Image {
    /// The decoded size in bytes of the inline data.
    pub fn byte_len(&self) -> usize {
        let padding = self.data.bytes().rev().take_while(|b| *b == b'=').count();
        (self.data.len() / 4 * 3).saturating_sub(padding)
    }
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmMessage {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl LlmMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// The concatenated text blocks, without reasoning or tool traffic.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolUse(call) => Some(call),
            _ => None,
        })
    }

    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolResult(result) => Some(result),
            _ => None,
        })
    }

    /// A question from the user, not tool results: where a turn, and so a history window, a
    /// consolidated part or a compacted part, may begin.
    pub fn starts_turn(&self) -> bool {
        self.role == Role::User && self.tool_results().next().is_none()
    }

    pub fn images(&self) -> impl Iterator<Item = &Image> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::Image(image) => Some(image),
            _ => None,
        })
    }
}

/// Why the model stopped producing output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A complete answer.
    EndTurn,
    /// The model wants tool results before it continues.
    ToolUse,
    /// Cut off by the output-token limit: the answer is truncated.
    MaxTokens,
    StopSequence,
    /// The model declined to answer; any text is its explanation.
    Refusal,
    /// A reason this version does not know, kept verbatim.
    Other(String),
}
