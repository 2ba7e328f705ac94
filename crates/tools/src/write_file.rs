use std::sync::Arc;

use async_trait::async_trait;
use nanocrab_policy::{Invocation, PathGuard, Risk};
use nanocrab_schema::ToolDef;
use serde::Deserialize;
use serde_json::json;

use crate::access::writing;
use crate::arguments::parse_arguments;
use crate::note_marks::mark_before_write;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};
use crate::workspace_history::{WorkspaceHistory, preview, write_recorded};

const EXPECTED: &str = "`path` (string) and `content` (string)";

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteFileTool {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "write_file".into(),
            description: "Write a file, replacing it; creates parent directories.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"]
            }),
        }
    }

    fn invocation(
        &self,
        input: &serde_json::Value,
        _: &ToolContext,
    ) -> Result<Invocation, ToolError> {
        let args: Arguments = parse_arguments("write_file", input.clone(), EXPECTED)?;
        let mut invocation = writing(&self.guard, "write", self.guard.check_write(&args.path)?);
        if invocation.risk != Risk::Safe {
            invocation.summary = format!("{}: {}", invocation.summary, preview(&args.content));
        }
        Ok(invocation)
    }

    async fn call(
        &self,
        input: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Arguments = parse_arguments("write_file", input, EXPECTED)?;
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
