//! The part of the Bot API's objects the adapter reads.
//!
//! Hand-written rather than frankenstein's: these few structs compile in a moment where
//! frankenstein's full API took ~45 s on the 2-core build machines, and every field here is
//! optional beyond the ids, so an object Telegram extends, or a kind of update added after
//! this was written, still parses (and is skipped) instead of failing the whole batch.

use serde::Deserialize;

/// Every Bot API answer: `result` when `ok`, otherwise the error fields.
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope<T> {
    pub ok: bool,
    pub result: Option<T>,
    pub description: Option<String>,
    pub error_code: Option<u16>,
    pub parameters: Option<ResponseParameters>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ResponseParameters {
    /// Seconds to wait before repeating a request refused with 429.
    pub retry_after: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Update {
    pub update_id: i64,
    pub message: Option<Message>,
    pub edited_message: Option<Message>,
    pub channel_post: Option<Message>,
    pub edited_channel_post: Option<Message>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    pub last_name: Option<String>,
    pub username: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Chat {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: Option<String>,
    pub username: Option<String>,
    #[serde(default)]
    pub is_forum: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Message {
    pub message_id: i64,
    pub message_thread_id: Option<i64>,
    pub from: Option<User>,
    pub sender_chat: Option<Chat>,
    pub date: i64,
    pub chat: Chat,
    #[serde(default)]
    pub is_topic_message: bool,
    pub reply_to_message: Option<Box<Message>>,
    /// A reply to a message in another chat or topic (then `reply_to_message` is absent).
    pub external_reply: Option<ExternalReplyInfo>,
    /// The part of the replied message chosen to quote, in this chat or (with
    /// `external_reply`) another: a quoting message never answers an approval.
    pub quote: Option<TextQuote>,
    /// Set on a forward: who wrote the message first.
    pub forward_origin: Option<MessageOrigin>,
    /// The inline bot the message was sent through: the bot wrote it, the sender picked it.
    pub via_bot: Option<User>,
    pub text: Option<String>,
    #[serde(default)]
    pub entities: Vec<MessageEntity>,
    pub caption: Option<String>,
    #[serde(default)]
    pub caption_entities: Vec<MessageEntity>,
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    pub document: Option<FileMeta>,
    pub audio: Option<FileMeta>,
    pub voice: Option<FileMeta>,
    pub video: Option<FileMeta>,
    pub video_note: Option<FileMeta>,
    pub sticker: Option<Sticker>,
}

/// The Bot API's ExternalReplyInfo, as far as it is read: whose message is answered.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ExternalReplyInfo {
    pub origin: Option<MessageOrigin>,
    /// Only given for a supergroup or a channel.
    pub message_id: Option<i64>,
}

/// The Bot API's TextQuote: the quoted part of the replied message.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct TextQuote {
    #[serde(default)]
    pub text: String,
}

/// Where a forwarded message comes from, by the Bot API's `type`. A kind added later still
/// parses, as [`MessageOrigin::Other`]: a forward all the same.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum MessageOrigin {
    User {
        sender_user: User,
    },
    HiddenUser {
        sender_user_name: String,
    },
    Chat {
        sender_chat: Chat,
    },
    Channel {
        chat: Chat,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MessageEntity {
    #[serde(rename = "type")]
    pub kind: String,
    /// In UTF-16 code units, as Telegram counts.
    pub offset: usize,
    pub length: usize,
    /// The person a `text_mention` names.
    pub user: Option<User>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PhotoSize {
    pub file_id: String,
    #[serde(default)]
    pub width: u64,
    #[serde(default)]
    pub height: u64,
    pub file_size: Option<u64>,
}

/// The fields documents, audio, voice notes and videos share.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FileMeta {
    pub file_id: String,
    pub file_name: Option<String>,
    pub mime_type: Option<String>,
    pub file_size: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Sticker {
    pub file_id: String,
    #[serde(default)]
    pub is_animated: bool,
    #[serde(default)]
    pub is_video: bool,
    pub file_size: Option<u64>,
}

/// `getFile`'s answer.
#[derive(Debug, Deserialize)]
pub(crate) struct File {
    pub file_size: Option<u64>,
    pub file_path: Option<String>,
}
