//! The agent loop: one user message in, tool calls as needed, one answer out, every step
//! persisted as it happens and reported as an [`AgentEvent`].

use nanocrab_memory::{
    CountedHistory, MemoryProvenance, SessionEntry, SessionError, SessionStore, TokenCounter,
};
use nanocrab_provider::{ChatRequest, ModelChain, ProviderDelta, ProviderError};
use nanocrab_schema::{
    AgentEvent, ContentBlock, Image, LlmMessage, Role, RunId, SessionKey, StopReason, TaskId,
    ToolResult, TraceId, Usage,
};
use nanocrab_tools::{NoteOrigins, ToolContext, ToolRegistry, fenced_sources, wrap_untrusted};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::consolidation::{Consolidation, ConsolidationError, ConsolidationReport};
use crate::context::{ChannelInfo, ContextBuilder, PromptMode, RuntimeInfo};
use crate::housekeeping::{Housekeeper, HousekeepingError};
use crate::retrieval::MemoryRetrieval;

/// How many times the same call (same tool, same arguments) may run in one turn; later
/// repeats are refused with an error result.
const MAX_IDENTICAL_CALLS: usize = 2;
/// Refused repeats after which the turn is stopped.
const MAX_REFUSED_REPEATS: u32 = 3;
/// Bounds of the learned provider-tokens-per-estimated-token ratio: a wild usage report
/// (a mock, a provider that counts oddly) must not empty or overflow the window.
const MIN_TOKEN_RATIO: f64 = 0.5;
const MAX_TOKEN_RATIO: f64 = 4.0;
/// Ends what a turn interrupted by the user had written, in the transcript: the model then
/// knows next turn that the answer the user saw stopped there, and why.
const INTERRUPTED_NOTE: &str = "[interrupted by the user]";

pub const HELP_TEXT: &str = "Commands:\n  /new      start a new conversation (the current one is archived)\n  /reset    same as /new\n  /clear    same as /new\n  /rag on   memory arrives by search with each message, not whole in the prompt\n  /rag off  MEMORY.md whole in the prompt again\n  /help     this list";

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentSettings {
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub max_tool_iterations: u32,
    pub context_window_tokens: u32,
}

/// What the user sent: text, and images for models that can see them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserInput {
    pub text: String,
    pub images: Vec<Image>,
    /// The chat it came from, told to the model; `None` for the CLI.
    pub channel: Option<ChannelInfo>,
    /// Ties this run to what caused it (an inbound message, a parent run); fresh if unset.
    pub trace_id: Option<TraceId>,
}

impl From<&str> for UserInput {
    fn from(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            images: Vec::new(),
            channel: None,
            trace_id: None,
        }
    }
}

impl UserInput {
    fn message(self) -> LlmMessage {
        let mut content = vec![ContentBlock::text(self.text)];
        content.extend(self.images.into_iter().map(ContentBlock::Image));
        LlmMessage {
            role: Role::User,
            content,
        }
    }
}

/// What a finished turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub text: String,
    pub usage: Usage,
    /// Model calls made.
    pub iterations: u32,
    /// The user interrupted the turn; `text` is what the model had written of its answer
    /// (the transcript keeps it, marked as interrupted).
    pub interrupted: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Brings an agent's tool set up to date before each turn; the binary hot-loads the WASM tools
/// of the workspace with it.
pub type ToolRefresh = Box<dyn FnMut(&mut ToolRegistry) + Send>;

pub struct Agent {
    /// `main` or the `agents.entries` id; recorded with every tool call.
    id: String,
    models: ModelChain,
    /// Behind a lock so a refresh can change it between turns; each turn uses its own copy.
    tools: std::sync::Mutex<ToolRegistry>,
    refresh: std::sync::Mutex<Option<ToolRefresh>>,
    store: SessionStore,
    context: ContextBuilder,
    settings: AgentSettings,
    memory: Option<MemoryRetrieval>,
    /// Where memory notes written from untrusted text are marked.
    provenance: Option<MemoryProvenance>,
    consolidation: Option<Consolidation>,
    housekeeper: Option<Housekeeper>,
    /// Sessions being consolidated now: one run per session at a time.
    consolidating: std::sync::Mutex<std::collections::HashSet<SessionKey>>,
    /// The transcript length at a session's last failed consolidation: the next try waits
    /// until more than half a window more has come, instead of repeating the same request (and its
    /// cost) after every turn while the model keeps failing.
    failed_at: std::sync::Mutex<std::collections::HashMap<SessionKey, usize>>,
}

impl Agent {
    pub fn new(
        models: ModelChain,
        tools: ToolRegistry,
        store: SessionStore,
        context: ContextBuilder,
        settings: AgentSettings,
    ) -> Self {
        Self {
            id: "main".to_owned(),
            models,
            tools: std::sync::Mutex::new(tools),
            refresh: std::sync::Mutex::new(None),
            store,
            context,
            settings,
            memory: None,
            provenance: None,
            consolidation: None,
            housekeeper: None,
            consolidating: std::sync::Mutex::default(),
            failed_at: std::sync::Mutex::default(),
        }
    }

    /// Summarises the older part of the history, first folding it into the memory files when
    /// consolidation is on; keeps the newest turns within their share of `budget`, or, with
    /// `force` (the provider refused the request as too long), only the current turn.
    /// Returns whether a compaction record was written.
    async fn compact(
        &self,
        key: &SessionKey,
        counter: TokenCounter,
        budget: usize,
        force: bool,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<bool, AgentError> {
        use crate::compaction::{KEEP_SHARE, MERGE_PROMPT, PART_SHARE, SUMMARY_PROMPT};

        let session = self.store.load(key)?;
        let entries = &session.entries;
        let start = session
            .compaction
            .as_ref()
            .map_or(0, |c| c.through.min(entries.len()));
        // Keep the newest whole turns within their share; the current turn is always kept.
        // Forced (the provider said the request was too long), keep only the current turn.
        let keep = if force {
            0
        } else {
            (budget as f64 * KEEP_SHARE) as usize
        };
        let (mut cut, mut kept) = (None, 0);
        for i in (start..entries.len()).rev() {
            kept += counter.count_message(&entries[i].message());
            if entries[i].starts_turn() && (cut.is_none() || kept <= keep) {
                cut = Some(i);
            }
            if kept > keep && cut.is_some() {
                break;
            }
        }
        let Some(cut) = cut.filter(|&cut| cut > start) else {
            return Ok(false);
        };
        // The silent memory flush: what is about to leave the model's view goes to the
        // memory files first.
        if self.consolidation.is_some() {
            let done = self.store.settings(key)?.consolidated_entries.max(start);
            if done < cut {
                on_event(AgentEvent::Consolidating {
                    messages: cut - done,
                });
                if let Err(err) = self.consolidate(key, &entries[done..cut], cut).await {
                    tracing::warn!("{err}; compacting without it");
                }
            }
        }
        // A summary of untrusted text is untrusted text: it keeps the fence, naming what it
        // was made from, so a later note written from it is marked too.
        let mut sources = Vec::new();
        if let Some(earlier) = &session.compaction {
            add_fenced_sources(&mut sources, [&ContentBlock::text(earlier.summary.clone())]);
        }
        add_fenced_sources(
            &mut sources,
            entries[start..cut].iter().flat_map(|e| &e.content),
        );
        let part_budget = ((budget as f64 * PART_SHARE) as usize).max(500);
        let mut parts: Vec<String> = Vec::new();
        let mut part = match &session.compaction {
            Some(earlier) => format!(
                "Summary of what came before:\n{}\n\n",
                earlier.summary.trim()
            ),
            None => String::new(),
        };
        let mut part_tokens = counter.count_text(&part);
        for entry in &entries[start..cut] {
            let text = crate::consolidation::render(entry);
            let tokens = counter.count_text(&text);
            if !part.is_empty() && part_tokens + tokens > part_budget {
                parts.push(std::mem::take(&mut part));
                part_tokens = 0;
            }
            part.push_str(&text);
            part_tokens += tokens;
        }
        parts.push(part);
        let mut summaries = Vec::with_capacity(parts.len());
        for part in parts {
            summaries.push(self.summarise(SUMMARY_PROMPT, part).await?);
        }
        let summary = match <[String; 1]>::try_from(summaries) {
            Ok([one]) => one,
            Err(several) => {
                let joined = several
                    .iter()
                    .enumerate()
                    .map(|(i, s)| format!("Part {}:\n{s}", i + 1))
                    .collect::<Vec<_>>()
                    .join("\n\n");
                self.summarise(MERGE_PROMPT, joined).await?
            }
        };
        if summary.trim().is_empty() {
            tracing::warn!("{key}: the model returned an empty summary; not compacting");
            return Ok(false);
        }
        let summary = if sources.is_empty() {
            summary
        } else {
            wrap_untrusted(
                &format!("summary of a conversation holding {}", sources.join("; ")),
                summary.trim(),
            )
        };
        self.store
            .append_compaction(key, &nanocrab_memory::Compaction::new(cut, summary))?;
        on_event(AgentEvent::Compaction {
            messages: cut - start,
        });
        Ok(true)
    }

    /// `text` summarised by the agent's own model as `system` asks.
    async fn summarise(&self, system: &str, text: String) -> Result<String, AgentError> {
        Ok(crate::housekeeping::ask_once(
            &self.models,
            system,
            text,
            self.settings.max_tokens,
            self.settings.temperature,
        )
        .await?)
    }

    /// Learns how many prompt tokens the provider counts per estimated token, from one request
    /// whose size was `estimated` and which it billed as `reported`; kept per conversation.
    fn calibrate(
        &self,
        key: &SessionKey,
        estimated: usize,
        reported: u64,
    ) -> Result<(), AgentError> {
        if estimated == 0 || reported == 0 {
            return Ok(());
        }
        let seen = (reported as f64 / estimated as f64).clamp(MIN_TOKEN_RATIO, MAX_TOKEN_RATIO);
        let mut settings = self.store.settings(key)?;
        // A moving average: one odd request (a cached prompt reported oddly) moves it little.
        let ratio = settings
            .token_ratio
            .map_or(seen, |old| old * 0.7 + seen * 0.3);
        if settings
            .token_ratio
            .is_none_or(|old| (old - ratio).abs() > old * 0.05)
        {
            settings.token_ratio = Some(ratio);
            self.store.save_settings(key, &settings)?;
        }
        Ok(())
    }

    /// Lets the agent fold older conversation into the memory files (`memory.consolidateAfter`).
    pub fn with_consolidation(mut self, consolidation: Consolidation) -> Self {
        self.consolidation = Some(consolidation);
        self
    }

    /// Hands session titles and the consolidation of short conversations to `model`
    /// (`agents.defaults.housekeepingModel`).
    pub fn with_housekeeping(mut self, model: nanocrab_provider::ResolvedModel) -> Self {
        self.housekeeper = Some(Housekeeper::new(model));
        self
    }

    /// Has the housekeeping model title the session once its first question is answered;
    /// returns the new title. Without a housekeeping model, or with a title already, nothing
    /// is asked: the first question stands in for the title.
    pub async fn title_if_missing(
        &self,
        key: &SessionKey,
    ) -> Result<Option<String>, HousekeepingError> {
        let Some(housekeeper) = &self.housekeeper else {
            return Ok(None);
        };
        if housekeeper.gave_up_on(key) || self.store.settings(key)?.title.is_some() {
            return Ok(None);
        }
        let session = self.store.load(key)?;
        let mut messages = session.entries.iter().map(SessionEntry::message);
        let Some(question) = messages
            .by_ref()
            .find(|m| m.role == Role::User && !m.text().trim().is_empty())
        else {
            return Ok(None);
        };
        let Some(answer) =
            messages.find(|m| m.role == Role::Assistant && !m.text().trim().is_empty())
        else {
            return Ok(None);
        };
        let answer = housekeeper
            .ask(
                crate::housekeeping::TITLE_PROMPT,
                crate::housekeeping::title_input(&question.text(), &answer.text()),
                24,
            )
            .await;
        let title = answer
            .as_deref()
            .ok()
            .and_then(crate::housekeeping::clean_title);
        let Some(title) = title else {
            // Asked once: a model that failed or gave nothing usable is not asked again after
            // every turn, reading the transcript each time; the first question stands in.
            housekeeper.give_up_on(key);
            return answer.map(|_| None).map_err(HousekeepingError::from);
        };
        // Read again just before writing: a turn may have saved settings meanwhile.
        let mut settings = self.store.settings(key)?;
        settings.title = Some(title.clone());
        self.store.save_settings(key, &settings)?;
        Ok(Some(title))
    }

    /// Folds the older part of the conversation into memory/HISTORY.md and MEMORY.md when
    /// more than `after_messages` of it are not yet, keeping the newest half of that window
    /// out. Meant to run after a turn has been answered, never before one.
    pub async fn consolidate_if_due(
        &self,
        key: &SessionKey,
    ) -> Result<Option<ConsolidationReport>, ConsolidationError> {
        self.consolidate_if_due_with(key, &mut |_| {}).await
    }

    /// [`Agent::consolidate_if_due`], emitting [`AgentEvent::Consolidating`] when it begins:
    /// the model call may take a while (a local model, seconds to a minute).
    pub async fn consolidate_if_due_with(
        &self,
        key: &SessionKey,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<ConsolidationReport>, ConsolidationError> {
        let Some(consolidation) = &self.consolidation else {
            return Ok(None);
        };
        let entries = self.store.load(key)?.entries;
        let done = self
            .store
            .settings(key)?
            .consolidated_entries
            .min(entries.len());
        if entries.len() - done <= consolidation.after_messages {
            return Ok(None);
        }
        let half_window = consolidation.after_messages / 2;
        let retry_at = self
            .failed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let outcome = self.consolidate(key, &entries[done..end], end).await;
        let mut failed_at = self
            .failed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    async fn consolidate(
        &self,
        key: &SessionKey,
        entries: &[SessionEntry],
        done_after: usize,
    ) -> Result<Option<ConsolidationReport>, ConsolidationError> {
        let Some(consolidation) = &self.consolidation else {
            return Ok(None);
        };
        let claimed = self
            .consolidating
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.clone());
        if !claimed {
            return Ok(None);
        }
        let outcome = self
            .run_consolidation(consolidation, key, entries, done_after)
            .await;
        self.consolidating
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
        outcome.map(Some)
    }

    async fn run_consolidation(
        &self,
        consolidation: &Consolidation,
        key: &SessionKey,
        entries: &[SessionEntry],
        done_after: usize,
    ) -> Result<ConsolidationReport, ConsolidationError> {
        let workspace = self.context.workspace();
        let now = jiff::Zoned::now();
        let memory = nanocrab_memory::read_memory(workspace)?.unwrap_or_default();
        // What the notes are rewritten from: a conversation that held untrusted text, or a
        // MEMORY.md already written from some, marks what this run writes.
        let mut sources = Vec::new();
        add_fenced_sources(&mut sources, entries.iter().flat_map(|e| &e.content));
        if let Some(source) =
            NoteOrigins::load(self.provenance.as_ref()).note_source("memory/MEMORY.md")
        {
            sources.push(source);
        }
        let mark = |note: &str| -> Result<(), ConsolidationError> {
            match &self.provenance {
                Some(provenance) if !sources.is_empty() => {
                    Ok(provenance.mark_untrusted(note, &sources, Some(&key.to_string()))?)
                }
                Some(_) | None => Ok(()),
            }
        };
        let prompt = crate::consolidation::prompt(&memory, entries);
        let housekeeper = self
            .housekeeper
            .as_ref()
            .filter(|h| h.fits(&prompt, self.settings.context_window_tokens));
        let models = match housekeeper {
            Some(housekeeper) => &housekeeper.models,
            None => &self.models,
        };
        // A model without tool calling cannot call save_memory: asked anyway, it answers in
        // text (a small local one after a long wait) and the consolidation fails every time.
        if !models.primary().profile.tools {
            return self
                .summarise_into_history(models, key, entries, done_after, &now, mark)
                .await;
        }
        let request = ChatRequest {
            model: String::new(),
            system: crate::consolidation::SYSTEM_PROMPT.to_owned(),
            messages: vec![LlmMessage::user(prompt)],
            tools: vec![crate::consolidation::save_memory_tool()],
            max_tokens: self.settings.max_tokens,
            temperature: self.settings.temperature,
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
                nanocrab_memory::rewrite_memory(workspace, text, &consolidation.backups, &now)?
            }
            Some(_) | None => false,
        };
        let mut settings = self.store.settings(key)?;
        settings.consolidated_entries = done_after;
        self.store.save_settings(key, &settings)?;
        Ok(ConsolidationReport {
            entries: entries.len(),
            memory_changed,
        })
    }

    /// Consolidation by a model that cannot call tools: its summary of `entries` becomes the
    /// dated HISTORY.md entry, and MEMORY.md stays as it is.
    async fn summarise_into_history(
        &self,
        models: &ModelChain,
        key: &SessionKey,
        entries: &[SessionEntry],
        done_after: usize,
        now: &jiff::Zoned,
        mark: impl Fn(&str) -> Result<(), ConsolidationError>,
    ) -> Result<ConsolidationReport, ConsolidationError> {
        let conversation: String = entries.iter().map(crate::consolidation::render).collect();
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
        nanocrab_memory::append_history(self.context.workspace(), summary.trim(), now)?;
        let mut settings = self.store.settings(key)?;
        settings.consolidated_entries = done_after;
        self.store.save_settings(key, &settings)?;
        Ok(ConsolidationReport {
            entries: entries.len(),
            memory_changed: false,
        })
    }

    /// Marks the memory notes this agent writes from untrusted text in `provenance`, and
    /// fences those notes wherever they reach the model again.
    pub fn with_memory_provenance(mut self, provenance: MemoryProvenance) -> Self {
        self.provenance = Some(provenance);
        self
    }

    /// Lets the agent retrieve memory for each message (RAG mode, `/rag on`).
    pub fn with_memory(mut self, memory: MemoryRetrieval) -> Self {
        self.memory = Some(memory);
        self
    }

    /// Runs `refresh` on the tool set at the start of every turn.
    pub fn with_tool_refresh(self, refresh: ToolRefresh) -> Self {
        *self
            .refresh
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(refresh);
        self
    }

    /// The tool set for one turn, refreshed first.
    fn current_tools(&self) -> ToolRegistry {
        let mut tools = self
            .tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(refresh) = self
            .refresh
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
        {
            refresh(&mut tools);
        }
        tools.clone()
    }

    /// Names the agent (`agents.entries` id) in the audit log and logs; `main` by default.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    pub fn store(&self) -> &SessionStore {
        &self.store
    }

    /// Runs one turn of session `key`: a slash command, or the user's message through the
    /// model and tools until a text answer. A failure is also emitted as
    /// [`AgentEvent::Error`]; what was done before it stays in the session.
    pub async fn run_turn(
        &self,
        key: &SessionKey,
        input: impl Into<UserInput>,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<TurnOutcome, AgentError> {
        self.run_turn_until(key, input, on_event, &CancellationToken::new())
            .await
    }

    /// [`Agent::run_turn`], which `cancel` interrupts: the text the model had streamed of its
    /// current answer is kept, marked as interrupted; interrupted while tools run, the
    /// finished calls keep their results and every other call gets an error result, so the
    /// transcript never holds a call without its result (providers reject that).
    pub async fn run_turn_until(
        &self,
        key: &SessionKey,
        input: impl Into<UserInput>,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let input = input.into();
        let ctx = ToolContext {
            workspace: self.context.workspace().to_path_buf(),
            agent: self.id.clone(),
            session: Some(key.clone()),
            channel: input.channel.as_ref().map(|c| c.channel.clone()),
            trace_id: input.trace_id.clone().unwrap_or_default(),
            task_id: TaskId::new(),
            run_id: RunId::new(),
            untrusted_sources: Vec::new(),
            memory_provenance: self.provenance.clone(),
        };
        // Every log line of the run, the tool calls' included, carries these ids.
        let span = tracing::info_span!(
            "run",
            agent = %self.id,
            session = %key,
            trace_id = %ctx.trace_id,
            task_id = %ctx.task_id,
            run_id = %ctx.run_id,
        );
        let outcome = self
            .run_steps(key, input, &ctx, on_event, cancel)
            .instrument(span)
            .await;
        if let Err(err) = &outcome {
            on_event(AgentEvent::Error {
                message: err.to_string(),
            });
        }
        outcome
    }

    async fn run_steps(
        &self,
        key: &SessionKey,
        input: UserInput,
        ctx: &ToolContext,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let command = if input.images.is_empty() {
            self.slash_command(key, input.text.trim(), on_event).await?
        } else {
            None
        };
        if let Some(text) = command {
            return Ok(finish(on_event, text, Usage::default(), 0));
        }
        // Counted as the primary model counts: exactly for OpenAI's, estimated for the others.
        let counter = TokenCounter::for_model(&self.models.primary().model);
        let mut history = CountedHistory::new(counter, self.store.load(key)?.messages());
        let settings = self.store.settings(key)?;
        let rag = match &self.memory {
            Some(memory) => settings.rag_mode.unwrap_or(memory.rag_by_default),
            None => false,
        };
        // Attached to this turn's message in every request of the turn, never stored.
        let retrieved = match (&self.memory, rag) {
            (Some(memory), true) => {
                match memory.retrieve(&input.text, self.provenance.as_ref()).await {
                    Ok(Some((block, sources))) => {
                        on_event(AgentEvent::Retrieval { sources });
                        Some(block)
                    }
                    Ok(None) => None,
                    Err(err) => {
                        tracing::warn!("memory retrieval failed, answering without it: {err}");
                        None
                    }
                }
            }
            (Some(_) | None, _) => None,
        };
        let channel = input.channel.clone();
        let user = input.message();
        self.store.append(key, &[SessionEntry::now(user.clone())])?;
        history.push(user);

        // A model without tool calling gets no tools, and a prompt that says so.
        let profile = self.models.primary().profile;
        let registry = self.current_tools();
        let (tool_names, tools) = if profile.tools {
            (registry.names(), registry.definitions())
        } else {
            (Vec::new(), Vec::new())
        };
        let mut context = self
            .context
            .clone()
            .with_memory_by_retrieval(rag)
            .with_memory_provenance(self.provenance.clone());
        if profile.compact_prompt {
            context = context.with_mode(PromptMode::Minimal);
        }
        let system = context.build(&tool_names, channel.as_ref(), &RuntimeInfo::current());
        // A model with a smaller window than configured (a small local one) has the history
        // fitted to its own, and keeps a quarter of it for the answer.
        let (context_window, max_tokens) = match profile.context_window {
            Some(window) => (
                self.settings.context_window_tokens.min(window),
                self.settings.max_tokens.min(window / 4),
            ),
            None => (
                self.settings.context_window_tokens,
                self.settings.max_tokens,
            ),
        };
        // What is left of the context window for history once the prompt, the tool schemas
        // and the answer are accounted for, in counted tokens. An estimate is scaled by what
        // this conversation's provider has been seen to count; an exact count is not: it
        // already is the provider's, and the ratio, learned against the estimate, would only
        // distort it.
        let ratio = if counter.is_exact() {
            1.0
        } else {
            settings
                .token_ratio
                .unwrap_or(1.0)
                .clamp(MIN_TOKEN_RATIO, MAX_TOKEN_RATIO)
        };
        let room =
            ((context_window as usize).saturating_sub(max_tokens as usize) as f64 / ratio) as usize;
        let budget_with = |count: &dyn Fn(&str) -> usize| {
            let fixed = count(&system)
                + tools
                    .iter()
                    .map(|t| {
                        count(&t.name) + count(&t.description) + count(&t.parameters.to_string())
                    })
                    .sum::<usize>();
            (fixed, room.saturating_sub(fixed).max(1_000))
        };
        // First from the free bounds, which never make a budget larger than counting does: a
        // history whose bounds fit it fits the counted budget too. The prompt is counted (an
        // OpenAI model's vocabulary loaded, once per process) only once the conversation is
        // long enough for it to matter. The estimate's bounds are its counts.
        let count_budget = || budget_with(&|text| counter.count_text(text)).1;
        let (fixed, mut budget) = budget_with(&|text| counter.bound_text(text));
        let mut counted = !counter.is_exact();
        let trigger = |budget: usize| (budget as f64 * crate::compaction::TRIGGER_SHARE) as usize;
        if !counted && history.bound() > trigger(budget) {
            budget = count_budget();
            counted = true;
        }
        // The transcript is read again only when it has to be compacted.
        if history.exceeds(trigger(budget))
            && self.compact(key, counter, budget, false, on_event).await?
        {
            history = CountedHistory::new(counter, self.store.load(key)?.messages());
        }
        let mut compacted_for_overflow = false;
        let mut usage = Usage::default();
        let mut seen_calls: Vec<(String, serde_json::Value)> = Vec::new();
        let mut refused_repeats = 0;
        // After a fallback the rest of the turn stays on the model that answered; the next
        // turn tries the primary again.
        let mut current = 0;
        let mut ctx = ctx.clone();

        for iteration in 1..=self.settings.max_tool_iterations {
            if iteration > 1 {
                on_event(AgentEvent::NewResponse { iteration });
            }
            if !counted && history.bound() > budget {
                budget = count_budget();
                counted = true;
            }
            let mut messages = history.window(budget).to_vec();
            if let Some(block) = &retrieved
                && let Some(question) = messages
                    .iter_mut()
                    .rev()
                    .find(|m| m.role == Role::User && m.tool_results().next().is_none())
            {
                question.content.push(block.clone());
            }
            // The untrusted text the model has in view; a memory note it writes now is
            // marked with where that came from.
            ctx.untrusted_sources = fenced_sources(&system);
            add_fenced_sources(
                &mut ctx.untrusted_sources,
                messages.iter().flat_map(|m| &m.content),
            );
            let request = ChatRequest {
                // Each model of the chain puts its own name here.
                model: String::new(),
                system: system.clone(),
                messages,
                tools: tools.clone(),
                max_tokens,
                temperature: self.settings.temperature,
            };
            // Both callbacks report to the same sink; the mutex lets them share it.
            let sink = std::sync::Mutex::new(&mut *on_event);
            let emit = |event: AgentEvent| {
                let mut sink = sink
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                (*sink)(event);
            };
            // What the user has seen of this answer, kept if they interrupt it.
            let mut streamed = String::new();
            let mut on_delta = |delta: ProviderDelta| match delta {
                ProviderDelta::Text(text) => {
                    streamed.push_str(&text);
                    emit(AgentEvent::Token { text });
                }
                ProviderDelta::Reasoning(text) => emit(AgentEvent::Reasoning { text }),
                ProviderDelta::Retry(notice) => emit(AgentEvent::Retry {
                    provider: notice.provider,
                    reason: notice.reason,
                    delay_ms: u64::try_from(notice.delay.as_millis()).unwrap_or(u64::MAX),
                    attempt: notice.attempt,
                    attempts: notice.attempts,
                }),
            };
            let mut on_fallback = |fallback: nanocrab_provider::Fallback| {
                emit(AgentEvent::ModelFallback {
                    from: fallback.from,
                    to: fallback.to,
                    reason: fallback.reason,
                });
            };
            let chat = self
                .models
                .chat(current, &request, &mut on_delta, &mut on_fallback);
            let answer = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                answer = chat => Some(answer),
            };
            let Some(answer) = answer else {
                return self.interrupted(key, on_event, streamed, usage, iteration);
            };
            let (answered_by, response) = match answer {
                Ok(answer) => answer,
                // The provider counted more tokens than the estimate did: compact, once, and
                // ask again.
                Err(err) if err.is_context_overflow() && !compacted_for_overflow => {
                    compacted_for_overflow = true;
                    if !self.compact(key, counter, budget, true, on_event).await? {
                        return Err(err.into());
                    }
                    history = CountedHistory::new(counter, self.store.load(key)?.messages());
                    continue;
                }
                Err(err) => return Err(err.into()),
            };
            current = answered_by;
            let label = self
                .models
                .get(answered_by)
                .map(|m| m.label.clone())
                .unwrap_or_default();
            usage += response.usage;
            // An exact count has no error to learn: what the provider adds around the text
            // (each message's framing, its rendering of the tool schemas) is small, fixed and
            // already counted, the schemas as their JSON, which is a little longer.
            if !counter.is_exact() {
                let estimated = fixed
                    + request
                        .messages
                        .iter()
                        .map(|m| counter.count_message(m))
                        .sum::<usize>();
                self.calibrate(key, estimated, response.usage.prompt_tokens())?;
            }
            on_event(AgentEvent::Usage {
                model: label.clone(),
                usage: response.usage,
            });
            let mut assistant = LlmMessage {
                role: Role::Assistant,
                content: response.content,
            };
            let calls: Vec<_> = assistant.tool_calls().cloned().collect();
            let answered = !assistant.text().trim().is_empty();
            // Kept in the transcript too: the model then knows next turn why its answer
            // ended there, and a provider never gets back an assistant message with no text.
            let note = match (calls.is_empty(), &response.stop_reason) {
                (false, _) => None,
                (true, StopReason::MaxTokens) if max_tokens < self.settings.max_tokens => {
                    Some(format!(
                        "[The answer was cut off at the output limit ({max_tokens} tokens, a quarter of this model's context window).]"
                    ))
                }
                (true, StopReason::MaxTokens) => Some(format!(
                    "[The answer was cut off at the output limit (agents.defaults.maxTokens = {max_tokens}).]"
                )),
                // A refusal's text is the model's explanation; without one, say what happened.
                (true, StopReason::Refusal) if !answered => {
                    Some("[The model declined to answer this request.]".to_owned())
                }
                (true, _) if answered => None,
                (true, _) => Some(
                    "[The model returned an empty answer. Try rephrasing the request.]".to_owned(),
                ),
            };
            if let Some(note) = note {
                let note = if answered {
                    format!("\n\n{note}")
                } else {
                    note
                };
                on_event(AgentEvent::Token { text: note.clone() });
                assistant.content.push(ContentBlock::text(note));
            }
            self.store.append(
                key,
                &[SessionEntry {
                    model: Some(label),
                    usage: Some(response.usage),
                    ..SessionEntry::now(assistant.clone())
                }],
            )?;
            history.push(assistant.clone());

            if calls.is_empty() {
                let text = assistant.text();
                on_event(AgentEvent::Done { text: text.clone() });
                return Ok(TurnOutcome {
                    text,
                    usage,
                    iterations: iteration,
                    interrupted: false,
                });
            }

            let mut results = Vec::with_capacity(calls.len());
            for call in &calls {
                if cancel.is_cancelled() {
                    results.push(ContentBlock::ToolResult(ToolResult::error(
                        &call.id,
                        "Error: interrupted by the user before it ran.",
                    )));
                    continue;
                }
                on_event(AgentEvent::ToolStart {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                });
                let signature = (call.name.clone(), call.input.clone());
                let earlier = seen_calls.iter().filter(|s| **s == signature).count();
                seen_calls.push(signature);
                let (result, change) = if earlier >= MAX_IDENTICAL_CALLS {
                    refused_repeats += 1;
                    let refused = ToolResult::error(
                        &call.id,
                        format!(
                            "Error: you are repeating yourself: {} was already called {earlier} times in this turn with these exact arguments. Use what it returned, try something different, or answer the user.",
                            call.name
                        ),
                    );
                    (refused, None)
                } else {
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => (
                            ToolResult::error(
                                &call.id,
                                "Error: interrupted by the user before it finished.",
                            ),
                            None,
                        ),
                        reported = registry.execute_reporting(call, &ctx) => reported,
                    }
                };
                // A later call of the same answer may write what this one read.
                add_fenced_sources(
                    &mut ctx.untrusted_sources,
                    [&ContentBlock::ToolResult(result.clone())],
                );
                on_event(AgentEvent::ToolEnd {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    output: result.content.clone(),
                    is_error: result.is_error,
                });
                if let Some(change) = change {
                    on_event(AgentEvent::InstructionsChanged(change));
                }
                results.push(ContentBlock::ToolResult(result));
            }
            let results = LlmMessage {
                role: Role::User,
                content: results,
            };
            self.store
                .append(key, &[SessionEntry::now(results.clone())])?;
            history.push(results);
            if cancel.is_cancelled() {
                return self.interrupted(key, on_event, String::new(), usage, iteration);
            }

            if refused_repeats >= MAX_REFUSED_REPEATS {
                let text = "I stopped because I kept repeating the same tool call without making progress. Tell me how you'd like to continue.".to_owned();
                return self.stop(key, on_event, text, usage, iteration);
            }
        }
        let max = self.settings.max_tool_iterations;
        let text = format!(
            "I stopped after {max} tool iterations (agents.defaults.maxToolIterations = {max}) without finishing. Tell me how to continue, or raise the limit."
        );
        self.stop(key, on_event, text, usage, max)
    }

    /// Ends a turn the agent cut short, with a message that is shown and kept in the session.
    fn stop(
        &self,
        key: &SessionKey,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
        text: String,
        usage: Usage,
        iterations: u32,
    ) -> Result<TurnOutcome, AgentError> {
        self.store.append(
            key,
            &[SessionEntry::now(LlmMessage::assistant(text.clone()))],
        )?;
        Ok(finish(on_event, text, usage, iterations))
    }

    /// Ends a turn the user interrupted: `streamed`, what they saw of the answer being
    /// written, is kept with a note that it was cut short.
    fn interrupted(
        &self,
        key: &SessionKey,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
        streamed: String,
        usage: Usage,
        iterations: u32,
    ) -> Result<TurnOutcome, AgentError> {
        let kept = if streamed.trim().is_empty() {
            INTERRUPTED_NOTE.to_owned()
        } else {
            format!("{}\n\n{INTERRUPTED_NOTE}", streamed.trim_end())
        };
        self.store
            .append(key, &[SessionEntry::now(LlmMessage::assistant(kept))])?;
        on_event(AgentEvent::Done {
            text: streamed.clone(),
        });
        Ok(TurnOutcome {
            text: streamed,
            usage,
            iterations,
            interrupted: true,
        })
    }

    /// Answers `/new`, `/reset`, `/clear`, `/rag` and `/help` without the model. Other text,
    /// including unknown slash commands, is for the model.
    async fn slash_command(
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
        let mut note = String::new();
        if self.consolidation.is_some() {
            let entries = self.store.load(key)?.entries;
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

/// Adds the source of every untrusted fence in `blocks` (text and tool results) to `sources`,
/// each once.
fn add_fenced_sources<'a>(
    sources: &mut Vec<String>,
    blocks: impl IntoIterator<Item = &'a ContentBlock>,
) {
    for block in blocks {
        let text = match block {
            ContentBlock::Text { text } => text,
            ContentBlock::ToolResult(result) => &result.content,
            ContentBlock::ToolUse(_)
            | ContentBlock::Image(_)
            | ContentBlock::Thinking { .. }
            | ContentBlock::RedactedThinking { .. } => continue,
        };
        for source in fenced_sources(text) {
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
    }
}

fn finish(
    on_event: &mut (dyn FnMut(AgentEvent) + Send),
    text: String,
    usage: Usage,
    iterations: u32,
) -> TurnOutcome {
    on_event(AgentEvent::Token { text: text.clone() });
    on_event(AgentEvent::Done { text: text.clone() });
    TurnOutcome {
        text,
        usage,
        iterations,
        interrupted: false,
    }
}
