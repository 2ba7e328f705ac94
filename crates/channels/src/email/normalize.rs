//! A mail as the gateway sees it: one [`InboundMessage`] of a direct conversation with its
//! sender, in the thread its `References` name, or the reason it is not answered.
//!
//! Not answered, never handed over: the bot's own mail, automatic mail (`Auto-Submitted`
//! other than `no`, `Precedence: bulk`/`list`/`junk`/`auto_reply`, a `List-Id`,
//! `X-Autoreply`, `X-Autorespond`), and mail servers' reports (`multipart/report`, an empty
//! `Return-Path`, `mailer-daemon@` or `postmaster@`), so two robots never answer each other;
//! and with `requireAuthResults`, mail the receiving server does not vouch for.

use mail_parser::{HeaderValue, Message, MessageParser, MimeHeaders as _, PartType};
use nanocrab_schema::{ChatType, InboundMessage, Media, MediaKind, Sender};

use super::auth_results::{self, Verdict};
use super::body_text::{html_to_text, within, without_quoted_history};
use super::connection::CHANNEL;

/// What the channel reads mail with.
#[derive(Debug, Clone)]
pub(crate) struct Reading<'a> {
    pub account: &'a str,
    /// The bot's own addresses, lowercase: mail from them is never answered.
    pub own_addresses: &'a [String],
    /// The receiving server's authserv-id, when `requireAuthResults` is on.
    pub authserv_id: Option<&'a str>,
    pub max_body_chars: usize,
}

/// Where a mail sits in the mailbox: what its attachments are fetched again by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    pub uid_validity: u32,
    pub uid: u32,
}

/// The thread a delivered mail belongs to, for answers to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadMail {
    /// The thread's first message id: the mail's first reference, else what it replies to,
    /// else its own id.
    pub root: String,
    /// The subject without `Re:`.
    pub subject: String,
    /// What an answer refers to: the mail's references and its own id last.
    pub references: Vec<String>,
}

#[derive(Debug, PartialEq)]
pub(crate) enum Normalized {
    Deliver(Box<InboundMessage>, ThreadMail),
    /// Not answered; `forged` when the From line was not vouched for (logged as a warning).
    Skip {
        reason: String,
        forged: bool,
    },
}

fn skip(reason: impl Into<String>) -> Normalized {
    Normalized::Skip {
        reason: reason.into(),
        forged: false,
    }
}

/// Reads the raw mail `raw`, found at `place`.
pub(crate) fn normalize(raw: &[u8], place: Place, reading: &Reading<'_>) -> Normalized {
    let Some(mail) = MessageParser::default().parse(raw) else {
        return skip("not a mail that can be read");
    };
    let Some(from) = mail.from().and_then(|from| from.first()) else {
        return skip("a mail without a From address");
    };
    let Some(address) = from.address().map(|a| a.trim().to_lowercase()) else {
        return skip("a mail without a From address");
    };
    let Some((local, domain)) = address.rsplit_once('@') else {
        return skip("a From address without a domain");
    };
    if reading.own_addresses.contains(&address) {
        return skip("the bot's own mail");
    }
    if let Some(why) = automatic(&mail, local) {
        return skip(why);
    }
    if let Some(authserv_id) = reading.authserv_id
        && let Verdict::Fail(why) = auth_results::check(mail.headers_raw(), authserv_id, domain)
    {
        return Normalized::Skip {
            reason: format!("the From address is not vouched for: {why}"),
            forged: true,
        };
    }
    let own_id = mail
        .message_id()
        .map(clean_id)
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("uid-{}-{}", place.uid_validity, place.uid));
    let references = ids(mail.references());
    let in_reply_to = ids(mail.in_reply_to());
    let is_reply = !references.is_empty() || !in_reply_to.is_empty();
    let root = references
        .first()
        .or(in_reply_to.first())
        .cloned()
        .unwrap_or_else(|| own_id.clone());
    let mut chain = if references.is_empty() {
        in_reply_to
    } else {
        references
    };
    chain.retain(|id| *id != own_id);
    chain.push(own_id.clone());
    let subject = mail.subject().unwrap_or_default().trim().to_owned();

    let body = match mail.text_part(0).map(|part| &part.body) {
        Some(PartType::Text(text)) => text.to_string(),
        Some(PartType::Html(html)) => html_to_text(html),
        Some(
            PartType::Binary(_)
            | PartType::InlineBinary(_)
            | PartType::Message(_)
            | PartType::Multipart(_),
        )
        | None => String::new(),
    };
    let body = if is_reply {
        without_quoted_history(&body).0
    } else {
        body.trim_end().to_owned()
    };
    let text = within(body.trim().to_owned(), reading.max_body_chars);
    let media: Vec<Media> = mail
        .attachments()
        .enumerate()
        .map(|(index, part)| attachment(part, place, index))
        .collect();
    if text.is_empty() && subject.is_empty() && media.is_empty() {
        return skip("an empty mail");
    }
    let message = InboundMessage {
        channel: CHANNEL.to_owned(),
        account: reading.account.to_owned(),
        message_id: own_id,
        chat_id: address.clone(),
        chat_type: ChatType::Dm,
        // A thread of mails is titled by its subject.
        chat_title: Some(subject.clone()).filter(|s| !s.is_empty()),
        guild_id: None,
        thread_id: Some(root.clone()),
        sender: Sender {
            id: address,
            username: None,
            display_name: from
                .name()
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty()),
            is_bot: false,
        },
        text,
        reply_to: None,
        mentions: Vec::new(),
        mentions_bot: true,
        media,
        timestamp: mail.date().map_or(0, |date| date.to_timestamp()),
        edited: false,
        forwarded_from: None,
        via_bot: None,
        caption: false,
        team_id: None,
    };
    Normalized::Deliver(
        Box::new(message),
        ThreadMail {
            root,
            subject: without_reply_prefix(&subject).to_owned(),
            references: chain,
        },
    )
}

/// Why `mail` (from `local@…`) was written by a program rather than a person, if it was.
fn automatic(mail: &Message<'_>, local: &str) -> Option<&'static str> {
    let header = |name: &str| {
        mail.headers_raw()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim().to_ascii_lowercase())
    };
    if header("Auto-Submitted").is_some_and(|value| !value.starts_with("no")) {
        return Some("an automatic mail (Auto-Submitted)");
    }
    if header("Precedence")
        .is_some_and(|value| matches!(value.as_str(), "bulk" | "list" | "junk" | "auto_reply"))
    {
        return Some("a bulk or list mail (Precedence)");
    }
    if header("List-Id").is_some() {
        return Some("a mailing list's mail (List-Id)");
    }
    if header("X-Autoreply").is_some() || header("X-Autorespond").is_some() {
        return Some("an auto-reply (X-Autoreply)");
    }
    if mail.root_part().is_content_type("multipart", "report") {
        return Some("a delivery report (multipart/report)");
    }
    if header("Return-Path").is_some_and(|value| value == "<>") {
        return Some("a bounce (empty Return-Path)");
    }
    if local == "mailer-daemon" || local == "postmaster" {
        return Some("a mail server's report (mailer-daemon)");
    }
    None
}

/// The message ids of a `References` or `In-Reply-To` field.
fn ids(value: &HeaderValue<'_>) -> Vec<String> {
    let ids: Vec<String> = match value {
        HeaderValue::Text(id) => vec![clean_id(id)],
        HeaderValue::TextList(ids) => ids.iter().map(|id| clean_id(id)).collect(),
        HeaderValue::Address(_)
        | HeaderValue::DateTime(_)
        | HeaderValue::ContentType(_)
        | HeaderValue::Received(_)
        | HeaderValue::Empty => Vec::new(),
    };
    ids.into_iter().filter(|id| !id.is_empty()).collect()
}

/// A message id without its angle brackets and spaces.
fn clean_id(id: &str) -> String {
    id.trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .trim()
        .to_owned()
}

/// `subject` without the `Re:` (and `Aw:`, `Sv:`, `Antw:`) replies put before it, however many.
pub(crate) fn without_reply_prefix(subject: &str) -> &str {
    let mut rest = subject.trim();
    loop {
        let Some((prefix, after)) = rest.split_once(':') else {
            return rest;
        };
        let prefix = prefix.trim();
        if ["re", "aw", "sv", "antw"]
            .iter()
            .any(|reply| prefix.eq_ignore_ascii_case(reply))
        {
            rest = after.trim_start();
        } else {
            return rest;
        }
    }
}

/// An attachment as a file the turn fetches again by `<uidvalidity>:<uid>:<index>`.
fn attachment(part: &mail_parser::MessagePart<'_>, place: Place, index: usize) -> Media {
    let mime = part
        .content_type()
        .map(|kind| match kind.subtype() {
            Some(subtype) => format!("{}/{}", kind.ctype(), subtype),
            None => kind.ctype().to_owned(),
        })
        .map(|mime| mime.to_ascii_lowercase());
    let kind = match mime.as_deref().and_then(|mime| mime.split('/').next()) {
        Some("image") => MediaKind::Photo,
        Some("audio") => MediaKind::Audio,
        Some("video") => MediaKind::Video,
        Some(_) | None => MediaKind::Document,
    };
    Media {
        kind,
        file_id: format!("{}:{}:{index}", place.uid_validity, place.uid),
        mime_type: mime,
        file_name: part
            .attachment_name()
            .map(str::to_owned)
            .or_else(|| part.is_message().then(|| "message.eml".to_owned())),
        size: Some(part.contents().len() as u64),
    }
}

/// The bytes of the attachment `index` of `raw`, as [`attachment`] numbered it.
pub(crate) fn attachment_bytes(raw: &[u8], index: usize) -> Option<Vec<u8>> {
    let mail = MessageParser::default().parse(raw)?;
    let part = mail.attachments().nth(index)?;
    Some(match &part.body {
        PartType::Message(inner) => inner.raw_message().to_vec(),
        PartType::Text(_)
        | PartType::Html(_)
        | PartType::Binary(_)
        | PartType::InlineBinary(_)
        | PartType::Multipart(_) => part.contents().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn reading(authserv_id: Option<&str>) -> Reading<'static> {
        Reading {
            account: "default",
            own_addresses: &[],
            authserv_id: authserv_id.map(|id| Box::leak(id.to_owned().into_boxed_str()) as &str),
            max_body_chars: 20_000,
        }
    }

    const PLACE: Place = Place {
        uid_validity: 9,
        uid: 4,
    };

    #[test]
    fn reply_prefixes_are_taken_off_however_many() {
        assert_eq!(without_reply_prefix("Re: RE: Aw:  Plans"), "Plans");
        assert_eq!(without_reply_prefix("Plans: Tuesday"), "Plans: Tuesday");
        assert_eq!(without_reply_prefix("Re:"), "");
    }

    #[test]
    fn a_reply_is_in_the_thread_of_its_first_reference() {
        let raw = b"From: Alice <Alice@Example.COM>\r\nTo: bot@example.test\r\nSubject: Re: Plans\r\nMessage-ID: <c@example.com>\r\nIn-Reply-To: <b@example.test>\r\nReferences: <a@example.com>\r\n <b@example.test>\r\nDate: Tue, 1 Dec 2026 10:00:00 +0000\r\n\r\nYes.\r\n\r\nOn Mon, Nanocrab wrote:\r\n> When?\r\n";
        let Normalized::Deliver(message, thread) = normalize(raw, PLACE, &reading(None)) else {
            panic!("not delivered");
        };
        assert_eq!(
            thread,
            ThreadMail {
                root: "a@example.com".to_owned(),
                subject: "Plans".to_owned(),
                references: vec![
                    "a@example.com".to_owned(),
                    "b@example.test".to_owned(),
                    "c@example.com".to_owned()
                ],
            }
        );
        assert_eq!(message.chat_id, "alice@example.com");
        assert_eq!(message.sender.display_name.as_deref(), Some("Alice"));
        assert_eq!(message.chat_title.as_deref(), Some("Re: Plans"));
        assert_eq!(message.thread_id.as_deref(), Some("a@example.com"));
        assert_eq!(message.message_id, "c@example.com");
        assert_eq!(message.text, "Yes.");
        assert_eq!(message.timestamp, 1_796_119_200);
    }

    #[test]
    fn a_recorded_list_mail_is_not_answered() {
        // A mailing-list mail as Gmail delivered it, recorded in dinosaure/blaze (MIT) at
        // 0aa5328e31adc53561242072c6801bd57781b45c, test/004.mail (its headers; the body cut).
        let raw = "Return-Path: <ocaml+verp-cdef9eaa098cd788943a4314c682b75a@discoursemail.com>\nDate: Wed, 28 Mar 2018 22:01:17 +0000\nFrom: Yaron Minsky <ocaml@discoursemail.com>\nReply-To: OCaml <ocaml+bf77c89f3ca4a05f160a08f134224d72@discoursemail.com>\nTo: romain.calascibetta@gmail.com\nMessage-ID: <topic/1378/8068@discuss.ocaml.org>\nIn-Reply-To: <topic/1378@discuss.ocaml.org>\nReferences: <topic/1378@discuss.ocaml.org>\nSubject: [OCaml] [Learning] OCaml Style guide?\nMime-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nList-Unsubscribe: <https://discuss.ocaml.org/email/unsubscribe/2fd70e1c317382c3b71d8459a94d0b0c105212eb757d87142a0412d92d107f03>\nX-Auto-Response-Suppress: All\nAuto-Submitted: auto-generated\nPrecedence: list\nList-ID: <learning.discuss.ocaml.org>\n\nHardly definitive, but we just posted our style guide here:\n";
        assert_eq!(
            normalize(raw.as_bytes(), PLACE, &reading(None)),
            skip("an automatic mail (Auto-Submitted)")
        );
    }

    #[test]
    fn bounces_and_the_bots_own_mail_are_not_answered() {
        let bounce = b"From: Mail Delivery System <MAILER-DAEMON@example.com>\r\nSubject: Undelivered\r\n\r\nsorry\r\n";
        assert_eq!(
            normalize(bounce, PLACE, &reading(None)),
            skip("a mail server's report (mailer-daemon)")
        );
        let own = b"From: bot@example.test\r\nSubject: hi\r\n\r\nhi\r\n";
        let mine = ["bot@example.test".to_owned()];
        let reading = Reading {
            own_addresses: &mine,
            ..reading(None)
        };
        assert_eq!(normalize(own, PLACE, &reading), skip("the bot's own mail"));
    }

    #[test]
    fn with_auth_results_required_an_unvouched_from_is_refused() {
        let raw = b"Authentication-Results: mx.example.test; dkim=none; spf=softfail smtp.mailfrom=evil.example\r\nFrom: alice@example.com\r\nSubject: hi\r\n\r\nhi\r\n";
        assert_eq!(
            normalize(raw, PLACE, &reading(Some("mx.example.test"))),
            Normalized::Skip {
                reason: "the From address is not vouched for: mx.example.test reports dkim=none spf=softfail, none aligned with example.com".to_owned(),
                forged: true,
            }
        );
    }

    #[test]
    fn attachments_are_files_to_fetch_again_by_their_place() {
        let raw = b"From: alice@example.com\r\nSubject: doc\r\nMessage-ID: <m@x>\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n--b\r\nContent-Type: application/pdf; name=\"plan.pdf\"\r\nContent-Disposition: attachment; filename=\"plan.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQ=\r\n--b--\r\n";
        let Normalized::Deliver(message, _) = normalize(raw, PLACE, &reading(None)) else {
            panic!("not delivered");
        };
        assert_eq!(
            message.media,
            [Media {
                kind: MediaKind::Document,
                file_id: "9:4:0".to_owned(),
                mime_type: Some("application/pdf".to_owned()),
                file_name: Some("plan.pdf".to_owned()),
                size: Some(8),
            }]
        );
        assert_eq!(message.text, "See attached.");
        assert_eq!(attachment_bytes(raw, 0).as_deref(), Some(&b"%PDF-1.4"[..]));
    }
}
