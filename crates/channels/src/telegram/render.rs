//! Markdown as the model writes it, in the HTML subset Telegram accepts (`parse_mode=HTML`).
//!
//! Telegram knows `b`, `i`, `s`, `code`, `pre`, `a` and `blockquote` but no paragraphs,
//! headings or lists, and it keeps newlines as they are: blocks become blank-line separated
//! text, headings bold lines, list items `•` or numbered lines. Everything that is not markup
//! is escaped, so stray `<` or `&` in an answer can never break the message.

use pulldown_cmark::{CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The line drawn for a thematic break (`---`).
const RULE: &str = "———";

pub(crate) fn markdown_to_html(markdown: &str) -> String {
    let mut renderer = Renderer::default();
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(markdown, options) {
        renderer.event(event);
    }
    renderer.out
}

/// The separator owed before the next block; written only once something follows, so the
/// message never ends with blank lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
enum Break {
    #[default]
    None,
    Line,
    Paragraph,
}

#[derive(Default)]
struct Renderer {
    out: String,
    pending: Break,
    /// Just after a list marker or `<blockquote>`: the block that follows starts right there.
    at_block_start: bool,
    /// One entry per open list: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// Telegram does not nest blockquotes: only the outermost is a tag.
    quote_depth: usize,
    /// Per open link: when it cannot be a link, its address and where its text starts, to
    /// print the address after the text unless the text is the address.
    links: Vec<Option<(String, usize)>>,
    /// The text of the code block being read, written whole at its end, and its closing tags.
    code: Option<(String, &'static str)>,
}

impl Renderer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match &mut self.code {
                Some((code, _)) => code.push_str(&text),
                None => self.write(&escape(&text)),
            },
            Event::Code(code) => self.write(&format!("<code>{}</code>", escape(&code))),
            Event::InlineMath(text) | Event::DisplayMath(text) => self.write(&escape(&text)),
            Event::Html(html) | Event::InlineHtml(html) => self.write(&escape(&html)),
            Event::FootnoteReference(label) => self.write(&escape(&format!("[{label}]"))),
            Event::SoftBreak | Event::HardBreak => self.write("\n"),
            Event::Rule => {
                self.open_block();
                self.write(RULE);
            }
            Event::TaskListMarker(done) => self.write(if done { "☑ " } else { "☐ " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph
            | Tag::HtmlBlock
            | Tag::Table(_)
            | Tag::TableHead
            | Tag::TableRow
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::FootnoteDefinition(_)
            | Tag::MetadataBlock(_) => self.open_block(),
            Tag::TableCell | Tag::Superscript | Tag::Subscript => {}
            Tag::Heading { .. } => {
                self.open_block();
                self.write("<b>");
            }
            Tag::BlockQuote(_) => {
                self.open_block();
                if self.quote_depth == 0 {
                    self.write("<blockquote>");
                    self.at_block_start = true;
                }
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                self.open_block();
                let language = match &kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .filter(|language| {
                            language.chars().all(|c| {
                                c.is_ascii_alphanumeric()
                                    || matches!(c, '_' | '-' | '+' | '#' | '.')
                            })
                        })
                        .map(str::to_owned),
                    CodeBlockKind::Indented => None,
                };
                let close = match language {
                    Some(language) => {
                        self.write(&format!("<pre><code class=\"language-{language}\">"));
                        "</code></pre>"
                    }
                    None => {
                        self.write("<pre>");
                        "</pre>"
                    }
                };
                self.code = Some((String::new(), close));
            }
            Tag::List(first) => {
                self.open_block();
                self.lists.push(first);
            }
            Tag::Item => {
                self.open_block();
                let indent = "  ".repeat(self.lists.len().saturating_sub(1));
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}. ");
                        *number += 1;
                        marker
                    }
                    Some(None) | None => "• ".to_owned(),
                };
                self.write(&format!("{indent}{marker}"));
                self.at_block_start = true;
            }
            Tag::Emphasis => self.write("<i>"),
            Tag::Strong => self.write("<b>"),
            Tag::Strikethrough => self.write("<s>"),
            Tag::Link {
                link_type,
                dest_url,
                ..
            }
            | Tag::Image {
                link_type,
                dest_url,
                ..
            } => {
                let scheme_ok = ["http://", "https://", "tg://"]
                    .iter()
                    .any(|scheme| dest_url.to_ascii_lowercase().starts_with(scheme));
                if link_type == LinkType::Email || !scheme_ok {
                    // Telegram refuses other schemes (and links e-mail addresses itself): the
                    // address follows the text instead, so nothing is lost.
                    self.links
                        .push(Some((dest_url.into_string(), self.out.len())));
                } else {
                    let href = escape(&dest_url).replace('"', "&quot;");
                    self.write(&format!("<a href=\"{href}\">"));
                    self.links.push(None);
                }
            }
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph
            | TagEnd::Table
            | TagEnd::TableHead
            | TagEnd::TableRow
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::FootnoteDefinition
            | TagEnd::MetadataBlock(_)
            | TagEnd::TableCell
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Item => {}
            TagEnd::HtmlBlock => {
                // Each line of raw HTML comes with its newline; the block's last is one too many.
                let kept = self.out.trim_end_matches('\n').len();
                self.out.truncate(kept);
            }
            TagEnd::Heading(_) => self.write("</b>"),
            TagEnd::BlockQuote(_) => {
                self.quote_depth = self.quote_depth.saturating_sub(1);
                if self.quote_depth == 0 {
                    // A separator owed inside the quote is not written.
                    self.pending = Break::None;
                    self.at_block_start = false;
                    self.out.push_str("</blockquote>");
                }
            }
            TagEnd::CodeBlock => {
                if let Some((code, close)) = self.code.take() {
                    let code = escape(code.strip_suffix('\n').unwrap_or(&code));
                    self.write(&format!("{code}{close}"));
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Emphasis => self.write("</i>"),
            TagEnd::Strong => self.write("</b>"),
            TagEnd::Strikethrough => self.write("</s>"),
            TagEnd::Link | TagEnd::Image => match self.links.pop() {
                Some(Some((url, text_start))) => {
                    let text = self.out.get(text_start..).unwrap_or_default();
                    if !url.is_empty() && text.trim() != escape(&url) {
                        self.write(&escape(&format!(" ({url})")));
                    }
                }
                Some(None) => self.write("</a>"),
                None => {}
            },
        }
    }

    /// A block starts: owe the separator from whatever came before.
    fn open_block(&mut self) {
        if self.out.is_empty() || self.at_block_start {
            return;
        }
        let wanted = if self.lists.is_empty() {
            Break::Paragraph
        } else {
            Break::Line
        };
        self.pending = self.pending.max(wanted);
    }

    fn write(&mut self, html: &str) {
        match self.pending {
            Break::None => {}
            Break::Line => self.out.push('\n'),
            Break::Paragraph => self.out.push_str("\n\n"),
        }
        self.pending = Break::None;
        self.at_block_start = false;
        self.out.push_str(html);
    }
}

pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_typical_answer() {
        insta::assert_snapshot!(markdown_to_html(
            &[
                "# Plan for *today*",
                "",
                "Here is **what** I found, with `inline <code>` and ~~old~~ news.",
                "See [the docs](https://example.com/a?b=1&c=\"2\") or <https://nanocrab.dev>.",
                "",
                "- first",
                "- second with **bold**",
                "",
                "1. one",
                "2. two",
                "",
                "```rust",
                "fn main() {",
                "    println!(\"a < b && c > d\");",
                "}",
                "```",
                "",
                "> A quote",
                "> on two lines",
                "",
                "---",
                "Done & dusted.",
            ]
            .join("\n")
        ));
    }

    #[test]
    fn nested_and_loose_lists_and_tasks() {
        insta::assert_snapshot!(markdown_to_html(
            &[
                "Steps:",
                "",
                "3. install",
                "   - with cargo",
                "   - or from source",
                "4. configure",
                "",
                "- [x] done",
                "- [ ] todo",
                "",
                "* loose item",
                "",
                "  second paragraph of it",
                "",
                "* next item",
            ]
            .join("\n")
        ));
    }

    #[test]
    fn quotes_code_and_headings_together() {
        insta::assert_snapshot!(markdown_to_html(
            &[
                "## Result",
                "",
                "> **Note:** nested",
                ">",
                "> > inner quote",
                "",
                "```",
                "plain <pre> & no language",
                "```",
                "",
                "```python title=\"x\"",
                "print('hi')",
                "```",
                "",
                "    indented code",
                "    kept as is",
                "",
                "Last line  ",
                "after a hard break.",
            ]
            .join("\n")
        ));
    }

    #[test]
    fn everything_that_is_not_markup_is_escaped() {
        assert_eq!(
            markdown_to_html("a < b && c > d <br> <script>x</script>"),
            "a &lt; b &amp;&amp; c &gt; d &lt;br&gt; &lt;script&gt;x&lt;/script&gt;"
        );
        assert_eq!(
            markdown_to_html("<div>\nraw\n</div>"),
            "&lt;div&gt;\nraw\n&lt;/div&gt;"
        );
    }

    #[test]
    fn links_telegram_refuses_keep_their_address_as_text() {
        assert_eq!(
            markdown_to_html("[file](./notes.md) and [mail](mailto:a@b.c) and <a@b.c>"),
            "file (./notes.md) and mail (mailto:a@b.c) and a@b.c"
        );
        assert_eq!(
            markdown_to_html("![a cat](https://example.com/cat.png)"),
            "<a href=\"https://example.com/cat.png\">a cat</a>"
        );
    }

    #[test]
    fn empty_and_blank_answers_render_empty() {
        assert_eq!(markdown_to_html(""), "");
        assert_eq!(markdown_to_html("  \n\n "), "");
    }
}
