//! The part of Socket Mode's frames and the Web API's objects the adapter reads.
//!
//! Hand-written rather than slack-morphism's: these few structs compile in a moment, and every
//! field beyond the ids is optional, so an event Slack extends, or a kind added after this
//! was written, still parses (and is skipped) instead of failing.

use serde::Deserialize;
use serde_json::Value;

/// One Socket Mode frame, by its `type`.
#[derive(Debug, Deserialize)]
pub(crate) struct Frame {
    #[serde(rename = "type")]
    pub kind: String,
    /// Set on everything that must be acknowledged (events, commands, interactions).
    pub envelope_id: Option<String>,
    #[serde(default)]
    pub payload: Value,
    /// 0 on a first delivery; Slack counts up on each redelivery of an unacknowledged one.
    #[serde(default)]
    pub retry_attempt: u32,
    /// `disconnect`'s reason: `warning`, `refresh_requested`, `too_many_websockets`...
    pub reason: Option<String>,
}

/// An `events_api` frame's payload: one Events API callback.
#[derive(Debug, Deserialize)]
pub(crate) struct EventCallback {
    pub team_id: Option<String>,
    /// The same on every redelivery of one event.
    pub event_id: Option<String>,
    pub event: Event,
}

/// A `message` or `app_mention` event; other kinds parse too and are skipped by `type`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Event {
    #[serde(rename = "type")]
    pub kind: String,
    pub subtype: Option<String>,
    pub channel: Option<String>,
    /// `im`, `mpim`, `channel` or `group` on `message`; `app_mention` has none.
    pub channel_type: Option<String>,
    pub user: Option<String>,
    /// Set when a bot (an integration, or this app itself) wrote the message.
    pub bot_id: Option<String>,
    #[serde(default)]
    pub text: String,
    pub ts: Option<String>,
    /// The thread's first message; equal to `ts` on that first message itself.
    pub thread_ts: Option<String>,
    pub team: Option<String>,
    #[serde(default)]
    pub files: Vec<FileObject>,
}

/// A `slash_commands` frame's payload.
#[derive(Debug, Deserialize)]
pub(crate) struct SlashCommand {
    pub team_id: Option<String>,
    pub channel_id: String,
    pub user_id: String,
    pub user_name: Option<String>,
    pub command: String,
    #[serde(default)]
    pub text: String,
    /// Unique per invocation: the command's message id.
    pub trigger_id: Option<String>,
}

/// A file shared in a message, or `files.info`'s `file`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FileObject {
    pub id: String,
    pub name: Option<String>,
    pub mimetype: Option<String>,
    /// `slack_audio` for an audio clip recorded in Slack, `slack_video` for a video clip.
    pub subtype: Option<String>,
    pub size: Option<u64>,
    pub url_private_download: Option<String>,
    pub url_private: Option<String>,
}

/// `auth.test`'s answer: who the bot is.
#[derive(Debug, Deserialize)]
pub(crate) struct AuthTest {
    pub user_id: String,
    pub team_id: Option<String>,
    pub team: Option<String>,
}

/// `apps.connections.open`'s answer.
#[derive(Debug, Deserialize)]
pub(crate) struct ConnectionsOpen {
    pub url: String,
}

/// `chat.postMessage`'s answer.
#[derive(Debug, Deserialize)]
pub(crate) struct Posted {
    pub ts: String,
}

/// `files.getUploadURLExternal`'s answer.
#[derive(Debug, Deserialize)]
pub(crate) struct UploadUrl {
    pub upload_url: String,
    pub file_id: String,
}

/// `files.info`'s answer.
#[derive(Debug, Deserialize)]
pub(crate) struct FileInfo {
    pub file: FileObject,
}

/// The answer of calls whose result is only `ok`.
#[derive(Debug, Deserialize)]
pub(crate) struct Done {}
