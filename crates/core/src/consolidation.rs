//! Consolidation: the older part of a conversation folded into the memory files by the model,
//! through one `save_memory` call: a dated entry appended to memory/HISTORY.md and a rewritten
//! memory/MEMORY.md. The transcript itself stays whole; the session settings remember how far
//! it has been consolidated.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use nanocrab_memory::MemoryFileError;
use nanocrab_provider::{ChatRequest, ModelChain, ProviderError};
use nanocrab_schema::{AgentEvent, ContentBlock, LlmMessage, Role, SessionKey, ToolDef};
use nanocrab_sessions::{SessionEntry, SessionError, SessionStore};
use nanocrab_tools::{MemoryProvenance, NoteOrigins, ProvenanceError};
use serde_json::json;

use crate::agent::{AgentSettings, add_fenced_sources};
use crate::housekeeping::Housekeeper;

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

/// Consolidation as an agent runs it: when a run is due, one run per session at a time, and
/// a pause after a failed one.
pub(crate) struct Consolidator {
    config: Consolidation,
    /// Sessions being consolidated now: one run per session at a time.
    running: Mutex<HashSet<SessionKey>>,
    /// The transcript length at a session's last failed consolidation: the next try waits
    /// until more than half a window more has come, instead of repeating the same request (and its
    /// cost) after every turn while the model keeps failing.
    failed_at: Mutex<HashMap<SessionKey, usize>>,
}

/// What a consolidation run reads and writes with, lent by the agent.
pub(crate) struct ConsolidationContext<'a> {
    pub(crate) store: &'a SessionStore,
    pub(crate) workspace: &'a Path,
    pub(crate) provenance: Option<&'a MemoryProvenance>,
    /// The agent's models, for what the housekeeping model cannot take.
    pub(crate) models: &'a ModelChain,
    pub(crate) housekeeper: Option<&'a Housekeeper>,
    pub(crate) settings: &'a AgentSettings,
}

impl Consolidator {
    pub(crate) fn new(config: Consolidation) -> Self {
        Self {
            config,
            running: Mutex::default(),
            failed_at: Mutex::default(),
        }
    }

    /// Consolidates the older part of session `key` when more than `after_messages` of it are
    /// not yet, keeping the newest half of that window out; see [`crate::Agent::consolidate_if_due`].
    pub(crate) async fn consolidate_if_due(
        &self,
        cx: &ConsolidationContext<'_>,
        key: &SessionKey,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<ConsolidationReport>, ConsolidationError> {
        let session = cx.store.load(key)?;
        let entries = &session.entries;
        let done = cx
            .store
            .settings(key)?
            .consolidated_entries
            .min(entries.len());
        if entries.len() - done <= self.config.after_messages {
            return Ok(None);
        }
        let half_window = self.config.after_messages / 2;
        let retry_at = self
            .failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .map(|failed| failed + half_window);
        if retry_at.is_some_and(|retry_at| entries.len() <= retry_at) {
            return Ok(None);
        }
        let limit = entries.len() - half_window;
        // End where a turn starts, so a question, its tool calls and its answer stay together.
        let Some(end) = (done + 1..=limit).rev().find(|&i| entries[i].starts_turn()) else {
            return Ok(None);
        };
        on_event(AgentEvent::Consolidating {
            messages: end - done,
        });
        let outcome = self.consolidate(cx, key, &entries[done..end], end).await;
        let mut failed_at = self
            .failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match &outcome {
            Ok(Some(_)) => {
                failed_at.remove(key);
            }
            // Another run had the session: nothing was tried here.
            Ok(None) => {}
            Err(_) => {
                failed_at.insert(key.clone(), entries.len());
            }
        }
        outcome
    }

    /// Runs one consolidation of `entries`, after which the first `done_after` entries of the
    /// transcript count as consolidated. `None` when another run has this session.
    pub(crate) async fn consolidate(
        &self,
        cx: &ConsolidationContext<'_>,
        key: &SessionKey,
        entries: &[SessionEntry],
        done_after: usize,
    ) -> Result<Option<ConsolidationReport>, ConsolidationError> {
        let claimed = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone());
        if !claimed {
            return Ok(None);
        }
        let outcome = self.run(cx, key, entries, done_after).await;
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
        outcome.map(Some)
    }

    async fn run(
        &self,
        cx: &ConsolidationContext<'_>,
        key: &SessionKey,
        entries: &[SessionEntry],
        done_after: usize,
    ) -> Result<ConsolidationReport, ConsolidationError> {
        let workspace = cx.workspace;
        let now = jiff::Zoned::now();
        let memory = nanocrab_memory::read_memory(workspace)?.unwrap_or_default();
        // What the notes are rewritten from: a conversation that held untrusted text, or a
        // MEMORY.md already written from some, marks what this run writes.
        let mut sources = Vec::new();
        add_fenced_sources(&mut sources, entries.iter().flat_map(|e| &e.content));
        if let Some(source) = NoteOrigins::load(cx.provenance).note_source("memory/MEMORY.md") {
            sources.push(source);
        }
        let mark = |note: &str| -> Result<(), ConsolidationError> {
            match cx.provenance {
                Some(provenance) if !sources.is_empty() => {
                    Ok(provenance.mark_untrusted(note, &sources, Some(&key.to_string()))?)
                }
                Some(_) | None => Ok(()),
            }
        };
        let prompt = prompt(&memory, entries);
        let housekeeper = cx
            .housekeeper
            .filter(|h| h.fits(&prompt, cx.settings.context_window_tokens));
        let models = match housekeeper {
            Some(housekeeper) => &housekeeper.models,
            None => cx.models,
        };
        // A model without tool calling cannot call save_memory: asked anyway, it answers in
        // text (a small local one after a long wait) and the consolidation fails every time.
        if !models.primary().profile.tools {
            return Self::summarise_into_history(cx, models, key, entries, done_after, &now, mark)
                .await;
        }
        let request = ChatRequest {
            model: "".into(),
            system: SYSTEM_PROMPT.into(),
            messages: vec![LlmMessage::user(prompt)].into(),
            tools: vec![save_memory_tool()].into(),
            max_tokens: cx.settings.max_tokens,
            temperature: cx.settings.temperature,
        };
        let (_, response) = models.chat(0, &request, &mut |_| {}, &mut |_| {}).await?;
        let answer = LlmMessage {
            role: Role::Assistant,
            content: response.content,
        };
        let Some(call) = answer.tool_calls().find(|c| c.name == "save_memory") else {
            return Err(ConsolidationError::NoSave {
                answer_chars: answer.text().chars().count(),
            });
        };
        if let Some(entry) = call.input["history_entry"]
            .as_str()
            .filter(|e| !e.trim().is_empty())
        {
            mark("memory/HISTORY.md")?;
            nanocrab_memory::append_history(workspace, entry, &now)?;
        }
        // An empty update would wipe the user's memory: it means "nothing new".
        let memory_changed = match call.input["memory_update"].as_str() {
            Some(text) if !text.trim().is_empty() => {
                mark("memory/MEMORY.md")?;
                nanocrab_memory::rewrite_memory(workspace, text, &self.config.backups, &now)?
            }
            Some(_) | None => false,
        };
        let mut settings = cx.store.settings(key)?;
        settings.consolidated_entries = done_after;
        cx.store.save_settings(key, &settings)?;
        Ok(ConsolidationReport {
            entries: entries.len(),
            memory_changed,
        })
    }

    /// Consolidation by a model that cannot call tools: its summary of `entries` becomes the
    /// dated HISTORY.md entry, and MEMORY.md stays as it is.
    async fn summarise_into_history(
        cx: &ConsolidationContext<'_>,
        models: &ModelChain,
        key: &SessionKey,
        entries: &[SessionEntry],
        done_after: usize,
        now: &jiff::Zoned,
        mark: impl Fn(&str) -> Result<(), ConsolidationError>,
    ) -> Result<ConsolidationReport, ConsolidationError> {
        let conversation: String = entries.iter().map(render).collect();
        let summary = crate::housekeeping::ask_once(
            models,
            crate::housekeeping::SUMMARY_PROMPT,
            conversation,
            400,
            Some(0.0),
        )
        .await?;
        if summary.trim().is_empty() {
            return Err(ConsolidationError::EmptySummary);
        }
        mark("memory/HISTORY.md")?;
        nanocrab_memory::append_history(cx.workspace, summary.trim(), now)?;
        let mut settings = cx.store.settings(key)?;
        settings.consolidated_entries = done_after;
        cx.store.save_settings(key, &settings)?;
        Ok(ConsolidationReport {
            entries: entries.len(),
            memory_changed: false,
        })
    }
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
