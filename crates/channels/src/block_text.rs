//! Text laid out in blocks for platforms whose markup has no paragraphs or lists (Telegram's
//! HTML, Slack's mrkdwn): blocks separated by blank lines, list items as `•` or numbered lines,
//! and a separator written only once something follows it, so a message never ends blank.

/// The separator owed before the next block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
enum Break {
    #[default]
    None,
    Line,
    Paragraph,
}

#[derive(Debug, Default)]
pub(crate) struct BlockText {
    /// What is written so far; a renderer may take back what it wrote (a link's text, a
    /// quote's lines) to write it again another way.
    pub out: String,
    pending: Break,
    /// Just after a list marker or a quote's start: the block that follows starts right there.
    at_block_start: bool,
    /// One entry per open list: the next number of an ordered one.
    lists: Vec<Option<u64>>,
}

impl BlockText {
    /// A block starts: owe the separator from whatever came before.
    pub fn open_block(&mut self) {
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

    /// Writes `text` (markup already escaped) after the separator owed.
    pub fn write(&mut self, text: &str) {
        match self.pending {
            Break::None => {}
            Break::Line => self.out.push('\n'),
            Break::Paragraph => self.out.push_str("\n\n"),
        }
        self.pending = Break::None;
        self.at_block_start = false;
        self.out.push_str(text);
    }

    /// The block that follows starts where the text is now (after a quote's opening).
    pub fn start_here(&mut self) {
        self.at_block_start = true;
    }

    /// Forgets a separator owed inside something that has just ended (a quote).
    pub fn owe_nothing(&mut self) {
        self.pending = Break::None;
        self.at_block_start = false;
    }

    pub fn start_list(&mut self, first: Option<u64>) {
        self.open_block();
        self.lists.push(first);
    }

    pub fn end_list(&mut self) {
        self.lists.pop();
    }

    /// A list item's marker, indented by its depth: `• ` or the next number.
    pub fn start_item(&mut self) {
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
        self.start_here();
    }
}

/// `&`, `<` and `>` as entities: what Telegram's HTML and Slack's mrkdwn both ask for, so that
/// stray markup in an answer never becomes a tag, a mention or a link.
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
