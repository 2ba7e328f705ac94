//! `nanocrab heartbeat run [--agent ID]`: the heartbeat runs in the gateway, which has the
//! schedule, the chats replies go to and the last chat each user wrote from; this asks the
//! running gateway (`POST /v1/heartbeat`, with `gateway.auth.token` when set) to fire one now
//! and prints what came of it. Without a gateway it says so and fails: a run here could not
//! deliver its reply, and would race the gateway's own runs when one starts.

use std::time::Duration;

use anyhow::{Context as _, bail};
use nanocrab_config::http::{Timeouts, client_builder};
use nanocrab_gateway::{Delivery, HeartbeatOutcome};
use serde::Deserialize;

use super::Env;

#[derive(Debug, Deserialize)]
struct Answer {
    result: HeartbeatOutcome,
}

#[derive(Debug, Deserialize)]
struct ErrorAnswer {
    error: ErrorBody,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    message: String,
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
    let gateway = &config.gateway;
    // A gateway listening on every address answers on loopback too.
    let host = match gateway.host.as_str() {
        "0.0.0.0" => "127.0.0.1".to_owned(),
        "::" => "[::1]".to_owned(),
        host if host.contains(':') => format!("[{host}]"),
        host => host.to_owned(),
    };
    let base = format!("http://{host}:{}", gateway.port);
    let client = client_builder(Timeouts {
        connect: Duration::from_secs(5),
        // A run lasts as long as its turn.
        read: None,
        total: None,
    })
    .build()?;
    let mut request = client
        .post(format!("{base}/v1/heartbeat"))
        .json(&serde_json::json!({ "agent": agent }));
    if let Some(token) = gateway.auth.token.as_deref().map(str::trim)
        && !token.is_empty()
    {
        request = request.bearer_auth(token);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (status, body) = runtime.block_on(async {
        let response = request.send().await.map_err(|err| {
            if err.is_connect() {
                anyhow::anyhow!(
                    "no gateway answers at {base}: start `nanocrab gateway` first (the heartbeat runs in the gateway, which has the chats its reply goes to)"
                )
            } else {
                anyhow::Error::new(err).context(format!("cannot ask the gateway at {base}"))
            }
        })?;
        let status = response.status();
        let body = response.bytes().await?;
        anyhow::Ok((status, body))
    })?;
    if !status.is_success() {
        let why = serde_json::from_slice::<ErrorAnswer>(&body)
            .map(|e| e.error.message)
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
        bail!("the gateway at {base} refused: {status}: {why}");
    }
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
        HeartbeatOutcome::Ran(Delivery::NotSent { text, reason }) => {
            outln!("{agent}: not sent ({reason}):\n{text}")?;
        }
        HeartbeatOutcome::Failed { error } => bail!("{agent}: the heartbeat failed: {error}"),
    }
    Ok(())
}
