use std::sync::Arc;

use async_trait::async_trait;
use nanocrab_policy::PathGuard;
use nanocrab_schema::ToolDef;
use serde::Deserialize;
use serde_json::json;

use crate::arguments::parse_arguments;
use crate::atomic_write::write_atomically;
use crate::tool::{Tool, ToolContext, ToolError};

pub struct WriteFileTool {
    guard: Arc<PathGuard>,
}

impl WriteFileTool {
    pub fn new(guard: Arc<PathGuard>) -> Self {
        Self { guard }
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

    async fn call(&self, input: serde_json::Value, _: &ToolContext) -> Result<String, ToolError> {
        let args: Arguments = parse_arguments(
            "write_file",
            input,
            "`path` (string) and `content` (string)",
        )?;
        let path = self.guard.check_write(&args.path)?;
        write_atomically(&path, args.content.as_bytes())?;
        Ok(format!(
            "Wrote {} bytes to {}",
            args.content.len(),
            path.display()
        ))
    }
}
