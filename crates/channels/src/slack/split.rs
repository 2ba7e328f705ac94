//! A long mrkdwn answer cut into messages within Slack's limit.
//!
//! `chat.postMessage` takes at most 40,000 characters of `text` (Slack truncates the rest).
//! Cuts fall on a paragraph break, else a line break, else a space, else anywhere that is a
//! character boundary and not inside an `&amp;`-style entity. A code block cut in two is
//! closed at the end of the first part and opened again at the start of the next, so both
//! parts still show as code.

/// Slack's limit on a message's `text`, in characters.
pub(crate) const MESSAGE_LIMIT: usize = 40_000;

const FENCE: &str = "```";

/// `text` in parts of at most `limit` characters (`limit` is at least 16), none blank.
pub(crate) fn split_mrkdwn(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(16);
    let mut parts = Vec::new();
    let mut rest = text.trim();
    // Whether `rest` starts inside a code block the previous part closed.
    let mut reopened = false;
    while !rest.is_empty() {
        let opener = if reopened { "```\n" } else { "" };
        // Room for the opener and, should the cut fall inside a block, its closer.
        let room = limit - opener.chars().count() - "\n```".len();
        if opener.chars().count() + rest.chars().count() <= limit {
            parts.push(format!("{opener}{rest}"));
            break;
        }
        let cut = cut_at(rest, room);
        let (head, tail) = rest.split_at(cut);
        let head = head.trim_end();
        let inside = reopened ^ (head.matches(FENCE).count() % 2 == 1);
        let closer = if inside { "\n```" } else { "" };
        parts.push(format!("{opener}{head}{closer}"));
        reopened = inside;
        rest = if inside {
            tail.trim_start_matches([' ', '\n'])
        } else {
            tail.trim_start()
        };
    }
    parts.retain(|part| !part.trim().is_empty());
    parts
}

/// The byte index to cut `text` at, at most `room` characters in.
fn cut_at(text: &str, room: usize) -> usize {
    let end = text
        .char_indices()
        .nth(room)
        .map_or(text.len(), |(at, _)| at);
    let window = &text[..end];
    let at_least = end / 2;
    for separator in ["\n\n", "\n", " "] {
        if let Some(at) = window.rfind(separator).filter(|at| *at >= at_least) {
            return at + separator.len();
        }
    }
    // No break in reach: cut anywhere, but never inside an entity (`&amp;`).
    match window.rfind('&') {
        Some(amp) if !window[amp..].contains(';') && amp > 0 => amp,
        Some(_) | None => end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split_mrkdwn("  hello  ", 40), vec!["hello".to_owned()]);
        assert!(split_mrkdwn(" \n ", 40).is_empty());
    }

    #[test]
    fn cuts_prefer_paragraphs_then_lines_then_spaces() {
        let text = "first paragraph here\n\nsecond one is here\nand a line";
        assert_eq!(
            split_mrkdwn(text, 30),
            vec![
                "first paragraph here".to_owned(),
                "second one is here\nand a line".to_owned()
            ]
        );
        let words = "aaaa bbbb cccc dddd eeee ffff gggg";
        for part in split_mrkdwn(words, 16) {
            assert!(part.chars().count() <= 16, "{part:?}");
            assert!(!part.starts_with(' ') && !part.ends_with(' '));
        }
    }

    #[test]
    fn a_code_block_cut_in_two_stays_code_in_both_parts() {
        let code: String = (0..12).map(|i| format!("line {i}\n")).collect();
        let text = format!("Look:\n\n```\n{code}```\n\nDone.");
        let parts = split_mrkdwn(&text, 40);
        for part in &parts {
            assert!(part.chars().count() <= 40, "{part:?}");
            assert_eq!(part.matches(FENCE).count() % 2, 0, "{part:?}");
        }
        let joined: String = parts.join("\n");
        for i in 0..12 {
            assert!(joined.contains(&format!("line {i}")));
        }
    }

    #[test]
    fn no_break_in_reach_cuts_on_a_character_and_never_inside_an_entity() {
        let text = format!("{}&amp;{}", "é".repeat(14), "x".repeat(30));
        let parts = split_mrkdwn(&text, 20);
        assert!(parts.iter().all(|part| part.chars().count() <= 20));
        assert!(parts.iter().any(|part| part.starts_with("&amp;")));
        assert_eq!(parts.concat(), text);
    }
}
