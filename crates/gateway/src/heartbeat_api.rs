//! The heartbeat's HTTP side: `POST /v1/heartbeat`, which `nanocrab heartbeat run` calls.

use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;

use crate::heartbeat::Heartbeats;
use crate::server::ServerState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunBody {
    /// Default: the default agent.
    #[serde(default)]
    agent: Option<String>,
}

/// `POST /v1/heartbeat` (`{"agent": "main"}`): fires that agent's heartbeat now and answers
/// with its [`HeartbeatOutcome`](crate::HeartbeatOutcome) once it is done; mounted behind the gateway's token.
pub fn heartbeat_routes(heartbeats: Heartbeats) -> Router<ServerState> {
    Router::new().route(
        "/v1/heartbeat",
        post(move |Json(body): Json<RunBody>| {
            let heartbeats = heartbeats.clone();
            async move {
                let agent = body
                    .agent
                    .unwrap_or_else(|| nanocrab_config::DEFAULT_AGENT_ID.to_owned());
                match heartbeats.run_now(&agent).await {
                    Ok(outcome) => (
                        StatusCode::OK,
                        Json(serde_json::json!({ "agent": agent, "result": outcome })),
                    ),
                    Err(err) => (
                        StatusCode::NOT_FOUND,
                        Json(serde_json::json!({ "error": { "message": err.to_string() } })),
                    ),
                }
            }
        }),
    )
}
