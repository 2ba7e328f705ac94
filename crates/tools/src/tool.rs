use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use nanocrab_policy::{Denial, Invocation, PathDenial};
use nanocrab_schema::{
    Image, InstructionsChange, RunId, RunSource, SessionKey, TaskId, ToolDef, TraceId,
};

use crate::memory_provenance::MemoryProvenance;

/// Per-run facts a tool may need, and the ids its calls are recorded under; what a tool may
/// *do* is fixed when it is constructed (its policy) and by the run's grants, not passed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    /// The agent's workspace; relative paths resolve against it.
    pub workspace: PathBuf,
    pub agent: String,
    /// The conversation; `None` for a run that belongs to none.
    pub session: Option<SessionKey>,
    /// The channel the run's message came from (`telegram`, `api`...); `None` for the CLI.
    /// Grants written under `channels.<name>.grants` apply to runs from that channel.
    pub channel: Option<String>,
    /// The chat of that channel the run's message came from; `None` for the CLI and for runs
    /// nobody in a chat started.
    pub chat_id: Option<String>,
    pub trace_id: TraceId,
    pub task_id: TaskId,
    pub run_id: RunId,
    /// The fenced sources (`read_file page.html`, `forwarded from …`) of untrusted text the
    /// model has in view so far this turn; a memory note written now is marked with them.
    pub untrusted_sources: Vec<String>,
    /// Where this agent's memory notes are marked; `None` leaves notes unmarked and unfenced
    /// (a run with no state folder).
    pub memory_provenance: Option<MemoryProvenance>,
    /// Who started the run (a chat, a heartbeat, a scheduled job, a parent run); recorded with
    /// each call in the audit log.
    pub source: RunSource,
}

impl ToolContext {
    /// A context for a run of agent `main` with fresh ids and no session.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            agent: "main".into(),
            session: None,
            channel: None,
            chat_id: None,
            trace_id: TraceId::new(),
            task_id: TaskId::new(),
            run_id: RunId::new(),
            untrusted_sources: Vec::new(),
            memory_provenance: None,
            source: RunSource::Chat,
        }
    }
}

/// Where a tool's output came from, which decides how the model is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provenance {
    /// Written by nanocrab or the user: a status line, the user's own memory.
    Trusted,
    /// Anything else: file contents, command output, the web. `source` names it for the model.
    Untrusted { source: String },
}

/// What a successful call returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub provenance: Provenance,
    /// The call changed an instruction file (a bootstrap file or a skill); the run reports it.
    pub instructions_change: Option<InstructionsChange>,
    /// Images for the model to look at (a browser's screenshot), sent after the call's result
    /// in the same message; a model without vision gets a note in their place.
    pub images: Vec<Image>,
}

impl ToolOutput {
    pub fn trusted(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            provenance: Provenance::Trusted,
            instructions_change: None,
            images: Vec::new(),
        }
    }

    pub fn untrusted(source: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            provenance: Provenance::Untrusted {
                source: source.into(),
            },
            instructions_change: None,
            images: Vec::new(),
        }
    }
}

/// Why a tool call did not succeed. The message goes back to the model as an error result,
/// so it says what was wrong and, where it can, what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments were not the object the tool's schema describes.
    #[error("{0}")]
    InvalidArguments(String),
    #[error("{0}")]
    PathDenied(#[from] PathDenial),
    #[error("{0}")]
    ExecDenied(#[from] Denial),
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is a binary file; read_file only reads text", path.display())]
    BinaryFile { path: PathBuf },
    /// The request cannot be carried out as asked (offset past the end, ambiguous edit...).
    #[error("{0}")]
    Rejected(String),
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error(
        "the command timed out after {seconds} s and was killed with its whole process group; \
         output so far:\n{output}"
    )]
    TimedOut { seconds: String, output: String },
    #[error("the WASM tool `{tool}` {failure}")]
    Wasm { tool: String, failure: GuestFailure },
    /// A tool of an MCP server failed: the server said so, did not answer in time, or is down.
    #[error("{0}")]
    Mcp(String),
}

/// Why one call of a WASM tool failed inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestFailure {
    OutOfFuel {
        fuel: u64,
    },
    OutOfMemory {
        limit_mb: u64,
    },
    TimedOut {
        timeout_ms: u64,
    },
    /// The guest trapped (unreachable, out-of-bounds access, a bad buffer handed to the host).
    Trap(String),
    /// `run` returned something that is not UTF-8 JSON.
    BadResult(String),
    /// The guest returned `{"error": "..."}`.
    Reported(String),
}

impl fmt::Display for GuestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OutOfFuel { fuel } => write!(
                f,
                "ran out of fuel (limit {fuel} per call, `limits.fuel` in its tool.json)"
            ),
            Self::OutOfMemory { limit_mb } => write!(
                f,
                "went over its memory limit of {limit_mb} MiB (`limits.memoryMb` in its tool.json)"
            ),
            Self::TimedOut { timeout_ms } => write!(
                f,
                "ran longer than its wall-time limit of {timeout_ms} ms (`limits.timeoutMs` in \
                 its tool.json) and was stopped"
            ),
            Self::Trap(reason) => write!(f, "trapped: {reason}"),
            Self::BadResult(reason) => write!(f, "returned an unusable result: {reason}"),
            Self::Reported(message) => write!(f, "failed: {message}"),
        }
    }
}

/// A tool as the registry sees it: the definition sent to the model and, for one call, what
/// the call needs and the call itself. Built-in tools implement [`crate::TypedTool`] instead,
/// which parses the arguments into a type; WASM tools take any JSON their manifest describes.
pub trait Tool: Send + Sync {
    fn definition(&self) -> ToolDef;

    /// Reads `input` and works out what the call needs (capabilities, risk) before anything
    /// runs; the registry checks that against the run's grants and then runs
    /// [`PreparedCall::run`], or drops it. An error refuses the call outright.
    fn prepare<'a>(
        &'a self,
        input: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError>;
}

/// One call, checked but not started: nothing of `run` happens until it is awaited.
pub struct PreparedCall<'a> {
    pub invocation: Invocation,
    pub run: Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>,
}

impl<'a> PreparedCall<'a> {
    pub fn new(
        invocation: Invocation,
        run: impl Future<Output = Result<ToolOutput, ToolError>> + Send + 'a,
    ) -> Self {
        Self {
            invocation,
            run: Box::pin(run),
        }
    }
}

/// The tools a [`ToolSource`] has for a turn, once it has them.
pub type SourcedTools<'a> =
    Pin<Box<dyn Future<Output = Vec<std::sync::Arc<dyn Tool>>> + Send + 'a>>;

/// Tools an agent gets from outside its registry, which may take a while to be known: the
/// tools of MCP servers, started when a turn first needs them. The agent asks at the start of
/// every turn and adds them to that turn's tool set.
pub trait ToolSource: Send + Sync {
    /// The tools for a turn starting now. May start what they come from, waiting a bounded
    /// time; what is not ready by then is left out, to be offered in a later turn.
    fn tools(&self) -> SourcedTools<'_>;

    /// The tools known now, without waiting or starting anything.
    fn known_tools(&self) -> Vec<std::sync::Arc<dyn Tool>>;
}
