//! A fake Discord on 127.0.0.1, gateway WebSocket and REST API, for the Discord channel
//! adapter's tests.
//!
//! ```no_run
//! # async fn demo() {
//! use nanocrab_testkit::discord::{self, DiscordError, FakeDiscord};
//!
//! let fake = FakeDiscord::start("bot-token").await;
//! fake.push_message_create(discord::dm("hello"));
//! fake.fail_next("createMessage", DiscordError::rate_limited(0.05));
//! // Point the adapter at fake.api_base() and fake.gateway_url()...
//! let sent = fake.sent_messages();
//! # }
//! ```
//!
//! **Gateway** (`ws://127.0.0.1:PORT/?v=10&encoding=json`, JSON frames, no compression):
//! - On connecting, the recorded HELLO (`gateway-hello-op10.json`) as it was, its
//!   `heartbeat_interval` changeable with [`FakeDiscord::set_heartbeat_interval`].
//! - Heartbeat (op 1) → heartbeat ACK (op 11).
//! - Identify (op 2) with the right token → a new session: the recorded READY
//!   (`dispatch-ready-d.json`, a gateway v6 capture) with the one v10 field a client needs
//!   added, `resume_gateway_url` (this fake's own address), then every event pushed while no
//!   session listened. A wrong token → close 4004 `Authentication failed.`, as Discord closes.
//! - Resume (op 6) of the current session → every event after the client's `seq` again, in
//!   order, then `RESUMED`; of a session this fake does not know (or after
//!   [`FakeDiscord::invalidate_session`]) → Invalid Session (op 9, `d: false`).
//! - Events ([`FakeDiscord::push_message_create`], [`FakeDiscord::push_message_update`]) are
//!   numbered (`s`) and logged for resuming, and sent at once to a connection that has
//!   identified or resumed. [`FakeDiscord::drop_connection`] cuts the TCP connection without a
//!   close frame, as a network failure does; [`FakeDiscord::close_with`] closes with a code.
//! - Every frame the client sent is kept ([`FakeDiscord::gateway_frames`]), tokens redacted.
//!
//! **REST** (`/api/v10/...`, the token checked as `Authorization: Bot <token>`, else 401):
//! `GET /users/@me` (the READY's bot user), `GET /channels/{id}` (a text channel, or a thread
//! added with [`FakeDiscord::add_thread`]), `POST /channels/{id}/messages` (JSON, or
//! `multipart/form-data` with `payload_json` and `files[n]`; over 2,000 characters → 400
//! `Invalid Form Body`), `PATCH /channels/{id}/messages/{id}`, `POST /channels/{id}/typing`,
//! `PUT /channels/{id}/messages/{id}/reactions/{emoji}/@me`, and `GET /attachments/{name}` for
//! the files added with [`FakeDiscord::add_attachment`]. A created message is answered in the
//! shape of the documentation's example message (`docs-example-message.json`). Every call is
//! recorded with its whole body ([`FakeDiscord::calls`]).
//! - [`FakeDiscord::fail_next`] makes the next calls of a route fail with a [`DiscordError`];
//!   a 429 carries Discord's rate-limit headers, so a client knows how long to wait.
//! - The message builders ([`dm`], [`guild_message`]) start from the recorded MESSAGE_CREATE
//!   and the documentation's example message; [`mentioning`] addresses one to a user.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_websockets::{CloseCode, Message as WsMessage, ServerBuilder};

use crate::fixtures::fixture_bytes;
use crate::multipart::multipart_parts;

/// Discord's limit on a message's content, in characters.
const MESSAGE_LIMIT: usize = 2000;

fn fixture(name: &str) -> Value {
    let path = format!("channels/discord/{name}");
    serde_json::from_slice(&fixture_bytes(&path))
        .unwrap_or_else(|err| panic!("{path} is not JSON: {err}"))
}

/// A direct message saying `text`: the recorded MESSAGE_CREATE (which has no `guild_id`).
pub fn dm(text: &str) -> Value {
    let mut message = fixture("dispatch-message-create-d.json");
    message["content"] = json!(text);
    message
}

/// A message saying `text` in channel `channel_id` of guild `guild_id`: the documentation's
/// example message with the `guild_id` a guild message carries.
pub fn guild_message(guild_id: &str, channel_id: &str, text: &str) -> Value {
    let mut message = fixture("docs-example-message.json");
    message["guild_id"] = json!(guild_id);
    message["channel_id"] = json!(channel_id);
    message["content"] = json!(text);
    message
}

/// `message` with `<@user>` before its text and `user` (a user object, such as
/// [`FakeDiscord::bot`]) in its `mentions`, as Discord reports a mention. The recorded users
/// are gateway v6 captures; a v10 mention also carries `public_flags`, added when missing.
pub fn mentioning(mut message: Value, user: &Value) -> Value {
    let id = user["id"].as_str().unwrap_or_default().to_owned();
    let text = message["content"].as_str().unwrap_or_default().to_owned();
    message["content"] = json!(format!("<@{id}> {text}"));
    let mut mention = user.clone();
    if mention.get("public_flags").is_none() {
        mention["public_flags"] = json!(0);
    }
    if let Some(mentions) = message["mentions"].as_array_mut() {
        mentions.push(mention);
    }
    message
}

/// `message` with a new id, so it is another message.
pub fn with_id(mut message: Value, id: u64) -> Value {
    message["id"] = json!(id.to_string());
    message
}

/// One REST call the fake received.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Call {
    /// `POST /channels/1/messages`, without `/api/v10`.
    pub route: String,
    /// The JSON body; for a multipart body its `payload_json`, with each file as
    /// `{"file": name, "size": bytes}` under `"_files"`.
    pub body: Value,
}

/// A message the bot created, as Discord took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    pub id: String,
    pub channel_id: String,
    pub content: String,
    /// `message_reference.message_id`.
    pub reply_to: Option<String>,
    /// The files, by name.
    pub files: Vec<(String, Vec<u8>)>,
}

/// An error answer in Discord's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscordError {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

impl DiscordError {
    /// 429 on the route's bucket, with the body twilight-http's tests hold
    /// (`{"global", "message", "retry_after"}`) and the `x-ratelimit-*` headers.
    pub fn rate_limited(retry_after: f64) -> Self {
        Self {
            status: 429,
            headers: vec![
                ("x-ratelimit-limit", "5".to_owned()),
                ("x-ratelimit-remaining", "0".to_owned()),
                ("x-ratelimit-reset-after", retry_after.to_string()),
                ("x-ratelimit-bucket", "fake-bucket".to_owned()),
                ("x-ratelimit-scope", "user".to_owned()),
                ("retry-after", (retry_after.ceil() as u64).to_string()),
            ],
            body: json!({
                "global": false,
                "message": "You are being rate limited.",
                "retry_after": retry_after,
            }),
        }
    }

    /// A 5xx from Discord's side.
    pub fn server_error() -> Self {
        Self {
            status: 502,
            headers: Vec::new(),
            body: json!({"message": "502: Bad Gateway", "code": 0}),
        }
    }

    fn unauthorized() -> Self {
        Self {
            status: 401,
            headers: Vec::new(),
            body: json!({"message": "401: Unauthorized", "code": 0}),
        }
    }

    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        let mut response = (status, axum::Json(self.body)).into_response();
        for (name, value) in self.headers {
            if let Ok(value) = value.parse() {
                response.headers_mut().insert(name, value);
            }
        }
        response
    }
}

/// What the fake does to the live gateway connection.
#[derive(Debug)]
enum Outgoing {
    Text(String),
    /// Cut the connection without a close frame.
    Drop,
    Close(u16, String),
}

/// One dispatched event.
struct Event {
    /// Its `s`; renumbered when a new session first sends it.
    sequence: u64,
    kind: String,
    data: Value,
    /// Whether a connection has had it.
    sent: bool,
}

impl Event {
    fn frame(&self) -> String {
        // Key order of the recorded envelope (`gateway-hello-op10.json`).
        json!({"t": self.kind, "s": self.sequence, "op": 0, "d": self.data}).to_string()
    }
}

struct Shared {
    token: String,
    gateway_url: String,
    state: Mutex<FakeState>,
}

struct FakeState {
    hello: Value,
    ready: Value,
    /// The current session's id; `None` before the first identify or once invalidated.
    session: Option<String>,
    sessions_started: u64,
    next_sequence: u64,
    /// Every event, in order.
    events: Vec<Event>,
    /// The connection that identified or resumed, for sending events at once.
    live: Option<mpsc::UnboundedSender<Outgoing>>,
    connections: usize,
    frames: Vec<Value>,
    calls: Vec<Call>,
    sent: Vec<SentMessage>,
    next_message_id: u64,
    faults: HashMap<String, VecDeque<DiscordError>>,
    /// Thread id → (parent channel, guild).
    threads: HashMap<String, (String, String)>,
    attachments: HashMap<String, Vec<u8>>,
}

/// The fake Discord. Clones share the same servers; they stop when the last clone is dropped.
#[derive(Clone)]
pub struct FakeDiscord {
    rest: SocketAddr,
    gateway: SocketAddr,
    shared: Arc<Shared>,
    /// Dropping the last clone of this closes the channel, which stops the servers.
    _alive: Arc<watch::Sender<()>>,
}

impl FakeDiscord {
    /// Starts the fake on the current tokio runtime, on free ports of 127.0.0.1, for a bot
    /// whose token is `token`.
    pub async fn start(token: &str) -> Self {
        let rest_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake Discord: bind 127.0.0.1:0");
        let gateway_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake Discord: bind 127.0.0.1:0");
        let rest = rest_listener.local_addr().expect("fake Discord: address");
        let gateway = gateway_listener
            .local_addr()
            .expect("fake Discord: address");
        let sent_example = fixture("docs-example-message.json");
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            gateway_url: format!("ws://{gateway}"),
            state: Mutex::new(FakeState {
                hello: fixture("gateway-hello-op10.json"),
                ready: fixture("dispatch-ready-d.json"),
                session: None,
                sessions_started: 0,
                next_sequence: 1,
                events: Vec::new(),
                live: None,
                connections: 0,
                frames: Vec::new(),
                calls: Vec::new(),
                sent: Vec::new(),
                next_message_id: sent_example["id"]
                    .as_str()
                    .and_then(|id| id.parse().ok())
                    .unwrap_or(1),
                faults: HashMap::new(),
                threads: HashMap::new(),
                attachments: HashMap::new(),
            }),
        });
        let (alive, stopped) = watch::channel(());
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        let mut rest_stopped = stopped.clone();
        tokio::spawn(async move {
            axum::serve(rest_listener, app)
                .with_graceful_shutdown(
                    async move { while rest_stopped.changed().await.is_ok() {} },
                )
                .await
                .expect("fake Discord: REST server failed");
        });
        let gateway_shared = Arc::clone(&shared);
        let mut gateway_stopped = stopped;
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = gateway_listener.accept() => accepted,
                    changed = gateway_stopped.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        continue;
                    }
                };
                let Ok((stream, _)) = accepted else { continue };
                tokio::spawn(serve_gateway(Arc::clone(&gateway_shared), stream));
            }
        });
        Self {
            rest,
            gateway,
            shared,
            _alive: Arc::new(alive),
        }
    }

    /// The `apiBase` to configure: `http://127.0.0.1:PORT`.
    pub fn api_base(&self) -> String {
        format!("http://{}", self.rest)
    }

    /// The `gatewayUrl` to configure: `ws://127.0.0.1:PORT`.
    pub fn gateway_url(&self) -> String {
        format!("ws://{}", self.gateway)
    }

    /// The bot user (`GET /users/@me`, READY's `user`).
    pub fn bot(&self) -> Value {
        self.state().ready["user"].clone()
    }

    /// The HELLO's heartbeat interval, in milliseconds, for connections from now on.
    pub fn set_heartbeat_interval(&self, millis: u64) {
        self.state().hello["d"]["heartbeat_interval"] = json!(millis);
    }

    /// Sends a MESSAGE_CREATE with `message` as its `d`; returns its sequence number.
    pub fn push_message_create(&self, message: Value) -> u64 {
        self.push_dispatch("MESSAGE_CREATE", message)
    }

    /// Sends a MESSAGE_UPDATE with `message` as its `d`; returns its sequence number.
    pub fn push_message_update(&self, message: Value) -> u64 {
        self.push_dispatch("MESSAGE_UPDATE", message)
    }

    fn push_dispatch(&self, kind: &str, data: Value) -> u64 {
        let mut state = self.state();
        let sequence = state.next_sequence;
        state.next_sequence += 1;
        let mut event = Event {
            sequence,
            kind: kind.to_owned(),
            data,
            sent: false,
        };
        event.sent = match &state.live {
            Some(live) => live.send(Outgoing::Text(event.frame())).is_ok(),
            None => false,
        };
        state.events.push(event);
        sequence
    }

    /// Cuts the live gateway connection without a close frame, as a network failure does.
    pub fn drop_connection(&self) {
        let mut state = self.state();
        if let Some(live) = state.live.take() {
            let _ = live.send(Outgoing::Drop);
        }
    }

    /// Closes the live gateway connection with `code` and `reason`.
    pub fn close_with(&self, code: u16, reason: &str) {
        let mut state = self.state();
        if let Some(live) = state.live.take() {
            let _ = live.send(Outgoing::Close(code, reason.to_owned()));
        }
    }

    /// Forgets the current session: a resume gets Invalid Session.
    pub fn invalidate_session(&self) {
        self.state().session = None;
    }

    /// How many gateway connections were opened so far.
    pub fn connections(&self) -> usize {
        self.state().connections
    }

    /// Whether a connection has identified or resumed and is getting events.
    pub fn is_listening(&self) -> bool {
        self.state().live.is_some()
    }

    /// Every frame clients sent to the gateway, in order, tokens as `[token]`.
    pub fn gateway_frames(&self) -> Vec<Value> {
        self.state().frames.clone()
    }

    /// The opcodes of [`Self::gateway_frames`] other than heartbeats (1), in order.
    pub fn gateway_ops(&self) -> Vec<u64> {
        self.state()
            .frames
            .iter()
            .filter_map(|frame| frame["op"].as_u64())
            .filter(|op| *op != 1)
            .collect()
    }

    /// Makes channel `thread_id` a public thread under `parent_id` in `guild_id`.
    pub fn add_thread(&self, thread_id: &str, parent_id: &str, guild_id: &str) {
        self.state().threads.insert(
            thread_id.to_owned(),
            (parent_id.to_owned(), guild_id.to_owned()),
        );
    }

    /// Serves `bytes` as an attachment; returns its `url` for a message's `attachments`.
    pub fn add_attachment(&self, name: &str, bytes: &[u8]) -> String {
        self.state()
            .attachments
            .insert(name.to_owned(), bytes.to_vec());
        format!("{}/attachments/{name}", self.api_base())
    }

    /// The next `count` calls of `route` answer `error`. Routes: `getCurrentUser`,
    /// `getChannel`, `createMessage`, `editMessage`, `triggerTyping`, `createReaction`.
    pub fn fail_next(&self, route: &str, error: DiscordError) {
        self.state()
            .faults
            .entry(route.to_owned())
            .or_default()
            .push_back(error);
    }

    /// Every REST call, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// The messages created, in order.
    pub fn sent_messages(&self) -> Vec<SentMessage> {
        self.state().sent.clone()
    }

    /// The messages created after the first `seen`, in order: a caller polling for answers
    /// through thousands of them copies only what is new.
    pub fn sent_messages_after(&self, seen: usize) -> Vec<SentMessage> {
        self.state().sent.get(seen..).unwrap_or_default().to_vec()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One gateway connection, from the WebSocket handshake until either side ends it.
async fn serve_gateway(shared: Arc<Shared>, stream: tokio::net::TcpStream) {
    let Ok((_request, mut socket)) = ServerBuilder::new().accept(stream).await else {
        return;
    };
    let (outgoing, mut queue) = mpsc::unbounded_channel();
    let hello = {
        let mut state = shared.state();
        state.connections += 1;
        state.hello.to_string()
    };
    if socket.send(WsMessage::text(hello)).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            frame = socket.next() => {
                let Some(Ok(frame)) = frame else { break };
                if frame.is_close() {
                    break;
                }
                let Some(text) = frame.as_text() else { continue };
                let Ok(frame) = serde_json::from_str::<Value>(text) else { continue };
                for reply in answer_frame(&shared, frame, &outgoing) {
                    let _ = outgoing.send(reply);
                }
            }
            next = queue.recv() => match next {
                Some(Outgoing::Text(text)) => {
                    if socket.send(WsMessage::text(text)).await.is_err() {
                        break;
                    }
                }
                Some(Outgoing::Close(code, reason)) => {
                    let code = CloseCode::try_from(code).ok();
                    let _ = socket.send(WsMessage::close(code, &reason)).await;
                    break;
                }
                Some(Outgoing::Drop) | None => break,
            },
        }
    }
    let mut state = shared.state();
    if state
        .live
        .as_ref()
        .is_some_and(|live| live.same_channel(&outgoing))
    {
        state.live = None;
    }
}

/// What the gateway answers to a client's frame.
fn answer_frame(
    shared: &Shared,
    mut frame: Value,
    connection: &mpsc::UnboundedSender<Outgoing>,
) -> Vec<Outgoing> {
    let token = frame["d"]["token"].as_str().map(str::to_owned);
    if token.is_some() {
        frame["d"]["token"] = json!("[token]");
    }
    let op = frame["op"].as_u64();
    let mut state = shared.state();
    state.frames.push(frame.clone());
    let right_token = token.as_deref() == Some(&format!("Bot {}", shared.token));
    match op {
        Some(1) => vec![Outgoing::Text(
            json!({"t": null, "s": null, "op": 11, "d": null}).to_string(),
        )],
        Some(2) if !right_token => {
            vec![Outgoing::Close(4004, "Authentication failed.".to_owned())]
        }
        Some(2) => {
            let recorded = state.ready["session_id"].as_str().unwrap_or_default();
            let session = match state.sessions_started {
                0 => recorded.to_owned(),
                n => format!("{recorded}-{n}"),
            };
            state.sessions_started += 1;
            state.session = Some(session.clone());
            let mut ready = state.ready.clone();
            ready["session_id"] = json!(session);
            ready["resume_gateway_url"] = json!(shared.gateway_url);
            // A session numbers its events from 1 and replays only its own.
            state.events.retain(|event| !event.sent);
            let sequence = 1;
            state.next_sequence = 2;
            let mut replies = vec![Outgoing::Text(
                json!({"t": "READY", "s": sequence, "op": 0, "d": ready}).to_string(),
            )];
            // A new session numbers what it sends after its READY.
            let mut next = state.next_sequence;
            for event in state.events.iter_mut().filter(|event| !event.sent) {
                event.sequence = next;
                next += 1;
                replies.push(Outgoing::Text(event.frame()));
                event.sent = true;
            }
            state.next_sequence = next;
            state.live = Some(connection.clone());
            replies
        }
        Some(6) if !right_token => {
            vec![Outgoing::Close(4004, "Authentication failed.".to_owned())]
        }
        Some(6) => {
            let asked = frame["d"]["session_id"].as_str();
            if state.session.is_none() || state.session.as_deref() != asked {
                return vec![Outgoing::Text(
                    json!({"t": null, "s": null, "op": 9, "d": false}).to_string(),
                )];
            }
            let after = frame["d"]["seq"].as_u64().unwrap_or(0);
            let mut replies = Vec::new();
            for event in state
                .events
                .iter_mut()
                .filter(|event| event.sequence > after)
            {
                replies.push(Outgoing::Text(event.frame()));
                event.sent = true;
            }
            let sequence = state.next_sequence;
            state.next_sequence += 1;
            replies.push(Outgoing::Text(
                json!({"t": "RESUMED", "s": sequence, "op": 0, "d": {}}).to_string(),
            ));
            state.live = Some(connection.clone());
            replies
        }
        _ => Vec::new(),
    }
}

/// Answers one REST call.
async fn answer(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    if let Some(name) = path.strip_prefix("/attachments/") {
        return match shared.state().attachments.get(name) {
            Some(bytes) => bytes.clone().into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        };
    }
    let Some(route) = path.strip_prefix("/api/v10") else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (body, files) = read_body(&headers, &body);
    let mut state = shared.state();
    state.calls.push(Call {
        route: format!("{method} {route}"),
        body: match files.is_empty() {
            true => body.clone(),
            false => {
                let mut body = body.clone();
                body["_files"] = files
                    .iter()
                    .map(|(name, bytes)| json!({"file": name, "size": bytes.len()}))
                    .collect();
                body
            }
        },
    });
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        == Some(&format!("Bot {}", shared.token));
    if !authorized {
        return DiscordError::unauthorized().into_response();
    }
    let segments: Vec<&str> = route.trim_start_matches('/').split('/').collect();
    let name = match (&method, segments.as_slice()) {
        (&Method::GET, ["users", "@me"]) => "getCurrentUser",
        (&Method::GET, ["channels", _]) => "getChannel",
        (&Method::POST, ["channels", _, "messages"]) => "createMessage",
        (&Method::PATCH, ["channels", _, "messages", _]) => "editMessage",
        (&Method::POST, ["channels", _, "typing"]) => "triggerTyping",
        (&Method::PUT, ["channels", _, "messages", _, "reactions", _, "@me"]) => "createReaction",
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    if let Some(error) = state.faults.get_mut(name).and_then(VecDeque::pop_front) {
        return error.into_response();
    }
    match name {
        "getCurrentUser" => axum::Json(state.ready["user"].clone()).into_response(),
        "getChannel" => {
            let id = segments[1];
            let channel = match state.threads.get(id) {
                Some((parent, guild)) => json!({
                    "id": id, "type": 11, "guild_id": guild, "parent_id": parent,
                    "name": "thread",
                }),
                None => json!({"id": id, "type": 0, "name": "general"}),
            };
            axum::Json(channel).into_response()
        }
        "createMessage" | "editMessage" => {
            let content = body["content"].as_str().unwrap_or_default().to_owned();
            if content.chars().count() > MESSAGE_LIMIT {
                return (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"message": "Invalid Form Body", "code": 50035})),
                )
                    .into_response();
            }
            let channel_id = segments[1].to_owned();
            let id = if name == "createMessage" {
                state.next_message_id += 1;
                let id = state.next_message_id.to_string();
                state.sent.push(SentMessage {
                    id: id.clone(),
                    channel_id: channel_id.clone(),
                    content: content.clone(),
                    reply_to: body["message_reference"]["message_id"]
                        .as_str()
                        .map(str::to_owned)
                        .or_else(|| {
                            body["message_reference"]["message_id"]
                                .as_u64()
                                .map(|id| id.to_string())
                        }),
                    files: files.clone(),
                });
                id
            } else {
                segments[3].to_owned()
            };
            let mut message = fixture("docs-example-message.json");
            message["id"] = json!(id);
            message["channel_id"] = json!(channel_id);
            message["content"] = json!(content);
            message["author"] = state.ready["user"].clone();
            message["reactions"] = json!([]);
            message["attachments"] = files
                .iter()
                .enumerate()
                .map(|(index, (name, bytes))| {
                    json!({
                        "id": (index + 1).to_string(), "filename": name, "size": bytes.len(),
                        "url": format!("http://{}/attachments/{name}", headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default()),
                        "proxy_url": "",
                    })
                })
                .collect();
            axum::Json(message).into_response()
        }
        _ => StatusCode::NO_CONTENT.into_response(),
    }
}

/// A JSON body, or a multipart body's `payload_json` and its files.
fn read_body(headers: &HeaderMap, body: &[u8]) -> (Value, Vec<(String, Vec<u8>)>) {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let Some(boundary) = content_type
        .strip_prefix("multipart/form-data")
        .and_then(|rest| rest.split_once("boundary="))
        .map(|(_, boundary)| boundary.trim_matches('"').to_owned())
    else {
        return (
            serde_json::from_slice(body).unwrap_or(Value::Null),
            Vec::new(),
        );
    };
    let mut payload = Value::Null;
    let mut files = Vec::new();
    for part in multipart_parts(body, &boundary) {
        match part.file_name {
            Some(name) => files.push((name, part.bytes)),
            None if part.name == "payload_json" => {
                payload = serde_json::from_slice(&part.bytes).unwrap_or(Value::Null);
            }
            None => {}
        }
    }
    (payload, files)
}
