//! What the next turn of a session would send, for a user who wants to see it (the web page's
//! prompt and token views), and the conversation's RAG mode.

use nanocrab_schema::{SessionKey, ToolDef};
use nanocrab_sessions::{SessionSettings, TokenCounter};

use super::{Agent, AgentError};
use crate::context::PromptMode;

/// The system prompt and tools the next turn of a session would send, and their sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptPreview {
    /// The `provider/model` that would be asked first.
    pub model: String,
    pub system: String,
    /// The tools offered with the first request; deferred ones wait for `tool_search`.
    pub tools: Vec<ToolDef>,
    pub system_tokens: usize,
    pub tool_tokens: usize,
    /// The history the model is sent: the compaction summary and the messages after it.
    pub message_tokens: usize,
    /// The window the history is fitted to.
    pub context_window: u32,
    /// Counted with the model's own tokenizer; otherwise estimated.
    pub exact: bool,
    /// Memory arrives by retrieval rather than whole in the prompt.
    pub rag: bool,
}

/// A conversation's RAG mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RagMode {
    pub enabled: bool,
    /// What `memory.ragMode` makes it when the conversation has not chosen.
    pub default: bool,
    /// The agent has a memory index to retrieve from; without one it is always off.
    pub available: bool,
}

impl Agent {
    /// The prompt and tools of the next turn of `key`, as a turn without a chat (the web page,
    /// the terminal) would send them; a chat's turn also tells the model which chat it is in.
    pub fn prompt_preview(&self, key: &SessionKey) -> Result<PromptPreview, AgentError> {
        let settings = self.store.settings(key)?;
        let rag = self.rag_on(&settings);
        let mut registry = self.current_tools();
        for tool in self.sources.iter().flat_map(|source| source.known_tools()) {
            registry.register_deferrable(tool);
        }
        let primary = self.models.primary();
        let search = if primary.profile.tools {
            registry.defer()
        } else {
            None
        };
        let (system, tools) =
            self.prompt_and_tools(&registry, search.as_deref(), rag, None, PromptMode::Full);
        let counter = TokenCounter::for_model(&primary.model);
        let tool_tokens = crate::budget::tools_size(&tools, |text| counter.count_text(text));
        let session = self.store.load(key)?;
        let start = session
            .compaction
            .as_ref()
            .map_or(0, |c| c.through.min(session.entries.len()));
        let message_tokens = session.compaction.as_ref().map_or(0, |c| {
            // Images count as their reference here; what a provider bills for them varies.
            counter.count_text(&c.summary)
        }) + session.entries[start..]
            .iter()
            .map(|entry| counter.count_message(&entry.message()))
            .sum::<usize>();
        let context_window = match primary.profile.context_window {
            Some(window) => self.settings.context_window_tokens.min(window),
            None => self.settings.context_window_tokens,
        };
        Ok(PromptPreview {
            model: primary.label.clone(),
            system_tokens: counter.count_text(&system),
            system,
            tools: tools.into_owned(),
            tool_tokens,
            message_tokens,
            context_window,
            exact: counter.is_exact(),
            rag,
        })
    }

    /// Counts `text` as the agent's model does (exactly for OpenAI's, estimated otherwise).
    pub fn count_tokens(&self, text: &str) -> usize {
        TokenCounter::for_model(&self.models.primary().model).count_text(text)
    }

    /// Whether memory arrives by retrieval in conversation `key`.
    pub fn rag_mode(&self, key: &SessionKey) -> Result<RagMode, AgentError> {
        let settings = self.store.settings(key)?;
        Ok(RagMode {
            enabled: self.rag_on(&settings),
            default: self.memory.as_ref().is_some_and(|m| m.rag_by_default),
            available: self.memory.is_some(),
        })
    }

    /// Turns RAG mode on or off for conversation `key`, as `/rag on` and `/rag off` do;
    /// `None` when the agent has no memory index to retrieve from.
    pub fn set_rag_mode(
        &self,
        key: &SessionKey,
        enabled: bool,
    ) -> Result<Option<RagMode>, AgentError> {
        if self.memory.is_none() {
            return Ok(None);
        }
        let mut settings = self.store.settings(key)?;
        settings.rag_mode = Some(enabled);
        self.store.save_settings(key, &settings)?;
        self.rag_mode(key).map(Some)
    }

    pub(super) fn rag_on(&self, settings: &SessionSettings) -> bool {
        match &self.memory {
            Some(memory) => settings.rag_mode.unwrap_or(memory.rag_by_default),
            None => false,
        }
    }
}
