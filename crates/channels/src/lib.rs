//! Chat platforms as nanocrab sees them: the [`Channel`] trait every adapter implements, and
//! the adapters themselves, each behind a cargo feature.
//!
//! An adapter receives from its platform, turns each update into an
//! [`InboundMessage`](nanocrab_schema::InboundMessage) and hands it to the gateway through an
//! [`InboundSink`]; it sends the gateway's answers back in the platform's own markup.

#[cfg(any(feature = "telegram", feature = "slack", feature = "email"))]
mod backoff;
#[cfg(any(feature = "telegram", feature = "slack"))]
mod block_text;
mod channel;
#[cfg(feature = "discord")]
pub mod discord;
#[cfg(feature = "email")]
pub mod email;
#[cfg(any(
    feature = "telegram",
    feature = "slack",
    feature = "discord",
    feature = "email"
))]
mod error_text;
mod sink;
#[cfg(feature = "slack")]
pub mod slack;
#[cfg(any(feature = "telegram", feature = "discord", feature = "email"))]
mod state_file;
#[cfg(feature = "telegram")]
pub mod telegram;

pub use channel::{Channel, ChannelCapabilities, ChannelError, SentMessage};
pub use sink::{Delivery, InboundSink, SinkClosed, inbound_queue};
