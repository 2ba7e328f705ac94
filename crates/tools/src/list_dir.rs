use std::sync::Arc;

use async_trait::async_trait;
use nanocrab_policy::{Invocation, PathGuard};
use nanocrab_schema::ToolDef;
use serde::Deserialize;
use serde_json::json;

use crate::access::reading;
use crate::arguments::parse_arguments;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Entries listed by one call; a larger directory gets a note.
pub const MAX_ENTRIES: usize = 500;

pub struct ListDirTool {
    guard: Arc<PathGuard>,
}

impl ListDirTool {
    pub fn new(guard: Arc<PathGuard>) -> Self {
        Self { guard }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    path: String,
}

#[async_trait]
impl Tool for ListDirTool {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "list_dir".into(),
            description: "List a directory; subdirectories end with /.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            }),
        }
    }

    fn invocation(
        &self,
        input: &serde_json::Value,
        _: &ToolContext,
    ) -> Result<Invocation, ToolError> {
        let args: Arguments = parse_arguments("list_dir", input.clone(), "`path` (string)")?;
        Ok(reading(
            &self.guard,
            "list",
            self.guard.check_read(&args.path)?,
        ))
    }

    async fn call(
        &self,
        input: serde_json::Value,
        _: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Arguments = parse_arguments("list_dir", input, "`path` (string)")?;
        let path = self.guard.check_read(&args.path)?;
        let io = |source| ToolError::Io {
            action: "list",
            path: path.clone(),
            source,
        };
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(io)? {
            let entry = entry.map_err(io)?;
            let mut name = entry.file_name().to_string_lossy().into_owned();
            // Follows symlinks, so a link to a directory is shown as one.
            if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
                name.push('/');
            }
            entries.push(name);
        }
        if entries.is_empty() {
            return Ok(ToolOutput::trusted("(empty directory)"));
        }
        entries.sort();
        let total = entries.len();
        entries.truncate(MAX_ENTRIES);
        let mut listing = entries.join("\n");
        if total > MAX_ENTRIES {
            listing.push_str(&format!(
                "\n[... {} more entries; showing the first {MAX_ENTRIES} of {total}. Use exec \
                 with ls or grep to narrow it down.]",
                total - MAX_ENTRIES
            ));
        }
        // File names are whatever whoever made the files chose.
        Ok(ToolOutput::untrusted(
            format!("list_dir {}", path.display()),
            listing,
        ))
    }
}
