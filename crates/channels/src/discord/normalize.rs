//! Discord messages as [`InboundMessage`]s.

use nanocrab_config::EditedMessages;
use nanocrab_schema::{ChatType, InboundMessage, Media, MediaKind, ReplyTo, Sender};
use twilight_model::channel::Message;
use twilight_model::channel::message::{MessageFlags, MessageType};
use twilight_model::id::Id;
use twilight_model::id::marker::UserMarker;

/// The channel's name in the config, session keys, errors and logs.
pub(crate) const CHANNEL: &str = "discord";

/// Who the bot is (from `GET /users/@me`): to tell mentions of it and replies to it.
#[derive(Debug, Clone)]
pub(crate) struct BotIdentity {
    pub id: Id<UserMarker>,
    pub name: String,
}

/// Where a message was posted: a thread is a channel of its own on Discord, kept under its
/// parent channel here, as a Telegram forum topic is under its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    pub chat_id: String,
    pub thread_id: Option<String>,
}

/// What becomes of one message.
#[derive(Debug, PartialEq)]
pub(crate) enum Normalized {
    Deliver(Box<InboundMessage>),
    /// Nothing to answer. The reason is for the debug log.
    Skip(&'static str),
}

/// `message` (new, or `edited`) as the gateway sees it, `account` being the bot that got it.
pub(crate) fn normalize(
    message: &Message,
    edited: bool,
    place: Place,
    bot: &BotIdentity,
    account: &str,
    edited_messages: EditedMessages,
) -> Normalized {
    if message.author.id == bot.id {
        return Normalized::Skip("the bot's own message");
    }
    match message.kind {
        MessageType::Regular | MessageType::Reply => {}
        _ => return Normalized::Skip("a system message"),
    }
    if edited {
        match edited_messages {
            EditedMessages::Ignore => return Normalized::Skip("an edit, and edits are ignored"),
            EditedMessages::Respond => {}
        }
    }
    // A voice message (recorded in the app) is flagged, and its one attachment carries the
    // recording's length and waveform.
    let voice_message = message
        .flags
        .is_some_and(|flags| flags.contains(MessageFlags::IS_VOICE_MESSAGE));
    let media: Vec<Media> = message
        .attachments
        .iter()
        .map(|attachment| {
            let mime_type = attachment.content_type.clone();
            let family = mime_type
                .as_deref()
                .and_then(|mime| mime.split('/').next())
                .unwrap_or_default();
            let recorded = voice_message
                || attachment.duration_secs.is_some() && attachment.waveform.is_some();
            Media {
                kind: match family {
                    "image" => MediaKind::Photo,
                    "audio" if recorded => MediaKind::Voice,
                    "audio" => MediaKind::Audio,
                    "video" => MediaKind::Video,
                    _ => MediaKind::Document,
                },
                // The attachment's address is all a download needs.
                file_id: attachment.url.clone(),
                mime_type,
                file_name: Some(attachment.filename.clone()),
                size: Some(attachment.size),
            }
        })
        .collect();
    let mentions_bot = message.mentions.iter().any(|mention| mention.id == bot.id);
    // `<@id>` is how a mention reads in the text: the bot's is dropped (it only addresses the
    // message), anyone else's becomes their name.
    let mut text = message.content.clone();
    for mention in &message.mentions {
        let name = if mention.id == bot.id {
            String::new()
        } else {
            format!("@{}", mention.name)
        };
        for form in [format!("<@{}>", mention.id), format!("<@!{}>", mention.id)] {
            text = text.replace(&form, &name);
        }
    }
    let text = text.trim().to_owned();
    if text.is_empty() && media.is_empty() {
        return Normalized::Skip("no text or attachment (the Message Content intent may be off)");
    }
    let author = &message.author;
    let display_name = message
        .member
        .as_ref()
        .and_then(|member| member.nick.clone())
        .or_else(|| author.global_name.clone())
        .filter(|name| !name.trim().is_empty());
    let reply_to = message
        .referenced_message
        .as_deref()
        .map(|replied| ReplyTo {
            message_id: replied.id.to_string(),
            sender_id: Some(replied.author.id.to_string()),
            to_bot: replied.author.id == bot.id,
            text: Some(replied.content.clone()).filter(|text| !text.is_empty()),
            quoted: false,
        });
    Normalized::Deliver(Box::new(InboundMessage {
        channel: CHANNEL.to_owned(),
        account: account.to_owned(),
        message_id: message.id.to_string(),
        chat_id: place.chat_id,
        chat_type: if message.guild_id.is_some() {
            ChatType::Group
        } else {
            ChatType::Dm
        },
        chat_title: None,
        guild_id: message.guild_id.map(|guild| guild.to_string()),
        team_id: None,
        thread_id: place.thread_id,
        sender: Sender {
            id: author.id.to_string(),
            username: Some(author.name.clone()),
            display_name,
            // A webhook posts under any name it likes; it is not a person.
            is_bot: author.bot || message.webhook_id.is_some(),
        },
        text,
        reply_to,
        mentions: message
            .mentions
            .iter()
            .filter(|mention| mention.id != bot.id)
            .map(|mention| mention.name.clone())
            .collect(),
        mentions_bot,
        media,
        timestamp: message.timestamp.as_secs(),
        edited,
        // A forward carries its text in `message_snapshots`, not `content`: it arrives empty
        // and is skipped above, so no forward can pose as the sender's own words.
        forwarded_from: None,
        via_bot: None,
        caption: false,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    fn fixture(name: &str) -> Value {
        serde_json::from_slice(&nanocrab_testkit::fixture_bytes(&format!(
            "channels/discord/{name}"
        )))
        .unwrap()
    }

    fn bot() -> BotIdentity {
        // The bot of the recorded READY.
        BotIdentity {
            id: Id::new(272_502_210_401_665_025),
            name: "Ein".to_owned(),
        }
    }

    fn place(message: &Message) -> Place {
        Place {
            chat_id: message.channel_id.to_string(),
            thread_id: None,
        }
    }

    fn run(payload: Value, edited: bool, edits: EditedMessages) -> Normalized {
        let message: Message = serde_json::from_value(payload).unwrap();
        normalize(&message, edited, place(&message), &bot(), "default", edits)
    }

    #[test]
    fn the_recorded_message_create_is_a_direct_message() {
        let Normalized::Deliver(message) = run(
            fixture("dispatch-message-create-d.json"),
            false,
            EditedMessages::Ignore,
        ) else {
            panic!("not delivered");
        };
        insta::assert_json_snapshot!(message, @r#"
        {
          "channel": "discord",
          "account": "default",
          "messageId": "302917639565475840",
          "chatId": "244567637332328449",
          "chatType": "dm",
          "sender": {
            "id": "114941315417899012",
            "username": "zeyla"
          },
          "text": "a",
          "timestamp": 1492291593
        }
        "#);
    }

    #[test]
    fn the_recorded_update_is_an_edit_answered_only_when_asked() {
        let update = fixture("dispatch-message-update-d.json");
        assert_eq!(
            run(update.clone(), true, EditedMessages::Ignore),
            Normalized::Skip("an edit, and edits are ignored")
        );
        let Normalized::Deliver(message) = run(update, true, EditedMessages::Respond) else {
            panic!("not delivered");
        };
        assert_eq!((message.text.as_str(), message.edited), ("b", true));
    }

    #[test]
    fn a_guild_message_mentioning_the_bot_is_addressed_to_it_without_the_mention() {
        let mut payload = fixture("docs-example-message.json");
        payload["guild_id"] = json!("81384788765712384");
        payload["content"] = json!("<@272502210401665025> hi <@!114941315417899012>");
        payload["mentions"] = json!([
            {"id": "272502210401665025", "username": "Ein", "discriminator": "7305", "avatar": null, "bot": true, "public_flags": 0},
            {"id": "114941315417899012", "username": "zeyla", "discriminator": "5479", "avatar": null, "public_flags": 0},
        ]);
        let Normalized::Deliver(message) = run(payload, false, EditedMessages::Ignore) else {
            panic!("not delivered");
        };
        assert_eq!(message.chat_type, ChatType::Group);
        assert_eq!(message.guild_id.as_deref(), Some("81384788765712384"));
        assert_eq!(message.text, "hi @zeyla");
        assert!(message.mentions_bot);
        assert_eq!(message.mentions, vec!["zeyla".to_owned()]);
    }

    #[test]
    fn the_bots_own_messages_and_empty_ones_are_skipped() {
        let mut own = fixture("dispatch-message-create-d.json");
        own["author"]["id"] = json!("272502210401665025");
        assert_eq!(
            run(own, false, EditedMessages::Ignore),
            Normalized::Skip("the bot's own message")
        );
        let mut empty = fixture("dispatch-message-create-d.json");
        empty["content"] = json!("");
        assert_eq!(
            run(empty, false, EditedMessages::Ignore),
            Normalized::Skip("no text or attachment (the Message Content intent may be off)")
        );
    }

    #[test]
    fn an_image_attachment_is_a_photo_fetched_by_its_address() {
        let mut payload = fixture("docs-example-message.json");
        payload["attachments"] = json!([{
            "id": "1", "filename": "crab.png", "size": 1234, "content_type": "image/png",
            "url": "https://cdn.discordapp.com/attachments/1/1/crab.png",
            "proxy_url": "https://media.discordapp.net/attachments/1/1/crab.png",
        }]);
        let Normalized::Deliver(message) = run(payload, false, EditedMessages::Ignore) else {
            panic!("not delivered");
        };
        assert_eq!(
            message.media,
            vec![Media {
                kind: MediaKind::Photo,
                file_id: "https://cdn.discordapp.com/attachments/1/1/crab.png".to_owned(),
                mime_type: Some("image/png".to_owned()),
                file_name: Some("crab.png".to_owned()),
                size: Some(1234),
            }]
        );
    }

    #[test]
    fn a_voice_message_is_voice_and_an_audio_file_is_audio() {
        // Discord's voice message: flag IS_VOICE_MESSAGE (1 << 13), one Ogg/Opus attachment
        // with its length and waveform.
        let mut voice = fixture("docs-example-message.json");
        voice["content"] = json!("");
        voice["flags"] = json!(1 << 13);
        voice["attachments"] = json!([{
            "id": "2", "filename": "voice-message.ogg", "size": 5120,
            "content_type": "audio/ogg", "duration_secs": 2.5, "waveform": "AAAA/w==",
            "url": "https://cdn.discordapp.com/attachments/1/2/voice-message.ogg",
            "proxy_url": "https://media.discordapp.net/attachments/1/2/voice-message.ogg",
        }]);
        let Normalized::Deliver(message) = run(voice.clone(), false, EditedMessages::Ignore) else {
            panic!("not delivered");
        };
        assert_eq!(
            message.media,
            vec![Media {
                kind: MediaKind::Voice,
                file_id: "https://cdn.discordapp.com/attachments/1/2/voice-message.ogg".to_owned(),
                mime_type: Some("audio/ogg".to_owned()),
                file_name: Some("voice-message.ogg".to_owned()),
                size: Some(5120),
            }]
        );
        // An uploaded song: no flag, no waveform.
        let mut song = voice;
        song["flags"] = json!(0);
        song["attachments"][0]["filename"] = json!("song.mp3");
        song["attachments"][0]["content_type"] = json!("audio/mpeg");
        song["attachments"][0]
            .as_object_mut()
            .unwrap()
            .remove("waveform");
        let Normalized::Deliver(message) = run(song, false, EditedMessages::Ignore) else {
            panic!("not delivered");
        };
        assert_eq!(message.media[0].kind, MediaKind::Audio);
    }
}
