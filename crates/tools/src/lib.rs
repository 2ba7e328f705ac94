//! Tools the agent can call, and the built-in set: read_file, write_file, edit_file,
//! list_dir and exec, each checked by nanocrab-policy before it touches anything, then the
//! tools its caller adds (nanocrab-memory's memory_search and memory_get); with the `wasm`
//! feature, custom WASM tools from `workspace/tools/`. Past `tools.deferAbove` the extensions'
//! tools are held back for `tool_search` to find.

mod access;
mod arguments;
mod atomic_write;
mod builtin;
mod cron;
mod edit_file;
mod exec;
mod exec_sandbox;
mod list_dir;
mod memory_provenance;
mod message;
mod note_marks;
mod process_group;
mod read_file;
mod registry;
mod spawn;
mod tool;
mod tool_search;
mod untrusted;
#[cfg(feature = "wasm")]
pub mod wasm;
mod workspace_history;
mod write_file;

pub use access::reading;
pub use arguments::{TypedTool, parameters};
pub use builtin::{ToolSetupError, builtin_registry, grants_from_config};
pub use cron::{CronAction, CronArgs, CronJobs, CronRequest, CronTool};
pub use edit_file::EditFileTool;
pub use exec::{ExecTool, MAX_OUTPUT_CHARS, PASSED_ENV_VARS, command_env};
pub use exec_sandbox::{ExecSandbox, SandboxLauncher};
pub use list_dir::{ListDirTool, MAX_ENTRIES};
pub use memory_provenance::{Mark, MemoryProvenance, NoteMark, ProvenanceEntry, ProvenanceError};
pub use message::{
    ChatAddress, ChatMessages, MAX_FILE_BYTES, MessageArgs, MessageRequest, MessageTool, NO_REPLY,
    Sending,
};
pub use note_marks::{NoteOrigins, note_name};
pub use process_group::ProcessGroup;
pub use read_file::{DEFAULT_LINE_LIMIT, MAX_READ_BYTES, ReadFileTool};
pub use registry::{
    CallGate, DEFAULT_APPROVAL_TIMEOUT, Executed, SkillGrants, ToolPolicy, ToolRegistry,
};
pub use spawn::{
    AgentTool, Awaited, ParentRun, SpawnArgs, SpawnRequest, SpawnTool, Subagents, SubagentsAction,
    SubagentsArgs, SubagentsTool,
};
pub use tool::{
    GuestFailure, PreparedCall, Provenance, SourcedTools, Tool, ToolContext, ToolError, ToolOutput,
    ToolSource,
};
pub use tool_search::{TOOL_SEARCH, ToolSearch, ToolSearchArgs, deferred_sources};
pub use untrusted::{UNTRUSTED_TAG, fenced_sources, wrap_untrusted};
pub use workspace_history::{Change, ContentDigest, HistoryError, Version, WorkspaceHistory};
