//! Chat platforms as nanocrab sees them: the [`Channel`] trait every adapter implements, and
//! the adapters themselves, each behind a cargo feature.
//!
//! An adapter receives from its platform, turns each update into an
//! [`InboundMessage`](nanocrab_schema::InboundMessage) and hands it to the gateway through an
//! [`InboundSink`]; it sends the gateway's answers back in the platform's own markup.

mod channel;
#[cfg(feature = "discord")]
pub mod discord;
mod sink;
#[cfg(feature = "slack")]
pub mod slack;
#[cfg(feature = "telegram")]
pub mod telegram;

pub use channel::{Channel, ChannelCapabilities, ChannelError, SentMessage};
pub use sink::{Delivery, InboundSink, SinkClosed, inbound_queue};
