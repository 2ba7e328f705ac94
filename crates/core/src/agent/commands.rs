//! Slash commands: what the user can ask the agent itself, without the model.

use nanocrab_schema::{AgentEvent, RunId, SessionKey, TraceId};

use super::{Agent, AgentError};
use crate::hooks::HookInput;

pub const HELP_TEXT: &str = "Commands:\n  /new      start a new conversation (the current one is archived)\n  /reset    same as /new\n  /clear    same as /new\n  /rag on   memory arrives by search with each message, not whole in the prompt\n  /rag off  MEMORY.md whole in the prompt again\n  /help     this list";

impl Agent {
    /// Answers `/new`, `/reset`, `/clear`, `/rag` and `/help` without the model. Other text,
    /// including unknown slash commands, is for the model.
    pub(super) async fn slash_command(
        &self,
        key: &SessionKey,
        text: &str,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<String>, AgentError> {
        Ok(match text {
            "/new" | "/reset" | "/clear" => Some(self.new_conversation(key, on_event).await?),
            "/help" => Some(HELP_TEXT.to_owned()),
            "/rag on" | "/rag off" | "/rag" => Some(self.rag_command(key, text)?),
            _ => None,
        })
    }

    /// `/new`: what is left of the conversation is consolidated first, then the transcript is
    /// archived. A failed consolidation is reported; the archive keeps everything regardless.
    async fn new_conversation(
        &self,
        key: &SessionKey,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<String, AgentError> {
        let started = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.clone(), super::SessionState::Cleared);
        if started == Some(super::SessionState::Started) {
            let scope = self.hook_scope(key, &TraceId::new(), &RunId::new());
            self.run_hooks(HookInput::SessionEnd { reason: "clear" }, &scope)
                .await;
        }
        let mut note = String::new();
        if self.consolidator.is_some() {
            let session = self.store.load(key)?;
            let entries = &session.entries;
            let done = self.store.settings(key)?.consolidated_entries;
            if done < entries.len() {
                let rest = &entries[done..];
                on_event(AgentEvent::Consolidating {
                    messages: rest.len(),
                });
                if let Err(err) = self.consolidate(key, rest, entries.len()).await {
                    note = format!(" ({err}; the conversation is kept in the archive.)");
                }
            }
        }
        let text = match self.store.reset(key)? {
            Some(archived) => format!(
                "Started a new conversation. The previous one is archived at {}.{note}",
                archived.display()
            ),
            None => "Started a new conversation.".to_owned(),
        };
        let mut settings = self.store.settings(key)?;
        if settings.consolidated_entries != 0 {
            settings.consolidated_entries = 0;
            self.store.save_settings(key, &settings)?;
        }
        Ok(text)
    }

    /// `/rag on`, `/rag off`, and `/rag` to tell which.
    fn rag_command(&self, key: &SessionKey, text: &str) -> Result<String, AgentError> {
        let Some(memory) = &self.memory else {
            return Ok("/rag is not available here: this agent has no memory index.".to_owned());
        };
        let mut settings = self.store.settings(key)?;
        match text {
            "/rag on" => settings.rag_mode = Some(true),
            "/rag off" => settings.rag_mode = Some(false),
            _ => {
                let on = settings.rag_mode.unwrap_or(memory.rag_by_default);
                return Ok(format!(
                    "RAG mode is {} for this conversation.",
                    if on { "on" } else { "off" }
                ));
            }
        }
        self.store.save_settings(key, &settings)?;
        Ok(if settings.rag_mode == Some(true) {
            "RAG mode on: memory now arrives by search with each message instead of whole in the prompt.".to_owned()
        } else {
            "RAG mode off: MEMORY.md is in the prompt again.".to_owned()
        })
    }
}
