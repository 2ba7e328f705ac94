//! A text part and the cache breakpoint mark, as the Chat Completions body (OpenRouter's
//! cache marks) and the Anthropic Messages body both write them.

use serde::Serialize;

/// `{"type": "text", "text": ..., "cache_control": {"type": "ephemeral"}}`, the mark only on a
/// cache breakpoint.
#[derive(Serialize)]
pub(crate) struct TextPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cache_control: Option<Ephemeral>,
}

impl<'a> TextPart<'a> {
    pub(crate) fn new(text: &'a str, cached: bool) -> Self {
        Self {
            kind: "text",
            text,
            cache_control: cached.then_some(EPHEMERAL),
        }
    }
}

/// `{"type": "ephemeral"}`: a cache breakpoint.
#[derive(Serialize)]
pub(crate) struct Ephemeral {
    #[serde(rename = "type")]
    kind: &'static str,
}

pub(crate) const EPHEMERAL: Ephemeral = Ephemeral { kind: "ephemeral" };
