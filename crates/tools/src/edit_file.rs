use std::sync::Arc;

use nanocrab_policy::{Invocation, PathGuard, Risk};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::access::writing;
use crate::arguments::TypedTool;
use crate::note_marks::mark_before_write;
use crate::tool::{ToolContext, ToolError, ToolOutput};
use crate::workspace_history::{WorkspaceHistory, preview, write_recorded};

pub struct EditFileTool {
    guard: Arc<PathGuard>,
    /// Where what a change to an instruction file replaced is kept; `None` keeps nothing.
    history: Option<WorkspaceHistory>,
}

impl EditFileTool {
    pub fn new(guard: Arc<PathGuard>, history: Option<WorkspaceHistory>) -> Self {
        Self { guard, history }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    path: String,
    old_text: String,
    new_text: String,
}

impl TypedTool for EditFileTool {
    type Args = EditFileArgs;

    const NAME: &'static str = "edit_file";

    fn description(&self) -> String {
        "Replace old_text with new_text in a file. old_text must match exactly once.".into()
    }

    fn invocation(&self, args: &EditFileArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        let mut invocation = writing(&self.guard, "edit", self.guard.check_write(&args.path)?);
        if invocation.risk != Risk::Safe {
            invocation.summary = format!(
                "{}: {} becomes {}",
                invocation.summary,
                preview(&args.old_text),
                preview(&args.new_text)
            );
        }
        Ok(invocation)
    }

    async fn call(&self, args: EditFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.old_text.is_empty() {
            return Err(ToolError::InvalidArguments(
                "old_text must not be empty; use write_file to create or replace a whole file"
                    .into(),
            ));
        }
        let path = self.guard.check_write(&args.path)?;
        let bytes = std::fs::read(&path).map_err(|source| ToolError::Io {
            action: "read",
            path: path.clone(),
            source,
        })?;
        let content =
            String::from_utf8(bytes).map_err(|_| ToolError::BinaryFile { path: path.clone() })?;
        match content.matches(&args.old_text).count() {
            1 => {}
            0 => {
                let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
                let hint = if collapse(&content).contains(&collapse(&args.old_text)) {
                    " It does match if whitespace is ignored: copy the exact indentation and \
                     line breaks from read_file."
                } else {
                    " Read the file again and copy the text exactly."
                };
                return Err(ToolError::Rejected(format!(
                    "old_text was not found in {}.{hint}",
                    path.display()
                )));
            }
            count => {
                return Err(ToolError::Rejected(format!(
                    "old_text appears {count} times in {}; include more surrounding text so it \
                     matches exactly once",
                    path.display()
                )));
            }
        }
        let edited = content.replacen(&args.old_text, &args.new_text, 1);
        mark_before_write(ctx, self.guard.workspace(), &path)?;
        let change = write_recorded(
            &self.guard,
            self.history.as_ref(),
            &path,
            edited.as_bytes(),
            "edit_file",
            ctx,
        )?;
        Ok(ToolOutput {
            instructions_change: change,
            ..ToolOutput::trusted(format!("Edited {}", path.display()))
        })
    }
}
