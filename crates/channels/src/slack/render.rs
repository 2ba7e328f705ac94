//! Markdown as the model writes it, in Slack's `mrkdwn`.
//!
//! mrkdwn has `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks, `>` quotes
//! and `<url|text>` links, but no headings or lists: headings become bold lines, list items
//! `•` or numbered lines. `&`, `<` and `>` are escaped everywhere, as Slack asks, so stray
//! markup in an answer can never turn into a mention or a link.

use crate::block_text::{BlockText, escape};
use pulldown_cmark::{CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The line drawn for a thematic break (`---`).
const RULE: &str = "———";

pub(crate) fn markdown_to_mrkdwn(markdown: &str) -> String {
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
    /// Where each open quote's text starts: its lines get `>` when it ends.
    quotes: Vec<usize>,
    /// Per open link: its address and where its text starts.
    links: Vec<(String, usize)>,
    /// The text of the code block being read, written whole at its end.
    code: Option<String>,
}

impl Renderer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match &mut self.code {
                Some(code) => code.push_str(&text),
                None => self.text.write(&escape(&text)),
            },
            Event::Code(code) => self.text.write(&format!("`{}`", escape(&code))),
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
                self.text.write("*");
            }
            Tag::BlockQuote(_) => {
                self.text.open_block();
                // The separator goes before the quote, not inside it.
                self.text.write("");
                self.quotes.push(self.text.out.len());
                self.text.start_here();
            }
            Tag::CodeBlock(kind) => {
                self.text.open_block();
                // mrkdwn has no languages: an indented block and a fenced one look alike.
                match kind {
                    CodeBlockKind::Fenced(_) | CodeBlockKind::Indented => {}
                }
                self.code = Some(String::new());
            }
            Tag::List(first) => self.text.start_list(first),
            Tag::Item => self.text.start_item(),
            Tag::Emphasis => self.text.write("_"),
            Tag::Strong => self.text.write("*"),
            Tag::Strikethrough => self.text.write("~"),
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
                // Written once the text is known: `<url|text>`, or the text and the address.
                self.text.write("");
                let url = match link_type {
                    LinkType::Email => format!("mailto:{dest_url}"),
                    LinkType::Inline
                    | LinkType::Reference
                    | LinkType::ReferenceUnknown
                    | LinkType::Collapsed
                    | LinkType::CollapsedUnknown
                    | LinkType::Shortcut
                    | LinkType::ShortcutUnknown
                    | LinkType::Autolink
                    | LinkType::WikiLink { .. } => dest_url.into_string(),
                };
                self.links.push((url, self.text.out.len()));
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
            TagEnd::Heading(_) => self.text.write("*"),
            TagEnd::BlockQuote(_) => {
                if let Some(start) = self.quotes.pop() {
                    let quoted: String = self.text.out[start..]
                        .split('\n')
                        .map(|line| format!("&gt; {line}"))
                        .collect::<Vec<_>>()
                        .join("\n");
                    self.text.out.truncate(start);
                    self.text.out.push_str(&quoted);
                    // A separator owed inside the quote is not written.
                    self.text.owe_nothing();
                }
                // An outer quote prefixes these lines again: `&gt; &gt;` is `>>`, as Slack
                // shows nested quotes flat anyway.
            }
            TagEnd::CodeBlock => {
                if let Some(code) = self.code.take() {
                    let code = escape(code.strip_suffix('\n').unwrap_or(&code));
                    self.text.write(&format!("```\n{code}\n```"));
                }
            }
            TagEnd::List(_) => self.text.end_list(),
            TagEnd::Emphasis => self.text.write("_"),
            TagEnd::Strong => self.text.write("*"),
            TagEnd::Strikethrough => self.text.write("~"),
            TagEnd::Link | TagEnd::Image => {
                if let Some((url, text_start)) = self.links.pop() {
                    let text = self.text.out.split_off(text_start.min(self.text.out.len()));
                    let linkable = ["http://", "https://", "mailto:"]
                        .iter()
                        .any(|scheme| url.to_ascii_lowercase().starts_with(scheme));
                    let shown = text.trim();
                    let link = match (linkable, shown.is_empty() || shown == escape(&url)) {
                        (true, true) => format!("<{}>", escape(&url)),
                        // `|` would end the address and `>` the link: neither may be in them.
                        (true, false) => format!(
                            "<{}|{}>",
                            escape(&url).replace('|', "%7C"),
                            text.replace('|', "¦")
                        ),
                        (false, true) => escape(&url),
                        (false, false) => format!("{text} ({})", escape(&url)),
                    };
                    self.text.out.push_str(&link);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn() {
        let markdown = "# Plan\n\nSome **bold**, *italic*, ~~gone~~ and `a<b`.\n\n\
            - one\n- [two](https://example.com/a?b=1&c=2)\n\n1. first\n2. <https://x.test>\n\n\
            > quoted\n> twice\n\n```rust\nfn main() { 1 < 2 }\n```\n\n\
            [local](file.md) and <@U1> stay text.\n\n---\nend";
        insta::assert_snapshot!(markdown_to_mrkdwn(markdown), @r"
        *Plan*

        Some *bold*, _italic_, ~gone~ and `a&lt;b`.

        • one
        • <https://example.com/a?b=1&amp;c=2|two>

        1. first
        2. <https://x.test>

        &gt; quoted
        &gt; twice

        ```
        fn main() { 1 &lt; 2 }
        ```

        local (file.md) and &lt;@U1&gt; stay text.

        ———

        end
        ");
    }
}
