//! `nanocrab heartbeat run [--agent ID]`: the heartbeat runs in the gateway, which has the
//! schedule, the chats replies go to and the last chat each user wrote from; this asks the
//! running gateway (`POST /v1/heartbeat`, with `gateway.auth.token` when set) to fire one now
//! and prints what came of it. Without a gateway it says so and fails: a run here could not
//! deliver its reply, and would race the gateway's own runs when one starts.

use anyhow::{Context as _, bail};
use nanocrab_gateway::{Delivery, HeartbeatOutcome};
use serde::Deserialize;

use super::Env;
use super::gateway_api::{ApiError, GatewayApi};

#[derive(Debug, Deserialize)]
struct Answer {
    result: HeartbeatOutcome,
}

pub fn run(env: &Env, agent: &str) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    config.require("gateway")?;
    if !config.agents.ids().any(|id| id == agent) {
        bail!(
            "no agent `{agent}` in {}; known: {}",
            env.config_path.display(),
            config.agents.ids().collect::<Vec<_>>().join(", ")
        );
    }
    let api = GatewayApi::new(&config.gateway)?;
    let base = api.base().to_owned();
    let body = match api.post("/v1/heartbeat", &serde_json::json!({ "agent": agent })) {
        Ok(body) => body,
        Err(ApiError::NotRunning { base }) => bail!(
            "no gateway answers at {base}: start `nanocrab gateway` first (the heartbeat runs in the gateway, which has the chats its reply goes to)"
        ),
        Err(err @ (ApiError::Request { .. } | ApiError::Refused { .. })) => return Err(err.into()),
    };
    let answer: Answer = serde_json::from_slice(&body).with_context(|| {
        format!("the gateway at {base} gave an answer this nanocrab does not read")
    })?;
    match answer.result {
        HeartbeatOutcome::Busy => {
            outln!("{agent}: the previous heartbeat run is still going; nothing started")?;
        }
        HeartbeatOutcome::NoTask => {
            outln!("{agent}: HEARTBEAT.md holds no task; no model asked")?;
        }
        HeartbeatOutcome::NothingDue => {
            outln!("{agent}: the housekeeping model found nothing due; the agent was not asked")?;
        }
        HeartbeatOutcome::Ran(Delivery::Silent) => {
            outln!("{agent}: nothing needs attention (HEARTBEAT_OK); nothing sent")?;
        }
        HeartbeatOutcome::Ran(Delivery::Sent { chat, text }) => {
            outln!(
                "{agent}: sent to {} chat {}:\n{text}",
                chat.channel,
                chat.chat_id
            )?;
        }
        HeartbeatOutcome::Ran(Delivery::Logged { text }) => {
            outln!("{agent}: heartbeat.target is none, so nothing was sent; the reply:\n{text}")?;
        }
        HeartbeatOutcome::Ran(Delivery::NotSent { text, reason }) => {
            outln!("{agent}: not sent ({reason}):\n{text}")?;
        }
        HeartbeatOutcome::Failed { error } => bail!("{agent}: the heartbeat failed: {error}"),
    }
    Ok(())
}
