//! LLM providers: one trait, one adapter per wire protocol.

mod provider;

pub use provider::{ChatRequest, ChatResponse, DeltaSink, LlmProvider, ProviderDelta, ProviderError};
