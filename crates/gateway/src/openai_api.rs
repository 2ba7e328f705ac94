//! The OpenAI-compatible API: `POST /v1/chat/completions` (whole or streamed) and
//! `GET /v1/models`, so that any OpenAI client can talk to the agent, tools and memory
//! included.
//!
//! `model` names the agent: `nanocrab` (or `main`) for the default one, an id of
//! `agents.entries`, or `provider/model` for the default agent on another model. A request
//! belongs to a session: the `X-Nanocrab-Session` header or the `user` field names it
//! (`agent:<agent>:openai:<name>`), and without either it is the API client's one session
//! (`agent:<agent>:openai:default`). Turns go through the same scheduler as chat messages, so
//! a session never runs two at once.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use nanocrab_config::DEFAULT_AGENT_ID;
use nanocrab_core::{Agent, UserInput};
use nanocrab_schema::{AgentEvent, SessionKey};
use nanocrab_sessions::SessionEntry;

use crate::openai_wire::{ChatRequest, Chunk, WireError, completion_body, models_body};
use crate::router::key_part;
use crate::server::ServerState;
use crate::turns::{SubmitError, TurnRequest, TurnTicket};

/// The model name of the default agent.
pub const DEFAULT_MODEL_NAME: &str = "nanocrab";
/// The header naming a request's session.
pub const SESSION_HEADER: &str = "x-nanocrab-session";
/// The session name of requests that give neither the header nor `user`.
pub const DEFAULT_SESSION_NAME: &str = "default";

/// The `/v1/*` routes, to be mounted behind the token with [`crate::server::app`].
pub fn openai_routes() -> Router<ServerState> {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
}

async fn models(State(state): State<ServerState>) -> Json<serde_json::Value> {
    Json(models_body(
        &model_names(&state),
        jiff::Timestamp::now().as_second(),
    ))
}

/// The agents as models: the default one as `nanocrab`, then the entries by id.
fn model_names(state: &ServerState) -> Vec<&str> {
    std::iter::once(DEFAULT_MODEL_NAME)
        .chain(
            state
                .turns()
                .agent_ids()
                .filter(|id| *id != DEFAULT_AGENT_ID),
        )
        .collect()
}

fn error_response(err: &WireError) -> Response {
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(err.body())).into_response()
}

async fn chat_completions(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match start_turn(&state, &headers, &body) {
        Ok((request, ticket)) => {
            let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
            let created = jiff::Timestamp::now().as_second();
            if request.stream {
                stream(ticket, id, created, request).into_response()
            } else {
                whole(ticket, &id, created, &request.model).await
            }
        }
        Err(err) => error_response(&err),
    }
}

/// Reads the request, picks the agent and session, seeds a new session with the request's
/// earlier messages, and queues the turn.
fn start_turn(
    state: &ServerState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(ChatRequest, TurnTicket), WireError> {
    let request: ChatRequest = serde_json::from_slice(body).map_err(|err| {
        WireError::invalid("body", format!("not a chat completion request: {err}"))
    })?;
    let turn = request.turn()?;
    let turns = state.turns();
    let (agent_id, with_model) = match request.model.as_str() {
        DEFAULT_MODEL_NAME | DEFAULT_AGENT_ID => (DEFAULT_AGENT_ID.to_owned(), None),
        id if turns.agent_ids().any(|known| known == id) => (id.to_owned(), None),
        model if model.contains('/') => {
            let build = state
                .model_builder()
                .ok_or_else(|| unknown_model(state, model, None))?;
            let agent = build(DEFAULT_AGENT_ID, model)
                .map_err(|why| unknown_model(state, model, Some(why)))?;
            (DEFAULT_AGENT_ID.to_owned(), Some(agent))
        }
        other => return Err(unknown_model(state, other, None)),
    };
    let name = match headers
        .get(SESSION_HEADER)
        .map(|value| value.to_str().map(str::trim))
    {
        Some(Ok(name)) if !name.is_empty() => key_part(name),
        Some(Ok(_) | Err(_)) => {
            return Err(WireError::invalid(
                "X-Nanocrab-Session",
                "the session header must be a non-empty visible ASCII text",
            ));
        }
        None => match request.user.as_deref().map(str::trim) {
            Some(user) if !user.is_empty() => key_part(user),
            // The gateway has one token, so every caller is the same client, its owner: its
            // requests continue one conversation as a chat's messages do, rather than each
            // leaving a session behind. The name says nothing of the token.
            Some(_) | None => DEFAULT_SESSION_NAME.to_owned(),
        },
    };
    let session = SessionKey::parse(&format!("agent:{agent_id}:openai:{name}"))
        .map_err(|err| WireError::invalid("user", err.to_string()))?;
    if !turn.earlier.is_empty() {
        seed(state, &agent_id, &session, &turn.earlier)?;
    }
    let ticket = turns
        .submit(TurnRequest {
            agent_id,
            session,
            input: UserInput {
                text: turn.text,
                images: turn.images,
                channel: None,
                trace_id: None,
                prompt_mode: nanocrab_core::PromptMode::Full,
                source: nanocrab_schema::RunSource::Chat,
                max_iterations: None,
                tools: None,
            },
            with_model,
            housekeeping: true,
            cancel: Default::default(),
            in_callers_slot: false,
        })
        .map_err(|err| match err {
            SubmitError::QueueFull { .. } => WireError {
                status: 429,
                kind: "requests",
                code: Some("rate_limit_exceeded"),
                param: None,
                message: format!("{err}; try again when the earlier ones are answered"),
            },
            SubmitError::ShuttingDown => WireError {
                status: 503,
                kind: "server_error",
                code: None,
                param: None,
                message: err.to_string(),
            },
            SubmitError::UnknownAgent(ref id) => unknown_model(state, id, None),
        })?;
    Ok((request, ticket))
}

fn unknown_model(state: &ServerState, model: &str, why: Option<String>) -> WireError {
    WireError {
        status: 404,
        kind: "invalid_request_error",
        code: Some("model_not_found"),
        param: Some("model"),
        message: match why {
            Some(why) => format!("the model `{model}` cannot be used: {why}"),
            None => format!(
                "the model `{model}` does not exist; use an agent ({}) or provider/model",
                model_names(state).join(", ")
            ),
        },
    }
}

/// A stateless client sends the whole conversation each time: the messages before the new
/// one become the session's history, once, when it has none.
fn seed(
    state: &ServerState,
    agent_id: &str,
    session: &SessionKey,
    earlier: &[nanocrab_schema::LlmMessage],
) -> Result<(), WireError> {
    let Some(agent): Option<&Arc<Agent>> = state.turns().agent(agent_id) else {
        return Ok(());
    };
    let store = agent.store();
    let stored = store.load(session).map_err(server_error)?;
    if stored.entries.is_empty() {
        let entries: Vec<SessionEntry> = earlier.iter().cloned().map(SessionEntry::now).collect();
        store.append(session, &entries).map_err(server_error)?;
    }
    Ok(())
}

fn server_error(err: impl std::fmt::Display) -> WireError {
    WireError {
        status: 500,
        kind: "server_error",
        code: None,
        param: None,
        message: err.to_string(),
    }
}

async fn whole(ticket: TurnTicket, id: &str, created: i64, model: &str) -> Response {
    // Nothing is streamed: the events are not needed.
    drop(ticket.events);
    match ticket.outcome.await {
        Ok(outcome) => Json(completion_body(
            id,
            created,
            model,
            &outcome.text,
            &outcome.usage,
        ))
        .into_response(),
        Err(err) => error_response(&server_error(err)),
    }
}

fn stream(
    ticket: TurnTicket,
    id: String,
    created: i64,
    request: ChatRequest,
) -> Sse<impl futures::Stream<Item = Result<SseEvent, Infallible>>> {
    let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
    let model = request.model;
    // Bounded: a slow client holds the writer back, not memory.
    let (out, chunks) = tokio::sync::mpsc::channel::<SseEvent>(64);
    tokio::spawn(async move {
        let json = |chunk: &Chunk<'_>| {
            SseEvent::default().data(serde_json::to_string(chunk).unwrap_or_default())
        };
        let TurnTicket {
            started: _,
            mut events,
            outcome,
            titled: _,
        } = ticket;
        // A client that went away stops the writing, not the turn: the scheduler runs it to
        // its end so the session stays whole.
        if out
            .send(json(&Chunk::role(&id, created, &model)))
            .await
            .is_err()
        {
            return;
        }
        // Text of an earlier model call of the turn (before its tool calls) is kept apart
        // from the next one's.
        let mut wrote_text = false;
        let mut needs_break = false;
        while let Some(event) = events.recv().await {
            match event {
                AgentEvent::Token { text } => {
                    if text.is_empty() {
                        continue;
                    }
                    let text = if needs_break {
                        format!("\n\n{text}")
                    } else {
                        text
                    };
                    needs_break = false;
                    wrote_text = true;
                    if out
                        .send(json(&Chunk::text(&id, created, &model, &text)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                AgentEvent::NewResponse { .. } => needs_break = wrote_text,
                // Tool calls, reasoning and the rest stay inside nanocrab.
                AgentEvent::Reasoning { .. }
                | AgentEvent::ToolStart { .. }
                | AgentEvent::ToolEnd { .. }
                | AgentEvent::Compaction { .. }
                | AgentEvent::Retrieval { .. }
                | AgentEvent::Usage { .. }
                | AgentEvent::ModelFallback { .. }
                | AgentEvent::Retry { .. }
                | AgentEvent::Consolidating { .. }
                | AgentEvent::InstructionsChanged(_)
                | AgentEvent::Done { .. }
                | AgentEvent::Error { .. } => {}
            }
        }
        let mut tail = Vec::new();
        match outcome.await {
            Ok(outcome) => {
                tail.push(json(&Chunk::stop(&id, created, &model)));
                if include_usage {
                    tail.push(json(&Chunk::usage(&id, created, &model, &outcome.usage)));
                }
            }
            Err(err) => tail.push(SseEvent::default().data(server_error(err).body().to_string())),
        }
        tail.push(SseEvent::default().data("[DONE]"));
        for chunk in tail {
            if out.send(chunk).await.is_err() {
                return;
            }
        }
    });
    Sse::new(futures::stream::unfold(chunks, |mut chunks| async move {
        chunks.recv().await.map(|chunk| (Ok(chunk), chunks))
    }))
}
