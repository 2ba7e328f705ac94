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
    let agent = match &command {
        McpCommand::List { agent, .. } | McpCommand::Call { agent, .. } => agent,
    };
    if config.agents.settings(agent).is_none() {
        anyhow::bail!("no agent `{agent}` in agents.entries");
    }
    let entries = super::agents::mcp_entries(&config, agent);
    if entries.is_empty() {
        anyhow::bail!(
            "agent `{agent}` has no MCP servers: add them under tools.mcpServers (or mcpServers) \
             in {}",
            env.config_path.display()
        );
    }
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
