use std::io::{BufRead as _, BufReader};
use std::sync::Arc;

use nanocrab_policy::{Invocation, PathGuard};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::access::reading;
use crate::arguments::TypedTool;
use crate::note_marks::{NoteOrigins, note_name};
use crate::tool::{ToolContext, ToolError, ToolOutput};

/// Lines returned when the model gives no `limit`.
pub const DEFAULT_LINE_LIMIT: usize = 2000;
/// Bytes of content returned by one call, whatever the limit.
pub const MAX_READ_BYTES: usize = 200 * 1024;

pub struct ReadFileTool {
    guard: Arc<PathGuard>,
}

impl ReadFileTool {
    pub fn new(guard: Arc<PathGuard>) -> Self {
        Self { guard }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    path: String,
    /// 1-based first line
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// max lines
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

impl TypedTool for ReadFileTool {
    type Args = ReadFileArgs;

    const NAME: &'static str = "read_file";

    fn description(&self) -> String {
        format!(
            "Read a text file. Returns up to {DEFAULT_LINE_LIMIT} lines; use offset/limit for more."
        )
    }

    fn invocation(&self, args: &ReadFileArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        Ok(reading(
            &self.guard,
            "read",
            self.guard.check_read(&args.path)?,
        ))
    }

    async fn call(&self, args: ReadFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let offset = args.offset.unwrap_or(1);
        let limit = args.limit.unwrap_or(DEFAULT_LINE_LIMIT);
        if offset == 0 || limit == 0 {
            return Err(ToolError::InvalidArguments(
                "offset and limit must be at least 1 (offset is the 1-based first line)".into(),
            ));
        }
        let path = self.guard.check_read(&args.path)?;
        let io = |action| {
            let path = path.clone();
            move |source| ToolError::Io {
                action,
                path,
                source,
            }
        };
        let file = std::fs::File::open(&path).map_err(io("read"))?;
        if file.metadata().map_err(io("read"))?.is_dir() {
            return Err(ToolError::Rejected(format!(
                "{} is a directory; use list_dir",
                path.display()
            )));
        }
        let mut reader = BufReader::new(file);
        if reader.fill_buf().map_err(io("read"))?.contains(&0) {
            return Err(ToolError::BinaryFile { path });
        }
        let mut content = String::new();
        let mut line = Vec::new();
        let mut line_number = 0;
        let mut last_shown = 0;
        let mut byte_capped = false;
        loop {
            line.clear();
            let read = reader.read_until(b'\n', &mut line).map_err(io("read"))?;
            if read == 0 {
                break;
            }
            line_number += 1;
            if line_number < offset || line_number >= offset + limit || byte_capped {
                continue;
            }
            if line.contains(&0) {
                return Err(ToolError::BinaryFile { path });
            }
            let text = String::from_utf8_lossy(&line);
            if content.len() + text.len() > MAX_READ_BYTES {
                byte_capped = true;
                continue;
            }
            content.push_str(&text);
            last_shown = line_number;
        }
        let total = line_number;
        if total == 0 {
            return Ok(ToolOutput::trusted("(empty file)"));
        }
        if offset > total {
            return Err(ToolError::Rejected(format!(
                "offset {offset} is past the end of {} ({total} lines)",
                path.display()
            )));
        }
        if last_shown == 0 {
            return Err(ToolError::Rejected(format!(
                "line {offset} of {} is longer than {} KB; read_file cannot show it",
                path.display(),
                MAX_READ_BYTES / 1024
            )));
        }
        if last_shown < total {
            if !content.ends_with('\n') {
                content.push('\n');
            }
            let why = if byte_capped {
                format!("output is capped at {} KB", MAX_READ_BYTES / 1024)
            } else {
                format!("limit {limit}")
            };
            content.push_str(&format!(
                "\n[Showing lines {offset}-{last_shown} of {total} ({why}). Call read_file with \
                 offset={} to read more.]",
                last_shown + 1
            ));
        }
        // The user's and the agent's notes are theirs, unless written from untrusted text.
        if let Some(note) = note_name(self.guard.workspace(), &path) {
            return Ok(
                match NoteOrigins::load(ctx.memory_provenance.as_ref()).note_source(&note) {
                    None => ToolOutput::trusted(content),
                    Some(origin) => ToolOutput::untrusted(format!("read_file {origin}"), content),
                },
            );
        }
        // A skill's instructions are the user's, like AGENTS.md: in the workspace a tool's
        // write to them waits for a human, elsewhere no tool can write them. Fenced as data,
        // the model would be told not to follow the skill the prompt told it to read. The
        // skill's other files stay data.
        if self.guard.is_skill_file(&path) {
            return Ok(ToolOutput::trusted(content));
        }
        Ok(ToolOutput::untrusted(
            format!("read_file {}", path.display()),
            content,
        ))
    }
}
