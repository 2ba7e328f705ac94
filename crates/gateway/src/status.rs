//! What the gateway is doing, for `GET /status`: each channel's state and traffic, and counts
//! of what happened to messages. Counters are atomics bumped on the message path; a channel's
//! state sits behind a lock because it changes only when the channel starts or fails.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use serde::Serialize;

/// What a channel is doing now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum ChannelState {
    /// Not started yet.
    Starting,
    /// Its receive loop runs (it retries transient failures inside).
    Running,
    /// Its receive loop failed with `error`; it is started again after a pause.
    Restarting { error: String },
    /// The platform rejected its credentials; it stays stopped until the gateway restarts.
    Unauthorized { error: String },
    /// Stopped by the shutdown.
    Stopped,
}

/// One channel's state and traffic.
#[derive(Debug)]
pub struct ChannelStatus {
    name: String,
    account: String,
    state: Mutex<ChannelState>,
    received: AtomicU64,
    sent: AtomicU64,
}

impl ChannelStatus {
    pub(crate) fn set_state(&self, state: ChannelState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }
}

/// The gateway's counters; shared by the run loop, the turns and the HTTP server.
#[derive(Debug)]
pub struct Status {
    started: Instant,
    channels: Vec<ChannelStatus>,
    counts: Counts,
}

#[derive(Debug, Default)]
struct Counts {
    received: AtomicU64,
    ignored: AtomicU64,
    denied: AtomicU64,
    duplicates: AtomicU64,
    refused: AtomicU64,
    kept: AtomicU64,
    turns_finished: AtomicU64,
    turns_failed: AtomicU64,
}

/// What happened to an inbound message once received, or to a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Access let it through but it was not for the bot.
    Ignored,
    /// Access refused it, or it could not be checked.
    Denied,
    /// A redelivery of a message already journaled.
    Duplicate,
    /// Its session's queue was full, or it could not be journaled or routed; the sender was
    /// told.
    Refused,
    /// Its answer could not be sent and was kept for the next start.
    Kept,
    /// A turn finished with an answer.
    TurnFinished,
    /// A turn failed; the sender got an apology, an API caller the error.
    TurnFailed,
}

impl Status {
    /// Counters for the channels `(name, account)`, all starting.
    pub fn new<'a>(channels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self {
            started: Instant::now(),
            channels: channels
                .into_iter()
                .map(|(name, account)| ChannelStatus {
                    name: name.to_owned(),
                    account: account.to_owned(),
                    state: Mutex::new(ChannelState::Starting),
                    received: AtomicU64::new(0),
                    sent: AtomicU64::new(0),
                })
                .collect(),
            counts: Counts::default(),
        }
    }

    pub(crate) fn channel(&self, name: &str, account: &str) -> Option<&ChannelStatus> {
        self.channels
            .iter()
            .find(|c| c.name == name && c.account == account)
    }

    /// Counts a message that reached the gateway from channel `name`, account `account`,
    /// before any check.
    pub(crate) fn received(&self, name: &str, account: &str) {
        if let Some(channel) = self.channel(name, account) {
            channel.received.fetch_add(1, Ordering::Relaxed);
        }
        self.counts.received.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count(&self, event: Event) {
        let counts = &self.counts;
        let counter = match event {
            Event::Ignored => &counts.ignored,
            Event::Denied => &counts.denied,
            Event::Duplicate => &counts.duplicates,
            Event::Refused => &counts.refused,
            Event::Kept => &counts.kept,
            Event::TurnFinished => &counts.turns_finished,
            Event::TurnFailed => &counts.turns_failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a message sent on channel `name`, account `account`.
    pub(crate) fn sent(&self, name: &str, account: &str) {
        if let Some(channel) = self.channel(name, account) {
            channel.sent.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn uptime_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    pub fn channels(&self) -> Vec<ChannelReport> {
        self.channels
            .iter()
            .map(|c| ChannelReport {
                name: c.name.clone(),
                account: c.account.clone(),
                state: c
                    .state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone(),
                messages_in: c.received.load(Ordering::Relaxed),
                messages_out: c.sent.load(Ordering::Relaxed),
            })
            .collect()
    }

    pub fn messages(&self) -> MessageCounts {
        let counts = &self.counts;
        MessageCounts {
            received: counts.received.load(Ordering::Relaxed),
            ignored: counts.ignored.load(Ordering::Relaxed),
            denied: counts.denied.load(Ordering::Relaxed),
            duplicates: counts.duplicates.load(Ordering::Relaxed),
            refused: counts.refused.load(Ordering::Relaxed),
            kept: counts.kept.load(Ordering::Relaxed),
        }
    }

    /// Turns finished and failed since the start: `(finished, failed)`.
    pub fn turns_done(&self) -> (u64, u64) {
        (
            self.counts.turns_finished.load(Ordering::Relaxed),
            self.counts.turns_failed.load(Ordering::Relaxed),
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelReport {
    pub name: String,
    pub account: String,
    #[serde(flatten)]
    pub state: ChannelState,
    pub messages_in: u64,
    pub messages_out: u64,
}

/// Inbound messages by what became of them since the start; see [`Event`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageCounts {
    pub received: u64,
    pub ignored: u64,
    pub denied: u64,
    pub duplicates: u64,
    pub refused: u64,
    /// Answers a platform did not take, kept to be sent at the next start.
    pub kept: u64,
}
