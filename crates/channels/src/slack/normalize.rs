//! Slack events and slash commands as [`InboundMessage`]s.

use nanocrab_schema::{ChatType, InboundMessage, Media, MediaKind, Sender};

use super::api::CHANNEL;
use super::types::{Event, EventCallback, FileObject, SlashCommand};

/// What becomes of one event.
#[derive(Debug, PartialEq)]
pub(crate) enum Normalized {
    Deliver(Box<InboundMessage>),
    /// Nothing to answer; acknowledged all the same. The reason is for the debug log.
    Skip(&'static str),
}

/// Message subtypes that are someone's message; every other (joins, topic changes, edits,
/// deletions, bots' own) is not answered.
const ANSWERED_SUBTYPES: [&str; 3] = ["file_share", "thread_broadcast", "me_message"];

/// One Events API callback as the gateway sees it. `bot_user` is the bot's own user id
/// (`auth.test`), `account` the account that received it.
pub(crate) fn normalize_event(
    callback: &EventCallback,
    bot_user: &str,
    account: &str,
) -> Normalized {
    let event = &callback.event;
    let mentioned = match event.kind.as_str() {
        "message" => false,
        "app_mention" => true,
        _ => return Normalized::Skip("not a kind of event answered"),
    };
    if let Some(subtype) = event.subtype.as_deref()
        && !ANSWERED_SUBTYPES.contains(&subtype)
    {
        return Normalized::Skip("a message subtype that is not someone's message");
    }
    let (Some(channel), Some(ts)) = (&event.channel, &event.ts) else {
        return Normalized::Skip("an event without a channel or ts");
    };
    let sender_id = match (&event.user, &event.bot_id) {
        (Some(user), _) if user == bot_user => return Normalized::Skip("the bot's own message"),
        (Some(user), _) => user.clone(),
        (None, Some(bot)) => bot.clone(),
        (None, None) => return Normalized::Skip("a message without a sender"),
    };
    let media: Vec<Media> = event.files.iter().map(media).collect();
    if event.text.trim().is_empty() && media.is_empty() {
        return Normalized::Skip("a message with neither text nor files");
    }
    let readable = Readable::of(&event.text, bot_user);
    Normalized::Deliver(Box::new(InboundMessage {
        channel: CHANNEL.to_owned(),
        account: account.to_owned(),
        message_id: ts.clone(),
        chat_id: channel.clone(),
        chat_type: chat_type(event, channel),
        chat_title: None,
        guild_id: None,
        thread_id: event.thread_ts.clone().filter(|thread| thread != ts),
        sender: Sender {
            id: sender_id,
            username: None,
            display_name: None,
            is_bot: event.bot_id.is_some(),
        },
        text: readable.text,
        reply_to: None,
        mentions: readable.mentions,
        mentions_bot: mentioned || readable.bot,
        media,
        timestamp: seconds(ts),
        edited: false,
        forwarded_from: None,
        via_bot: None,
        caption: false,
        team_id: callback.team_id.clone().or_else(|| event.team.clone()),
    }))
}

/// A slash command (`/new`, `/help`) as a message typed in its channel.
pub(crate) fn normalize_command(
    command: &SlashCommand,
    envelope_id: &str,
    account: &str,
) -> InboundMessage {
    let text = format!("{} {}", command.command, command.text.trim());
    InboundMessage {
        channel: CHANNEL.to_owned(),
        account: account.to_owned(),
        // A command has no ts; its trigger is unique per invocation.
        message_id: command
            .trigger_id
            .clone()
            .unwrap_or_else(|| envelope_id.to_owned()),
        chat_id: command.channel_id.clone(),
        chat_type: if command.channel_id.starts_with('D') {
            ChatType::Dm
        } else {
            ChatType::Group
        },
        chat_title: None,
        guild_id: None,
        thread_id: None,
        sender: Sender {
            id: command.user_id.clone(),
            username: command.user_name.clone(),
            display_name: None,
            is_bot: false,
        },
        text: text.trim_end().to_owned(),
        reply_to: None,
        mentions: Vec::new(),
        // A command is addressed to the app that registered it.
        mentions_bot: true,
        media: Vec::new(),
        timestamp: 0,
        edited: false,
        forwarded_from: None,
        via_bot: None,
        caption: false,
        team_id: command.team_id.clone(),
    }
}

/// A direct message (`im`), or a conversation with several people.
fn chat_type(event: &Event, channel: &str) -> ChatType {
    match event.channel_type.as_deref() {
        Some("im") => ChatType::Dm,
        Some(_) => ChatType::Group,
        // `app_mention` says no type; direct message channels' ids start with D.
        None if channel.starts_with('D') => ChatType::Dm,
        None => ChatType::Group,
    }
}

/// The whole seconds of a `ts` (`1610241741.000200`).
fn seconds(ts: &str) -> i64 {
    ts.split('.')
        .next()
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or_default()
}

fn media(file: &FileObject) -> Media {
    let mime = file.mimetype.as_deref().unwrap_or_default();
    // A clip recorded in Slack is a voice message, whatever container it came in.
    let kind = match mime.split('/').next() {
        _ if file.subtype.as_deref() == Some("slack_audio") => MediaKind::Voice,
        Some("image") => MediaKind::Photo,
        Some("audio") => MediaKind::Audio,
        Some("video") => MediaKind::Video,
        _ => MediaKind::Document,
    };
    Media {
        kind,
        file_id: file.id.clone(),
        mime_type: file.mimetype.clone(),
        file_name: file.name.clone(),
        size: file.size,
    }
}

/// Slack's message text (`<@U1> see <https://x|this> &amp; that`) as a person reads it
/// (`@U1 see this (https://x) & that`), and who it mentions.
#[derive(Debug, PartialEq)]
struct Readable {
    text: String,
    /// User ids mentioned, without `@`.
    mentions: Vec<String>,
    /// Whether the bot is among them.
    bot: bool,
}

impl Readable {
    fn of(text: &str, bot_user: &str) -> Self {
        let mut out = String::with_capacity(text.len());
        let mut mentions = Vec::new();
        let mut bot = false;
        let mut rest = text;
        while let Some(open) = rest.find('<') {
            out.push_str(&unescape(&rest[..open]));
            let after = &rest[open + 1..];
            let Some(close) = after.find('>') else {
                out.push_str(&unescape(&rest[open..]));
                rest = "";
                break;
            };
            let (target, label) = match after[..close].split_once('|') {
                Some((target, label)) => (target, Some(unescape(label))),
                None => (&after[..close], None),
            };
            if let Some(user) = target.strip_prefix('@') {
                bot |= user == bot_user;
                mentions.push(user.to_owned());
                // The bot's name ahead of a command or an approval is only the address.
                if !(user == bot_user && out.trim().is_empty()) {
                    out.push('@');
                    out.push_str(label.as_deref().unwrap_or(user));
                }
            } else if let Some(channel) = target.strip_prefix('#') {
                out.push('#');
                out.push_str(label.as_deref().unwrap_or(channel));
            } else if let Some(special) = target.strip_prefix('!') {
                // `<!here>`, `<!channel>`, `<!subteam^S1|@team>`.
                match label {
                    Some(label) => out.push_str(&label),
                    None => {
                        out.push('@');
                        out.push_str(special);
                    }
                }
            } else {
                let target = unescape(target);
                match label {
                    Some(label) if label != target => {
                        out.push_str(&format!("{label} ({target})"));
                    }
                    Some(_) | None => out.push_str(&target),
                }
            }
            rest = &after[close + 1..];
        }
        out.push_str(&unescape(rest));
        Self {
            text: out.trim().to_owned(),
            mentions,
            bot,
        }
    }
}

/// Slack escapes only these three in message text.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn slack_markup_reads_as_plain_text_and_a_leading_bot_mention_is_only_the_address() {
        let readable = Readable::of(
            "<@UBOT> approve k3f9aa &amp; see <https://x.test/a?b=1&amp;c=2|the page>, <https://y.test>, <#C1|general>, <!here>, <@U2|ann>",
            "UBOT",
        );
        assert_eq!(
            readable,
            Readable {
                text: "approve k3f9aa & see the page (https://x.test/a?b=1&c=2), https://y.test, #general, @here, @ann".to_owned(),
                mentions: vec!["UBOT".to_owned(), "U2".to_owned()],
                bot: true,
            }
        );
        let inside = Readable::of("hi <@UBOT> and 1 &lt; 2 <unclosed", "UBOT");
        assert_eq!(inside.text, "hi @UBOT and 1 < 2 <unclosed");
        assert!(inside.bot);
    }

    #[test]
    fn an_audio_clip_recorded_in_slack_is_voice_and_an_uploaded_one_audio() {
        let file = |subtype: Option<&str>, mime: &str| FileObject {
            id: "F1".to_owned(),
            name: Some("audio_message.m4a".to_owned()),
            mimetype: Some(mime.to_owned()),
            subtype: subtype.map(str::to_owned),
            size: Some(2048),
            url_private_download: None,
            url_private: None,
        };
        assert_eq!(
            media(&file(Some("slack_audio"), "audio/mp4")),
            Media {
                kind: MediaKind::Voice,
                file_id: "F1".to_owned(),
                mime_type: Some("audio/mp4".to_owned()),
                file_name: Some("audio_message.m4a".to_owned()),
                size: Some(2048),
            }
        );
        assert_eq!(
            media(&file(Some("slack_audio"), "video/mp4")).kind,
            MediaKind::Voice
        );
        assert_eq!(media(&file(None, "audio/mpeg")).kind, MediaKind::Audio);
    }
}
