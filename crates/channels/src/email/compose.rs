//! An answer as a mail: to the address of the chat, from the bot's own, and in a thread it
//! knows a reply to the thread's latest mail (`In-Reply-To`, `References`, `Re: ` once before
//! the subject); the Markdown as plain text, a file as an attachment. It says it was written by
//! a program (`Auto-Submitted: auto-replied`, RFC 3834), so other robots do not answer it.

use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};

use super::mailbox_state::Thread;

/// A mail ready to send, and the id it carries.
pub(crate) struct Composed {
    pub mail: lettre::Message,
    /// Its `Message-ID`, without angle brackets.
    pub message_id: String,
}

/// A file to attach: its name and bytes.
pub(crate) struct File {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// The longest subject made from an answer's first line, in characters.
const SUBJECT_CHARS: usize = 78;

/// The mail answering in `thread` (none: a mail of its own, titled by its first line) from
/// `from` to `to`, saying `text`.
pub(crate) fn compose(
    from: &Mailbox,
    to: Mailbox,
    thread: Option<&Thread>,
    text: &str,
    file: Option<File>,
) -> Result<Composed, String> {
    let domain = from.email.domain().to_owned();
    let message_id = format!("{}@{domain}", uuid::Uuid::new_v4().simple());
    let subject = match thread {
        Some(thread) if !thread.subject.is_empty() => format!("Re: {}", thread.subject),
        Some(_) => "Re: (no subject)".to_owned(),
        None => first_line(text),
    };
    let mut builder = lettre::Message::builder()
        .from(from.clone())
        .to(to)
        .subject(subject)
        .date_now()
        .message_id(Some(format!("<{message_id}>")))
        .raw_header(HeaderValue::new(
            HeaderName::new_from_ascii_str("Auto-Submitted"),
            "auto-replied".to_owned(),
        ));
    if let Some(thread) = thread
        && let Some(parent) = thread.references.last()
    {
        builder = builder.in_reply_to(format!("<{parent}>")).references(
            thread
                .references
                .iter()
                .map(|id| format!("<{id}>"))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    let body = SinglePart::plain(text.to_owned());
    let mail = match file {
        None => builder.singlepart(body),
        Some(file) => {
            let kind = ContentType::parse(mime_of(&file.name)).unwrap_or(ContentType::TEXT_PLAIN);
            builder.multipart(
                MultiPart::mixed()
                    .singlepart(body)
                    .singlepart(Attachment::new(file.name).body(file.bytes, kind)),
            )
        }
    }
    .map_err(|err| format!("cannot build the mail: {err}"))?;
    Ok(Composed { mail, message_id })
}

/// A subject from the first line of `text` with words, without Markdown's heading marks.
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(|line| line.trim().trim_start_matches('#').trim())
        .find(|line| !line.is_empty())
        .unwrap_or("A message from your assistant");
    if line.chars().count() <= SUBJECT_CHARS {
        return line.to_owned();
    }
    let head: String = line.chars().take(SUBJECT_CHARS - 1).collect();
    format!("{}…", head.trim_end())
}

/// The MIME type of a file by its extension, for the common ones; the rest are bytes.
fn mime_of(name: &str) -> &'static str {
    let extension = name
        .rsplit_once('.')
        .map(|(_, extension)| extension.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "txt" | "md" | "log" => "text/plain; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "html" | "htm" => "text/html; charset=utf-8",
        "json" => "application/json",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_mail_of_its_own_is_titled_by_its_first_line() {
        assert_eq!(first_line("\n# Your **plan**\n\nmore"), "Your **plan**");
        assert_eq!(first_line(""), "A message from your assistant");
        let long = "word ".repeat(30);
        let subject = first_line(&long);
        assert!(subject.chars().count() <= SUBJECT_CHARS && subject.ends_with('…'));
    }

    #[test]
    fn files_get_the_type_of_their_extension() {
        assert_eq!(mime_of("report.PDF"), "application/pdf");
        assert_eq!(mime_of("notes"), "application/octet-stream");
    }
}
