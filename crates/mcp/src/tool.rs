//! A tool of an MCP server as the agent's registry sees it: offered as `<server>__<tool>`,
//! needing the capability `mcp:<server>:<tool>`, its output fenced as untrusted.

use std::sync::Arc;

use nanocrab_policy::{Capability, Invocation, Risk};
use nanocrab_schema::ToolDef;
use nanocrab_tools::{PreparedCall, Tool, ToolContext, ToolError, ToolOutput, wrap_untrusted};

use crate::server::{Offered, Server};

/// How much of the arguments an approval question shows.
const SUMMARY_ARGUMENT_CHARS: usize = 200;

pub(crate) struct McpTool {
    pub(crate) server: Arc<Server>,
    pub(crate) offered: Offered,
}

impl Tool for McpTool {
    fn definition(&self) -> ToolDef {
        self.offered.definition.clone()
    }

    fn prepare<'a>(
        &'a self,
        input: serde_json::Value,
        _ctx: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let arguments = match input {
            serde_json::Value::Object(arguments) => Some(arguments),
            serde_json::Value::Null => None,
            serde_json::Value::Bool(_)
            | serde_json::Value::Number(_)
            | serde_json::Value::String(_)
            | serde_json::Value::Array(_) => {
                return Err(ToolError::InvalidArguments(format!(
                    "the arguments of {} must be a JSON object",
                    self.offered.name
                )));
            }
        };
        let shown = arguments
            .as_ref()
            .map(|a| serde_json::Value::Object(a.clone()).to_string())
            .unwrap_or_else(|| "{}".to_owned());
        let shown = match shown.char_indices().nth(SUMMARY_ARGUMENT_CHARS) {
            Some((cut, _)) => format!("{}…", &shown[..cut]),
            None => shown,
        };
        let invocation = Invocation::new(
            Risk::Guarded,
            format!(
                "call {} of the MCP server {} with {shown}",
                self.offered.tool, self.server.name
            ),
            vec![Capability::Mcp(format!(
                "{}:{}",
                self.server.name, self.offered.tool
            ))],
        );
        Ok(PreparedCall::new(invocation, async move {
            let name = &self.offered.name;
            let source = format!("mcp {name}");
            match self.server.call(name, &self.offered.tool, arguments).await {
                Ok(rendered) if !rendered.is_error => {
                    Ok(ToolOutput::untrusted(source, rendered.text))
                }
                Ok(rendered) => Err(ToolError::Mcp(format!(
                    "{name} reported an error:\n{}",
                    wrap_untrusted(&source, &rendered.text)
                ))),
                Err(message) => Err(ToolError::Mcp(message)),
            }
        }))
    }
}
