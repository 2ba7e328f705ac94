//! Dev-only loopback fakes for nanocrab's tests: a mock LLM that speaks the real wire formats
//! of Anthropic Messages, OpenAI Chat Completions, the OpenAI Responses API and Gemini,
//! scripted per test and recording every request, a fake Telegram Bot API ([`FakeTelegram`],
//! see [`telegram`]), a fake Discord (gateway WebSocket and REST, [`FakeDiscord`], see
//! [`discord`]), a fake Slack Web API and Socket Mode ([`FakeSlack`], see [`slack`]), real
//! IMAP and SMTP servers started on 127.0.0.1 ([`mail::MailServers`]), a
//! tiny random GGUF chat model ([`gguf::TinyLlama`]), a fake web with search providers
//! ([`FakeWeb`], see [`web`]), plus access to the
//! recorded real streams in `shared/fixtures/`.
//!
//! ```no_run
//! # async fn demo() {
//! use nanocrab_testkit::{MockLlm, Reply};
//! use serde_json::json;
//!
//! let mock = MockLlm::start().await; // or MockLlm::spawn() in a synchronous test
//! mock.push(Reply::tool_call("call_1", "write_file", json!({"path": "a.md", "content": "x"})));
//! mock.push(Reply::text("Done."));
//! // Point the provider at mock.anthropic_base() (host root) or mock.openai_base() (`/v1`)...
//! let bodies: Vec<_> = mock.requests().into_iter().map(|r| r.body).collect();
//! # }
//! ```
//!
//! - Replies are served first in, first out, whichever endpoint is hit (`POST /v1/messages`,
//!   `/v1/chat/completions`, `/v1/responses` or `/v1beta/models/{model}:generateContent` /
//!   `:streamGenerateContent`); the endpoint decides the wire format and the request's
//!   `"stream": true` (Gemini: the path) decides SSE versus one JSON body.
//! - Streams follow the recorded ones: Anthropic `message_start` (usage), then per block
//!   `content_block_start` / `content_block_delta` (`text_delta`, `thinking_delta`,
//!   `input_json_delta`) / `content_block_stop`, `message_delta` (stop reason, output
//!   tokens), `message_stop`, each with its `event:` line. OpenAI `chat.completion.chunk`s,
//!   tool calls as `tool_calls` deltas (index, id, type, name, then the arguments split over
//!   several chunks), a `finish_reason` chunk, the usage chunk with `choices: []` when the
//!   request set `stream_options.include_usage`, then `data: [DONE]`. Responses API events
//!   with `event:` lines and `sequence_number`s: `response.created`, `response.in_progress`,
//!   per part an output item (`message` with `output_text` deltas, `function_call` with
//!   argument deltas, `reasoning` with the thinking as its summary and `encrypted_content`
//!   when the request's `include` asks for it) added, streamed and done, then
//!   `response.completed` with the whole `output` and `usage`. Gemini `alt=sse` chunks with
//!   the finish reason and usage on the last.
//! - [`Reply::truncated`] and [`Reply::refusal`] end an answer the way each provider does
//!   (`max_tokens` / `length` / `MAX_TOKENS` / `response.incomplete`; `refusal` /
//!   `delta.refusal` / `SAFETY` / a `refusal` content part); [`Reply::with_usage`] and
//!   [`Reply::with_cache_usage`] set the token counts, cache reads counted the way each
//!   provider counts them.
//! - Each SSE event is written as its own body frame; [`Reply::with_chunk_size`] re-cuts the
//!   body at arbitrary byte boundaries and [`Reply::with_chunk_delay`] paces the frames.
//! - Errors ([`Reply::error`] with an [`ApiError`]) use each provider's own status and body
//!   shape; [`Reply::status`] sends anything else; [`Reply::stream_error_after`] fails inside
//!   a 200 stream; [`Reply::stall_after`] streams some text and then holds the stream open
//!   until the client goes away.
//! - [`Reply::fixture`] replays a recorded file from `shared/fixtures/`.
//! - [`Reply::echo`] answers `echo: <the last user message>`: as the fallback, it lets
//!   concurrent conversations each get their own answer; [`MockLlm::peak_concurrency`] tells
//!   how many requests were open at once.
//! - `POST /v1/audio/transcriptions` reads the multipart upload, records it apart
//!   ([`MockLlm::transcription_requests`]) and answers from its own script
//!   ([`MockLlm::push_transcription`]: a [`Transcription`] text or error).
//! - An empty script answers HTTP 500 `mock LLM: no scripted reply left for request N`, so a
//!   test fails at once instead of hanging; every request is recorded all the same.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test infrastructure: a panic is the report

mod anthropic;
pub mod discord;
mod fixtures;
mod gate;
mod gemini;
pub mod gguf;
pub mod hub;

mod inbound;
pub mod mail;
pub mod models;
mod multipart;
mod openai_chat;
mod openai_responses;
mod reply;
mod server;
pub mod slack;
pub mod telegram;
mod transcription;
pub mod web;

pub use discord::FakeDiscord;
pub use fixtures::{
    Protocol, chunks_to_sse, fixture_bytes, fixture_path, fixtures_dir, replay_list,
};
pub use gate::Gate;
pub use inbound::inbound_dm;
pub use reply::{ApiError, Part, Reply};
pub use server::{EMBEDDING_DIMENSIONS, MockLlm, RecordedRequest};
pub use slack::FakeSlack;
pub use telegram::FakeTelegram;
pub use transcription::{Transcription, TranscriptionRequest, VOICE_NOTE_OGG};
pub use web::{FakeWeb, WebRequest};
