//! The web page's API under `/api`, and the page itself at `/`: sessions, their messages and
//! prompt, titles, compression, RAG mode, approvals, and reports. The chat stream is in
//! [`crate::web_chat`], the workspace files in [`crate::web_files`], sign-in and the browser
//! protections in [`crate::web_auth`]. `docs/api.md` documents every route.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use nanocrab_config::DEFAULT_AGENT_ID;
use nanocrab_core::Agent;
use nanocrab_policy::ApprovalAnswer;
use nanocrab_schema::SessionKey;
use serde::Deserialize;

use crate::approvals::Answered;
use crate::approvals_api::PendingApproval;
use crate::server::status_report;
use crate::web_auth::guard;
use crate::web_state::{Workbench, create_transcript, json_body, new_session_key};
use crate::web_wire::{ApiError, ApiQuery, MessageView, SessionView};

/// The page and `/api`, guarded by [`guard`]; merge it into the server's app.
pub fn web_routes(workbench: Workbench) -> Router {
    let auth = Arc::clone(&workbench.shared.auth);
    Router::new()
        .route("/", get(crate::web_assets::index))
        .route("/api/me", get(me))
        .route("/api/login", post(login))
        .route("/api/logout", post(logout))
        .route("/api/sessions", get(list_sessions).post(create_session))
        .route(
            "/api/sessions/{id}",
            axum::routing::put(rename_session).delete(delete_session),
        )
        .route("/api/sessions/{id}/history", get(history))
        .route("/api/sessions/{id}/messages", get(messages))
        .route("/api/sessions/{id}/generate-title", post(generate_title))
        .route("/api/sessions/{id}/compress", post(compress))
        .route("/api/sessions/{id}/stop", post(crate::web_chat::stop))
        .route(
            "/api/sessions/{id}/rag-mode",
            get(get_rag_mode).put(put_rag_mode),
        )
        .route(
            "/api/config/rag-mode",
            get(get_config_rag_mode).put(put_config_rag_mode),
        )
        .route("/api/tokens/session/{id}", get(session_tokens))
        .route(
            "/api/chat",
            // Images come in the body, base64.
            post(crate::web_chat::chat).layer(axum::extract::DefaultBodyLimit::max(
                crate::web_chat::MAX_CHAT_BODY,
            )),
        )
        .route("/api/events", get(crate::web_chat::events))
        .route("/api/approvals", get(list_approvals))
        .route("/api/approvals/{id}", post(answer_approval))
        .route(
            "/api/files",
            get(crate::web_files::get_files)
                .put(crate::web_files::put_file)
                .post(crate::web_files::put_file),
        )
        .route("/api/tokens/files", post(crate::web_files::file_tokens))
        .route("/api/media/{name}", get(crate::web_files::media))
        .route("/api/skills", get(skills))
        .route("/api/usage", get(usage))
        .route("/api/audit", get(audit))
        .route("/api/status", get(status))
        .route("/api/{*rest}", axum::routing::any(no_such_route))
        .route("/{*path}", get(crate::web_assets::file))
        .layer(axum::middleware::from_fn_with_state(auth, guard))
        .with_state(workbench)
}

async fn no_such_route() -> ApiError {
    ApiError::not_found("no such API route; see docs/api.md")
}

async fn me(
    State(workbench): State<Workbench>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let auth = &workbench.shared.auth;
    if !auth.signed_in(&headers, &peer) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(serde_json::json!({
                "error": {"message": "sign in with the gateway's token"},
                "needsToken": true,
            })),
        )
            .into_response();
    }
    let agents: Vec<&str> = workbench.shared.server.turns().agent_ids().collect();
    Json(serde_json::json!({
        "signedIn": true,
        "csrf": auth.csrf(),
        "needsToken": auth.needs_token(),
        "agents": agents,
        "defaultAgent": DEFAULT_AGENT_ID,
        "version": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

async fn login(
    State(workbench): State<Workbench>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    crate::web_auth::login(&workbench.shared.auth, &peer, &headers, &body)
}

async fn logout(State(workbench): State<Workbench>, headers: HeaderMap) -> Response {
    crate::web_auth::logout(&workbench.shared.auth, &headers)
}

async fn list_sessions(
    State(workbench): State<Workbench>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let activity = workbench.shared.server.turns().activity();
    // Every agent keeps its transcripts in the one sessions folder: list it once.
    let mut seen = std::collections::HashSet::new();
    let mut data = Vec::new();
    for id in workbench.shared.server.turns().agent_ids() {
        let agent = workbench.agent(id)?;
        if !seen.insert(agent.store().dir().to_path_buf()) {
            continue;
        }
        for summary in agent.store().list().map_err(ApiError::internal)? {
            let busy = activity
                .iter()
                .any(|a| a.session == summary.key && (a.running || a.waiting > 0));
            data.push(SessionView::new(summary, busy));
        }
    }
    // A new session, with nothing said yet, counts from when it was made.
    let recent = |s: &SessionView| s.updated_at.clone().or_else(|| s.created_at.clone());
    data.sort_by(|a, b| recent(b).cmp(&recent(a)).then(a.id.cmp(&b.id)));
    Ok(Json(serde_json::json!({ "data": data })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewSession {
    agent: Option<String>,
    title: Option<String>,
}

async fn create_session(
    State(workbench): State<Workbench>,
    body: Bytes,
) -> Result<(StatusCode, Json<SessionView>), ApiError> {
    let request: NewSession = if body.iter().all(u8::is_ascii_whitespace) {
        NewSession::default()
    } else {
        json_body(&body)?
    };
    let agent_id = request.agent.as_deref().unwrap_or(DEFAULT_AGENT_ID);
    let agent = workbench.agent(agent_id)?;
    let key = new_session_key(agent_id)?;
    create_transcript(agent, &key)?;
    if let Some(title) = request
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        set_title(agent, &key, title)?;
    }
    workbench.sessions_changed();
    Ok((StatusCode::CREATED, Json(workbench.view(&key, agent)?)))
}

fn set_title(agent: &Agent, key: &SessionKey, title: &str) -> Result<(), ApiError> {
    let store = agent.store();
    let mut settings = store.settings(key).map_err(ApiError::internal)?;
    settings.title = Some(title.chars().take(200).collect());
    store
        .save_settings(key, &settings)
        .map_err(ApiError::internal)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rename {
    title: String,
}

async fn rename_session(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<SessionView>, ApiError> {
    let (key, agent) = workbench.session(&id)?;
    let Rename { title } = json_body(&body)?;
    let title = title.trim();
    if title.is_empty() {
        return Err(ApiError::bad_request("the title is empty"));
    }
    set_title(agent, &key, title)?;
    workbench.sessions_changed();
    Ok(Json(workbench.view(&key, agent)?))
}

async fn delete_session(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let (key, agent) = workbench.session(&id)?;
    if workbench.is_busy(&key) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "a turn of this session is running; stop it first",
        ));
    }
    // Archived, as `/new` does: nothing is lost.
    agent.store().reset(&key).map_err(ApiError::internal)?;
    workbench.sessions_changed();
    Ok(StatusCode::NO_CONTENT)
}

fn history_body(key: &SessionKey, agent: &Agent) -> Result<serde_json::Value, ApiError> {
    let store = agent.store();
    let session = store.load(key).map_err(ApiError::internal)?;
    let title = store.title(&session).map_err(ApiError::internal)?;
    let messages: Vec<MessageView> = session.entries.iter().map(MessageView::new).collect();
    Ok(serde_json::json!({
        "id": key.to_string(),
        "title": title,
        "compaction": session.compaction.as_ref().map(|c| serde_json::json!({
            "through": c.through,
            "summary": c.summary,
        })),
        "messages": messages,
    }))
}

async fn history(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, agent) = workbench.session(&id)?;
    Ok(Json(history_body(&key, agent)?))
}

async fn messages(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, agent) = workbench.session(&id)?;
    let mut body = history_body(&key, agent)?;
    let preview = agent.prompt_preview(&key).map_err(ApiError::internal)?;
    body["system"] = serde_json::json!(preview.system);
    body["model"] = serde_json::json!(preview.model);
    body["tools"] = serde_json::json!(preview
        .tools
        .iter()
        .map(|t| serde_json::json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect::<Vec<_>>());
    Ok(Json(body))
}

async fn session_tokens(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, agent) = workbench.session(&id)?;
    let p = agent.prompt_preview(&key).map_err(ApiError::internal)?;
    Ok(Json(serde_json::json!({
        "model": p.model,
        "systemTokens": p.system_tokens,
        "toolTokens": p.tool_tokens,
        "messageTokens": p.message_tokens,
        "totalTokens": p.system_tokens + p.tool_tokens + p.message_tokens,
        "contextWindow": p.context_window,
        "exact": p.exact,
    })))
}

async fn generate_title(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, agent) = workbench.session(&id)?;
    match agent.generate_title(&key).await {
        Ok(Some(title)) => {
            workbench.sessions_changed();
            Ok(Json(serde_json::json!({ "id": id, "title": title })))
        }
        Ok(None) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "nothing to title yet: the session has no answered question (or the model gave no title)",
        )),
        Err(err) => Err(ApiError::new(StatusCode::BAD_GATEWAY, err.to_string())),
    }
}

async fn compress(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, agent) = workbench.session(&id)?;
    if workbench.is_busy(&key) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "a turn of this session is running; compress when it is done",
        ));
    }
    match agent.compress(&key, &mut |_| {}).await {
        Ok(Some(done)) => Ok(Json(serde_json::json!({
            "summarized": done.summarized,
            "kept": done.kept,
        }))),
        Ok(None) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "nothing to compress: the conversation is one turn, or already summarised up to its last turn",
        )),
        Err(err) => Err(ApiError::new(StatusCode::BAD_GATEWAY, err.to_string())),
    }
}

fn rag_body(key: &SessionKey, mode: nanocrab_core::RagMode) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "session": key.to_string(),
        "enabled": mode.enabled,
        "default": mode.default,
        "available": mode.available,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetRag {
    enabled: bool,
    #[serde(default)]
    session: Option<String>,
}

fn read_rag(workbench: &Workbench, id: &str) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, agent) = workbench.session(id)?;
    let mode = agent.rag_mode(&key).map_err(ApiError::internal)?;
    Ok(rag_body(&key, mode))
}

fn write_rag(
    workbench: &Workbench,
    id: &str,
    enabled: bool,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, agent) = workbench.session(id)?;
    match agent
        .set_rag_mode(&key, enabled)
        .map_err(ApiError::internal)?
    {
        Some(mode) => Ok(rag_body(&key, mode)),
        None => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "RAG mode needs a memory index, and this agent has none",
        )),
    }
}

async fn get_rag_mode(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    read_rag(&workbench, &id)
}

async fn put_rag_mode(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let SetRag { enabled, .. } = json_body(&body)?;
    write_rag(&workbench, &id, enabled)
}

#[derive(Debug, Deserialize)]
struct SessionQuery {
    session: Option<String>,
}

const NAME_THE_SESSION: &str = "RAG mode is chosen per conversation: name it (?session=ID or \"session\" in the body); the default is memory.ragMode in config.json";

async fn get_config_rag_mode(
    State(workbench): State<Workbench>,
    ApiQuery(query): ApiQuery<SessionQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = query
        .session
        .ok_or_else(|| ApiError::bad_request(NAME_THE_SESSION))?;
    read_rag(&workbench, &id)
}

async fn put_config_rag_mode(
    State(workbench): State<Workbench>,
    ApiQuery(query): ApiQuery<SessionQuery>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let SetRag { enabled, session } = json_body(&body)?;
    let id = session
        .or(query.session)
        .ok_or_else(|| ApiError::bad_request(NAME_THE_SESSION))?;
    write_rag(&workbench, &id, enabled)
}

async fn list_approvals(State(workbench): State<Workbench>) -> Json<serde_json::Value> {
    let data: Vec<PendingApproval> = workbench
        .shared
        .approvals
        .pending()
        .into_iter()
        .map(PendingApproval::from)
        .collect();
    Json(serde_json::json!({ "data": data }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    answer: String,
}

async fn answer_approval(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Answer { answer } = json_body(&body)?;
    let Some(verb) = ApprovalAnswer::from_verb(&answer) else {
        return Err(ApiError::bad_request(format!(
            "answer must be approve, always or deny, not {answer:?}"
        )));
    };
    match workbench
        .shared
        .approvals
        .answer(&id, verb, "web".into(), None)
    {
        Answered::Done => {
            workbench.sessions_changed();
            Ok(Json(serde_json::json!({"id": id, "answer": answer})))
        }
        Answered::NotPending => Err(ApiError::not_found(format!("no approval {id} is waiting"))),
    }
}

fn report(result: Result<serde_json::Value, String>) -> Result<Json<serde_json::Value>, ApiError> {
    result.map(Json).map_err(ApiError::internal)
}

#[derive(Debug, Deserialize)]
struct AgentQuery {
    agent: Option<String>,
}

async fn skills(
    State(workbench): State<Workbench>,
    ApiQuery(query): ApiQuery<AgentQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let agent = query.agent.as_deref().unwrap_or(DEFAULT_AGENT_ID);
    workbench.workbench_agent(agent)?;
    report(
        workbench
            .shared
            .reports
            .skills(agent)
            .map(|data| serde_json::json!({ "data": data })),
    )
}

#[derive(Debug, Deserialize)]
struct UsageQuery {
    days: Option<u32>,
}

async fn usage(
    State(workbench): State<Workbench>,
    ApiQuery(query): ApiQuery<UsageQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let since = match query.days {
        Some(days) => Some(
            jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_hours(
                    24 * i64::from(days.min(3650)),
                ))
                .map_err(|err| ApiError::bad_request(err.to_string()))?,
        ),
        None => None,
    };
    report(workbench.shared.reports.usage(since))
}

#[derive(Debug, Deserialize)]
struct LimitQuery {
    limit: Option<usize>,
}

async fn audit(
    State(workbench): State<Workbench>,
    ApiQuery(query): ApiQuery<LimitQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    report(
        workbench
            .shared
            .reports
            .audit(limit)
            .map(|data| serde_json::json!({ "data": data })),
    )
}

async fn status(State(workbench): State<Workbench>) -> Result<Json<serde_json::Value>, ApiError> {
    let mut body = serde_json::to_value(status_report(&workbench.shared.server))
        .map_err(ApiError::internal)?;
    // Without scheduled jobs the report says why, and the rest stands.
    body["cron"] = match workbench.shared.reports.cron() {
        Ok(jobs) => jobs,
        Err(err) => serde_json::json!({ "error": err }),
    };
    Ok(Json(body))
}
