use std::sync::Arc;

use nanocrab_schema::{ToolCall, ToolDef, ToolResult};

use crate::tool::{Tool, ToolContext};

/// The tools one agent run may call, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a later tool with the same name replaces the earlier one.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.definition().name;
        self.tools.retain(|t| t.definition().name != name);
        self.tools.push(tool);
    }

    /// Definitions in registration order, as sent to the model.
    pub fn definitions(&self) -> Vec<ToolDef> {
        self.tools.iter().map(|t| t.definition()).collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.definition().name).collect()
    }

    /// Runs one call. Every failure (unknown tool, bad arguments, denied by policy, the tool's
    /// own error) becomes an error result for the model, never a dropped call.
    pub async fn execute(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let Some(tool) = self.tools.iter().find(|t| t.definition().name == call.name) else {
            return ToolResult::error(
                &call.id,
                format!(
                    "Error: unknown tool '{}'. Available tools: {}",
                    call.name,
                    self.names().join(", ")
                ),
            );
        };
        match tool.call(call.input.clone(), ctx).await {
            Ok(output) => ToolResult::ok(&call.id, output),
            Err(err) => ToolResult::error(&call.id, format!("Error: {err}")),
        }
    }
}
