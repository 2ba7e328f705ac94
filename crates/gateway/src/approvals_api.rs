//! The approvals' HTTP side: `GET /v1/approvals` and `POST /v1/approvals/{id}`, for runs
//! that have no chat to ask in.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use nanocrab_policy::ApprovalAnswer;
use serde::{Deserialize, Serialize};

use crate::approvals::{Answered, Approvals};
use crate::server::ServerState;

/// An approval as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    pub id: String,
    pub agent: String,
    pub session: Option<String>,
    pub tool: String,
    pub summary: String,
    pub risk: String,
    pub needs: Vec<String>,
    /// Whether `always` may be answered.
    pub session_grant_offered: bool,
}

impl From<nanocrab_policy::ApprovalRequest> for PendingApproval {
    fn from(r: nanocrab_policy::ApprovalRequest) -> Self {
        Self {
            id: r.id,
            agent: r.agent,
            session: r.session.map(|s| s.to_string()),
            tool: r.tool,
            summary: r.summary,
            risk: r.risk.to_string(),
            needs: r.missing.iter().map(ToString::to_string).collect(),
            session_grant_offered: r.session_grant_offered,
        }
    }
}

#[derive(Debug, Deserialize)]
struct AnswerBody {
    answer: String,
}

/// `GET /v1/approvals` and `POST /v1/approvals/{id}` (`{"answer": "approve" | "always" |
/// "deny"}`), for runs that have no chat to ask in; mounted behind the gateway's token.
pub fn approval_routes(approvals: Arc<Approvals>) -> Router<ServerState> {
    let listed = Arc::clone(&approvals);
    Router::new()
        .route(
            "/v1/approvals",
            get(move || {
                let approvals = Arc::clone(&listed);
                async move {
                    let data: Vec<PendingApproval> = approvals
                        .pending()
                        .into_iter()
                        .map(PendingApproval::from)
                        .collect();
                    Json(serde_json::json!({ "data": data }))
                }
            }),
        )
        .route(
            "/v1/approvals/{id}",
            post(
                move |Path(id): Path<String>, Json(body): Json<AnswerBody>| {
                    let approvals = Arc::clone(&approvals);
                    async move {
                        let Some(answer) = ApprovalAnswer::from_verb(&body.answer) else {
                            return (
                                StatusCode::BAD_REQUEST,
                                Json(serde_json::json!({"error": {
                                    "message": format!(
                                        "answer must be approve, always or deny, not {:?}",
                                        body.answer
                                    )
                                }})),
                            );
                        };
                        match approvals.answer(&id, answer, "api".into(), None) {
                            Answered::Done => (
                                StatusCode::OK,
                                Json(serde_json::json!({"id": id, "answer": body.answer})),
                            ),
                            Answered::NotPending => (
                                StatusCode::NOT_FOUND,
                                Json(serde_json::json!({"error": {
                                    "message": format!("no approval {id} is waiting")
                                }})),
                            ),
                        }
                    }
                },
            ),
        )
}
