//! The scheduler's HTTP side, which `nanocrab cron` calls: `POST /v1/cron/wake` after it
//! changed the store, and `POST /v1/cron/run` for `cron run ID`.

use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;

use crate::cron::CronScheduler;
use crate::cron_jobs::CronError;
use crate::server::ServerState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunBody {
    id: String,
}

/// `POST /v1/cron/wake`: the jobs changed, the scheduler reads them again (`204`).
/// `POST /v1/cron/run` (`{"id": "1a2b3c4d"}`): runs that job now and answers with its
/// [`CronRunOutcome`](crate::CronRunOutcome) once it is done; `404` for an unknown id.
/// Mounted behind the gateway's token.
pub fn cron_routes(scheduler: CronScheduler) -> Router<ServerState> {
    let waker = scheduler.control().clone();
    Router::new()
        .route(
            "/v1/cron/wake",
            post(move || {
                waker.wake();
                async { StatusCode::NO_CONTENT }
            }),
        )
        .route(
            "/v1/cron/run",
            post(move |Json(body): Json<RunBody>| {
                let scheduler = scheduler.clone();
                async move {
                    match scheduler.run_now(&body.id).await {
                        Ok(outcome) => (
                            StatusCode::OK,
                            Json(serde_json::json!({ "id": body.id, "result": outcome })),
                        ),
                        Err(err) => {
                            let status = match &err {
                                CronError::UnknownJob { .. } => StatusCode::NOT_FOUND,
                                CronError::Invalid { .. }
                                | CronError::Store(_)
                                | CronError::Task { .. } => StatusCode::INTERNAL_SERVER_ERROR,
                            };
                            (
                                status,
                                Json(
                                    serde_json::json!({ "error": { "message": err.to_string() } }),
                                ),
                            )
                        }
                    }
                }
            }),
        )
}
