//! Cutting rendered HTML into messages Telegram accepts.
//!
//! Telegram refuses a message longer than 4096 UTF-16 code units of its text after entity
//! parsing. The whole HTML is counted here, tags and `&amp;`s included: a little more is cut
//! than needed, but no part can be refused, whatever Telegram's count does with entities.
//! Cuts fall on a blank line if the part has one, else a line end, else a space, else
//! anywhere, but never inside a tag or an `&...;` entity; the tags open at a cut are closed
//! at the end of the part and opened again at the start of the next, so a long code block
//! becomes several closed blocks with the same language.

/// Telegram's limit on a message's text.
pub(crate) const MESSAGE_LIMIT: usize = 4096;

/// One indivisible piece of the HTML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Atom<'a> {
    /// `<b>`, `<a href="...">`: the tag's name.
    Open(&'a str),
    Close,
    /// One character, or one entity (`&lt;`).
    Text(&'a str),
}

/// `html` as its atoms, with each atom's text.
fn atoms(html: &str) -> Vec<(Atom<'_>, &str)> {
    let mut atoms = Vec::new();
    let mut rest = html;
    while let Some(first) = rest.chars().next() {
        let end = match first {
            '<' => rest.find('>').map(|at| at + 1),
            '&' => rest
                .find(';')
                .filter(|&at| {
                    rest[1..at]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '#')
                })
                .map(|at| at + 1),
            _ => None,
        }
        .unwrap_or(first.len_utf8());
        let (raw, tail) = rest.split_at(end);
        let atom = match raw.strip_prefix("</") {
            Some(_) => Atom::Close,
            None if first == '<' && raw.len() > 1 => {
                let name = raw[1..raw.len() - 1]
                    .split(|c: char| c.is_whitespace())
                    .next()
                    .unwrap_or_default();
                Atom::Open(name)
            }
            None => Atom::Text(raw),
        };
        atoms.push((atom, raw));
        rest = tail;
    }
    atoms
}

/// How good a place to cut is; later variants are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Boundary {
    Anywhere,
    Word,
    Line,
    Paragraph,
}

/// Where a part may end.
#[derive(Debug, Clone, Copy)]
struct Cut {
    /// The part is the atoms before this one...
    end: usize,
    /// ...and the next starts here, after the whitespace the cut swallows.
    resume: usize,
}

fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// `</name>`'s length.
fn closer_len(name: &str) -> usize {
    name.len() + 3
}

/// Cuts `html` (as the renderer writes it: well nested) into parts of at most `limit` UTF-16
/// code units, each well nested on its own.
pub(crate) fn split_html(html: &str, limit: usize) -> Vec<String> {
    let atoms = atoms(html);
    let mut parts = Vec::new();
    // The tags open where the next part starts, outermost first: (name, opening tag).
    let mut open: Vec<(&str, &str)> = Vec::new();
    let mut start = 0;
    while start < atoms.len() {
        let prefix: String = open.iter().map(|(_, raw)| *raw).collect();
        let mut depth = open.clone();
        let mut length = utf16_len(&prefix);
        let mut closers: usize = depth.iter().map(|(name, _)| closer_len(name)).sum();
        let mut visible = false;
        // The last place to cut of each kind seen so far, by `Boundary`.
        let mut best: [Option<Cut>; 4] = [None; 4];
        let mut index = start;
        let mut whole = false;
        loop {
            let fits = length + closers <= limit;
            if fits && index == atoms.len() {
                whole = true;
                break;
            }
            let after_open_tag = index > start && matches!(atoms[index - 1].0, Atom::Open(_));
            if fits && visible && !after_open_tag {
                let following = atoms.get(index + 1).map(|atom| atom.1);
                let boundary = match (atoms[index].1, following) {
                    ("\n", Some("\n")) => Some((Boundary::Paragraph, 2)),
                    ("\n", _) => Some((Boundary::Line, 1)),
                    (" ", _) => Some((Boundary::Word, 1)),
                    _ => None,
                };
                best[Boundary::Anywhere as usize] = Some(Cut {
                    end: index,
                    resume: index,
                });
                if let Some((kind, swallow)) = boundary {
                    best[kind as usize] = Some(Cut {
                        end: index,
                        resume: index + swallow,
                    });
                }
            }
            if length > limit || index == atoms.len() {
                break;
            }
            let (atom, raw) = atoms[index];
            length += utf16_len(raw);
            match atom {
                Atom::Open(name) => {
                    depth.push((name, raw));
                    closers += closer_len(name);
                }
                Atom::Close => {
                    if let Some((name, _)) = depth.pop() {
                        closers -= closer_len(name);
                    }
                }
                Atom::Text(_) => visible = true,
            }
            index += 1;
        }
        if whole {
            let body: String = atoms[start..].iter().map(|atom| atom.1).collect();
            parts.push(format!("{prefix}{body}"));
            break;
        }
        let cut = best
            .iter()
            .rev()
            .flatten()
            .next()
            .copied()
            .unwrap_or_else(|| {
                // Not even one character fits beside the open tags (an absurdly long link):
                // one part goes over the limit rather than the rest never going at all.
                let end = atoms[start..]
                    .iter()
                    .position(|atom| matches!(atom.0, Atom::Text(_)))
                    .map_or(atoms.len(), |at| start + at + 1);
                Cut { end, resume: end }
            });
        for (atom, raw) in &atoms[start..cut.end] {
            match atom {
                Atom::Open(name) => open.push((name, raw)),
                Atom::Close => {
                    open.pop();
                }
                Atom::Text(_) => {}
            }
        }
        let body: String = atoms[start..cut.end].iter().map(|atom| atom.1).collect();
        let closing: String = open
            .iter()
            .rev()
            .map(|(name, _)| format!("</{name}>"))
            .collect();
        parts.push(format!("{prefix}{body}{closing}"));
        start = cut.resume;
    }
    parts
}

/// What Telegram would show of `html`: the text without tags, entities decoded. A part sent
/// again without `parse_mode` when Telegram could not parse it.
pub(crate) fn plain_text(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    for (atom, raw) in atoms(html) {
        match atom {
            Atom::Open(_) | Atom::Close => {}
            Atom::Text(raw_text) => match raw_text {
                "&amp;" => text.push('&'),
                "&lt;" => text.push('<'),
                "&gt;" => text.push('>'),
                "&quot;" => text.push('"'),
                _ => text.push_str(raw),
            },
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telegram::render::markdown_to_html;
    use pretty_assertions::assert_eq;

    /// Every part within `limit` and well nested on its own.
    fn check(parts: &[String], limit: usize) {
        for part in parts {
            assert!(utf16_len(part) <= limit, "part over {limit}: {part}");
            let mut open = Vec::new();
            for (atom, _) in atoms(part) {
                match atom {
                    Atom::Open(name) => open.push(name),
                    Atom::Close => assert!(open.pop().is_some(), "stray end tag in {part}"),
                    Atom::Text(_) => {}
                }
            }
            assert_eq!(open, Vec::<&str>::new(), "unclosed tags in {part}");
            assert!(!plain_text(part).trim().is_empty(), "an empty part");
        }
    }

    /// The text without whitespace: what a cut may not lose.
    fn ink(text: &str) -> String {
        text.chars().filter(|c| !c.is_whitespace()).collect()
    }

    #[test]
    fn a_short_message_is_one_part() {
        let html = "<b>hi</b> &amp; bye";
        assert_eq!(split_html(html, MESSAGE_LIMIT), vec![html.to_owned()]);
        assert_eq!(split_html("", MESSAGE_LIMIT), Vec::<String>::new());
    }

    #[test]
    fn paragraphs_are_cut_between_them_first() {
        let paragraph = |c: &str| format!("{}end.", format!("{c} ").repeat(600));
        // A blank line early beats a line end and spaces later.
        let html = format!(
            "{}\n\n{}\n{}",
            paragraph("a"),
            paragraph("b"),
            paragraph("c")
        );
        let parts = split_html(&html, 3000);
        check(&parts, 3000);
        assert_eq!(
            parts,
            vec![
                paragraph("a"),
                format!("{}\n{}", paragraph("b"), paragraph("c"))
            ]
        );
    }

    #[test]
    fn then_lines_then_words_then_anywhere() {
        let line = "word ".repeat(30).trim_end().to_owned();
        let html = [line.as_str(); 4].join("\n");
        let parts = split_html(&html, 200);
        check(&parts, 200);
        assert_eq!(parts, vec![line.clone(); 4]);

        let words = "abcdefghi ".repeat(100).trim_end().to_owned();
        let parts = split_html(&words, 95);
        check(&parts, 95);
        let mut expected = vec![["abcdefghi"; 9].join(" "); 11];
        expected.push("abcdefghi".to_owned());
        assert_eq!(parts, expected);

        let word = "x".repeat(250);
        let parts = split_html(&word, 100);
        check(&parts, 100);
        assert_eq!(parts, ["x".repeat(100), "x".repeat(100), "x".repeat(50)]);
    }

    #[test]
    fn a_long_code_block_becomes_closed_blocks_in_the_same_language() {
        let code: String = (0..400).map(|n| format!("let x{n} = a < b;\n")).collect();
        let html = markdown_to_html(&format!("Look:\n\n```rust\n{code}```\n\nDone."));
        let parts = split_html(&html, MESSAGE_LIMIT);
        check(&parts, MESSAGE_LIMIT);
        assert!(parts.len() >= 2, "{}", parts.len());
        assert_eq!(parts[0], "Look:");
        let (last, middle) = parts[1..].split_last().unwrap();
        for part in middle {
            assert!(
                part.starts_with("<pre><code class=\"language-rust\">let x")
                    && part.ends_with(";</code></pre>"),
                "{part}"
            );
        }
        assert!(last.starts_with("<pre><code class=\"language-rust\">let x"));
        assert!(
            last.ends_with("x399 = a &lt; b;</code></pre>\n\nDone."),
            "{last}"
        );
        let joined: String = parts.iter().map(|part| plain_text(part)).collect();
        assert_eq!(ink(&joined), ink(&plain_text(&html)));
    }

    #[test]
    fn entities_and_surrogate_pairs_stay_whole() {
        let html = "&amp;&lt;".repeat(700);
        let parts = split_html(&html, 1000);
        check(&parts, 1000);
        assert!(parts.iter().all(|part| part.ends_with(';')));
        assert_eq!(parts.concat(), html);

        // Each emoji is two UTF-16 code units, as Telegram counts.
        let emoji = "😀".repeat(3000);
        let parts = split_html(&emoji, MESSAGE_LIMIT);
        check(&parts, MESSAGE_LIMIT);
        assert_eq!(
            parts
                .iter()
                .map(|part| part.chars().count())
                .collect::<Vec<_>>(),
            [2048, 952]
        );
    }

    #[test]
    fn formatting_across_a_cut_is_closed_and_reopened() {
        let html = format!(
            "<blockquote><b>{}</b> <a href=\"https://x.y\">{}</a></blockquote>",
            "bold ".repeat(40),
            "link ".repeat(40)
        );
        let parts = split_html(&html, 120);
        check(&parts, 120);
        assert!(parts.len() > 3);
        assert!(parts.iter().all(|part| part.starts_with("<blockquote>")));
        assert_eq!(
            ink(&parts.iter().map(|p| plain_text(p)).collect::<String>()),
            ink(&plain_text(&html))
        );
    }

    #[test]
    fn plain_text_is_what_telegram_shows() {
        assert_eq!(
            plain_text("<b>a &amp; b</b> <a href=\"https://x\">&lt;3&gt;</a> &quot;q&quot;"),
            "a & b <3> \"q\""
        );
    }
}
