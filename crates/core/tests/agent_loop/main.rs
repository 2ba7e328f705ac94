//! The agent loop against a scripted in-process provider and a fake tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nanocrab_core::{
    Agent, AgentSettings, Consolidation, ConsolidationReport, ContextBuilder, IndexRetriever,
    MemoryRetrieval,
};
use nanocrab_policy::{Invocation, Risk};
use nanocrab_provider::{
    ChatRequest, ChatResponse, DeltaSink, LlmProvider, ModelChain, ModelProfile, ProviderDelta,
    ProviderError, ResolvedModel,
};
use nanocrab_schema::{
    AgentEvent, ContentBlock, LlmMessage, RetrievedSource, Role, SessionKey, StopReason, ToolCall,
    ToolDef, ToolResult, Usage,
};
use nanocrab_sessions::{SessionEntry, SessionStore, TokenCounter};
use nanocrab_tools::{
    MemoryProvenance, PreparedCall, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use serde_json::json;

mod autonomous;
mod budget;
mod compaction;
mod consolidation;
mod deferred;
mod fallback;
mod housekeeping;
mod interruption;
mod provenance;
mod rag;
mod tool_loop;

/// Answers with queued responses (or errors) and records every request. Summarising requests
/// of compaction are answered apart, `Summary 1`, `Summary 2`..., and recorded apart.
#[derive(Default)]
struct Scripted {
    replies: Mutex<VecDeque<Result<ChatResponse, ProviderError>>>,
    requests: Mutex<Vec<ChatRequest<'static>>>,
    summaries: Mutex<Vec<ChatRequest<'static>>>,
    /// When not 0, report this many times the request's size, counted as the agent counts for
    /// the request's model, as its prompt tokens (1: as a real provider would) instead of the
    /// scripted figure.
    usage_factor: std::sync::atomic::AtomicU64,
}

#[async_trait]
impl LlmProvider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        if request.system.starts_with("You summarise a conversation")
            || request.system.starts_with("Merge these summaries")
        {
            let mut summaries = self.summaries.lock().unwrap();
            summaries.push(request.to_owned_request());
            return answer(&format!("Summary {}", summaries.len()), StopReason::EndTurn);
        }
        self.requests
            .lock()
            .unwrap()
            .push(request.to_owned_request());
        let mut reply = self
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .expect("a scripted reply");
        let factor = self.usage_factor.load(Ordering::SeqCst);
        if let Ok(response) = &mut reply
            && factor > 0
        {
            let counter = TokenCounter::for_model(&request.model);
            let tools: usize = request
                .tools
                .iter()
                .map(|t| {
                    counter.count_text(&t.name)
                        + counter.count_text(&t.description)
                        + counter.count_text(&t.parameters.to_string())
                })
                .sum();
            response.usage.input_tokens = factor
                * (counter.count_text(&request.system)
                    + tools
                    + request
                        .messages
                        .iter()
                        .map(|m| counter.count_message(m))
                        .sum::<usize>()) as u64;
        }
        if let Ok(response) = &reply {
            for block in &response.content {
                match block {
                    ContentBlock::Text { text } => on_delta(ProviderDelta::Text(text.clone())),
                    ContentBlock::Thinking { thinking, .. } => {
                        on_delta(ProviderDelta::Reasoning(thinking.clone()));
                    }
                    ContentBlock::RedactedThinking { .. }
                    | ContentBlock::Image(_)
                    | ContentBlock::ToolUse(_)
                    | ContentBlock::ToolResult(_) => {}
                }
            }
        }
        reply
    }
}

/// The scripted provider as the model `scripted/<model>`.
fn resolved(provider: &Arc<Scripted>, model: &str, profile: ModelProfile) -> ResolvedModel {
    ResolvedModel {
        provider: provider.clone(),
        model: model.into(),
        label: format!("scripted/{model}"),
        profile,
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 10,
        output_tokens: 5,
        ..Usage::default()
    }
}

fn answer(text: &str, stop_reason: StopReason) -> Result<ChatResponse, ProviderError> {
    Ok(ChatResponse {
        content: vec![ContentBlock::text(text)],
        stop_reason,
        usage: usage(),
        model: "m1".into(),
    })
}

fn call(id: &str, input: serde_json::Value) -> Result<ChatResponse, ProviderError> {
    Ok(ChatResponse {
        content: vec![ContentBlock::ToolUse(ToolCall {
            id: id.into(),
            name: "echo".into(),
            input,
        })],
        stop_reason: StopReason::ToolUse,
        usage: usage(),
        model: "m1".into(),
    })
}

/// Returns its `text` argument; fails when there is none. Counts its calls.
#[derive(Default)]
struct Echo {
    calls: AtomicUsize,
}

impl Tool for Echo {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "echo".into(),
            description: "Echo text.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn prepare<'a>(
        &'a self,
        input: serde_json::Value,
        _: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let invocation = Invocation::new(Risk::Safe, "echo", Vec::new());
        Ok(PreparedCall::new(invocation, async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            input["text"]
                .as_str()
                .map(ToolOutput::trusted)
                .ok_or_else(|| ToolError::InvalidArguments("text is required".into()))
        }))
    }
}

/// An extension's tool with a given definition (an MCP server's, a tool source's), answering with its name
/// and arguments.
struct Extension(ToolDef);

impl Tool for Extension {
    fn definition(&self) -> ToolDef {
        self.0.clone()
    }

    fn prepare<'a>(
        &'a self,
        input: serde_json::Value,
        _: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let invocation = Invocation::new(Risk::Safe, &self.0.name, Vec::new());
        Ok(PreparedCall::new(invocation, async move {
            Ok(ToolOutput::trusted(format!(
                "{} ran with {input}",
                self.0.name
            )))
        }))
    }
}

/// The names of the tools a request offered.
fn tool_names(request: &ChatRequest<'_>) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

struct Setup {
    dir: tempfile::TempDir,
    provider: Arc<Scripted>,
    echo: Arc<Echo>,
    agent: Agent,
    key: SessionKey,
}

fn setup(replies: Vec<Result<ChatResponse, ProviderError>>, max_tool_iterations: u32) -> Setup {
    setup_with(
        replies,
        AgentSettings {
            max_tokens: 100,
            temperature: None,
            max_tool_iterations,
            context_window_tokens: 65_536,
        },
    )
}

fn setup_with(replies: Vec<Result<ChatResponse, ProviderError>>, settings: AgentSettings) -> Setup {
    setup_for("m1", replies, settings)
}

/// The scripted provider serving a model named `model`.
fn setup_for(
    model: &str,
    replies: Vec<Result<ChatResponse, ProviderError>>,
    settings: AgentSettings,
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(Scripted {
        replies: Mutex::new(replies.into()),
        ..Scripted::default()
    });
    let echo = Arc::new(Echo::default());
    let mut tools = ToolRegistry::new();
    tools.register(echo.clone());
    let agent = Agent::new(
        ModelChain::new(
            resolved(&provider, model, ModelProfile::GENERIC),
            Vec::new(),
        ),
        tools,
        SessionStore::new(dir.path().join("sessions")),
        ContextBuilder::new(dir.path().join("workspace")),
        settings,
    );
    Setup {
        dir,
        provider,
        echo,
        agent,
        key: SessionKey::parse("test:1").unwrap(),
    }
}

async fn run(setup: &Setup, text: &str) -> (Vec<AgentEvent>, Result<String, String>) {
    let mut events = Vec::new();
    let outcome = setup
        .agent
        .run_turn(&setup.key, text, &mut |event| events.push(event))
        .await;
    (events, outcome.map(|o| o.text).map_err(|e| e.to_string()))
}

/// An agent over `dir`'s sessions and `workspace`, with the settings most tests use.
fn agent_for(
    dir: &tempfile::TempDir,
    workspace: impl Into<std::path::PathBuf>,
    models: ModelChain,
    tools: ToolRegistry,
) -> Agent {
    Agent::new(
        models,
        tools,
        SessionStore::new(dir.path().join("sessions")),
        ContextBuilder::new(workspace),
        AgentSettings {
            max_tokens: 100,
            temperature: None,
            max_tool_iterations: 40,
            context_window_tokens: 65_536,
        },
    )
}

fn overloaded() -> ProviderError {
    ProviderError::Status {
        provider: "scripted".into(),
        status: 529,
        message: "Overloaded".into(),
        kind: Some("overloaded_error".into()),
        hint: "The provider is having trouble: try again later".into(),
        attempts: 4,
        retry_after: None,
    }
}

/// An agent with a memory index over its workspace, MEMORY.md holding two facts.
fn with_memory(replies: Vec<Result<ChatResponse, ProviderError>>, rag_by_default: bool) -> Setup {
    let setup = setup(replies, 40);
    let workspace = setup.dir.path().join("workspace");
    std::fs::create_dir_all(workspace.join("memory")).unwrap();
    std::fs::write(
        workspace.join("memory/MEMORY.md"),
        "# People\n- Ada is my sister; she lives in Lisbon.\n\n# Health\n- Dentist: Dr. Okafor, every March.\n",
    )
    .unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(setup.echo.clone());
    Setup {
        agent: agent_for(
            &setup.dir,
            &workspace,
            ModelChain::new(
                resolved(&setup.provider, "m1", ModelProfile::GENERIC),
                Vec::new(),
            ),
            tools,
        )
        .with_memory(MemoryRetrieval {
            retriever: Arc::new(IndexRetriever {
                index: nanocrab_memory::IndexSetup {
                    database: setup.dir.path().join("state/memory-index.sqlite"),
                    workspace,
                    sessions: None,
                    embeddings: nanocrab_memory::EmbeddingSetup::KeywordOnly(
                        "no embedding model in this test".to_owned(),
                    ),
                    watch: None,
                },
                search: nanocrab_memory::SearchOptions::new(3),
            }),
            rag_by_default,
        }),
        ..setup
    }
}

/// An agent without tools that consolidates after four messages, its MEMORY.md backups in
/// `backups`.
fn consolidating(setup: &Setup, backups: std::path::PathBuf) -> Agent {
    agent_for(
        &setup.dir,
        setup.dir.path().join("workspace"),
        ModelChain::new(
            resolved(&setup.provider, "m1", ModelProfile::GENERIC),
            Vec::new(),
        ),
        ToolRegistry::new(),
    )
    .with_consolidation(Consolidation {
        after_messages: 4,
        backups,
    })
}

fn save_memory(history_entry: &str, memory_update: &str) -> Result<ChatResponse, ProviderError> {
    Ok(ChatResponse {
        content: vec![ContentBlock::ToolUse(ToolCall {
            id: "save".into(),
            name: "save_memory".into(),
            input: json!({"history_entry": history_entry, "memory_update": memory_update}),
        })],
        stop_reason: StopReason::ToolUse,
        usage: usage(),
        model: "m1".into(),
    })
}

fn calls(calls: &[(&str, &str, serde_json::Value)]) -> Result<ChatResponse, ProviderError> {
    Ok(ChatResponse {
        content: calls
            .iter()
            .map(|(id, name, input)| {
                ContentBlock::ToolUse(ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    input: input.clone(),
                })
            })
            .collect(),
        stop_reason: StopReason::ToolUse,
        usage: usage(),
        model: "m1".into(),
    })
}
