//! `nanocrab subagents list|show|cancel`: list and show read `state/subagents.jsonl` (so they
//! work with the gateway stopped); cancel asks the running gateway, which runs them
//! (`POST /v1/subagents/{id}/cancel`).

use anyhow::{Context as _, bail};
use nanocrab_gateway::{SubagentRecord, read_subagents};

use super::Env;
use super::gateway_api::{ApiError, GatewayApi};
use crate::cli::SubagentsCommand;

pub fn run(env: &Env, command: SubagentsCommand) -> anyhow::Result<()> {
    let path = env.paths.subagents_file();
    match command {
        SubagentsCommand::List { json } => {
            let records = read_subagents(&path)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&records)?)?;
            } else if records.is_empty() {
                outln!("No subagents yet.")?;
            } else {
                for record in &records {
                    outln!("{}", record.line())?;
                }
            }
            Ok(())
        }
        SubagentsCommand::Show { id, json } => {
            let record = find(&read_subagents(&path)?, &id)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&record)?)?;
            } else {
                outln!("{}", record.details(false))?;
            }
            Ok(())
        }
        SubagentsCommand::Cancel { id } => {
            let record = find(&read_subagents(&path)?, &id)?;
            if record.state.is_over() {
                outln!("{id} has already ended ({})", record.state.word())?;
                return Ok(());
            }
            let config = env.load_config()?.config;
            let api = GatewayApi::new(&config.gateway)?;
            match api.post(
                &format!("/v1/subagents/{id}/cancel"),
                &serde_json::json!({}),
            ) {
                Ok(_) => outln!("cancelled {id}; its end is announced to its parent")?,
                Err(ApiError::NotRunning { base }) => bail!(
                    "no gateway answers at {base}: subagents run in `nanocrab gateway`, and a \
                     stopped gateway runs none"
                ),
                Err(err @ (ApiError::Request { .. } | ApiError::Refused { .. })) => {
                    return Err(err.into());
                }
            }
            Ok(())
        }
    }
}

/// Subagent `id` of `records`, or an error saying how to find one.
fn find(records: &[SubagentRecord], id: &str) -> anyhow::Result<SubagentRecord> {
    records
        .iter()
        .find(|r| r.id == id)
        .cloned()
        .with_context(|| format!("no subagent `{id}`; `nanocrab subagents list` shows them"))
}
