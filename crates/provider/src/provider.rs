use std::borrow::Cow;

use async_trait::async_trait;
use nanocrab_schema::{ContentBlock, LlmMessage, StopReason, ToolDef, Usage};

use crate::error::ProviderError;

/// One model call, provider-neutral. It borrows what the caller already holds (the history
/// window, the system prompt, the tool definitions): a turn sends its whole history with every
/// model call, and copying it on the way to the wire is what a busy gateway would spend its
/// time on. [`ChatRequest::to_owned_request`] makes a copy that outlives the caller's data.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest<'a> {
    /// The model name without the `provider/` prefix.
    pub model: Cow<'a, str>,
    pub system: Cow<'a, str>,
    pub messages: Cow<'a, [LlmMessage]>,
    pub tools: Cow<'a, [ToolDef]>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
}

impl ChatRequest<'_> {
    /// This request for `model`, borrowing everything else from it.
    pub fn for_model<'b>(&'b self, model: &'b str) -> ChatRequest<'b> {
        ChatRequest {
            model: Cow::Borrowed(model),
            system: Cow::Borrowed(&self.system),
            messages: Cow::Borrowed(&self.messages),
            tools: Cow::Borrowed(&self.tools),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
        }
    }

    /// A copy owning all of its data (a test's record of what was sent).
    pub fn to_owned_request(&self) -> ChatRequest<'static> {
        ChatRequest {
            model: Cow::Owned(self.model.to_string()),
            system: Cow::Owned(self.system.to_string()),
            messages: Cow::Owned(self.messages.to_vec()),
            tools: Cow::Owned(self.tools.to_vec()),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
        }
    }
}

/// The assembled answer of one model call: text, reasoning and tool calls as content blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// The model that answered, as the provider reported it.
    pub model: String,
}

/// Incremental output while a response streams. Tool calls are not streamed piecemeal: they
/// arrive whole in [`ChatResponse::content`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderDelta {
    Text(String),
    Reasoning(String),
    /// The request failed and is about to be sent again: nothing of the answer has come yet.
    Retry(RetryNotice),
}

/// A failed attempt that is tried again, as the user is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNotice {
    pub provider: String,
    /// The HTTP status, or the kind of the error: see [`crate::ProviderError::brief`].
    pub reason: String,
    pub delay: std::time::Duration,
    /// The number of the attempt about to be made, counting the first.
    pub attempt: u32,
    /// The most attempts that will be made.
    pub attempts: u32,
}

/// Where an adapter pushes [`ProviderDelta`]s as they arrive.
pub type DeltaSink<'a> = &'a mut (dyn FnMut(ProviderDelta) + Send);

/// A language model behind some wire protocol.
#[async_trait]
pub trait LlmProvider: Send + Sync {
    /// The provider's name as used in `provider/model` (`anthropic`, `openai`, `custom`, ...).
    fn name(&self) -> &str;

    /// Runs one model call, streaming text and reasoning into `on_delta` as they arrive, and
    /// returns the whole response once the stream ends.
    async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, ProviderError>;
}
