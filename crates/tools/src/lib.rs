//! Tools the agent can call.

mod tool;

pub use tool::{Tool, ToolContext, ToolError};
