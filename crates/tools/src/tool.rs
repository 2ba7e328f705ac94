use std::path::PathBuf;

use async_trait::async_trait;
use nanocrab_schema::ToolDef;

/// Per-run facts a tool may need; what a tool may *do* is fixed when it is constructed
/// (its policy), not passed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    /// The agent's workspace; relative paths resolve against it.
    pub workspace: PathBuf,
}

/// Why a tool call did not succeed. The message goes back to the model as an error result,
/// so it says what was wrong and, where it can, what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    Placeholder(String),
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn definition(&self) -> ToolDef;

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError>;
}
