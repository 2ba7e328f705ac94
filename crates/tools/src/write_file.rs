use std::sync::Arc;

use nanocrab_policy::{Invocation, PathGuard, Risk};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::access::writing;
use crate::arguments::TypedTool;
use crate::note_marks::mark_before_write;
use crate::tool::{ToolContext, ToolError, ToolOutput};
use crate::workspace_history::{WorkspaceHistory, preview, write_recorded};

pub struct WriteFileTool {
    guard: Arc<PathGuard>,
    /// Where what a change to an instruction file replaced is kept; `None` keeps nothing.
    history: Option<WorkspaceHistory>,
}

impl WriteFileTool {
    pub fn new(guard: Arc<PathGuard>, history: Option<WorkspaceHistory>) -> Self {
        Self { guard, history }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    path: String,
    content: String,
}

impl TypedTool for WriteFileTool {
    type Args = WriteFileArgs;

    const NAME: &'static str = "write_file";

    fn description(&self) -> String {
        "Write a file, replacing it; creates parent directories.".into()
    }

    fn invocation(&self, args: &WriteFileArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        let mut invocation = writing(&self.guard, "write", self.guard.check_write(&args.path)?);
        if invocation.risk != Risk::Safe {
            invocation.summary = format!("{}: {}", invocation.summary, preview(&args.content));
        }
        Ok(invocation)
    }

    async fn call(&self, args: WriteFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let path = self.guard.check_write(&args.path)?;
        mark_before_write(ctx, self.guard.workspace(), &path)?;
        let change = write_recorded(
            &self.guard,
            self.history.as_ref(),
            &path,
            args.content.as_bytes(),
            "write_file",
            ctx,
        )?;
        Ok(ToolOutput {
            instructions_change: change,
            ..ToolOutput::trusted(format!(
                "Wrote {} bytes to {}",
                args.content.len(),
                path.display()
            ))
        })
    }
}
