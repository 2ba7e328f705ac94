//! Telegram updates as [`InboundMessage`]s.

use nanocrab_config::EditedMessages;
use nanocrab_schema::{ChatType, InboundMessage, Media, MediaKind, ReplyTo, Sender};

use super::api::CHANNEL;
use super::types::{Message, MessageEntity, MessageOrigin, Update};

/// Who the bot is, from `getMe`: to tell mentions of it and replies to it.
#[derive(Debug, Clone)]
pub(crate) struct BotIdentity {
    pub id: i64,
    pub username: String,
}

/// What becomes of one update.
#[derive(Debug, PartialEq)]
pub(crate) enum Normalized {
    Deliver(Box<InboundMessage>),
    /// Nothing to answer; confirmed all the same. The reason is for the debug log.
    Skip(&'static str),
}

/// One update as the gateway sees it, `account` being the bot account that polled it.
pub(crate) fn normalize(
    update: &Update,
    bot: &BotIdentity,
    account: &str,
    edited_messages: EditedMessages,
) -> Normalized {
    let (message, edited) = match (
        &update.message,
        &update.channel_post,
        &update.edited_message,
        &update.edited_channel_post,
    ) {
        (Some(message), _, _, _) | (None, Some(message), _, _) => (message, false),
        (None, None, Some(message), _) | (None, None, None, Some(message)) => match edited_messages
        {
            EditedMessages::Ignore => return Normalized::Skip("an edit, and edits are ignored"),
            EditedMessages::Respond => (message, true),
        },
        (None, None, None, None) => return Normalized::Skip("not a kind of update answered"),
    };
    let chat_type = match message.chat.kind.as_str() {
        "private" => ChatType::Dm,
        "group" | "supergroup" => ChatType::Group,
        "channel" => ChatType::Channel,
        _ => return Normalized::Skip("a chat of an unknown type"),
    };
    let (text, entities) = match (&message.text, &message.caption) {
        (Some(text), _) => (text.as_str(), &message.entities),
        (None, Some(caption)) => (caption.as_str(), &message.caption_entities),
        (None, None) => ("", &message.entities),
    };
    let media = media(message);
    if text.is_empty() && media.is_empty() {
        return Normalized::Skip("a service message (no text, caption or file)");
    }
    // An anonymous admin (Telegram's `GroupAnonymousBot` in `from`) or a channel speaks as
    // the chat in `sender_chat`.
    let sender = match (&message.sender_chat, &message.from) {
        (Some(chat), _) => Sender {
            id: chat.id.to_string(),
            username: chat.username.clone(),
            display_name: chat.title.clone(),
            is_bot: false,
        },
        (None, Some(user)) => Sender {
            id: user.id.to_string(),
            username: user.username.clone(),
            display_name: Some(match &user.last_name {
                Some(last) => format!("{} {last}", user.first_name),
                None => user.first_name.clone(),
            })
            .filter(|name| !name.trim().is_empty()),
            is_bot: user.is_bot,
        },
        (None, None) => return Normalized::Skip("a message without a sender"),
    };
    let mentions = Mentions::read(text, entities, bot);
    // In a forum every topic message answers the topic's first (service) message: that is
    // where it was posted, not what it replies to.
    let thread_id = (message.chat.is_forum && message.is_topic_message)
        .then_some(message.message_thread_id)
        .flatten();
    let quoted = message.quote.is_some();
    let replied = message
        .reply_to_message
        .as_deref()
        .filter(|replied| Some(replied.message_id) != thread_id);
    // A reply to a message in another chat (`external_reply`) comes with no
    // `reply_to_message`; a quote, wherever its message is, still makes this a quoting reply.
    let reply_to = match (replied, message.external_reply.as_ref()) {
        (Some(replied), _) => Some(ReplyTo {
            message_id: replied.message_id.to_string(),
            sender_id: replied
                .from
                .as_ref()
                .map(|from| from.id)
                .or(replied.sender_chat.as_ref().map(|chat| chat.id))
                .map(|id| id.to_string()),
            to_bot: replied.from.as_ref().is_some_and(|from| from.id == bot.id),
            text: replied
                .text
                .as_ref()
                .or(replied.caption.as_ref())
                .filter(|text| !text.is_empty())
                .cloned(),
            quoted,
        }),
        // Only the quote tells what the other chat's message said.
        (None, external) if external.is_some() || quoted => Some(ReplyTo {
            message_id: external
                .and_then(|external| external.message_id)
                .map(|id| id.to_string())
                .unwrap_or_default(),
            sender_id: match external.and_then(|external| external.origin.as_ref()) {
                Some(MessageOrigin::User { sender_user }) => Some(sender_user.id.to_string()),
                Some(
                    MessageOrigin::Chat { sender_chat: chat } | MessageOrigin::Channel { chat },
                ) => Some(chat.id.to_string()),
                Some(MessageOrigin::HiddenUser { .. } | MessageOrigin::Other) | None => None,
            },
            to_bot: false,
            text: message
                .quote
                .as_ref()
                .map(|quote| quote.text.clone())
                .filter(|text| !text.is_empty()),
            quoted,
        }),
        (None, _) => None,
    };
    let forwarded_from = message.forward_origin.as_ref().map(|origin| match origin {
        MessageOrigin::User { sender_user } => {
            let name = match &sender_user.last_name {
                Some(last) => format!("{} {last}", sender_user.first_name),
                None => sender_user.first_name.clone(),
            };
            match &sender_user.username {
                Some(handle) => format!("{} (@{handle}, user {})", name.trim(), sender_user.id),
                None => format!("{} (user {})", name.trim(), sender_user.id),
            }
        }
        MessageOrigin::HiddenUser { sender_user_name } => sender_user_name.clone(),
        MessageOrigin::Chat { sender_chat: chat } | MessageOrigin::Channel { chat } => {
            match (&chat.title, &chat.username) {
                (Some(title), _) => format!("{title} (chat {})", chat.id),
                (None, Some(handle)) => format!("@{handle} (chat {})", chat.id),
                (None, None) => format!("chat {}", chat.id),
            }
        }
        MessageOrigin::Other => "an unknown origin".to_owned(),
    });
    Normalized::Deliver(Box::new(InboundMessage {
        channel: CHANNEL.to_owned(),
        account: account.to_owned(),
        message_id: message.message_id.to_string(),
        chat_id: message.chat.id.to_string(),
        chat_type,
        chat_title: message.chat.title.clone(),
        guild_id: None,
        thread_id: thread_id.map(|id| id.to_string()),
        sender,
        text: command_for_gateway(text, entities, bot),
        reply_to,
        mentions: mentions.usernames,
        mentions_bot: mentions.bot,
        media,
        timestamp: message.date,
        edited,
        forwarded_from,
        via_bot: message
            .via_bot
            .as_ref()
            .map(|inline| match &inline.username {
                Some(handle) => format!("@{handle}"),
                None => format!("bot {}", inline.id),
            }),
        caption: message.text.is_none() && message.caption.is_some(),
        team_id: None,
    }))
}

/// The files of a message: the largest size of a photo, or the one document, audio, voice
/// note, video or sticker.
fn media(message: &Message) -> Vec<Media> {
    let mut media = Vec::new();
    if let Some(photo) = message
        .photo
        .iter()
        .max_by_key(|size| (size.width * size.height, size.file_size))
    {
        media.push(Media {
            kind: MediaKind::Photo,
            file_id: photo.file_id.clone(),
            // Telegram re-encodes every photo as JPEG.
            mime_type: Some("image/jpeg".to_owned()),
            file_name: None,
            size: photo.file_size,
        });
    }
    let files = [
        (MediaKind::Document, &message.document),
        (MediaKind::Audio, &message.audio),
        (MediaKind::Voice, &message.voice),
        (MediaKind::Video, &message.video),
        (MediaKind::Video, &message.video_note),
    ];
    for (kind, file) in files {
        if let Some(file) = file {
            media.push(Media {
                kind,
                file_id: file.file_id.clone(),
                mime_type: file.mime_type.clone(),
                file_name: file.file_name.clone(),
                size: file.file_size,
            });
        }
    }
    if let Some(sticker) = &message.sticker {
        let mime_type = match (sticker.is_animated, sticker.is_video) {
            (true, _) => "application/x-tgsticker",
            (false, true) => "video/webm",
            (false, false) => "image/webp",
        };
        media.push(Media {
            kind: MediaKind::Sticker,
            file_id: sticker.file_id.clone(),
            mime_type: Some(mime_type.to_owned()),
            file_name: None,
            size: sticker.file_size,
        });
    }
    media
}

/// Who the entities of a text address.
struct Mentions {
    usernames: Vec<String>,
    bot: bool,
}

impl Mentions {
    fn read(text: &str, entities: &[MessageEntity], bot: &BotIdentity) -> Self {
        let mut mentions = Self {
            usernames: Vec::new(),
            bot: false,
        };
        let is_bot = |username: &str| username.eq_ignore_ascii_case(&bot.username);
        for entity in entities {
            match entity.kind.as_str() {
                "mention" => {
                    if let Some(username) =
                        utf16_slice(text, entity).and_then(|slice| slice.strip_prefix('@'))
                    {
                        mentions.bot |= is_bot(username);
                        mentions.usernames.push(username.to_owned());
                    }
                }
                // A mention of someone without a username: their id stands in for it.
                "text_mention" => {
                    if let Some(user) = &entity.user {
                        mentions.bot |= user.id == bot.id;
                        mentions
                            .usernames
                            .push(user.username.clone().unwrap_or_else(|| user.id.to_string()));
                    }
                }
                "bot_command" => {
                    let addressee = utf16_slice(text, entity)
                        .and_then(|command| command.split_once('@'))
                        .map(|(_, addressee)| addressee);
                    mentions.bot |= addressee.is_some_and(is_bot);
                }
                _ => {}
            }
        }
        mentions
    }
}

/// The text with its leading command as the gateway knows it: `/new@thisbot` is `/new`, and
/// Telegram's `/start` (what a new chat with the bot begins with) is `/help`. A command for
/// another bot stays as it is.
fn command_for_gateway(text: &str, entities: &[MessageEntity], bot: &BotIdentity) -> String {
    let Some(command_entity) = entities
        .iter()
        .find(|entity| entity.kind == "bot_command" && entity.offset == 0)
    else {
        return text.to_owned();
    };
    let Some(command) = utf16_slice(text, command_entity) else {
        return text.to_owned();
    };
    let rest = &text[command.len()..];
    let name = match command.split_once('@') {
        Some((name, addressee)) if addressee.eq_ignore_ascii_case(&bot.username) => name,
        Some(_) => return text.to_owned(),
        None => command,
    };
    let name = if name == "/start" { "/help" } else { name };
    format!("{name}{rest}")
}

/// The text an entity covers; its offset and length count UTF-16 code units.
fn utf16_slice<'a>(text: &'a str, entity: &MessageEntity) -> Option<&'a str> {
    let mut units = 0;
    let mut start = None;
    let end_units = entity.offset + entity.length;
    for (index, c) in text.char_indices() {
        if units == entity.offset {
            start = Some(index);
        }
        if units == end_units {
            return start.map(|start| &text[start..index]);
        }
        units += c.len_utf16();
    }
    if units == end_units {
        return start.map(|start| &text[start..]);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn entity(offset: usize, length: usize) -> MessageEntity {
        MessageEntity {
            kind: "mention".to_owned(),
            offset,
            length,
            user: None,
        }
    }

    #[test]
    fn entities_count_utf16_code_units() {
        let text = "😀 hi @bot!";
        assert_eq!(utf16_slice(text, &entity(6, 4)), Some("@bot"));
        assert_eq!(utf16_slice(text, &entity(0, 2)), Some("😀"));
        assert_eq!(utf16_slice(text, &entity(6, 5)), Some("@bot!"));
        assert_eq!(utf16_slice(text, &entity(6, 9)), None);
        // Inside the surrogate pair: no character boundary there.
        assert_eq!(utf16_slice(text, &entity(1, 2)), None);
    }

    #[test]
    fn commands_for_this_bot_lose_the_suffix_and_start_becomes_help() {
        let bot = BotIdentity {
            id: 1,
            username: "ThisBot".to_owned(),
        };
        let command = |text: &str, length: usize| {
            let entities = [MessageEntity {
                kind: "bot_command".to_owned(),
                offset: 0,
                length,
                user: None,
            }];
            command_for_gateway(text, &entities, &bot)
        };
        assert_eq!(command("/new@thisbot", 12), "/new");
        assert_eq!(command("/new@otherbot", 13), "/new@otherbot");
        assert_eq!(command("/start", 6), "/help");
        assert_eq!(command("/start@ThisBot abc", 14), "/help abc");
        assert_eq!(command("/reset now", 6), "/reset now");
    }

    /// The recorded private message (`update-private-text.json`) with `fields` added to it.
    fn private_update(fields: serde_json::Value) -> Update {
        let mut message = serde_json::json!({
            "message_id": 6557,
            "from": {"id": 218485655, "is_bot": false, "first_name": "Waffle", "username": "WaffleLapkin"},
            "chat": {"id": 218485655, "first_name": "Waffle", "username": "WaffleLapkin", "type": "private"},
            "date": 1569518342,
            "text": "approve k3f9aa",
        });
        for (key, value) in fields.as_object().into_iter().flatten() {
            message[key] = value.clone();
        }
        serde_json::from_value(serde_json::json!({"update_id": 1, "message": message})).unwrap()
    }

    fn delivered(fields: serde_json::Value) -> InboundMessage {
        let bot = BotIdentity {
            id: 1,
            username: "ThisBot".to_owned(),
        };
        match normalize(
            &private_update(fields),
            &bot,
            "default",
            EditedMessages::Ignore,
        ) {
            Normalized::Deliver(message) => *message,
            Normalized::Skip(why) => panic!("skipped: {why}"),
        }
    }

    #[test]
    fn a_forward_names_its_origin_and_is_not_typed_by_the_sender() {
        let origin = |origin: serde_json::Value| {
            let message = delivered(serde_json::json!({ "forward_origin": origin }));
            assert!(!message.typed_by_sender());
            message.forwarded_from
        };
        assert_eq!(
            [
                origin(serde_json::json!({"type": "user", "date": 1, "sender_user":
                    {"id": 666, "is_bot": false, "first_name": "Mallory", "username": "mallory"}})),
                origin(
                    serde_json::json!({"type": "hidden_user", "date": 1, "sender_user_name": "Eve"})
                ),
                origin(serde_json::json!({"type": "chat", "date": 1, "sender_chat":
                    {"id": -100, "type": "supergroup", "title": "Crabs"}})),
                origin(
                    serde_json::json!({"type": "channel", "date": 1, "message_id": 3, "chat":
                    {"id": -1001, "type": "channel", "username": "news"}})
                ),
                origin(serde_json::json!({"type": "from_the_future", "date": 1})),
            ],
            [
                Some("Mallory (@mallory, user 666)".to_owned()),
                Some("Eve".to_owned()),
                Some("Crabs (chat -100)".to_owned()),
                Some("@news (chat -1001)".to_owned()),
                Some("an unknown origin".to_owned()),
            ]
        );
        assert!(delivered(serde_json::json!({})).typed_by_sender());
    }

    #[test]
    fn a_caption_a_quote_an_inline_bot_and_a_bot_are_not_typed_by_the_sender() {
        let caption = delivered(serde_json::json!({
            "text": null,
            "caption": "approve k3f9aa",
            "photo": [{"file_id": "p", "width": 1, "height": 1}],
        }));
        assert!(caption.caption && !caption.typed_by_sender());
        let quote = delivered(serde_json::json!({
            "reply_to_message": {"message_id": 5, "date": 1, "text": "approve k3f9aa",
                "chat": {"id": 218485655, "type": "private"}},
            "quote": {"text": "approve k3f9aa", "position": 0},
        }));
        assert!(!quote.typed_by_sender());
        // A quote of a message in another chat: `external_reply`, no `reply_to_message`.
        let elsewhere = delivered(serde_json::json!({
            "external_reply": {"origin": {"type": "channel", "date": 1, "message_id": 77,
                "chat": {"id": -1001, "type": "channel", "username": "news"}},
                "chat": {"id": -1001, "type": "channel", "username": "news"}, "message_id": 77},
            "quote": {"text": "approve k3f9aa", "position": 0},
        }));
        assert_eq!(
            elsewhere.reply_to,
            Some(ReplyTo {
                message_id: "77".to_owned(),
                sender_id: Some("-1001".to_owned()),
                to_bot: false,
                text: Some("approve k3f9aa".to_owned()),
                quoted: true,
            })
        );
        assert!(!elsewhere.typed_by_sender());
        let unquoted = delivered(serde_json::json!({
            "external_reply": {"origin": {"type": "hidden_user", "date": 1,
                "sender_user_name": "Eve"}},
        }));
        assert!(
            unquoted
                .reply_to
                .is_some_and(|reply| !reply.quoted && reply.text.is_none())
        );
        let inline = delivered(serde_json::json!({
            "via_bot": {"id": 98, "is_bot": true, "first_name": "Wiki", "username": "wiki"},
        }));
        assert_eq!(inline.via_bot.as_deref(), Some("@wiki"));
        assert!(!inline.typed_by_sender());
        let bot = delivered(serde_json::json!({
            "from": {"id": 99, "is_bot": true, "first_name": "Other", "username": "otherbot"},
        }));
        assert!(!bot.typed_by_sender());
    }
}
