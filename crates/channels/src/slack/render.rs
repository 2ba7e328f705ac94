//! Markdown as the model writes it, in Slack's `mrkdwn`.
//!
//! mrkdwn has `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks, `>` quotes
//! and `<url|text>` links, but no headings or lists: headings become bold lines, list items
//! `•` or numbered lines. `&`, `<` and `>` are escaped everywhere, as Slack asks, so stray
//! markup in an answer can never turn into a mention or a link.

use pulldown_cmark::{CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The line drawn for a thematic break (`---`).
const RULE: &str = "———";

pub(crate) fn markdown_to_mrkdwn(markdown: &str) -> String {
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
    /// Just after a list marker: the block that follows starts right there.
    at_block_start: bool,
    /// One entry per open list: the next number of an ordered one.
    lists: Vec<Option<u64>>,
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
                None => self.write(&escape(&text)),
            },
            Event::Code(code) => self.write(&format!("`{}`", escape(&code))),
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
                self.write("*");
            }
            Tag::BlockQuote(_) => {
                self.open_block();
                // The separator goes before the quote, not inside it.
                self.write("");
                self.quotes.push(self.out.len());
                self.at_block_start = true;
            }
            Tag::CodeBlock(kind) => {
                self.open_block();
                // mrkdwn has no languages: an indented block and a fenced one look alike.
                match kind {
                    CodeBlockKind::Fenced(_) | CodeBlockKind::Indented => {}
                }
                self.code = Some(String::new());
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
            Tag::Emphasis => self.write("_"),
            Tag::Strong => self.write("*"),
            Tag::Strikethrough => self.write("~"),
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
                self.write("");
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
                self.links.push((url, self.out.len()));
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
            TagEnd::Heading(_) => self.write("*"),
            TagEnd::BlockQuote(_) => {
                if let Some(start) = self.quotes.pop() {
                    let quoted: String = self.out[start..]
                        .split('\n')
                        .map(|line| format!("&gt; {line}"))
                        .collect::<Vec<_>>()
                        .join("\n");
                    self.out.truncate(start);
                    self.out.push_str(&quoted);
                    // A separator owed inside the quote is not written.
                    self.pending = Break::None;
                    self.at_block_start = false;
                }
                // An outer quote prefixes these lines again: `&gt; &gt;` is `>>`, as Slack
                // shows nested quotes flat anyway.
            }
            TagEnd::CodeBlock => {
                if let Some(code) = self.code.take() {
                    let code = escape(code.strip_suffix('\n').unwrap_or(&code));
                    self.write(&format!("```\n{code}\n```"));
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Emphasis => self.write("_"),
            TagEnd::Strong => self.write("*"),
            TagEnd::Strikethrough => self.write("~"),
            TagEnd::Link | TagEnd::Image => {
                if let Some((url, text_start)) = self.links.pop() {
                    let text = self.out.split_off(text_start.min(self.out.len()));
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
                    self.out.push_str(&link);
                }
            }
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

    fn write(&mut self, text: &str) {
        match self.pending {
            Break::None => {}
            Break::Line => self.out.push('\n'),
            Break::Paragraph => self.out.push_str("\n\n"),
        }
        self.pending = Break::None;
        self.at_block_start = false;
        self.out.push_str(text);
    }
}

/// The three characters Slack wants escaped in message text.
fn escape(text: &str) -> String {
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
