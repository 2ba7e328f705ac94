//! The agent: context building, the tool-calling loop, and the workspace templates.

mod agent;
mod budget;
mod compaction;
mod consolidation;
mod context;
pub mod heartbeat;
pub mod hooks;
mod housekeeping;
mod retrieval;
pub mod workspace;

pub use agent::{
    Agent, AgentError, AgentSettings, Compressed, HELP_TEXT, PromptPreview, RagMode, ToolRefresh,
    TurnOutcome, UserInput,
};
pub use consolidation::{Consolidation, ConsolidationError, ConsolidationReport};
pub use context::{ChannelInfo, ContextBuilder, PromptMode, RuntimeInfo};
pub use housekeeping::HousekeepingError;
pub use retrieval::{IndexRetriever, MemoryRetrieval, RetrievalError, RetrievedPassage, Retriever};
