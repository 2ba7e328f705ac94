use std::path::PathBuf;

use async_trait::async_trait;
use nanocrab_policy::{Denial, PathDenial};
use nanocrab_schema::ToolDef;

/// Per-run facts a tool may need; what a tool may *do* is fixed when it is constructed
/// (its policy), not passed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    /// The agent's workspace; relative paths resolve against it.
    pub workspace: PathBuf,
}

impl ToolContext {
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
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
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn definition(&self) -> ToolDef;

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError>;
}
