//! Messages between chat platforms and the gateway, in one shape whatever the platform.
//!
//! An adapter turns a platform's update into an [`InboundMessage`] and an
//! [`OutboundMessage`] back into the platform's calls. They are serialisable because the
//! gateway journals accepted messages until their turn has run, so a restart loses none.

use serde::{Deserialize, Serialize};

/// What kind of conversation a message came from; decides who may talk and how the session
/// is keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    /// A private conversation between one person and the bot.
    Dm,
    /// A group or supergroup (a Discord guild channel, a Slack channel with members).
    Group,
    /// A broadcast channel: the bot reads posts, nobody is a sender in person.
    Channel,
}

impl ChatType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dm => "dm",
            Self::Group => "group",
            Self::Channel => "channel",
        }
    }
}

/// Who sent a message, as the platform names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sender {
    /// The platform's stable id (Telegram's numeric user id, as text).
    pub id: String,
    /// The handle without `@`, when the person has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_bot: bool,
}

/// The message an inbound message answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyTo {
    /// Empty when the platform does not say (Telegram, for a message in another private
    /// chat or group).
    pub message_id: String,
    /// Its sender's id, when the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
    /// Whether it was one of the bot's own messages: a reply to the bot counts as addressing
    /// it in a group.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub to_bot: bool,
    /// Its text, quoted so the model knows what is being answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Whether the reply quotes a chosen part of it (Telegram's `quote`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quoted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MediaKind {
    Photo,
    Document,
    Audio,
    Voice,
    Video,
    Sticker,
}

/// A file attached to a message. Only the platform's reference travels: the bytes are fetched
/// through the channel when the turn runs, so a queued message stays small.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Media {
    pub kind: MediaKind,
    /// The platform's handle for downloading it (Telegram's `file_id`).
    pub file_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    /// Size in bytes, when the platform tells it before the download.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// One message from a chat platform, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundMessage {
    /// The channel's name in the config (`telegram`).
    pub channel: String,
    /// Which bot account of the channel received it (`default` with one account).
    pub account: String,
    pub message_id: String,
    pub chat_id: String,
    pub chat_type: ChatType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_title: Option<String>,
    /// The Discord server the chat belongs to; bindings can match on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<String>,
    /// A forum topic or reply thread inside the chat; replies go back into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    pub sender: Sender,
    /// The text or the media caption; empty for media alone.
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<ReplyTo>,
    /// Usernames (without `@`) mentioned in the text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<String>,
    /// Whether the bot itself was mentioned (by @username or a bot command addressed to it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mentions_bot: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<Media>,
    /// When the platform says it was sent, in Unix seconds.
    pub timestamp: i64,
    /// An edit of an earlier message rather than a new one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
    /// Who wrote it first, when it is a forward: its text is someone else's words, not the
    /// sender's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_from: Option<String>,
    /// The inline bot it was sent through (`@gif`): the bot wrote the text, the sender only
    /// picked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via_bot: Option<String>,
    /// Whether `text` is the caption of a file rather than a message typed on its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub caption: bool,
    /// The Slack workspace (team id) it came through, for `bindings` that name a team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_id: Option<String>,
}

impl InboundMessage {
    /// Where an answer to this message goes.
    pub fn chat(&self) -> ChatRef {
        ChatRef {
            channel: self.channel.clone(),
            account: self.account.clone(),
            chat_id: self.chat_id.clone(),
            thread_id: self.thread_id.clone(),
        }
    }

    /// Whether this is the sender's own words, freshly typed: not a forward, an edit, a
    /// caption, a quoting reply (of a message here or in another chat), an inline bot's
    /// result, nor a bot's. Only such a message may answer an approval.
    pub fn typed_by_sender(&self) -> bool {
        self.forwarded_from.is_none()
            && self.via_bot.is_none()
            && !self.edited
            && !self.caption
            && !self.sender.is_bot
            && !self.reply_to.as_ref().is_some_and(|reply| reply.quoted)
    }
}

/// A conversation on a platform, down to the thread: everything needed to post into it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRef {
    pub channel: String,
    pub account: String,
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

/// A message for a chat platform. The text is Markdown as the model wrote it; the adapter
/// renders it in the platform's own markup and splits it to the platform's length limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboundMessage {
    pub chat: ChatRef,
    pub text: String,
    /// The message this one answers, shown as a reply where the platform can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to_message_id: Option<String>,
    /// A file sent after the text (a document on Telegram): an absolute path, read when the
    /// message is sent, so a message kept for later stays small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<std::path::PathBuf>,
}
