//! LLM providers: one trait, one adapter per wire protocol (Anthropic Messages, OpenAI Chat
//! Completions for OpenAI and every compatible server, Gemini), a small registry of known providers,
//! retries, and tolerant parsing of what comes back.

mod anthropic;
mod error;
mod gemini;
mod http;
mod openai;
mod pricing;
mod provider;
mod registry;
mod think;

pub use error::ProviderError;
pub use http::RetryPolicy;
pub use pricing::{ModelPrice, ModelPricing, PRICES_AS_OF, PriceSource, model_pricing};
pub use provider::{ChatRequest, ChatResponse, DeltaSink, LlmProvider, ProviderDelta};
pub use registry::{
    PROVIDERS, Protocol, ProviderSpec, ResolvedModel, configured_providers, resolve_model, spec,
    split_model,
};

/// Replays a recorded response body through an adapter's stream parser, exactly as a live
/// response is read. For tests of recorded fixtures.
#[doc(hidden)]
pub async fn replay_stream(
    protocol: Protocol,
    chunks: Vec<bytes::Bytes>,
    on_delta: DeltaSink<'_>,
) -> Result<ChatResponse, ProviderError> {
    use http::WireFormat as _;
    let stream = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
    let state = match protocol {
        Protocol::AnthropicMessages => anthropic::Anthropic.new_stream("anthropic"),
        Protocol::OpenAiChat => openai::OpenAi.new_stream("openai"),
        Protocol::Gemini => gemini::Gemini.new_stream("gemini"),
    };
    http::read_stream("replay", stream, state, on_delta).await
}

/// The JSON body an adapter sends for `request`. For snapshot tests of the wire payloads.
#[doc(hidden)]
pub fn request_body(protocol: Protocol, request: &ChatRequest) -> serde_json::Value {
    use http::WireFormat as _;
    match protocol {
        Protocol::AnthropicMessages => anthropic::Anthropic.body(request),
        Protocol::OpenAiChat => openai::OpenAi.body(request),
        Protocol::Gemini => gemini::Gemini.body(request),
    }
}
