//! Markdown as the model writes it, in the HTML subset Telegram accepts (`parse_mode=HTML`).
//!
//! Telegram knows `b`, `i`, `s`, `code`, `pre`, `a` and `blockquote` but no paragraphs,
//! headings or lists, and it keeps newlines as they are: blocks become blank-line separated
//! text, headings bold lines, list items `•` or numbered lines. Everything that is not markup
//! is escaped, so stray `<` or `&` in an answer can never break the message.

use crate::block_text::{BlockText, escape};
use pulldown_cmark::{CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The line drawn for a thematic break (`---`).
const RULE: &str = "———";

pub(crate) fn markdown_to_html(markdown: &str) -> String {
    let mut renderer = Renderer::default();
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(markdown, options) {
        renderer.event(event);
    }
    renderer.text.out
}

#[derive(Default)]
struct Renderer {
    text: BlockText,
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
                None => self.text.write(&escape(&text)),
            },
            Event::Code(code) => self.text.write(&format!("<code>{}</code>", escape(&code))),
            Event::InlineMath(text) | Event::DisplayMath(text) => self.text.write(&escape(&text)),
            Event::Html(html) | Event::InlineHtml(html) => self.text.write(&escape(&html)),
            Event::FootnoteReference(label) => self.text.write(&escape(&format!("[{label}]"))),
            Event::SoftBreak | Event::HardBreak => self.text.write("\n"),
            Event::Rule => {
                self.text.open_block();
                self.text.write(RULE);
            }
            Event::TaskListMarker(done) => self.text.write(if done { "☑ " } else { "☐ " }),
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
            | Tag::MetadataBlock(_) => self.text.open_block(),
            Tag::TableCell | Tag::Superscript | Tag::Subscript => {}
            Tag::Heading { .. } => {
                self.text.open_block();
                self.text.write("<b>");
            }
            Tag::BlockQuote(_) => {
                self.text.open_block();
                if self.quote_depth == 0 {
                    self.text.write("<blockquote>");
                    self.text.start_here();
                }
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                self.text.open_block();
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
                        self.text
                            .write(&format!("<pre><code class=\"language-{language}\">"));
                        "</code></pre>"
                    }
                    None => {
                        self.text.write("<pre>");
                        "</pre>"
                    }
                };
                self.code = Some((String::new(), close));
            }
            Tag::List(first) => self.text.start_list(first),
            Tag::Item => self.text.start_item(),
            Tag::Emphasis => self.text.write("<i>"),
            Tag::Strong => self.text.write("<b>"),
            Tag::Strikethrough => self.text.write("<s>"),
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
                        .push(Some((dest_url.into_string(), self.text.out.len())));
                } else {
                    let href = escape(&dest_url).replace('"', "&quot;");
                    self.text.write(&format!("<a href=\"{href}\">"));
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
                let kept = self.text.out.trim_end_matches('\n').len();
                self.text.out.truncate(kept);
            }
            TagEnd::Heading(_) => self.text.write("</b>"),
            TagEnd::BlockQuote(_) => {
                self.quote_depth = self.quote_depth.saturating_sub(1);
                if self.quote_depth == 0 {
                    // A separator owed inside the quote is not written.
                    self.text.owe_nothing();
                    self.text.out.push_str("</blockquote>");
                }
            }
            TagEnd::CodeBlock => {
                if let Some((code, close)) = self.code.take() {
                    let code = escape(code.strip_suffix('\n').unwrap_or(&code));
                    self.text.write(&format!("{code}{close}"));
                }
            }
            TagEnd::List(_) => self.text.end_list(),
            TagEnd::Emphasis => self.text.write("</i>"),
            TagEnd::Strong => self.text.write("</b>"),
            TagEnd::Strikethrough => self.text.write("</s>"),
            TagEnd::Link | TagEnd::Image => match self.links.pop() {
                Some(Some((url, text_start))) => {
                    let text = self.text.out.get(text_start..).unwrap_or_default();
                    if !url.is_empty() && text.trim() != escape(&url) {
                        self.text.write(&escape(&format!(" ({url})")));
                    }
                }
                Some(None) => self.text.write("</a>"),
                None => {}
            },
        }
    }
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
