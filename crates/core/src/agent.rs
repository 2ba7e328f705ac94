//! The agent loop: one user message in, tool calls as needed, one answer out, every step
//! persisted as it happens and reported as an [`AgentEvent`].

use std::borrow::Cow;

use nanocrab_policy::{RunRecord, RunStatus};
use nanocrab_provider::{ChatRequest, ChatResponse, ModelChain, ProviderDelta, ProviderError};
use nanocrab_schema::{
    AgentEvent, ContentBlock, Image, LlmMessage, Role, RunId, RunSource, SessionKey, StopReason,
    TaskId, ToolCall, ToolDef, ToolResult, TraceId, Usage,
};
use nanocrab_sessions::{CountedHistory, SessionEntry, SessionError, SessionStore, TokenCounter};
use nanocrab_tools::{
    Executed, MemoryProvenance, ToolContext, ToolRegistry, ToolSearch, ToolSource, fenced_sources,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::budget::{Budget, learn_ratio};
use crate::compaction::{self, Compactor};
use crate::consolidation::{
    Consolidation, ConsolidationContext, ConsolidationError, ConsolidationReport, Consolidator,
};
use crate::context::{ChannelInfo, ContextBuilder, PromptMode, RuntimeInfo};
use crate::hooks::{HookInput, HookOutcome, HookScope, HookVerdict, Hooks, MAX_STOP_CONTINUES};
use crate::housekeeping::{Housekeeper, HousekeepingError};
use crate::retrieval::MemoryRetrieval;

mod commands;
mod inspection;

pub use commands::HELP_TEXT;
pub use inspection::{PromptPreview, RagMode};

/// How many times the same call (same tool, same arguments) may run in one turn; later
/// repeats are refused with an error result.
const MAX_IDENTICAL_CALLS: usize = 2;
/// Refused repeats after which the turn is stopped.
const MAX_REFUSED_REPEATS: u32 = 3;
/// Ends what a turn interrupted by the user had written, in the transcript: the model then
/// knows next turn that the answer the user saw stopped there, and why.
const INTERRUPTED_NOTE: &str = "[interrupted by the user]";

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
    /// How much of the workspace the system prompt carries: `Minimal` for an autonomous run
    /// (a heartbeat) whose message brings the one file it needs.
    pub prompt_mode: PromptMode,
    /// Who started the run; kept with the question in the transcript and with every tool
    /// call in the audit log.
    pub source: RunSource,
    /// Model calls this run may make, when fewer than the agent's `maxToolIterations` (a
    /// subagent's own cap).
    pub max_iterations: Option<u32>,
    /// Only these of the agent's tools are offered (a subagent given a subset); `None`: all.
    pub tools: Option<Vec<String>>,
}

impl From<&str> for UserInput {
    fn from(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            images: Vec::new(),
            channel: None,
            trace_id: None,
            prompt_mode: PromptMode::Full,
            source: RunSource::Chat,
            max_iterations: None,
            tools: None,
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

/// What [`Agent::compress`] did: how many entries of the transcript the new summary stands
/// for, and how many after it the model still gets whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compressed {
    pub summarized: usize,
    pub kept: usize,
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
    /// Tools from outside the registry (MCP servers), added to each turn's copy.
    sources: Vec<std::sync::Arc<dyn ToolSource>>,
    store: SessionStore,
    context: ContextBuilder,
    settings: AgentSettings,
    memory: Option<MemoryRetrieval>,
    /// Where memory notes written from untrusted text are marked.
    provenance: Option<MemoryProvenance>,
    consolidator: Option<Consolidator>,
    housekeeper: Option<Housekeeper>,
    /// The user's hooks; `None` when config has none.
    hooks: Option<std::sync::Arc<dyn Hooks>>,
    /// The conversations this process has started (for `SessionStart`), or that `/new`
    /// cleared.
    sessions: std::sync::Mutex<std::collections::HashMap<SessionKey, SessionState>>,
}

/// Where a conversation is, for its `SessionStart` hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionState {
    Started,
    /// `/new` ended it; the next turn starts it again with source `clear`.
    Cleared,
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
            sources: Vec::new(),
            store,
            context,
            settings,
            memory: None,
            provenance: None,
            consolidator: None,
            housekeeper: None,
            hooks: None,
            sessions: std::sync::Mutex::default(),
        }
    }

    /// Runs the user's `hooks` at the points of each conversation's life.
    pub fn with_hooks(mut self, hooks: std::sync::Arc<dyn Hooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// What the hooks of `key` are told about where they run.
    fn hook_scope(&self, key: &SessionKey, trace_id: &TraceId, run_id: &RunId) -> HookScope {
        HookScope {
            agent: self.id.clone(),
            session: key.clone(),
            transcript_path: self.store.path(key),
            cwd: self.context.workspace().to_path_buf(),
            trace_id: trace_id.to_string(),
            run_id: run_id.to_string(),
        }
    }

    /// Runs the hooks of `input`'s event; `None` when there are none.
    async fn run_hooks(&self, input: HookInput, scope: &HookScope) -> Option<HookOutcome> {
        let hooks = self.hooks.as_ref()?;
        if !hooks.handles(input.event()) {
            return None;
        }
        Some(hooks.run(&input, scope).await)
    }

    /// Ends conversation `key` for its `SessionEnd` hooks (`reason`: `clear`,
    /// `prompt_input_exit`, `other`): the CLI calls it when it exits. The next turn of `key`
    /// starts it again.
    pub async fn end_session(&self, key: &SessionKey, reason: &'static str) {
        let state = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
        // One that `/new` cleared has had its SessionEnd.
        if state == Some(SessionState::Started) {
            let scope = self.hook_scope(key, &TraceId::new(), &RunId::new());
            self.run_hooks(HookInput::SessionEnd { reason }, &scope)
                .await;
        }
    }

    /// Summarises the older part of `key`'s history at once, whatever its length, keeping
    /// the newest half of it (by tokens, in whole turns) as it is: the web page's "compress".
    /// `None` when there is nothing to summarise (one turn, or all of it already is).
    pub async fn compress(
        &self,
        key: &SessionKey,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<Compressed>, AgentError> {
        let counter = TokenCounter::for_model(&self.models.primary().model);
        let session = self.store.load(key)?;
        let start = session
            .compaction
            .as_ref()
            .map_or(0, |c| c.through.min(session.entries.len()));
        let total: usize = session.entries[start..]
            .iter()
            .map(|entry| counter.count_message(&entry.message()))
            .sum();
        let budget = self.settings.context_window_tokens as usize;
        let Some(cut) = self
            .compact(key, counter, budget, total / 2, "manual", on_event)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(Compressed {
            summarized: cut - start,
            kept: session.entries.len() - cut,
        }))
    }

    /// Summarises the older part of the history, first folding it into the memory files when
    /// consolidation is on; keeps the newest turns within `keep` tokens (and the current turn
    /// always), summarising in parts of `budget`'s share. Returns where the summary ends when
    /// a compaction record was written.
    async fn compact(
        &self,
        key: &SessionKey,
        counter: TokenCounter,
        budget: usize,
        keep: usize,
        trigger: &'static str,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<usize>, AgentError> {
        let scope = self.hook_scope(key, &TraceId::new(), &RunId::new());
        self.run_hooks(HookInput::PreCompact { trigger }, &scope)
            .await;
        let session = self.store.load(key)?;
        let entries = &session.entries;
        let start = session
            .compaction
            .as_ref()
            .map_or(0, |c| c.through.min(entries.len()));
        let Some(cut) = compaction::cut_point(entries, start, counter, keep) else {
            return Ok(None);
        };
        // The silent memory flush: what is about to leave the model's view goes to the
        // memory files first.
        if self.consolidator.is_some() {
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
        let compactor = Compactor {
            models: &self.models,
            settings: &self.settings,
            counter,
        };
        let Some(summary) = compactor
            .summarise(session.compaction.as_ref(), &entries[start..cut], budget)
            .await?
        else {
            tracing::warn!("{key}: the model returned an empty summary; not compacting");
            return Ok(None);
        };
        self.store
            .append_compaction(key, &nanocrab_sessions::Compaction::new(cut, summary))?;
        on_event(AgentEvent::Compaction {
            messages: cut - start,
        });
        Ok(Some(cut))
    }

    /// Learns how many prompt tokens the provider counts per estimated token, from one request
    /// whose size was `estimated` and which it billed as `reported`; kept per conversation.
    fn calibrate(
        &self,
        key: &SessionKey,
        estimated: usize,
        reported: u64,
    ) -> Result<(), AgentError> {
        let mut settings = self.store.settings(key)?;
        if let Some(ratio) = learn_ratio(settings.token_ratio, estimated, reported) {
            settings.token_ratio = Some(ratio);
            self.store.save_settings(key, &settings)?;
        }
        Ok(())
    }

    /// Lets the agent fold older conversation into the memory files (`memory.consolidateAfter`).
    pub fn with_consolidation(mut self, consolidation: Consolidation) -> Self {
        self.consolidator = Some(Consolidator::new(consolidation));
        self
    }

    /// Hands session titles and the consolidation of short conversations to `model`
    /// (`agents.defaults.housekeepingModel`).
    pub fn with_housekeeping(mut self, model: nanocrab_provider::ResolvedModel) -> Self {
        self.housekeeper = Some(Housekeeper::new(model));
        self
    }

    /// Asks the housekeeping model one question without tools (`system`, then `question`);
    /// `None` when the agent has no housekeeping model, so the caller decides without one.
    pub async fn ask_housekeeper(
        &self,
        system: &str,
        question: String,
        max_tokens: u32,
    ) -> Option<Result<String, ProviderError>> {
        let housekeeper = self.housekeeper.as_ref()?;
        Some(housekeeper.ask(system, question, max_tokens).await)
    }

    /// Has the housekeeping model title the session once its first question is answered;
    /// returns the new title. Without a housekeeping model, or with a title already, nothing
    /// is asked: the first question stands in for the title.
    pub async fn title_if_missing(
        &self,
        key: &SessionKey,
    ) -> Result<Option<String>, HousekeepingError> {
        match &self.housekeeper {
            Some(housekeeper) => housekeeper.title_if_missing(&self.store, key).await,
            None => Ok(None),
        }
    }

    /// Titles session `key` now, replacing any title it has, with the housekeeping model or
    /// else the agent's own; the new title, or `None` when the conversation has no answered
    /// question yet or the model gave nothing usable.
    pub async fn generate_title(
        &self,
        key: &SessionKey,
    ) -> Result<Option<String>, HousekeepingError> {
        let models = self
            .housekeeper
            .as_ref()
            .map_or(&self.models, |housekeeper| &housekeeper.models);
        crate::housekeeping::retitle(models, &self.store, key).await
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
        match &self.consolidator {
            Some(consolidator) => {
                consolidator
                    .consolidate_if_due(&self.consolidation_context(), key, on_event)
                    .await
            }
            None => Ok(None),
        }
    }

    /// Runs one consolidation of `entries`, after which the first `done_after` entries of the
    /// transcript count as consolidated. `None` when consolidation is off or another run has
    /// this session.
    async fn consolidate(
        &self,
        key: &SessionKey,
        entries: &[SessionEntry],
        done_after: usize,
    ) -> Result<Option<ConsolidationReport>, ConsolidationError> {
        match &self.consolidator {
            Some(consolidator) => {
                consolidator
                    .consolidate(&self.consolidation_context(), key, entries, done_after)
                    .await
            }
            None => Ok(None),
        }
    }

    fn consolidation_context(&self) -> ConsolidationContext<'_> {
        ConsolidationContext {
            store: &self.store,
            workspace: self.context.workspace(),
            provenance: self.provenance.as_ref(),
            models: &self.models,
            housekeeper: self.housekeeper.as_ref(),
            settings: &self.settings,
        }
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

    /// Adds the tools of `source` to every turn, as it has them when the turn starts.
    pub fn with_tool_source(mut self, source: std::sync::Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
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

    /// The names of the tools a turn starting now is offered (before a run's own subset),
    /// of those its tool sources have ready.
    pub fn tool_names(&self) -> Vec<String> {
        let mut tools = self.current_tools();
        for tool in self.sources.iter().flat_map(|source| source.known_tools()) {
            tools.register_deferrable(tool);
        }
        tools.names()
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
        let started_at_ms = jiff::Timestamp::now().as_millisecond();
        let ctx = ToolContext {
            workspace: self.context.workspace().to_path_buf(),
            agent: self.id.clone(),
            session: Some(key.clone()),
            channel: input.channel.as_ref().map(|c| c.channel.clone()),
            chat_id: input.channel.as_ref().map(|c| c.chat_id.clone()),
            trace_id: input.trace_id.clone().unwrap_or_default(),
            task_id: TaskId::new(),
            run_id: RunId::new(),
            untrusted_sources: Vec::new(),
            memory_provenance: self.provenance.clone(),
            source: input.source.clone(),
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
        // A turn that failed after tools ran leaves their results durable too; a finished one
        // ended with a committed record and has nothing left to commit.
        let outcome = match (outcome, self.store.commit(key).await) {
            (Ok(outcome), Ok(())) => Ok(outcome),
            (Ok(_), Err(err)) => Err(err.into()),
            (Err(err), _) => Err(err),
        };
        if let Err(err) = &outcome {
            on_event(AgentEvent::Error {
                message: err.to_string(),
            });
        }
        // A run nobody asked for is audited as a whole, so its cost and its origin are on
        // record even when it called no tool.
        // A chat's turn (the hot path) takes no lock for it.
        let audit = if ctx.source.is_autonomous() {
            self.tools
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .policy()
                .audit
                .clone()
        } else {
            None
        };
        if let Some(audit) = audit {
            let (status, error, model_calls, usage) = match &outcome {
                Ok(done) if done.interrupted => {
                    (RunStatus::Interrupted, None, done.iterations, done.usage)
                }
                Ok(done) => (RunStatus::Ok, None, done.iterations, done.usage),
                Err(err) => (RunStatus::Error, Some(err.to_string()), 0, Usage::default()),
            };
            let record = RunRecord {
                id: 0,
                source: ctx.source.clone(),
                agent: self.id.clone(),
                session: key.to_string(),
                trace_id: ctx.trace_id.to_string(),
                run_id: ctx.run_id.to_string(),
                started_at_ms,
                ended_at_ms: jiff::Timestamp::now().as_millisecond(),
                status,
                error,
                model_calls,
                usage,
                tool_calls: 0,
            };
            if let Err(err) = audit.append_run(&record) {
                tracing::warn!("the run is missing from the audit log: {err}");
            }
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
        let past = self.store.load(key)?.messages();
        let resumed = !past.is_empty();
        let mut history = CountedHistory::new(counter, past);
        let settings = self.store.settings(key)?;
        let rag = self.rag_on(&settings);
        // Attached to this turn's message in every request of the turn, never stored.
        let retrieved = if rag {
            self.retrieve_memory(&input.text, on_event).await
        } else {
            None
        };
        let channel = input.channel.clone();
        let prompt_mode = input.prompt_mode;
        let max_iterations = input
            .max_iterations
            .map_or(self.settings.max_tool_iterations, |cap| {
                cap.min(self.settings.max_tool_iterations)
            });
        let only_tools = input.tools.clone();
        let source = input.source.clone();
        let scope = self.hook_scope(key, &ctx.trace_id, &ctx.run_id);
        let mut context = Vec::new();
        let state = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.clone(), SessionState::Started);
        if state != Some(SessionState::Started) {
            let source = match state {
                Some(SessionState::Cleared) => "clear",
                Some(SessionState::Started) | None if resumed => "resume",
                Some(SessionState::Started) | None => "startup",
            };
            if let Some(outcome) = self
                .run_hooks(HookInput::SessionStart { source }, &scope)
                .await
            {
                context.extend(outcome.context);
            }
        }
        if let Some(outcome) = self
            .run_hooks(
                HookInput::UserPromptSubmit {
                    prompt: input.text.clone(),
                },
                &scope,
            )
            .await
        {
            let refused = match outcome.verdict {
                HookVerdict::Block { by, reason } => Some(format!(
                    "Your message was blocked by the UserPromptSubmit hook `{by}`: {reason}"
                )),
                HookVerdict::Proceed | HookVerdict::Allow { .. } | HookVerdict::Ask { .. } => {
                    outcome.halt
                }
            };
            // Neither kept nor shown to the model: as if it had not been sent.
            if let Some(text) = refused {
                return Ok(finish(on_event, text, Usage::default(), 0));
            }
            context.extend(outcome.context);
        }
        let mut user = input.message();
        if !context.is_empty() {
            user.content.push(ContentBlock::text(format!(
                "\n\n[Context from the user's hooks]\n{}",
                context.join("\n\n")
            )));
        }
        // Committed with the answer: until then the gateway's journal holds the message, and a
        // crash before the answer runs the turn again.
        let mut question = SessionEntry::now(user.clone());
        question.source = Some(source).filter(|source| *source != RunSource::Chat);
        self.store.append_unsynced(key, &[question])?;
        history.push(user);

        let profile = self.models.primary().profile;
        let mut registry = self.current_tools();
        for source in &self.sources {
            for tool in source.tools().await {
                registry.register_deferrable(tool);
            }
        }
        if let Some(only) = &only_tools {
            for name in registry.names() {
                if !only.contains(&name) {
                    registry.unregister(&name);
                }
            }
        }
        // Past `tools.deferAbove` the extensions' tools wait for tool_search, which loads what
        // it finds for the rest of this turn.
        let search = if profile.tools {
            registry.defer()
        } else {
            None
        };
        let (system, tools) = self.prompt_and_tools(
            &registry,
            search.as_deref(),
            rag,
            channel.as_ref(),
            prompt_mode,
        );
        let mut budget = Budget::new(
            counter,
            &system,
            tools,
            &self.settings,
            profile.context_window,
            settings.token_ratio,
        );
        budget.count_past(history.bound(), budget.compaction_trigger());
        // The transcript is read again only when it has to be compacted.
        if history.exceeds(budget.compaction_trigger())
            && self
                .compact(
                    key,
                    counter,
                    budget.history(),
                    compaction::kept_tokens(budget.history(), false),
                    "auto",
                    on_event,
                )
                .await?
                .is_some()
        {
            history = CountedHistory::new(counter, self.store.load(key)?.messages());
        }
        let mut compacted_for_overflow = false;
        let mut usage = Usage::default();
        let mut repeats = Repeats::default();
        // After a fallback the rest of the turn stays on the model that answered; the next
        // turn tries the primary again.
        let mut current = 0;
        let mut ctx = ctx.clone();
        let mut loaded = 0;
        // Answers a Stop hook sent back in a row.
        let mut continued = 0;

        for iteration in 1..=max_iterations {
            if iteration > 1 {
                on_event(AgentEvent::NewResponse { iteration });
            }
            budget.count_past(history.bound(), budget.history());
            let request = self.request(
                history.window(budget.history()),
                retrieved.as_ref(),
                &system,
                budget.tools(),
                budget.max_tokens,
                &mut ctx,
            );
            let (answer, streamed) = self
                .stream_answer(current, &request, on_event, cancel)
                .await;
            let Some(answer) = answer else {
                return self.interrupted(key, on_event, streamed, usage, iteration);
            };
            let (answered_by, response) = match answer {
                Ok(answer) => answer,
                // The provider counted more tokens than the estimate did: compact, once, and
                // ask again.
                Err(err) if err.is_context_overflow() && !compacted_for_overflow => {
                    drop(request);
                    compacted_for_overflow = true;
                    if self
                        .compact(
                            key,
                            counter,
                            budget.history(),
                            compaction::kept_tokens(budget.history(), true),
                            "auto",
                            on_event,
                        )
                        .await?
                        .is_none()
                    {
                        return Err(err.into());
                    }
                    history = CountedHistory::new(counter, self.store.load(key)?.messages());
                    continue;
                }
                Err(err) => return Err(err.into()),
            };
            current = answered_by;
            usage += response.usage;
            let assistant = self.record_answer(
                key,
                answered_by,
                response,
                &request.messages,
                &budget,
                on_event,
            )?;
            drop(request);
            // On disk before its tool calls run or it is answered, with everything of the turn
            // before it.
            self.store.commit(key).await?;
            history.push(assistant.clone());
            let calls: Vec<_> = assistant.tool_calls().cloned().collect();
            if calls.is_empty() {
                let text = assistant.text();
                if continued < MAX_STOP_CONTINUES
                    && let Some(HookOutcome {
                        verdict: HookVerdict::Block { by, reason },
                        halt: None,
                        ..
                    }) = self
                        .run_hooks(
                            HookInput::Stop {
                                stop_hook_active: continued > 0,
                                last_message: text.clone(),
                            },
                            &scope,
                        )
                        .await
                {
                    continued += 1;
                    let nudge = LlmMessage::user(format!(
                        "[The Stop hook `{by}` asks you to continue] {reason}"
                    ));
                    self.store
                        .append_unsynced(key, &[SessionEntry::now(nudge.clone())])?;
                    history.push(nudge);
                    continue;
                }
                on_event(AgentEvent::Done { text: text.clone() });
                return Ok(TurnOutcome {
                    text,
                    usage,
                    iterations: iteration,
                    interrupted: false,
                });
            }

            continued = 0;
            let mut halt = None;
            let results = self
                .run_tools(
                    &calls,
                    &registry,
                    &mut ctx,
                    &mut repeats,
                    &scope,
                    &mut halt,
                    on_event,
                    cancel,
                )
                .await;
            let results = LlmMessage {
                role: Role::User,
                content: results,
            };
            // Synced with the next record, which is synced before anything acts on these
            // results (the next tool calls) and before the turn ends; a power cut before then
            // leaves the calls answered as interrupted.
            self.store
                .append_unsynced(key, &[SessionEntry::now(results.clone())])?;
            history.push(results);
            if cancel.is_cancelled() {
                return self.interrupted(key, on_event, String::new(), usage, iteration);
            }
            if let Some(text) = halt {
                return self.stop(key, on_event, text, usage, iteration);
            }
            if let Some(search) = &search
                && search.loaded_count() > loaded
            {
                loaded = search.loaded_count();
                budget.offer(registry.offered(Some(search)));
            }

            if repeats.refused >= MAX_REFUSED_REPEATS {
                let text = "I stopped because I kept repeating the same tool call without making progress. Tell me how you'd like to continue.".to_owned();
                return self.stop(key, on_event, text, usage, iteration);
            }
        }
        let max = max_iterations;
        let text = if max < self.settings.max_tool_iterations {
            format!(
                "I stopped after {max} tool iterations, the limit of this run, without finishing."
            )
        } else {
            format!(
                "I stopped after {max} tool iterations (agents.defaults.maxToolIterations = {max}) without finishing. Tell me how to continue, or raise the limit."
            )
        };
        self.stop(key, on_event, text, usage, max)
    }

    /// What the model is told this turn: the system prompt, and the tools it may call first
    /// (with `search`, the tools it holds back are named in one line of the prompt). A model
    /// without tool calling gets no tools, and a prompt that says so.
    fn prompt_and_tools<'r>(
        &self,
        registry: &'r ToolRegistry,
        search: Option<&ToolSearch>,
        rag: bool,
        channel: Option<&ChannelInfo>,
        mode: PromptMode,
    ) -> (String, Cow<'r, [ToolDef]>) {
        let profile = self.models.primary().profile;
        let tools = if profile.tools {
            registry.offered(search)
        } else {
            Cow::Borrowed(&[][..])
        };
        let mut context = self
            .context
            .clone()
            .with_memory_by_retrieval(rag)
            .with_memory_provenance(self.provenance.clone());
        if let Some(search) = search {
            context = context
                .with_deferred_tools(search.deferred().iter().map(|d| d.name.clone()).collect());
        }
        if profile.compact_prompt {
            context = context.with_mode(PromptMode::Minimal);
        } else if mode != PromptMode::Full {
            context = context.with_mode(mode);
        }
        let system = context.build(!tools.is_empty(), channel, &RuntimeInfo::current());
        (system, tools)
    }

    /// The next request of the turn: `messages`, the window of the history, with the memory
    /// `retrieved` for this turn attached to its question. Notes `ctx` with the untrusted text
    /// the model has in view, so that a memory note it writes now is marked with where that
    /// came from.
    fn request<'a>(
        &self,
        window: &'a [LlmMessage],
        retrieved: Option<&ContentBlock>,
        system: &'a str,
        tools: &'a [ToolDef],
        max_tokens: u32,
        ctx: &mut ToolContext,
    ) -> ChatRequest<'a> {
        let mut messages = Cow::Borrowed(window);
        if let Some(block) = retrieved
            && let Some(question) = messages
                .to_mut()
                .iter_mut()
                .rev()
                .find(|m| m.role == Role::User && m.tool_results().next().is_none())
        {
            question.content.push(block.clone());
        }
        // The untrusted text the model has in view; a memory note it writes now is
        // marked with where that came from.
        ctx.untrusted_sources = fenced_sources(system);
        add_fenced_sources(
            &mut ctx.untrusted_sources,
            messages.iter().flat_map(|m| &m.content),
        );
        ChatRequest {
            // Each model of the chain puts its own name here.
            model: Cow::Borrowed(""),
            system: Cow::Borrowed(system),
            messages,
            tools: Cow::Borrowed(tools),
            max_tokens,
            temperature: self.settings.temperature,
        }
    }

    /// Memory found for `text` by search (RAG mode); a failed search is logged and the turn
    /// answered without it.
    async fn retrieve_memory(
        &self,
        text: &str,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Option<ContentBlock> {
        let memory = self.memory.as_ref()?;
        match memory.retrieve(text, self.provenance.as_ref()).await {
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

    /// Asks model `current` of the chain (or a later one, on failure) for the next answer,
    /// streaming it as events; `None` when `cancel` interrupted it. Also returns the text the
    /// user has seen of it, kept if they interrupt it.
    async fn stream_answer(
        &self,
        current: usize,
        request: &ChatRequest<'_>,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
        cancel: &CancellationToken,
    ) -> (Option<Result<(usize, ChatResponse), ProviderError>>, String) {
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
            .chat(current, request, &mut on_delta, &mut on_fallback);
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            answer = chat => Some(answer),
        };
        (answer, streamed)
    }

    /// Keeps an answer of model `answered_by` to a request that sent `sent`: its usage
    /// reported and learned from, why it ended explained, and the message saved.
    fn record_answer(
        &self,
        key: &SessionKey,
        answered_by: usize,
        response: ChatResponse,
        sent: &[LlmMessage],
        budget: &Budget<'_>,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<LlmMessage, AgentError> {
        let label = self
            .models
            .get(answered_by)
            .map(|m| m.label.clone())
            .unwrap_or_default();
        if let Some(estimated) = budget.estimate(sent) {
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
        if assistant.tool_calls().next().is_none() {
            self.explain_ending(
                &mut assistant,
                &response.stop_reason,
                budget.max_tokens,
                on_event,
            );
        }
        self.store.append_unsynced(
            key,
            &[SessionEntry {
                model: Some(label),
                usage: Some(response.usage),
                ..SessionEntry::now(assistant.clone())
            }],
        )?;
        Ok(assistant)
    }

    /// Says in an answer without tool calls why it ended there when it is cut off, refused
    /// or empty. Kept in the transcript too: the model then knows next turn why its answer
    /// ended there, and a provider never gets back an assistant message with no text.
    fn explain_ending(
        &self,
        assistant: &mut LlmMessage,
        stop: &StopReason,
        max_tokens: u32,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
    ) {
        let answered = !assistant.text().trim().is_empty();
        let note = match stop {
            StopReason::MaxTokens if max_tokens < self.settings.max_tokens => format!(
                "[The answer was cut off at the output limit ({max_tokens} tokens, a quarter of this model's context window).]"
            ),
            StopReason::MaxTokens => format!(
                "[The answer was cut off at the output limit (agents.defaults.maxTokens = {max_tokens}).]"
            ),
            // A refusal's text is the model's explanation; without one, say what happened.
            StopReason::Refusal if !answered => {
                "[The model declined to answer this request.]".to_owned()
            }
            StopReason::Refusal
            | StopReason::EndTurn
            | StopReason::ToolUse
            | StopReason::StopSequence
            | StopReason::Other(_)
                if answered =>
            {
                return;
            }
            StopReason::Refusal
            | StopReason::EndTurn
            | StopReason::ToolUse
            | StopReason::StopSequence
            | StopReason::Other(_) => {
                "[The model returned an empty answer. Try rephrasing the request.]".to_owned()
            }
        };
        let note = if answered {
            format!("\n\n{note}")
        } else {
            note
        };
        on_event(AgentEvent::Token { text: note.clone() });
        assistant.content.push(ContentBlock::text(note));
    }

    /// Runs the answer's tool calls in order, each reported as it starts and ends, past the
    /// `PreToolUse` hooks and then the `PostToolUse` ones; a repeat beyond
    /// [`MAX_IDENTICAL_CALLS`] is refused, and once `cancel` fires (or a hook halts the turn,
    /// setting `halt`) the calls left get an error result, so that every call has its result.
    #[allow(clippy::too_many_arguments)]
    async fn run_tools(
        &self,
        calls: &[ToolCall],
        registry: &ToolRegistry,
        ctx: &mut ToolContext,
        repeats: &mut Repeats,
        scope: &HookScope,
        halt: &mut Option<String>,
        on_event: &mut (dyn FnMut(AgentEvent) + Send),
        cancel: &CancellationToken,
    ) -> Vec<ContentBlock> {
        let mut results = Vec::with_capacity(calls.len());
        let mut images = Vec::new();
        for call in calls {
            if cancel.is_cancelled() {
                results.push(ContentBlock::ToolResult(ToolResult::error(
                    &call.id,
                    "Error: interrupted by the user before it ran.",
                )));
                continue;
            }
            if halt.is_some() {
                results.push(ContentBlock::ToolResult(ToolResult::error(
                    &call.id,
                    "Error: not run: a hook ended the turn.",
                )));
                continue;
            }
            on_event(AgentEvent::ToolStart {
                call_id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            });
            let Executed {
                mut result,
                change,
                images: returned,
            } = if let Some(refused) = repeats.refuse(call) {
                Executed {
                    result: refused,
                    change: None,
                    images: Vec::new(),
                }
            } else {
                let gate = match self
                    .run_hooks(HookInput::PreToolUse { call: call.clone() }, scope)
                    .await
                {
                    Some(outcome) => {
                        if outcome.halt.is_some() {
                            *halt = outcome.halt;
                        }
                        match halt {
                            Some(text) => nanocrab_tools::CallGate::Denied {
                                by: "continue: false".to_owned(),
                                reason: text.clone(),
                            },
                            None => outcome.verdict.gate(),
                        }
                    }
                    None => nanocrab_tools::CallGate::Policy,
                };
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => Executed {
                        result: ToolResult::error(
                            &call.id,
                            "Error: interrupted by the user before it finished.",
                        ),
                        change: None,
                        images: Vec::new(),
                    },
                    reported = registry.execute_gated(call, ctx, &gate) => reported,
                }
            };
            images.extend(returned.into_iter().map(ContentBlock::Image));
            if halt.is_none()
                && let Some(outcome) = self
                    .run_hooks(
                        HookInput::PostToolUse {
                            call: call.clone(),
                            result: result.clone(),
                        },
                        scope,
                    )
                    .await
            {
                for text in &outcome.context {
                    result
                        .content
                        .push_str(&format!("\n\n[PostToolUse hook] {text}"));
                }
                match outcome.verdict {
                    HookVerdict::Block { by, reason } => result
                        .content
                        .push_str(&format!("\n\n[The PostToolUse hook `{by}` says] {reason}")),
                    HookVerdict::Proceed | HookVerdict::Allow { .. } | HookVerdict::Ask { .. } => {}
                }
                *halt = outcome.halt;
            }
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
        // Every result first (Anthropic's rule, and OpenAI's `tool` messages come before
        // the user message that carries the images).
        results.extend(images);
        results
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
}

/// Adds the source of every untrusted fence in `blocks` (text and tool results) to `sources`,
/// each once.
pub(crate) fn add_fenced_sources<'a>(
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

/// The tool calls of one turn, to refuse a call repeated with the same arguments beyond
/// [`MAX_IDENTICAL_CALLS`].
#[derive(Default)]
struct Repeats {
    seen: Vec<(String, serde_json::Value)>,
    refused: u32,
}

impl Repeats {
    /// The error result refusing `call` when it is one repeat too many; counts it either way.
    fn refuse(&mut self, call: &ToolCall) -> Option<ToolResult> {
        let signature = (call.name.clone(), call.input.clone());
        let earlier = self.seen.iter().filter(|s| **s == signature).count();
        self.seen.push(signature);
        if earlier < MAX_IDENTICAL_CALLS {
            return None;
        }
        self.refused += 1;
        Some(ToolResult::error(
            &call.id,
            format!(
                "Error: you are repeating yourself: {} was already called {earlier} times in this turn with these exact arguments. Use what it returned, try something different, or answer the user.",
                call.name
            ),
        ))
    }
}
