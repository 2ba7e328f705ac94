//! The page's conversation: `POST /api/chat` runs a turn and streams what happens in it as
//! server-sent events, `POST /api/sessions/{id}/stop` interrupts it, and `GET /api/events`
//! streams what every other conversation does (a chat on Telegram, a scheduled job) live.
//!
//! A turn runs in the gateway's scheduler like any other: one at a time per session, and to
//! its end whether or not the page still listens, so a closed tab or a slow connection never
//! leaves half a turn in the transcript. A slow reader only holds back its own stream: the
//! turn's events wait in their queue while the page catches up.

use std::convert::Infallible;
use std::sync::{Arc, PoisonError};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use nanocrab_config::DEFAULT_AGENT_ID;
use nanocrab_core::UserInput;
use nanocrab_schema::{AgentEvent, Image, RunSource, SessionKey};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approvals_api::PendingApproval;
use crate::bus::{EventKind, OutboundEvent};
use crate::turns::{SubmitError, TurnRequest, TurnTicket};
use crate::web_state::{
    MAX_LIVE_STREAMS, Workbench, create_transcript, json_body, new_session_key,
};
use crate::web_wire::{ApiError, UsageView, WEB_CHANNEL, key_parts, stream_event};

/// At most this many images per message...
const MAX_IMAGES: usize = 4;
/// ...of at most this many bytes each...
const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;
/// ...in a body of at most this many bytes (base64 takes a third more).
pub(crate) const MAX_CHAT_BODY: usize = 28 * 1024 * 1024;
/// Events the page may fall behind by before its stream waits for it.
const STREAM_BUFFER: usize = 256;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ChatBody {
    message: String,
    #[serde(default, alias = "session_id")]
    session_id: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    images: Vec<ImageBody>,
    /// The seed's clients send it; the answer is always streamed.
    #[serde(default)]
    stream: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ImageBody {
    media_type: String,
    data: String,
}

fn images(bodies: Vec<ImageBody>) -> Result<Vec<Image>, ApiError> {
    if bodies.len() > MAX_IMAGES {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_IMAGES} images per message"
        )));
    }
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            if !matches!(
                body.media_type.as_str(),
                "image/png" | "image/jpeg" | "image/gif" | "image/webp"
            ) {
                return Err(ApiError::bad_request(format!(
                    "images[{i}]: {} is not an image type a model takes (png, jpeg, gif, webp)",
                    body.media_type
                )));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(body.data.trim())
                .map_err(|err| ApiError::bad_request(format!("images[{i}]: not base64: {err}")))?;
            if bytes.len() > MAX_IMAGE_BYTES {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("images[{i}] is larger than 5 MB"),
                ));
            }
            Ok(Image {
                media_type: body.media_type,
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                file: None,
            })
        })
        .collect()
}

/// `POST /api/chat`.
pub(crate) async fn chat(State(workbench): State<Workbench>, body: Bytes) -> Response {
    match start(&workbench, &body) {
        Ok(started) => stream(workbench, started).into_response(),
        Err(err) => err.into_response(),
    }
}

struct Started {
    key: SessionKey,
    agent_id: String,
    query: String,
    ticket: TurnTicket,
    approvals: crate::bus::Subscription,
}

fn start(workbench: &Workbench, body: &[u8]) -> Result<Started, ApiError> {
    let request: ChatBody = json_body(body)?;
    let _ = request.stream;
    let images = images(request.images)?;
    if request.message.trim().is_empty() && images.is_empty() {
        return Err(ApiError::bad_request("the message is empty"));
    }
    let (key, agent_id) = match &request.session_id {
        Some(id) => {
            let key = match workbench.session(id) {
                Ok((key, _)) => key,
                // A page's session named by its client (the remote CLI's) starts here.
                Err(err) => {
                    let key = SessionKey::parse(id).map_err(|_| err)?;
                    let (agent_id, channel) = key_parts(&key);
                    if channel != WEB_CHANNEL {
                        return Err(ApiError::not_found(format!("no session `{id}`")));
                    }
                    create_transcript(workbench.agent(&agent_id)?, &key)?;
                    key
                }
            };
            let (agent_id, _) = key_parts(&key);
            if request.agent.as_deref().is_some_and(|a| a != agent_id) {
                return Err(ApiError::bad_request(format!(
                    "session {id} belongs to agent `{agent_id}`"
                )));
            }
            (key, agent_id)
        }
        None => {
            let agent_id = request
                .agent
                .clone()
                .unwrap_or_else(|| DEFAULT_AGENT_ID.to_owned());
            let agent = workbench.agent(&agent_id)?;
            let key = new_session_key(&agent_id)?;
            create_transcript(agent, &key)?;
            (key, agent_id)
        }
    };
    // Subscribed before the turn can ask, so no question is missed.
    let approvals = workbench
        .shared
        .bus
        .subscribe(&[EventKind::ApprovalRequested], 16);
    let cancel = CancellationToken::new();
    let ticket = workbench
        .shared
        .server
        .turns()
        .submit(TurnRequest {
            agent_id: agent_id.clone(),
            session: key.clone(),
            input: UserInput {
                text: request.message.clone(),
                images,
                channel: None,
                trace_id: None,
                prompt_mode: nanocrab_core::PromptMode::Full,
                source: RunSource::Chat,
                max_iterations: None,
                tools: None,
            },
            with_model: None,
            housekeeping: true,
            cancel: cancel.clone(),
            in_callers_slot: false,
        })
        .map_err(|err| match err {
            SubmitError::QueueFull { .. } => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!("{err}; send again when they are answered"),
            ),
            SubmitError::ShuttingDown => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, err.to_string())
            }
            SubmitError::UnknownAgent(_) => ApiError::not_found(err.to_string()),
        })?;
    workbench
        .shared
        .running
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key.clone(), cancel);
    Ok(Started {
        key,
        agent_id,
        query: request.message,
        ticket,
        approvals,
    })
}

fn sse(name: &str, data: &serde_json::Value) -> SseEvent {
    SseEvent::default()
        .event(name)
        .data(serde_json::to_string(data).unwrap_or_default())
}

/// Writes to the page while it listens; once it has gone, the rest is dropped.
struct Writer {
    out: mpsc::Sender<SseEvent>,
    gone: bool,
}

impl Writer {
    async fn send(&mut self, name: &str, data: serde_json::Value) {
        if !self.gone && self.out.send(sse(name, &data)).await.is_err() {
            self.gone = true;
        }
    }
}

fn stream(
    workbench: Workbench,
    started: Started,
) -> Sse<impl futures::Stream<Item = Result<SseEvent, Infallible>>> {
    let (out, events_out) = mpsc::channel::<SseEvent>(STREAM_BUFFER);
    tokio::spawn(async move {
        let Started {
            key,
            agent_id,
            query,
            ticket,
            mut approvals,
        } = started;
        let TurnTicket {
            started: _,
            mut events,
            outcome,
            titled,
        } = ticket;
        let mut writer = Writer { out, gone: false };
        let id = key.to_string();
        let title = workbench
            .agent(&agent_id)
            .ok()
            .and_then(|agent| agent.store().settings(&key).ok())
            .and_then(|settings| settings.title);
        writer
            .send(
                "session",
                serde_json::json!({"sessionId": id, "title": title}),
            )
            .await;
        // Until the turn ends: its events, and the approvals it asks for.
        let mut asking = true;
        loop {
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { break };
                    if let Some((name, data)) = stream_event(&event, &query) {
                        writer.send(name, data).await;
                    }
                }
                asked = approvals.recv(), if asking => {
                    asking = asked.is_some();
                    if let Some(asked) = asked
                        && let OutboundEvent::ApprovalRequested { request, .. } = asked.as_ref()
                        && request.session.as_ref() == Some(&key)
                    {
                        let view = PendingApproval::from(request.clone());
                        writer
                            .send("approval", serde_json::to_value(view).unwrap_or_default())
                            .await;
                    }
                }
            }
        }
        drop(approvals);
        workbench
            .shared
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        match outcome.await {
            Ok(done) => {
                writer
                    .send(
                        "done",
                        serde_json::json!({
                            "content": done.text,
                            "sessionId": id,
                            "interrupted": done.interrupted,
                            "usage": UsageView::from(done.usage),
                        }),
                    )
                    .await;
            }
            Err(err) => {
                writer
                    .send("error", serde_json::json!({"error": err.to_string()}))
                    .await;
            }
        }
        // After the answer, the housekeeping may title the conversation.
        if let Ok(title) = titled.await {
            writer
                .send(
                    "title",
                    serde_json::json!({"sessionId": id, "title": title}),
                )
                .await;
        }
    });
    Sse::new(futures::stream::unfold(
        events_out,
        |mut events| async move { events.recv().await.map(|event| (Ok(event), events)) },
    ))
    .keep_alive(KeepAlive::default())
}

/// `POST /api/sessions/{id}/stop`.
pub(crate) async fn stop(
    State(workbench): State<Workbench>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, _) = workbench.session(&id)?;
    let cancel = workbench
        .shared
        .running
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .cloned();
    let stopped = cancel.is_some_and(|cancel| {
        cancel.cancel();
        true
    });
    Ok(Json(serde_json::json!({ "stopped": stopped })))
}

/// `GET /api/events`: what the other conversations do, live.
pub(crate) async fn events(State(workbench): State<Workbench>) -> Response {
    // Each open stream holds a subscription: a page has one, a handful of tabs a few.
    let Ok(permit) = Arc::clone(&workbench.shared.live_streams).try_acquire_owned() else {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_LIVE_STREAMS} live streams are open already; close a tab"),
        )
        .into_response();
    };
    let mut subscription = workbench.shared.bus.subscribe(
        &[
            EventKind::Turn,
            EventKind::Message,
            EventKind::ApprovalRequested,
        ],
        STREAM_BUFFER,
    );
    let mut listed = workbench.shared.sessions_changed.subscribe();
    let (out, events_out) = mpsc::channel::<SseEvent>(STREAM_BUFFER);
    tokio::spawn(async move {
        let _permit = permit;
        let mut lagged = 0;
        loop {
            // A page that went away frees its subscription at once, not at the next event.
            let event = tokio::select! {
                event = subscription.recv() => event,
                // Another tab (or client) made, renamed or deleted a session, or answered an
                // approval: the page reads the list again. Missed ones say the same.
                changed = listed.recv() => {
                    if matches!(changed, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        return;
                    }
                    if out.send(sse("sessions", &serde_json::json!({}))).await.is_err() {
                        return;
                    }
                    continue;
                }
                () = out.closed() => return,
            };
            let Some(event) = event else { return };
            let mut sent = Vec::new();
            if subscription.lagged() != lagged {
                lagged = subscription.lagged();
                // The page missed some: it reads the transcripts again.
                sent.push(sse("lagged", &serde_json::json!({ "missed": lagged })));
            }
            match event.as_ref() {
                OutboundEvent::Turn { session, event } => {
                    let id = session.to_string();
                    let shown = match event {
                        AgentEvent::Done { text } => {
                            Some(serde_json::json!({"type": "done", "content": text}))
                        }
                        AgentEvent::Error { message } => {
                            Some(serde_json::json!({"type": "error", "error": message}))
                        }
                        other => stream_event(other, "").map(|(name, mut data)| {
                            data["type"] = serde_json::json!(name);
                            data
                        }),
                    };
                    if let Some(shown) = shown {
                        let ended =
                            matches!(event, AgentEvent::Done { .. } | AgentEvent::Error { .. });
                        sent.push(sse(
                            "turn",
                            &serde_json::json!({"sessionId": id, "event": shown}),
                        ));
                        if ended {
                            sent.push(sse("sessions", &serde_json::json!({})));
                        }
                    }
                }
                OutboundEvent::Message(outgoing) => {
                    let message = &outgoing.message;
                    sent.push(sse(
                        "message",
                        &serde_json::json!({
                            "channel": message.chat.channel,
                            "chatId": message.chat.chat_id,
                            "text": message.text,
                        }),
                    ));
                }
                OutboundEvent::ApprovalRequested { request, .. } => {
                    let view = PendingApproval::from(request.clone());
                    sent.push(sse(
                        "approval",
                        &serde_json::to_value(view).unwrap_or_default(),
                    ));
                }
                OutboundEvent::Typing(_) => {}
            }
            for event in sent {
                if out.send(event).await.is_err() {
                    return;
                }
            }
        }
    });
    Sse::new(futures::stream::unfold(
        events_out,
        |mut events| async move {
            events
                .recv()
                .await
                .map(|event| (Ok::<_, Infallible>(event), events))
        },
    ))
    .keep_alive(KeepAlive::default())
    .into_response()
}
