//! Consolidation: the older part of a conversation folded into the memory files by the model,
//! through one `save_memory` call: a dated entry appended to memory/HISTORY.md and a rewritten
//! memory/MEMORY.md. The transcript itself stays whole; the session settings remember how far
//! it has been consolidated.

use std::path::PathBuf;

use nanocrab_memory::{MemoryFileError, ProvenanceError, SessionEntry, SessionError};
use nanocrab_provider::ProviderError;
use nanocrab_schema::{ContentBlock, Role, ToolDef};
use serde_json::json;

/// When and where consolidation runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consolidation {
    /// Messages not yet consolidated that make a run due (`memory.consolidateAfter`).
    pub after_messages: usize,
    /// Where the versions of MEMORY.md that a run replaced are kept.
    pub backups: PathBuf,
}

/// What one run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsolidationReport {
    /// Transcript entries folded in.
    pub entries: usize,
    pub memory_changed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ConsolidationError {
    #[error("memory consolidation: {0}")]
    Provider(#[from] ProviderError),
    #[error("memory consolidation: {0}")]
    Session(#[from] SessionError),
    #[error("memory consolidation: {0}")]
    Files(#[from] MemoryFileError),
    /// The notes would hold untrusted text but could not be marked, so were not written.
    #[error("memory consolidation: {0}")]
    Provenance(#[from] ProvenanceError),
    /// The answer's text is left out: it would put the conversation into the log.
    #[error(
        "memory consolidation: the model answered ({answer_chars} characters) without calling save_memory"
    )]
    NoSave { answer_chars: usize },
    #[error("memory consolidation: the housekeeping model answered with an empty summary")]
    EmptySummary,
}

pub(crate) const SYSTEM_PROMPT: &str = "You consolidate a conversation into the user's long-term memory. Call save_memory exactly once; write nothing else.";

/// Each message is cut to this many characters in the consolidation prompt.
const MAX_MESSAGE_CHARS: usize = 2_000;

pub(crate) fn save_memory_tool() -> ToolDef {
    ToolDef {
        name: "save_memory".into(),
        description: "Save the consolidated memory.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "history_entry": {"type": "string", "description": "2-5 sentences: what happened and what was decided, with names, dates and numbers, for a grep-able timeline"},
                "memory_update": {"type": "string", "description": "the whole new MEMORY.md: the current one with durable facts about the user added or corrected; the current one unchanged if nothing new"}
            },
            "required": ["history_entry", "memory_update"]
        }),
    }
}

/// The user message of a consolidation run: the current MEMORY.md and the conversation part.
pub(crate) fn prompt(memory: &str, entries: &[SessionEntry]) -> String {
    let mut out = String::from("## Current memory/MEMORY.md\n");
    out.push_str(if memory.trim().is_empty() {
        "(empty)"
    } else {
        memory.trim()
    });
    out.push_str("\n\n## Conversation to consolidate\n");
    for entry in entries {
        out.push_str(&render(entry));
    }
    out
}

/// One transcript entry as lines a model can read back: time, who, and what was said or done;
/// a message longer than [`MAX_MESSAGE_CHARS`] is shortened and says so.
pub(crate) fn render(entry: &SessionEntry) -> String {
    let time = entry.timestamp.get(..16).unwrap_or(&entry.timestamp);
    let who = match entry.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let mut out = String::new();
    for block in &entry.content {
        let line = match block {
            ContentBlock::Text { text } if !text.trim().is_empty() => {
                format!("[{time}] {who}: {}", cut(text.trim()))
            }
            ContentBlock::ToolUse(call) => {
                format!(
                    "[{time}] {who} called {} {}",
                    call.name,
                    cut(&call.input.to_string())
                )
            }
            ContentBlock::ToolResult(result) => {
                format!("[{time}] tool result: {}", cut(&result.content))
            }
            ContentBlock::Image(image) => {
                format!("[{time}] {who} sent an image ({})", image.media_type)
            }
            ContentBlock::Text { .. }
            | ContentBlock::Thinking { .. }
            | ContentBlock::RedactedThinking { .. } => continue,
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((at, _)) => format!(
            "{} [… shortened: {} characters in all]",
            &text[..at],
            text.chars().count()
        ),
        None => text.to_owned(),
    }
}
