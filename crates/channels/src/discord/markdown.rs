//! The model's Markdown as Discord shows it, cut into messages Discord accepts.
//!
//! Discord renders most of Markdown itself (emphasis, code, quotes, lists, links, `#` to `###`
//! headings), so the text goes out nearly as written: deeper headings become bold lines,
//! tables (which Discord shows as raw pipes) become code blocks so their columns line up, and
//! task list boxes become ☐ / ☑.
//!
//! Discord refuses a message of more than 2,000 characters. Cuts fall at line ends, a line
//! longer than a message at its last space that fits, else anywhere; a code block open at a
//! cut is closed at the end of the part and opened again, with its language, at the start of
//! the next.

/// Discord's limit on a message's content, in characters (Unicode scalar values, as
/// twilight-validate counts them).
pub(crate) const MESSAGE_LIMIT: usize = 2000;

/// A fenced code block's opening: its marker (```` ``` ````, `~~~~`) and the whole line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fence {
    marker: String,
    opening: String,
}

/// The fence `line` opens, if it is a fence line: up to three spaces, then three or more
/// backticks or tildes.
fn fence_of(line: &str) -> Option<Fence> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let mark = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let length = rest.len() - rest.trim_start_matches(mark).len();
    (length >= 3).then(|| Fence {
        marker: rest[..length].to_owned(),
        opening: line.trim_end().to_owned(),
    })
}

/// Whether `line` closes `fence`: its marker character, at least as many, and nothing else.
fn closes(line: &str, fence: &Fence) -> bool {
    let trimmed = line.trim();
    let mark = fence.marker.chars().next().unwrap_or('`');
    trimmed.len() >= fence.marker.len() && trimmed.chars().all(|c| c == mark)
}

/// `markdown` in the dialect Discord renders.
pub(crate) fn render(markdown: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut fence: Option<Fence> = None;
    let mut in_table = false;
    for line in markdown.lines() {
        if let Some(open) = &fence {
            if closes(line, open) {
                fence = None;
            }
            out.push(line.to_owned());
            continue;
        }
        let trimmed = line.trim_start();
        let table_row = trimmed.starts_with('|');
        if table_row != in_table {
            out.push("```".to_owned());
            in_table = table_row;
        }
        if table_row {
            out.push(trimmed.trim_end().to_owned());
            continue;
        }
        if let Some(opened) = fence_of(line) {
            fence = Some(opened);
            out.push(line.to_owned());
            continue;
        }
        let hashes = trimmed.len() - trimmed.trim_start_matches('#').len();
        if hashes > 3 && trimmed[hashes..].starts_with(' ') {
            out.push(format!("**{}**", trimmed[hashes..].trim()));
            continue;
        }
        let indent = &line[..line.len() - trimmed.len()];
        let task = ["- [ ] ", "* [ ] ", "- [x] ", "* [x] ", "- [X] ", "* [X] "]
            .iter()
            .find(|prefix| trimmed.starts_with(**prefix));
        match task {
            Some(prefix) => {
                let mark = if prefix.as_bytes()[3] == b' ' {
                    "☐"
                } else {
                    "☑"
                };
                out.push(format!("{indent}- {mark} {}", &trimmed[prefix.len()..]));
            }
            None => out.push(line.to_owned()),
        }
    }
    if in_table {
        out.push("```".to_owned());
    }
    out.join("\n")
}

/// Cuts `text` into parts of at most `limit` characters, code blocks closed and reopened at
/// each cut. Blank parts are left out: Discord refuses an empty message.
pub(crate) fn split(text: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut length = 0;
    // How much of `current` is the reopened fence, not content of its own.
    let mut prefix = 0;
    let mut fence: Option<Fence> = None;
    for line in text.split('\n') {
        let after = match &fence {
            Some(open) if closes(line, open) => None,
            Some(open) => Some(open.clone()),
            None => fence_of(line),
        };
        let mut pending = line;
        loop {
            let separator = usize::from(length > 0);
            // A block still open after this line is closed at the end of the part.
            let reserve = after.as_ref().map_or(0, |open| open.marker.len() + 1);
            let room = limit.saturating_sub(length + separator + reserve);
            let pending_length = pending.chars().count();
            if pending_length <= room {
                if separator == 1 {
                    current.push('\n');
                }
                current.push_str(pending);
                length += separator + pending_length;
                break;
            }
            if length > prefix {
                let reopened = fence.as_ref().map(|open| open.opening.clone());
                flush(&mut parts, &mut current, fence.as_ref());
                current = reopened.unwrap_or_default();
                length = current.chars().count();
                prefix = length;
                continue;
            }
            // One line longer than a whole message: cut at its last space that fits.
            let room = room.max(1);
            let hard = pending
                .char_indices()
                .nth(room)
                .map_or(pending.len(), |(at, _)| at);
            let cut = pending[..hard]
                .rfind(' ')
                .filter(|at| *at > 0)
                .map_or(hard, |at| at + 1);
            if separator == 1 {
                current.push('\n');
            }
            current.push_str(&pending[..cut]);
            pending = &pending[cut..];
            let reopened = after.as_ref().map(|open| open.opening.clone());
            flush(&mut parts, &mut current, after.as_ref());
            current = reopened.unwrap_or_default();
            length = current.chars().count();
            prefix = length;
        }
        fence = after;
    }
    if length > prefix {
        // The text itself may leave a block open; Discord shows it either way.
        parts.push(current);
    }
    parts
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .collect()
}

/// Ends the part being built, closing the code block open in it.
fn flush(parts: &mut Vec<String>, current: &mut String, open: Option<&Fence>) {
    let mut part = std::mem::take(current);
    if let Some(open) = open {
        part.push('\n');
        part.push_str(&open.marker);
    }
    parts.push(part);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn most_markdown_goes_out_as_written_and_what_discord_cannot_show_is_changed() {
        let markdown = "# Plan\n\n**Bold**, *it*, ~~gone~~, `code` and [a link](https://example.com).\n\n#### Details\n\n- [ ] buy\n- [x] cook\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```rust\n| not a table |\n#### not a heading\n```\n> quoted";
        insta::assert_snapshot!(render(markdown), @r"
        # Plan

        **Bold**, *it*, ~~gone~~, `code` and [a link](https://example.com).

        **Details**

        - ☐ buy
        - ☑ cook

        ```
        | a | b |
        |---|---|
        | 1 | 2 |
        ```

        ```rust
        | not a table |
        #### not a heading
        ```
        > quoted
        ");
    }

    #[test]
    fn a_short_text_is_one_part_and_a_blank_one_none() {
        assert_eq!(split("hello", MESSAGE_LIMIT), vec!["hello".to_owned()]);
        assert_eq!(split(" \n\n ", MESSAGE_LIMIT), Vec::<String>::new());
    }

    #[test]
    fn parts_end_at_line_ends_within_the_limit() {
        let text = ["a".repeat(8), "b".repeat(8), "c".repeat(8)].join("\n");
        assert_eq!(
            split(&text, 18),
            vec![
                format!("{}\n{}", "a".repeat(8), "b".repeat(8)),
                "c".repeat(8)
            ]
        );
    }

    #[test]
    fn a_code_block_cut_is_closed_and_reopened_with_its_language() {
        let body: Vec<String> = (0..6).map(|i| format!("let x{i} = {i};")).collect();
        let text = format!("Here:\n```rust\n{}\n```\nDone.", body.join("\n"));
        let parts = split(&text, 50);
        for part in &parts {
            assert!(part.chars().count() <= 50, "{part:?}");
            assert_eq!(part.matches("```").count() % 2, 0, "{part:?}");
        }
        insta::assert_debug_snapshot!(parts, @r#"
        [
            "Here:\n```rust\nlet x0 = 0;\nlet x1 = 1;\n```",
            "```rust\nlet x2 = 2;\nlet x3 = 3;\nlet x4 = 4;\n```",
            "```rust\nlet x5 = 5;\n```\nDone.",
        ]
        "#);
    }

    #[test]
    fn a_line_longer_than_a_message_is_cut_at_a_space_else_anywhere() {
        let words = "word ".repeat(10);
        let parts = split(words.trim_end(), 12);
        assert_eq!(parts[0], "word word ");
        assert!(parts.iter().all(|part| part.chars().count() <= 12));
        assert_eq!(parts.concat(), words.trim_end());
        let solid = "é".repeat(25);
        assert_eq!(
            split(&solid, 10),
            vec!["é".repeat(10), "é".repeat(10), "é".repeat(5)]
        );
    }

    #[test]
    fn every_part_of_a_long_answer_fits_discord() {
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&format!("Paragraph {i} with some words in it.\n"));
            if i % 50 == 0 {
                text.push_str("```\nfn main() {}\n```\n");
            }
        }
        let parts = split(&text, MESSAGE_LIMIT);
        assert!(parts.len() > 1);
        for part in &parts {
            assert!(part.chars().count() <= MESSAGE_LIMIT);
        }
        assert_eq!(parts.join("\n").matches("Paragraph").count(), 300);
    }
}
