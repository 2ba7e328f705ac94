//! Slack over Socket Mode: events come in on a WebSocket the app opens itself
//! (`apps.connections.open`), answers go out through the Web API.
//!
//! - `types`: the part of the frames and objects read; `api`: the Web API calls, whose
//!   errors never hold a token.
//! - `socket`: the WebSocket, over TLS for Slack (plain `ws://` for a test double).
//! - `normalize`: events and slash commands as
//!   [`InboundMessage`](nanocrab_schema::InboundMessage)s.
//! - `render`: the model's Markdown as mrkdwn; `split`: that cut into messages within
//!   `chat.postMessage`'s 40,000 characters.
//! - `channel`: the [`Channel`](crate::Channel) tying them together.

mod api;
mod channel;
mod normalize;
mod render;
mod socket;
mod split;
mod types;

pub use channel::{SlackChannel, SlackSettings};
