//! LLM providers: one trait, one adapter per wire protocol (Anthropic Messages, OpenAI Chat
//! Completions for OpenAI and every compatible server, OpenAI Responses, Gemini), a
//! data-driven registry of known providers and their models' quirks, retries, failover, and
//! tolerant parsing of what comes back; and speech to text through an OpenAI-compatible
//! transcription endpoint (`Transcriber`).

mod anthropic;
mod check;
mod error;
mod failover;
mod gemini;
mod http;
mod local;
mod local_tool_calls;
mod openai;
mod prepare;
mod pricing;
mod profile;
mod provider;
mod registry;
mod resolve;
mod responses;
mod starter;
mod text_part;
mod think;
mod transcription;

pub use check::check_config;
pub use error::ProviderError;
pub use failover::{Fallback, ModelChain};
pub use http::RetryPolicy;
pub use local::{DEFAULT_LOCAL_MODEL, LOCAL, LocalModels};
pub use pricing::{ModelPrice, ModelPricing, PRICES_AS_OF, PriceSource, model_pricing};
pub use profile::{
    MaxTokensField, ModelProfile, ModelRule, ProfilePatch, ReasoningEcho, Temperature,
    ToolCallContent, ToolCallIds,
};
pub use provider::{ChatRequest, ChatResponse, DeltaSink, LlmProvider, ProviderDelta, RetryNotice};
pub use registry::{PROVIDERS, Protocol, ProviderSpec, detect, spec, spec_for_model};
pub use resolve::{
    ProviderStatus, Readiness, ResolvedModel, model_profile, provider_statuses, resolve_model,
    split_model,
};
pub use starter::{KeyedProvider, keyed_provider};
pub use transcription::{Transcriber, TranscriptionError};

/// Replays a recorded response body through an adapter's stream parser, exactly as a live
/// response is read. For tests of recorded fixtures.
#[doc(hidden)]
pub async fn replay_stream(
    protocol: Protocol,
    chunks: Vec<bytes::Bytes>,
    on_delta: DeltaSink<'_>,
) -> Result<ChatResponse, ProviderError> {
    let stream = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
    let state = wire(protocol).new_stream("replay");
    http::read_stream("replay", stream, state, on_delta).await
}

/// Replays a recorded whole (non-streamed) response body through an adapter, exactly as a
/// live JSON answer is read. For tests of recorded fixtures.
#[doc(hidden)]
pub async fn replay_whole(
    protocol: Protocol,
    body: serde_json::Value,
    on_delta: DeltaSink<'_>,
) -> Result<ChatResponse, ProviderError> {
    replay_stream(protocol, vec![wire(protocol).whole_as_sse(body)], on_delta).await
}

/// The JSON body an adapter sends for `request` to a model with `profile`, after the request
/// was fitted to the model as a live call does. For snapshot tests of the wire payloads.
#[doc(hidden)]
pub fn request_body(
    protocol: Protocol,
    request: &ChatRequest<'_>,
    profile: &ModelProfile,
    provider: &str,
) -> serde_json::Value {
    let body = wire(protocol)
        .body(&prepare::prepare(request, profile, provider), profile)
        .unwrap_or_default();
    serde_json::from_slice(&body).unwrap_or_default()
}

/// The provider error an HTTP error answer with `body` becomes, exactly as for a live call to
/// a provider named `replay`. For tests of recorded error bodies.
#[doc(hidden)]
pub fn error_from_body(protocol: Protocol, status: u16, body: &str) -> ProviderError {
    let endpoint = http::Endpoint {
        provider: "replay".to_owned(),
        api_base: String::new(),
        api_key: None,
        api_key_env: None,
        extra_headers: Vec::new(),
        retry: RetryPolicy::default(),
        profile: ModelProfile::GENERIC,
    };
    http::status_error(wire(protocol), &endpoint, status, body, None)
}

fn wire(protocol: Protocol) -> &'static dyn http::WireFormat {
    match protocol {
        Protocol::AnthropicMessages => &anthropic::Anthropic,
        Protocol::OpenAiChat => &openai::OpenAi,
        Protocol::OpenAiResponses => &responses::Responses,
        Protocol::Gemini => &gemini::Gemini,
    }
}
