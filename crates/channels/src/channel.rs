//! The seam between the gateway and a chat platform.

use async_trait::async_trait;
use nanocrab_schema::{ChatRef, Media, OutboundMessage};
use tokio_util::sync::CancellationToken;

use crate::sink::InboundSink;

/// What a platform can do besides receiving and sending text. The gateway asks before it
/// uses a capability; calling one anyway gets [`ChannelError::Unsupported`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelCapabilities {
    /// Changing a message already sent.
    pub edit: bool,
    /// A "typing…" indicator while a turn runs.
    pub typing: bool,
    /// Reacting to a message with an emoji.
    pub reactions: bool,
    /// Threads or forum topics inside a chat.
    pub threads: bool,
    /// Downloading files attached to inbound messages.
    pub media: bool,
}

/// What a send produced on the platform.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SentMessage {
    /// One id per platform message: a long answer is sent as several.
    pub message_ids: Vec<String>,
}

/// Why a channel call failed. Messages never carry the bot token or other secrets.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{channel} cannot {capability}")]
    Unsupported {
        channel: String,
        capability: &'static str,
    },
    /// The platform refused the call; `status` is its HTTP status when there is one.
    #[error("{channel}: {method} failed ({}): {message}", status.map_or_else(|| "no status".to_owned(), |s| s.to_string()))]
    Api {
        channel: String,
        method: String,
        status: Option<u16>,
        message: String,
    },
    /// The platform could not be reached, or answered with something that is not its API.
    #[error("{channel}: {method}: {message}")]
    Transport {
        channel: String,
        method: String,
        message: String,
    },
    /// The platform refused the message for good (a mail server's permanent 5xx: no such
    /// recipient, a message it will not take); sending it again will not help.
    #[error("{channel}: {method} refused: {message}")]
    Rejected {
        channel: String,
        method: String,
        message: String,
    },
    /// The platform says the credentials are wrong; retrying will not help.
    #[error("{channel}: the token was rejected: {message}")]
    Unauthorized { channel: String, message: String },
    /// A file to send cannot be read.
    #[error("{channel}: cannot read {}: {message}", path.display())]
    File {
        channel: String,
        path: std::path::PathBuf,
        message: String,
    },
    /// A file is larger than the channel will fetch.
    #[error("{channel}: {file} is {size} bytes, more than the {limit} a download may be")]
    TooLarge {
        channel: String,
        file: String,
        size: u64,
        limit: u64,
    },
}

/// A connected chat platform (one bot account of it).
#[async_trait]
pub trait Channel: Send + Sync {
    /// The channel's name in the config and in session keys (`telegram`).
    fn name(&self) -> &str;

    /// The bot account this instance speaks as (`default` with one account).
    fn account(&self) -> &str;

    fn capabilities(&self) -> ChannelCapabilities;

    /// Receives from the platform until `shutdown` is cancelled, delivering each message to
    /// `sink` and confirming it to the platform only once delivered. Transient failures are
    /// retried with backoff inside; an error returns only when going on is pointless (the
    /// token was rejected).
    async fn run(&self, sink: InboundSink, shutdown: CancellationToken)
    -> Result<(), ChannelError>;

    /// Sends `message`, rendered and split as the platform needs.
    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError>;

    /// Shows that the bot is writing in `chat`, for the platform's usual few seconds.
    async fn typing(&self, chat: &ChatRef) -> Result<(), ChannelError>;

    /// Replaces the text of a message the bot sent.
    async fn edit(&self, chat: &ChatRef, message_id: &str, text: &str) -> Result<(), ChannelError>;

    /// Whether what arrives is content nobody vouches for: an email's From line can be forged
    /// and its text may be anyone's. The model reads such messages fenced as data.
    fn untrusted_content(&self) -> bool {
        false
    }

    /// Reacts to a message with an emoji.
    async fn react(
        &self,
        chat: &ChatRef,
        message_id: &str,
        emoji: &str,
    ) -> Result<(), ChannelError>;

    /// Fetches the bytes of a file attached to an inbound message.
    async fn download(&self, media: &Media) -> Result<Vec<u8>, ChannelError>;
}
