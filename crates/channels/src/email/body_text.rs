//! The text a person wrote in a mail: the plain part, or the HTML part made Markdown; without
//! the quoted history a reply carries below it (the conversation has those mails already);
//! within the configured length.

/// Tags whose text is not what the mail says.
const SKIPPED_TAGS: [&str; 4] = ["script", "style", "head", "title"];

/// The Markdown of an HTML body.
pub(crate) fn html_to_text(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    // A body htmd cannot read is still readable as its raw text.
    converter.convert(html).unwrap_or_else(|_| html.to_owned())
}

/// `text` without the history quoted below a reply: from Outlook's `-----Original Message-----`
/// or a `From:` header block after a rule, or the trailing `>` lines and the "On …, X wrote:"
/// line above them. Whether something was cut comes with it. Quotes between the writer's own
/// lines (an answer written inline) are kept: there they are part of what is said.
pub(crate) fn without_quoted_history(text: &str) -> (String, bool) {
    let lines: Vec<&str> = text.lines().collect();
    let mut end = lines.len();
    if let Some(at) = lines.iter().enumerate().position(|(at, line)| {
        let line = line.trim();
        line.starts_with("-----Original Message-----")
            || line.starts_with("----- Original Message -----")
            || (line.starts_with("From:")
                && at > 0
                && lines[at - 1].trim().starts_with("________________"))
    }) {
        end = at;
        // The rule above Outlook's header block goes too.
        while end > 0 && lines[end - 1].trim().starts_with("________________") {
            end -= 1;
        }
    }
    // The trailing quote, blank lines among it.
    let mut quote_start = end;
    while quote_start > 0 {
        let line = lines[quote_start - 1].trim();
        if line.starts_with('>') || line.is_empty() {
            quote_start -= 1;
        } else {
            break;
        }
    }
    let quoted = lines[quote_start..end]
        .iter()
        .any(|line| line.trim_start().starts_with('>'));
    if quoted {
        end = quote_start;
        // "On Mon, 1 Jan 2026 at 10:00, Alice <a@x> wrote:", which clients wrap over two lines.
        if end > 0 && is_attribution(lines[end - 1]) {
            // A line that is only "wrote:" ends the line above it.
            let lone = lines[end - 1].split_whitespace().count() == 1;
            end -= 1;
            if lone && end > 0 {
                end -= 1;
            }
        } else if end > 1 && is_attribution(&format!("{} {}", lines[end - 2], lines[end - 1])) {
            end -= 2;
        }
    }
    let cut = end < lines.len() && lines[end..].iter().any(|line| !line.trim().is_empty());
    let kept = lines[..end].join("\n").trim_end().to_owned();
    (kept, cut)
}

/// Whether `line` introduces a quote: it ends in "wrote:" (or a client's word for it).
fn is_attribution(line: &str) -> bool {
    let line = line.trim().to_lowercase();
    [
        "wrote:",
        "writes:",
        "schrieb:",
        "a écrit :",
        "a écrit:",
        "escribió:",
        "schreef:",
    ]
    .iter()
    .any(|end| line.ends_with(end))
}

/// `text` cut to at most `max` characters, at a line or word end where one is near, with a
/// note when it was cut.
pub(crate) fn within(text: String, max: usize) -> String {
    let Some((at, _)) = text.char_indices().nth(max) else {
        return text;
    };
    let head = &text[..at];
    let cut_at = head
        .rfind('\n')
        .filter(|line_end| *line_end > at / 2)
        .or_else(|| head.rfind(' ').filter(|word_end| *word_end > at / 2))
        .unwrap_or(at);
    format!(
        "{}\n[… the rest of the mail is left out: it is longer than {max} characters]",
        text[..cut_at].trim_end()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_quoted_history_below_a_reply_is_cut() {
        let gmail = "Yes, Tuesday works.\n\nOn Mon, 1 Dec 2026 at 10:00, Nanocrab <bot@example.test>\nwrote:\n\n> When shall we meet?\n>\n> > Earlier\n";
        assert_eq!(
            without_quoted_history(gmail),
            ("Yes, Tuesday works.".to_owned(), true)
        );
        let outlook = "Sounds good.\n\n________________________________\nFrom: Nanocrab <bot@example.test>\nSent: Monday\nSubject: Plans\n\nWhen shall we meet?";
        assert_eq!(
            without_quoted_history(outlook),
            ("Sounds good.".to_owned(), true)
        );
        let original = "ok\n-----Original Message-----\nFrom: x";
        assert_eq!(without_quoted_history(original), ("ok".to_owned(), true));
    }

    #[test]
    fn an_inline_answer_and_a_mail_without_quotes_stay_whole() {
        let inline = "> Which day?\nTuesday.\n> Which time?\nTen.";
        assert_eq!(without_quoted_history(inline), (inline.to_owned(), false));
        let plain = "Hello,\n\nno quotes here.\n";
        assert_eq!(
            without_quoted_history(plain),
            ("Hello,\n\nno quotes here.".to_owned(), false)
        );
    }

    #[test]
    fn html_becomes_markdown_without_scripts_or_styles() {
        let html = "<html><head><style>p{color:red}</style><title>T</title></head><body><p>Hello <b>there</b></p><script>alert(1)</script><ul><li>one</li></ul></body></html>";
        assert_eq!(html_to_text(html), "Hello **there**\n\n*   one");
    }

    #[test]
    fn a_long_text_is_cut_at_a_line_end_and_says_so() {
        let text = format!("{}\n{}", "a".repeat(60), "b".repeat(60));
        assert_eq!(
            within(text.clone(), 100),
            format!(
                "{}\n[… the rest of the mail is left out: it is longer than 100 characters]",
                "a".repeat(60)
            )
        );
        assert_eq!(within(text.clone(), 200), text);
    }
}
