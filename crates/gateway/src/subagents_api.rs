//! The subagents' HTTP side, which `nanocrab subagents cancel` calls: `GET /v1/subagents`
//! lists them, `POST /v1/subagents/{id}/cancel` stops one.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::server::ServerState;
use crate::subagents::{SubagentControl, SubagentError};

/// `GET /v1/subagents`: `{"subagents": [record...]}`, oldest first.
/// `POST /v1/subagents/{id}/cancel`: stops it (its end is recorded and announced as
/// cancelled) and answers with its record as it was; `404` for an unknown id. Mounted behind
/// the gateway's token.
pub fn subagent_routes(control: SubagentControl) -> Router<ServerState> {
    let lister = control.clone();
    Router::new()
        .route(
            "/v1/subagents",
            get(move || {
                let subagents = lister.all();
                async move { Json(serde_json::json!({ "subagents": subagents })) }
            }),
        )
        .route(
            "/v1/subagents/{id}/cancel",
            post(move |Path(id): Path<String>| {
                let answer = match control.cancel_any(&id) {
                    Ok(record) => (StatusCode::OK, Json(serde_json::json!(record))),
                    Err(err) => {
                        let status = match &err {
                            SubagentError::Unknown { .. } => StatusCode::NOT_FOUND,
                            SubagentError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
                        };
                        (
                            status,
                            Json(serde_json::json!({ "error": { "message": err.to_string() } })),
                        )
                    }
                };
                async move { answer }
            }),
        )
}
