use std::path::Path;
use std::sync::Arc;

use nanocrab_policy::{Invocation, PathGuard};
use nanocrab_tools::{
    NoteOrigins, ToolContext, ToolError, ToolOutput, TypedTool, note_name, reading,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::documents::document_text;

/// Lines returned when no end is given.
const DEFAULT_LINES: usize = 60;
/// Lines returned at most by one call.
const MAX_LINES: usize = 400;

/// `memory_get(path, start_line?, end_line?)`: lines of a memory file or document, as
/// `memory_search` points at them. Only `memory/` and `knowledge/` of the workspace.
pub struct MemoryGetTool {
    guard: Arc<PathGuard>,
}

impl MemoryGetTool {
    pub fn new(guard: Arc<PathGuard>) -> Self {
        Self { guard }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryGetArgs {
    /// e.g. memory/MEMORY.md
    path: String,
    /// 1-based, default 1
    #[schemars(range(min = 1))]
    start_line: Option<usize>,
    /// inclusive
    #[schemars(range(min = 1))]
    end_line: Option<usize>,
}

impl TypedTool for MemoryGetTool {
    type Args = MemoryGetArgs;

    const NAME: &'static str = "memory_get";

    fn description(&self) -> String {
        "Read lines of a memory file or document (a path:lines from memory_search).".into()
    }

    fn invocation(&self, args: &MemoryGetArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        Ok(reading(
            &self.guard,
            "read",
            self.guard.check_read(&args.path)?,
        ))
    }

    async fn call(&self, args: MemoryGetArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let start = args.start_line.unwrap_or(1);
        let end = args.end_line.unwrap_or(start + DEFAULT_LINES - 1);
        if start == 0 || end < start {
            return Err(ToolError::InvalidArguments(
                "start_line must be at least 1 and end_line at least start_line".into(),
            ));
        }
        if args.path.starts_with("sessions/") {
            return Err(ToolError::Rejected(
                "transcripts are not read with memory_get: the memory_search snippet shows what was said there".into(),
            ));
        }
        let path = self.guard.check_read(&args.path)?;
        let workspace = self.guard.workspace();
        let inside = |folder: &str| path.starts_with(workspace.join(folder));
        if !(inside("memory") || inside("knowledge")) {
            return Err(ToolError::Rejected(format!(
                "{} is not a memory file or document: memory_get reads memory/ and knowledge/ (use read_file for other files)",
                args.path
            )));
        }
        let bytes = std::fs::read(&path).map_err(|source| ToolError::Io {
            action: "read",
            path: path.clone(),
            source,
        })?;
        // The lines a search pointed at: HTML and PDF as the index read them, as their text.
        let text = document_text(&path, &bytes)
            .map_err(|err| ToolError::Rejected(format!("{}: {err}", args.path)))?;
        let total = text.lines().count();
        if start > total {
            return Err(ToolError::Rejected(format!(
                "{} has {total} lines; start_line {start} is past the end",
                args.path
            )));
        }
        let end = end.min(total).min(start + MAX_LINES - 1);
        let lines: Vec<&str> = text.lines().skip(start - 1).take(end - start + 1).collect();
        let shown = Path::new(&args.path).display();
        let more = if end < total {
            format!("\n[lines {}-{total} not shown]", end + 1)
        } else {
            String::new()
        };
        let text = format!("{shown}:{start}-{end}\n{}{more}", lines.join("\n"));
        // Documents in knowledge/ come from elsewhere; memory/ is the user's and the agent's,
        // unless a note was written from untrusted text.
        let origin = match note_name(workspace, &path) {
            Some(note) => NoteOrigins::load(ctx.memory_provenance.as_ref()).note_source(&note),
            None => Some(args.path.clone()),
        };
        Ok(match origin {
            None => ToolOutput::trusted(text),
            Some(origin) => ToolOutput::untrusted(format!("memory_get {origin}"), text),
        })
    }
}
