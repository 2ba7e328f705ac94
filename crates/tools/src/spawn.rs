//! Subagents: `spawn(task, agent?, tools?)` starts one on its own, `subagents(action, id?)`
//! lists, shows or cancels this conversation's, and an agent offered as a tool
//! (`agent_<id>`) runs one and waits for its answer. The runs live with whoever schedules
//! turns (the gateway), behind [`Subagents`]; these tools only read the call and say who asks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use nanocrab_policy::{Capability, Invocation, Risk};
use nanocrab_schema::{RunId, RunSource, SessionKey, ToolDef, TraceId};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::arguments::{TypedTool, parameters};
use crate::tool::{PreparedCall, Tool, ToolContext, ToolError, ToolOutput};

/// The run that asks for a subagent, as its tool context says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRun {
    pub agent: String,
    pub session: Option<SessionKey>,
    pub run_id: RunId,
    pub trace_id: TraceId,
    /// The chat the parent answers (`channel`, `chat id`): the subagent's end is told there.
    pub chat: Option<(String, String)>,
    pub source: RunSource,
}

impl ParentRun {
    pub fn of(ctx: &ToolContext) -> Self {
        Self {
            agent: ctx.agent.clone(),
            session: ctx.session.clone(),
            run_id: ctx.run_id.clone(),
            trace_id: ctx.trace_id.clone(),
            chat: ctx.channel.clone().zip(ctx.chat_id.clone()),
            source: ctx.source.clone(),
        }
    }
}

/// A subagent as a run asks for it; the scheduler checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    pub task: String,
    /// The agent that works on it: the asking one's own when the call names none.
    pub agent: String,
    /// Only these of its tools; `None`: all of them.
    pub tools: Option<Vec<String>>,
    pub parent: ParentRun,
}

/// A run of a subagent awaited by its caller: its answer, or why there is none.
pub type Awaited<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, String>> + Send + 'a>>;

/// The subagents of one process, as the agent's tools see them. Each answer is a line for
/// the model; an error says what was wrong.
pub trait Subagents: Send + Sync {
    /// Starts `request` on its own; its end is announced to the parent's conversation.
    fn spawn(&self, request: SpawnRequest) -> Result<String, String>;
    /// Runs `request` and waits for its end: its answer, fenced, after a line of stats.
    fn run(&self, request: SpawnRequest) -> Awaited<'_>;
    /// The subagents conversation `session` started.
    fn list(&self, session: Option<&SessionKey>) -> Result<String, String>;
    /// Subagent `id` of conversation `session`: its state and result.
    fn show(&self, session: Option<&SessionKey>, id: &str) -> Result<String, String>;
    /// Cancels subagent `id` of conversation `session`.
    fn cancel(&self, session: Option<&SessionKey>, id: &str) -> Result<String, String>;
}

pub struct SpawnTool {
    subagents: Arc<dyn Subagents>,
}

impl SpawnTool {
    pub fn new(subagents: Arc<dyn Subagents>) -> Self {
        Self { subagents }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnArgs {
    /// all it needs to know
    task: String,
    /// default: you
    agent: Option<String>,
    /// only these tools
    tools: Option<Vec<String>>,
}

impl TypedTool for SpawnTool {
    type Args = SpawnArgs;

    const NAME: &'static str = "spawn";

    fn description(&self) -> String {
        "Run a task in a background subagent; its result comes here later.".into()
    }

    fn invocation(&self, args: &SpawnArgs, ctx: &ToolContext) -> Result<Invocation, ToolError> {
        // The agent it runs as: its grants and workspace are what the subagent gets.
        let agent = args
            .agent
            .as_deref()
            .map(str::trim)
            .filter(|agent| !agent.is_empty())
            .unwrap_or(&ctx.agent);
        Ok(Invocation::new(
            Risk::Guarded,
            format!("start a subagent (agent {agent}): {}", args.task),
            vec![Capability::Spawn(agent.to_owned())],
        ))
    }

    async fn call(&self, args: SpawnArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let request = spawn_request(args.task, args.agent, args.tools, ctx)?;
        self.subagents
            .spawn(request)
            .map(ToolOutput::trusted)
            .map_err(ToolError::Rejected)
    }
}

fn spawn_request(
    task: String,
    agent: Option<String>,
    tools: Option<Vec<String>>,
    ctx: &ToolContext,
) -> Result<SpawnRequest, ToolError> {
    if task.trim().is_empty() {
        return Err(ToolError::InvalidArguments(
            "task: say what the subagent is to do".to_owned(),
        ));
    }
    let agent = agent
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| ctx.agent.clone());
    Ok(SpawnRequest {
        task,
        agent,
        tools,
        parent: ParentRun::of(ctx),
    })
}

pub struct SubagentsTool {
    subagents: Arc<dyn Subagents>,
}

impl SubagentsTool {
    pub fn new(subagents: Arc<dyn Subagents>) -> Self {
        Self { subagents }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SubagentsAction {
    List,
    Show,
    Cancel,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubagentsArgs {
    action: SubagentsAction,
    /// subagent id
    id: Option<String>,
}

impl TypedTool for SubagentsTool {
    type Args = SubagentsArgs;

    const NAME: &'static str = "subagents";

    fn description(&self) -> String {
        "Check or cancel your subagents.".into()
    }

    fn invocation(&self, args: &SubagentsArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        let id = args.id.as_deref().unwrap_or_default();
        // Only this conversation's subagents are in reach: nothing here needs a grant.
        Ok(match args.action {
            SubagentsAction::List => Invocation::new(Risk::Safe, "list the subagents", Vec::new()),
            SubagentsAction::Show => {
                Invocation::new(Risk::Safe, format!("show the subagent {id}"), Vec::new())
            }
            SubagentsAction::Cancel => {
                Invocation::new(Risk::Safe, format!("cancel the subagent {id}"), Vec::new())
            }
        })
    }

    async fn call(&self, args: SubagentsArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let session = ctx.session.as_ref();
        let id = args
            .id
            .as_deref()
            .map(str::trim)
            .filter(|id| !id.is_empty());
        let answer = match (args.action, id) {
            (SubagentsAction::List, _) => self.subagents.list(session),
            (SubagentsAction::Show, Some(id)) => self.subagents.show(session, id),
            (SubagentsAction::Cancel, Some(id)) => self.subagents.cancel(session, id),
            (SubagentsAction::Show | SubagentsAction::Cancel, None) => {
                return Err(ToolError::InvalidArguments(
                    "id: give the subagent's id (sa-...)".to_owned(),
                ));
            }
        };
        answer.map(ToolOutput::trusted).map_err(ToolError::Rejected)
    }
}

/// Agent `agent` offered to the others as the tool `agent_<id>`
/// (`agents.entries.<id>.asTool`): a call runs it as a subagent and waits for its answer.
pub struct AgentTool {
    agent: String,
    description: String,
    subagents: Arc<dyn Subagents>,
}

impl AgentTool {
    /// `description`: what the agent is good for; default: that it is agent `agent`.
    pub fn new(agent: &str, description: Option<&str>, subagents: Arc<dyn Subagents>) -> Self {
        Self {
            agent: agent.to_owned(),
            description: description.map_or_else(
                || format!("Ask agent {agent} to do a task and wait for its answer."),
                str::to_owned,
            ),
            subagents,
        }
    }

    /// The tool's name: `agent_<id>`.
    pub fn name(&self) -> String {
        format!("agent_{}", self.agent)
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AgentToolArgs {
    /// all it needs to know
    task: String,
}

impl Tool for AgentTool {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: self.name(),
            description: self.description.clone(),
            parameters: parameters::<AgentToolArgs>(),
        }
    }

    fn prepare<'a>(
        &'a self,
        input: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let args: AgentToolArgs = serde_json::from_value(input).map_err(|err| {
            ToolError::InvalidArguments(format!(
                "invalid arguments for {}: {err}; expected a JSON object with `task` (a string)",
                self.name()
            ))
        })?;
        let request = spawn_request(args.task, Some(self.agent.clone()), None, ctx)?;
        let invocation = Invocation::new(
            Risk::Guarded,
            format!("ask agent {}: {}", self.agent, request.task),
            vec![Capability::Spawn(self.agent.clone())],
        );
        Ok(PreparedCall::new(invocation, async move {
            self.subagents
                .run(request)
                .await
                .map_err(ToolError::Rejected)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::sync::Mutex;

    /// Records what it was asked.
    #[derive(Default)]
    struct Recorder {
        spawned: Mutex<Vec<SpawnRequest>>,
        asked: Mutex<Vec<String>>,
    }

    impl Subagents for Recorder {
        fn spawn(&self, request: SpawnRequest) -> Result<String, String> {
            self.spawned.lock().unwrap().push(request);
            Ok("Started subagent sa-1".to_owned())
        }
        fn run(&self, request: SpawnRequest) -> Awaited<'_> {
            self.spawned.lock().unwrap().push(request);
            Box::pin(async { Ok(ToolOutput::trusted("the answer")) })
        }
        fn list(&self, session: Option<&SessionKey>) -> Result<String, String> {
            self.asked.lock().unwrap().push(format!("list {session:?}"));
            Ok("none".to_owned())
        }
        fn show(&self, _: Option<&SessionKey>, id: &str) -> Result<String, String> {
            self.asked.lock().unwrap().push(format!("show {id}"));
            Err(format!("no subagent {id} in this conversation"))
        }
        fn cancel(&self, _: Option<&SessionKey>, id: &str) -> Result<String, String> {
            self.asked.lock().unwrap().push(format!("cancel {id}"));
            Ok(format!("cancelled {id}"))
        }
    }

    fn call(tool: &dyn Tool, ctx: &ToolContext, args: serde_json::Value) -> Result<String, String> {
        let prepared = tool.prepare(args, ctx).map_err(|e| e.to_string())?;
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(prepared.run)
            .map(|o| o.text)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn spawn_says_who_asks_and_defaults_to_the_asking_agent() {
        let recorder = Arc::new(Recorder::default());
        let tool = SpawnTool::new(Arc::clone(&recorder) as Arc<dyn Subagents>);
        let mut ctx = ToolContext::new("/tmp");
        ctx.channel = Some("telegram".to_owned());
        ctx.chat_id = Some("42".to_owned());
        let prepared = Tool::prepare(
            &tool,
            serde_json::json!({"task": "Find the train times", "tools": ["read_file"]}),
            &ctx,
        )
        .unwrap();
        assert_eq!(
            (
                prepared.invocation.risk,
                prepared.invocation.capabilities,
                prepared.invocation.summary
            ),
            (
                Risk::Guarded,
                vec![Capability::Spawn("main".to_owned())],
                "start a subagent (agent main): Find the train times".to_owned()
            )
        );
        drop(prepared.run);
        assert_eq!(
            call(
                &tool,
                &ctx,
                serde_json::json!({"task": "Find the train times", "tools": ["read_file"]})
            ),
            Ok("Started subagent sa-1".to_owned())
        );
        assert_eq!(
            recorder.spawned.lock().unwrap().clone(),
            [SpawnRequest {
                task: "Find the train times".to_owned(),
                agent: "main".to_owned(),
                tools: Some(vec!["read_file".to_owned()]),
                parent: ParentRun {
                    agent: "main".to_owned(),
                    session: None,
                    run_id: ctx.run_id.clone(),
                    trace_id: ctx.trace_id.clone(),
                    chat: Some(("telegram".to_owned(), "42".to_owned())),
                    source: RunSource::Chat,
                },
            }]
        );
        assert_eq!(
            call(&tool, &ctx, serde_json::json!({"task": " "})),
            Err("task: say what the subagent is to do".to_owned())
        );
    }

    #[test]
    fn subagents_needs_an_id_to_show_or_cancel_and_no_grant() {
        let recorder = Arc::new(Recorder::default());
        let tool = SubagentsTool::new(Arc::clone(&recorder) as Arc<dyn Subagents>);
        let ctx = ToolContext::new("/tmp");
        assert_eq!(
            call(&tool, &ctx, serde_json::json!({"action": "cancel"})),
            Err("id: give the subagent's id (sa-...)".to_owned())
        );
        assert_eq!(
            call(
                &tool,
                &ctx,
                serde_json::json!({"action": "show", "id": "sa-9"})
            ),
            Err("no subagent sa-9 in this conversation".to_owned())
        );
        assert_eq!(
            call(
                &tool,
                &ctx,
                serde_json::json!({"action": "cancel", "id": "sa-9"})
            ),
            Ok("cancelled sa-9".to_owned())
        );
        assert_eq!(
            call(&tool, &ctx, serde_json::json!({"action": "list"})),
            Ok("none".to_owned())
        );
        let prepared = Tool::prepare(
            &tool,
            serde_json::json!({"action": "cancel", "id": "sa-9"}),
            &ctx,
        )
        .unwrap();
        assert_eq!(
            (prepared.invocation.risk, prepared.invocation.capabilities),
            (Risk::Safe, vec![])
        );
    }

    #[test]
    fn an_agent_offered_as_a_tool_is_named_after_it_and_runs_the_task() {
        let recorder = Arc::new(Recorder::default());
        let tool = AgentTool::new(
            "research",
            Some("Digs through the web."),
            Arc::clone(&recorder) as Arc<dyn Subagents>,
        );
        let definition = tool.definition();
        assert_eq!(
            (definition.name.as_str(), definition.description.as_str()),
            ("agent_research", "Digs through the web.")
        );
        let ctx = ToolContext::new("/tmp");
        assert_eq!(
            call(
                &tool,
                &ctx,
                serde_json::json!({"task": "Compare two laptops"})
            ),
            Ok("the answer".to_owned())
        );
        assert_eq!(
            recorder
                .spawned
                .lock()
                .unwrap()
                .iter()
                .map(|r| (r.agent.as_str(), r.task.as_str()))
                .collect::<Vec<_>>(),
            [("research", "Compare two laptops")]
        );
    }
}
