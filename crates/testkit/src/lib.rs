//! Dev-only loopback fakes: a mock LLM that speaks the real wire formats of Anthropic Messages
//! and OpenAI Chat Completions, scripted per test and recording every request, plus access to
//! the recorded real streams in `shared/fixtures/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixtures;
mod reply;
mod server;

pub use fixtures::{
    Protocol, chunks_to_sse, fixture_bytes, fixture_path, fixtures_dir, replay_list,
};
pub use reply::Reply;
pub use server::{MockLlm, RecordedRequest};
