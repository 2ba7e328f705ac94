//! Plain data shared by every nanocrab crate.
//!
//! Nothing here does I/O. The types are the vocabulary the rest of the workspace speaks:
//! one internal message model ([`LlmMessage`] made of [`ContentBlock`]s) that every provider
//! adapter translates to and from its own wire format, the tool-calling types, the
//! [`AgentEvent`] stream a run emits, and the ids that tie a run together.

mod channel_message;
mod content_block_de;
mod event;
mod ids;
mod message;
mod run_source;
mod session_key;
mod tool;
mod usage;

pub use channel_message::{
    ChatRef, ChatType, InboundMessage, Media, MediaKind, OutboundMessage, ReplyTo, Sender,
};
pub use event::{AgentEvent, InstructionsChange, RetrievedSource};
pub use ids::{RunId, StepId, TaskId, TraceId};
pub use message::{ContentBlock, Image, LlmMessage, Role, StopReason};
pub use run_source::{RunSource, RunSourceError};
pub use session_key::{SessionKey, SessionKeyError};
pub use tool::{ToolCall, ToolDef, ToolResult};
pub use usage::Usage;
