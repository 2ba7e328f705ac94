//! Tools the agent can call.

mod registry;
mod tool;

pub use registry::ToolRegistry;
pub use tool::{Tool, ToolContext, ToolError};
