//! What one model accepts and how its provider wants to be spoken to: capabilities (tools,
//! images, prompt caching) and wire quirks. Built from the registry's provider defaults, the
//! model rules that match, and the user's `providers.<name>.models.<model>` settings.

/// How the configured temperature is sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Temperature {
    /// As configured.
    AsConfigured,
    /// Always this value: the model rejects any other (Kimi K2.5 wants 1.0).
    Fixed(f32),
    /// Not sent: the model accepts only its default (OpenAI reasoning models).
    Omit,
}

/// The request field that limits the answer's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`, which every OpenAI-compatible server accepts.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's reasoning models reject `max_tokens` with 400.
    MaxCompletionTokens,
}

/// Whether and how the model's earlier reasoning goes back to it in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningEcho {
    /// Not sent back: most providers ignore or reject it.
    Drop,
    /// `reasoning_content` on assistant messages: DeepSeek and Kimi answer 400 ("reasoning_content
    /// must be passed back") when a thinking model's tool-call message lacks it.
    ReasoningContent,
    /// Wrapped in `<think>` at the start of the content, where MiniMax M2 expects to find its
    /// interleaved thinking again.
    ThinkTags,
}

/// What tool-call ids the provider accepts in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallIds {
    /// Any id another provider made (letters, digits, `_` and `-` are kept; others replaced).
    Any,
    /// Exactly nine ASCII letters or digits (Mistral: "Tool call id was ... but must be a-z,
    /// A-Z, 0-9, with a length of 9").
    Alphanumeric9,
}

/// The `content` of an assistant message that only calls tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallContent {
    /// `null`, as the OpenAI spec and SDKs send it; gateways backed by Bedrock reject `""`.
    Null,
    /// `""`: Ollama rejects `null` ("invalid message content type: <nil>").
    EmptyString,
}

/// Everything the adapters and the agent need to know about one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelProfile {
    /// Native tool calling; without it the request carries no tools.
    pub tools: bool,
    /// Images in user messages; without it each image becomes a short note.
    pub vision: bool,
    /// The system prompt, tools and conversation are marked cacheable (`cache_control`).
    pub prompt_caching: bool,
    /// A reasoning model whose encrypted reasoning can be asked for and sent back (OpenAI's
    /// o-series, GPT-5 and Codex on the Responses API; other models reject the request).
    pub reasoning: bool,
    pub temperature: Temperature,
    pub max_tokens_field: MaxTokensField,
    /// `stream_options.include_usage` is sent; strict servers (Mistral) reject unknown fields.
    pub stream_usage: bool,
    pub reasoning_echo: ReasoningEcho,
    pub tool_call_ids: ToolCallIds,
    pub tool_call_content: ToolCallContent,
    /// The model's own context window when it is smaller than agents are configured for (a
    /// small local model): history and the answer are fitted to it.
    pub context_window: Option<u32>,
    /// A model too small to follow the workspace files: it gets the minimal system prompt.
    pub compact_prompt: bool,
}

impl ModelProfile {
    /// An OpenAI-compatible server nanocrab knows nothing more about.
    pub const GENERIC: Self = Self {
        tools: true,
        vision: false,
        prompt_caching: false,
        reasoning: false,
        temperature: Temperature::AsConfigured,
        max_tokens_field: MaxTokensField::MaxTokens,
        stream_usage: true,
        reasoning_echo: ReasoningEcho::Drop,
        tool_call_ids: ToolCallIds::Any,
        tool_call_content: ToolCallContent::Null,
        context_window: None,
        compact_prompt: false,
    };

    pub(crate) fn apply(&mut self, patch: &ProfilePatch) {
        let ProfilePatch {
            tools,
            vision,
            prompt_caching,
            reasoning,
            temperature,
            max_tokens_field,
            protocol: _,
        } = patch;
        if let Some(value) = tools {
            self.tools = *value;
        }
        if let Some(value) = vision {
            self.vision = *value;
        }
        if let Some(value) = prompt_caching {
            self.prompt_caching = *value;
        }
        if let Some(value) = reasoning {
            self.reasoning = *value;
        }
        if let Some(value) = temperature {
            self.temperature = *value;
        }
        if let Some(value) = max_tokens_field {
            self.max_tokens_field = *value;
        }
    }

    /// The temperature to send, if any.
    pub fn temperature(&self, configured: Option<f32>) -> Option<f32> {
        match self.temperature {
            Temperature::AsConfigured => configured,
            Temperature::Fixed(value) => Some(value),
            Temperature::Omit => None,
        }
    }
}

/// What a model rule changes; `None` leaves the provider's default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProfilePatch {
    pub tools: Option<bool>,
    pub vision: Option<bool>,
    pub prompt_caching: Option<bool>,
    pub reasoning: Option<bool>,
    pub temperature: Option<Temperature>,
    pub max_tokens_field: Option<MaxTokensField>,
    /// The model is served only over this protocol (OpenAI's Codex models: Responses only).
    pub protocol: Option<nanocrab_config::Protocol>,
}

impl ProfilePatch {
    pub const NONE: Self = Self {
        tools: None,
        vision: None,
        prompt_caching: None,
        reasoning: None,
        temperature: None,
        max_tokens_field: None,
        protocol: None,
    };
}

/// A per-model override: applies to model names starting with `prefix` (case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelRule {
    pub prefix: &'static str,
    pub patch: ProfilePatch,
}
