//! Discord: the gateway WebSocket in (twilight-gateway: hello, identify, heartbeat, resume,
//! reconnect), REST out (twilight-http, with Discord's per-route rate-limit buckets).
//!
//! - `normalize`: `MESSAGE_CREATE` / `MESSAGE_UPDATE` as
//!   [`InboundMessage`](nanocrab_schema::InboundMessage)s.
//! - `markdown`: the model's Markdown in the dialect Discord renders, cut into messages within
//!   Discord's length limit without breaking code blocks.
//! - `session`: the gateway session on disk, resumed after a restart so that Discord replays
//!   what was sent meanwhile.
//! - `channel`: the [`Channel`](crate::Channel) tying them together.

mod channel;
mod markdown;
mod normalize;
mod session;

pub use channel::{DiscordChannel, DiscordSettings};
