//! Telegram over the Bot API with long polling (`getUpdates`).
//!
//! - `types`: the part of the Bot API's objects read; `api`: the HTTP calls, whose errors
//!   never hold the token.
//! - `normalize`: updates as [`InboundMessage`](nanocrab_schema::InboundMessage)s.
//! - `render`: the model's Markdown as Telegram HTML; `split`: that HTML cut into messages
//!   within Telegram's length limit.
//! - `offset`: the last confirmed update on disk.
//! - `channel`: the [`Channel`](crate::Channel) tying them together.

mod api;
mod channel;
mod normalize;
mod offset;
mod render;
mod split;
mod types;

pub use channel::{TelegramChannel, TelegramSettings};
