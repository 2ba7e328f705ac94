use std::sync::Arc;

use nanocrab_policy::{Invocation, PathGuard};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::access::reading;
use crate::arguments::TypedTool;
use crate::tool::{ToolContext, ToolError, ToolOutput};

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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    path: String,
}

impl TypedTool for ListDirTool {
    type Args = ListDirArgs;

    const NAME: &'static str = "list_dir";

    fn description(&self) -> String {
        "List a directory; subdirectories end with /.".into()
    }

    fn invocation(&self, args: &ListDirArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        Ok(reading(
            &self.guard,
            "list",
            self.guard.check_read(&args.path)?,
        ))
    }

    async fn call(&self, args: ListDirArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
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
