//! `nanocrab mcp`: an agent's MCP servers, their state and tools, and a tool called by hand.

use super::Env;
use crate::cli::McpCommand;

#[cfg(not(feature = "mcp"))]
pub fn run(_env: &Env, _command: McpCommand) -> anyhow::Result<()> {
    anyhow::bail!("this nanocrab was built without MCP (cargo feature `mcp`)")
}

#[cfg(feature = "mcp")]
pub fn run(env: &Env, command: McpCommand) -> anyhow::Result<()> {
    use anyhow::Context as _;

    let config = env.load_config()?.config;
    let entries = match &command {
        McpCommand::List { agent, .. } | McpCommand::Call { agent, .. } => {
            if config.agents.settings(agent).is_none() {
                anyhow::bail!("no agent `{agent}` in agents.entries");
            }
            let entries = super::agents::mcp_entries(&config, agent);
            if entries.is_empty() {
                anyhow::bail!(
                    "agent `{agent}` has no MCP servers: add them under tools.mcpServers (or \
                     mcpServers) in {}",
                    env.config_path.display()
                );
            }
            entries
        }
        // The scenario's server, as a user would configure it: `{"url": ...}`.
        McpCommand::ConformanceClient { url } => vec![nanocrab_mcp::ServerEntry {
            name: "conformance".to_owned(),
            key: "the conformance scenario's server".to_owned(),
            config: serde_json::from_value(serde_json::json!({ "url": url }))
                .context("the conformance scenario's URL")?,
            problem: None,
        }],
    };
    let source = env.mcp_servers(&config).source(entries);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        match command {
            McpCommand::List { json: true, .. } => {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&source.statuses().await)?
                )?;
                Ok(())
            }
            McpCommand::List { json: false, .. } => {
                for status in source.statuses().await {
                    outln!("{}", describe(&status))?;
                }
                Ok(())
            }
            McpCommand::Call {
                server,
                tool,
                arguments,
                ..
            } => {
                let arguments: serde_json::Value =
                    serde_json::from_str(&arguments).context("the arguments are not JSON")?;
                let result = source.call(&server, &tool, arguments).await?;
                outln!("{}", result.text)?;
                if result.is_error {
                    anyhow::bail!("{tool} of the MCP server `{server}` reported an error");
                }
                Ok(())
            }
            // Each tool called as the agent's turn would call it (through `prepare` and `run`,
            // without the policy), with every required argument: its default, or a plain
            // value of its type.
            McpCommand::ConformanceClient { .. } => {
                use nanocrab_tools::ToolSource as _;
                let workspace = std::env::temp_dir();
                for tool in source.tools().await {
                    let definition = tool.definition();
                    let schema = &definition.parameters;
                    let mut arguments = serde_json::Map::new();
                    let required = schema["required"].as_array().cloned().unwrap_or_default();
                    for name in required.iter().filter_map(|name| name.as_str()) {
                        let property = &schema["properties"][name];
                        let value = match (property.get("default"), property["type"].as_str()) {
                            (Some(default), _) => default.clone(),
                            (None, Some("number" | "integer")) => serde_json::json!(1),
                            (None, Some("boolean")) => serde_json::json!(true),
                            (None, Some("array")) => serde_json::json!([]),
                            (None, Some("object")) => serde_json::json!({}),
                            (None, _) => serde_json::json!("test"),
                        };
                        arguments.insert(name.to_owned(), value);
                    }
                    let ctx = nanocrab_tools::ToolContext::new(&workspace);
                    let outcome = match tool.prepare(serde_json::Value::Object(arguments), &ctx) {
                        Ok(call) => call.run.await,
                        Err(err) => Err(err),
                    };
                    match outcome {
                        Ok(output) => outln!("{}: {}", definition.name, output.text)?,
                        Err(err) => outln!("{}: error: {err}", definition.name)?,
                    }
                }
                Ok(())
            }
        }
    });
    runtime.block_on(env.shutdown_mcp());
    outcome
}

/// One server for a person: what it is, how it is, and what it offers or why it failed.
#[cfg(feature = "mcp")]
fn describe(status: &nanocrab_mcp::ServerStatus) -> String {
    let state = serde_json::to_value(status.state)
        .ok()
        .and_then(|state| state.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut text = format!(
        "{} · {} · {state} · {} tools ({})\n  {}",
        status.name,
        status.transport,
        status.tools.len(),
        status.key,
        status.target
    );
    if !status.tools.is_empty() {
        text.push_str(&format!("\n  tools: {}", status.tools.join(", ")));
    }
    if let Some(error) = &status.error {
        text.push_str(&format!("\n  error: {error}"));
    }
    if let Some(stderr) = &status.stderr {
        text.push_str("\n  stderr:");
        for line in stderr.lines() {
            text.push_str(&format!("\n    {line}"));
        }
    }
    text
}
