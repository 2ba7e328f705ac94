//! A fake Slack on 127.0.0.1 (Web API over HTTP and the Socket Mode WebSocket), for the Slack
//! channel adapter's tests.
//!
//! ```no_run
//! # async fn demo() {
//! use nanocrab_testkit::slack::{self, FakeSlack, SlackError};
//!
//! let fake = FakeSlack::start().await;
//! fake.push_envelope(slack::dm_message(&fake, "hello"));
//! fake.fail_next("chat.postMessage", 1, SlackError::ratelimited(1));
//! // Point the adapter at fake.api_base() with fake.bot_token() and fake.app_token()...
//! let posted = fake.posted();
//! # }
//! ```
//!
//! - `POST /api/<method>` with a JSON or form body, a token as `Authorization: Bearer`.
//!   A token that is not the fake's gets HTTP 200 `{"ok":false,"error":"invalid_auth"}`, as
//!   Slack answers. Every call is recorded with its whole body ([`FakeSlack::calls`]).
//! - `apps.connections.open` (app token) answers the address of the fake's Socket Mode
//!   WebSocket. Each connection is greeted with the recorded `hello` frame, then gets every
//!   envelope pushed with [`FakeSlack::push_envelope`] that is not yet acknowledged: an
//!   envelope sent on a connection that ended before its acknowledgement is sent again on the
//!   next one with `retry_attempt` counted up and `retry_reason: "timeout"`, as Slack
//!   redelivers. [`FakeSlack::disconnect`] sends the recorded `disconnect` frame;
//!   [`FakeSlack::drop_socket`] cuts the connection without a closing handshake.
//! - `chat.postMessage` refuses a `text` over 40,000 characters (`msg_too_long`) or an empty
//!   one (`no_text`) and answers `ts`s counting up; `chat.update` records the new text.
//! - Files: `files.getUploadURLExternal` gives an address on the fake that takes the raw
//!   bytes, `files.completeUploadExternal` shares them into a channel
//!   ([`FakeSlack::uploads`]); `files.info` describes the files added with
//!   [`FakeSlack::add_file`], whose `url_private_download` serves them to the bot token.
//! - [`FakeSlack::fail_next`] makes the next calls of a method fail with a [`SlackError`].
//! - The envelope builders ([`channel_message`], [`dm_message`], [`app_mention`],
//!   [`slash_command`]) start from the recorded frames in
//!   `shared/fixtures/channels/slack/`, with fresh envelope and event ids; [`recorded`]
//!   gives a recorded frame unchanged.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::fixtures::fixture_bytes;

/// `chat.postMessage`'s limit on `text`, in characters.
pub const MESSAGE_LIMIT: usize = 40_000;

/// The bot's user id: the app's bot user in the recorded `events_api` message's
/// `authorizations`.
pub const BOT_USER: &str = "U333";

/// The workspace of the recorded frames.
pub const TEAM: &str = "T111";

/// One Web API call the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: String,
    /// The JSON body as sent, or a form body as an object of strings.
    pub body: Value,
}

/// A message `chat.postMessage` accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    pub channel: String,
    pub text: String,
    pub thread_ts: Option<String>,
    pub ts: String,
}

/// A file `files.completeUploadExternal` shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub channel: String,
    pub thread_ts: Option<String>,
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// An error answer: Slack's `{"ok":false,"error":...}`, with its HTTP status and headers.
#[derive(Debug, Clone, PartialEq)]
pub struct SlackError {
    pub status: u16,
    pub error: String,
    pub retry_after: Option<u64>,
}

impl SlackError {
    /// `{"ok":false,"error":<error>}` with HTTP 200, as Slack refuses most calls.
    pub fn error(error: &str) -> Self {
        Self {
            status: 200,
            error: error.to_owned(),
            retry_after: None,
        }
    }

    /// HTTP 429 with `Retry-After`, as Slack rate-limits.
    pub fn ratelimited(retry_after: u64) -> Self {
        Self {
            status: 429,
            error: "ratelimited".to_owned(),
            retry_after: Some(retry_after),
        }
    }

    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        let body = axum::Json(json!({"ok": false, "error": self.error}));
        match self.retry_after {
            Some(seconds) => {
                (status, [(header::RETRY_AFTER, seconds.to_string())], body).into_response()
            }
            None => (status, body).into_response(),
        }
    }
}

#[derive(Debug, Clone)]
struct StoredFile {
    name: String,
    mimetype: String,
    bytes: Vec<u8>,
}

/// An envelope not yet acknowledged.
#[derive(Debug, Clone)]
struct Pending {
    frame: Value,
    /// How many times it was sent.
    sent: u32,
}

struct Shared {
    bot_token: String,
    app_token: String,
    state: Mutex<FakeState>,
    /// Counted up on every push, waking the open connection.
    news: watch::Sender<u64>,
    /// Counted up by [`FakeSlack::drop_socket`].
    drops: watch::Sender<u64>,
    /// Counted up by [`FakeSlack::disconnect`].
    disconnects: watch::Sender<u64>,
    next_id: AtomicU64,
}

#[derive(Default)]
struct FakeState {
    addr: Option<SocketAddr>,
    calls: Vec<Call>,
    posted: Vec<Posted>,
    updated: Vec<Call>,
    uploads: Vec<Uploaded>,
    /// Bytes sent to an upload address, by file id, until completed.
    staged: HashMap<String, (String, Vec<u8>)>,
    files: HashMap<String, StoredFile>,
    faults: HashMap<String, Vec<SlackError>>,
    pending: Vec<Pending>,
    acks: Vec<Value>,
    connections: u32,
    open: u32,
    next_ts: u64,
}

/// The fake Slack. Clones share the same server; it stops when the last clone is dropped.
#[derive(Clone)]
pub struct FakeSlack {
    addr: SocketAddr,
    shared: Arc<Shared>,
    alive: Arc<watch::Sender<()>>,
}

impl FakeSlack {
    /// Starts the fake on the current tokio runtime, on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            bot_token: "xoxb-111-222-fake".to_owned(),
            app_token: "xapp-1-A111-333-fake".to_owned(),
            state: Mutex::new(FakeState {
                next_ts: 1_700_000_000,
                ..FakeState::default()
            }),
            news: watch::channel(0).0,
            drops: watch::channel(0).0,
            disconnects: watch::channel(0).0,
            next_id: AtomicU64::new(1),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake Slack: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("fake Slack: local address");
        lock(&shared.state).addr = Some(addr);
        let (alive, mut stopped) = watch::channel(());
        let app = Router::new()
            .route("/api/{method}", post(api))
            .route("/socket", get(socket))
            .route("/upload/{file_id}", post(upload))
            .route("/files-pri/{file_id}/{name}", get(download))
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { while stopped.changed().await.is_ok() {} })
                .await
                .expect("fake Slack: server failed");
        });
        Self {
            addr,
            shared,
            alive: Arc::new(alive),
        }
    }

    /// Starts the fake on a thread and runtime of its own, for synchronous tests. The thread
    /// ends when the last handle drops.
    pub fn spawn() -> Self {
        let (handover, handle) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("fake-slack".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake Slack: tokio runtime");
                runtime.block_on(async move {
                    let fake = Self::start().await;
                    let mut stopped = fake.alive.subscribe();
                    handover.send(fake).expect("fake Slack: the test went away");
                    while stopped.changed().await.is_ok() {}
                });
            })
            .expect("fake Slack: spawn its thread");
        handle.recv().expect("fake Slack: server thread died")
    }

    /// The `apiBase` to configure: `http://127.0.0.1:PORT/api`.
    pub fn api_base(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    pub fn bot_token(&self) -> String {
        self.shared.bot_token.clone()
    }

    pub fn app_token(&self) -> String {
        self.shared.app_token.clone()
    }

    /// Queues an envelope for the Socket Mode connection (now, or the next one) and returns
    /// its `envelope_id`.
    pub fn push_envelope(&self, frame: Value) -> String {
        let id = frame["envelope_id"].as_str().unwrap_or_default().to_owned();
        lock(&self.shared.state)
            .pending
            .push(Pending { frame, sent: 0 });
        self.shared.news.send_modify(|n| *n += 1);
        id
    }

    /// Sends the recorded `disconnect` frame on the open connection.
    pub fn disconnect(&self) {
        self.shared.disconnects.send_modify(|n| *n += 1);
    }

    /// Cuts the open connection without a closing handshake, as a network failure does.
    pub fn drop_socket(&self) {
        self.shared.drops.send_modify(|n| *n += 1);
    }

    /// The envelope ids pushed and not yet acknowledged.
    pub fn unacknowledged(&self) -> Vec<String> {
        lock(&self.shared.state)
            .pending
            .iter()
            .map(|pending| {
                pending.frame["envelope_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// Every acknowledgement frame received, in order.
    pub fn acks(&self) -> Vec<Value> {
        lock(&self.shared.state).acks.clone()
    }

    /// How many Socket Mode connections were opened.
    pub fn connections(&self) -> u32 {
        lock(&self.shared.state).connections
    }

    /// How many Socket Mode connections are open now (the fake's side of them).
    pub fn open_connections(&self) -> u32 {
        lock(&self.shared.state).open
    }

    /// The next `count` calls of `method` answer `error`.
    pub fn fail_next(&self, method: &str, count: usize, error: SlackError) {
        let mut state = lock(&self.shared.state);
        let queue = state.faults.entry(method.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(error, count));
    }

    /// A file `files.info` describes as `id` and whose download address serves `bytes`.
    pub fn add_file(&self, id: &str, name: &str, mimetype: &str, bytes: Vec<u8>) {
        lock(&self.shared.state).files.insert(
            id.to_owned(),
            StoredFile {
                name: name.to_owned(),
                mimetype: mimetype.to_owned(),
                bytes,
            },
        );
    }

    /// Every Web API call so far, in order, including those answered with an error.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.shared.state).calls.clone()
    }

    /// The calls of one method, in order.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        lock(&self.shared.state)
            .calls
            .iter()
            .filter(|call| call.method == method)
            .cloned()
            .collect()
    }

    /// The messages `chat.postMessage` accepted, in order.
    pub fn posted(&self) -> Vec<Posted> {
        lock(&self.shared.state).posted.clone()
    }

    /// The messages posted after the first `seen`, in order: a caller polling for answers
    /// through thousands of them copies only what is new.
    pub fn posted_after(&self, seen: usize) -> Vec<Posted> {
        lock(&self.shared.state)
            .posted
            .get(seen..)
            .unwrap_or_default()
            .to_vec()
    }

    /// The files shared, in order.
    pub fn uploads(&self) -> Vec<Uploaded> {
        lock(&self.shared.state).uploads.clone()
    }

    /// A fresh id for an envelope or an event.
    fn fresh(&self, prefix: &str) -> String {
        let n = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}{n:06}")
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide the next test's failure.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn ok(mut result: Value) -> Response {
    result["ok"] = json!(true);
    axum::Json(result).into_response()
}

/// The body as one object: JSON as sent, or a form's fields as strings.
fn parameters(headers: &HeaderMap, body: &[u8]) -> Value {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if content_type.starts_with("application/json") {
        return serde_json::from_slice(body).unwrap_or(Value::Null);
    }
    let mut params = Map::new();
    for (key, value) in form_urlencoded::parse(body) {
        params.insert(key.into_owned(), Value::String(value.into_owned()));
    }
    Value::Object(params)
}

fn text_field(params: &Value, key: &str) -> Option<String> {
    match params.get(key)? {
        Value::String(text) => Some(text.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

async fn api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = parameters(&headers, &body);
    let fault = {
        let mut state = lock(&shared.state);
        state.calls.push(Call {
            method: method.clone(),
            body: params.clone(),
        });
        let wanted = if method == "apps.connections.open" {
            &shared.app_token
        } else {
            &shared.bot_token
        };
        if bearer(&headers) != Some(wanted.as_str()) {
            return SlackError::error("invalid_auth").into_response();
        }
        state
            .faults
            .get_mut(&method)
            .and_then(|queue| (!queue.is_empty()).then(|| queue.remove(0)))
    };
    if let Some(error) = fault {
        return error.into_response();
    }
    let mut state = lock(&shared.state);
    let addr = state
        .addr
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    match method.as_str() {
        "auth.test" => ok(json!({
            "url": "https://xxx.slack.com/",
            "team": "xxx",
            "user": "nanocrab",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": "B111",
        })),
        "apps.connections.open" => ok(json!({"url": format!("ws://{addr}/socket?ticket=fake")})),
        "chat.postMessage" => {
            let (Some(channel), text) =
                (text_field(&params, "channel"), text_field(&params, "text"))
            else {
                return SlackError::error("channel_not_found").into_response();
            };
            let text = text.unwrap_or_default();
            if text.trim().is_empty() {
                return SlackError::error("no_text").into_response();
            }
            if text.chars().count() > MESSAGE_LIMIT {
                return SlackError::error("msg_too_long").into_response();
            }
            state.next_ts += 1;
            let ts = format!("{}.000100", state.next_ts);
            let thread_ts = text_field(&params, "thread_ts");
            state.posted.push(Posted {
                channel: channel.clone(),
                text: text.clone(),
                thread_ts,
                ts: ts.clone(),
            });
            ok(json!({
                "channel": channel,
                "ts": ts,
                "message": {"type": "message", "user": BOT_USER, "bot_id": "B111", "text": text, "ts": ts},
            }))
        }
        "chat.update" => {
            let text = text_field(&params, "text").unwrap_or_default();
            if text.chars().count() > MESSAGE_LIMIT {
                return SlackError::error("msg_too_long").into_response();
            }
            state.updated.push(Call {
                method,
                body: params.clone(),
            });
            ok(json!({"channel": params["channel"], "ts": params["ts"], "text": text}))
        }
        "files.getUploadURLExternal" => {
            let file_id = format!("F{:06}", shared.next_id.fetch_add(1, Ordering::Relaxed));
            let name = text_field(&params, "filename").unwrap_or_default();
            state.staged.insert(file_id.clone(), (name, Vec::new()));
            ok(json!({"upload_url": format!("http://{addr}/upload/{file_id}"), "file_id": file_id}))
        }
        "files.completeUploadExternal" => {
            let channel = text_field(&params, "channel_id").unwrap_or_default();
            let thread_ts = text_field(&params, "thread_ts");
            let mut files = Vec::new();
            for file in params["files"].as_array().into_iter().flatten() {
                let id = file["id"].as_str().unwrap_or_default();
                let Some((name, bytes)) = state.staged.remove(id) else {
                    return SlackError::error("file_not_found").into_response();
                };
                files.push(json!({"id": id, "title": file["title"]}));
                state.uploads.push(Uploaded {
                    channel: channel.clone(),
                    thread_ts: thread_ts.clone(),
                    file_name: name,
                    bytes,
                });
            }
            ok(json!({"files": files}))
        }
        "files.info" => {
            let id = text_field(&params, "file").unwrap_or_default();
            let Some(file) = state.files.get(&id) else {
                return SlackError::error("file_not_found").into_response();
            };
            ok(json!({"file": {
                "id": id,
                "name": file.name,
                "mimetype": file.mimetype,
                "size": file.bytes.len(),
                "url_private": format!("http://{addr}/files-pri/{id}/{}", file.name),
                "url_private_download": format!("http://{addr}/files-pri/{id}/{}?download=1", file.name),
            }}))
        }
        _ => SlackError::error("unknown_method").into_response(),
    }
}

async fn upload(
    State(shared): State<Arc<Shared>>,
    Path(file_id): Path<String>,
    body: Bytes,
) -> Response {
    let mut state = lock(&shared.state);
    match state.staged.get_mut(&file_id) {
        Some((_, bytes)) => {
            *bytes = body.to_vec();
            (StatusCode::OK, "OK - 1").into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn download(
    State(shared): State<Arc<Shared>>,
    Path((file_id, _name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if bearer(&headers) != Some(shared.bot_token.as_str()) {
        // Slack sends a request without the token to its login page.
        return StatusCode::FOUND.into_response();
    }
    match lock(&shared.state).files.get(&file_id) {
        Some(file) => file.bytes.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn socket(State(shared): State<Arc<Shared>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| connection(shared, socket))
}

/// Counts a connection as closed however its task ends.
struct OpenConnection<'a>(&'a Shared);

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).open -= 1;
    }
}

/// One Socket Mode connection: `hello`, then the unacknowledged envelopes as they come.
async fn connection(shared: Arc<Shared>, mut socket: WebSocket) {
    {
        let mut state = lock(&shared.state);
        state.connections += 1;
        state.open += 1;
    }
    let _open = OpenConnection(&shared);
    let mut news = shared.news.subscribe();
    let mut drops = shared.drops.subscribe();
    let mut disconnects = shared.disconnects.subscribe();
    let hello = String::from_utf8(fixture_bytes("channels/slack/socket-mode-hello.json"))
        .expect("the hello fixture is UTF-8");
    if socket
        .send(Message::Text(hello.trim().into()))
        .await
        .is_err()
    {
        return;
    }
    let mut sent_here: HashSet<String> = HashSet::new();
    loop {
        news.mark_unchanged();
        let mut frames = Vec::new();
        {
            let mut state = lock(&shared.state);
            for pending in &mut state.pending {
                let id = pending.frame["envelope_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if !sent_here.insert(id) {
                    continue;
                }
                if pending.sent > 0 {
                    pending.frame["retry_attempt"] = json!(pending.sent);
                    pending.frame["retry_reason"] = json!("timeout");
                }
                pending.sent += 1;
                frames.push(pending.frame.to_string());
            }
        }
        for frame in frames {
            if socket.send(Message::Text(frame.into())).await.is_err() {
                return;
            }
        }
        tokio::select! {
            changed = news.changed() => if changed.is_err() { return },
            _ = drops.changed() => return,
            _ = disconnects.changed() => {
                let frame = String::from_utf8(fixture_bytes("channels/slack/socket-mode-disconnect.json"))
                    .expect("the disconnect fixture is UTF-8");
                if socket.send(Message::Text(frame.trim().into())).await.is_err() {
                    return;
                }
            }
            received = socket.recv() => match received {
                Some(Ok(Message::Text(text))) => {
                    let ack: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                    let mut state = lock(&shared.state);
                    let id = ack["envelope_id"].as_str().unwrap_or_default().to_owned();
                    state.pending.retain(|pending| pending.frame["envelope_id"] != id.as_str());
                    state.acks.push(ack);
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Binary(_))) => {}
            },
        }
    }
}

/// A recorded frame of `shared/fixtures/channels/slack/`, unchanged (`socket-mode-hello`).
pub fn recorded(name: &str) -> Value {
    let path = format!("channels/slack/{name}.json");
    serde_json::from_slice(&fixture_bytes(&path))
        .unwrap_or_else(|err| panic!("{path} is not JSON: {err}"))
}

/// The recorded `events_api` message frame with a fresh envelope id, event id and `ts`.
fn fresh_event(fake: &FakeSlack, fixture: &str, text: &str) -> Value {
    let mut frame = recorded(fixture);
    frame["envelope_id"] = json!(fake.fresh("env-"));
    let payload = &mut frame["payload"];
    payload["event_id"] = json!(fake.fresh("Ev"));
    let ts = {
        let mut state = lock(&fake.shared.state);
        state.next_ts += 1;
        format!("{}.000200", state.next_ts)
    };
    payload["event"]["ts"] = json!(ts);
    payload["event"]["event_ts"] = json!(ts);
    payload["event"]["text"] = json!(text);
    // Only the recorded text's blocks matched it.
    if let Some(event) = payload["event"].as_object_mut() {
        event.remove("blocks");
    }
    frame
}

/// A message in channel `C111` (the recorded `socket-mode-events-api-message.json`, from
/// `U222`), with `text`.
pub fn channel_message(fake: &FakeSlack, text: &str) -> Value {
    fresh_event(fake, "socket-mode-events-api-message", text)
}

/// A direct message from `U222` to the bot: the recorded message in channel `D111` of type
/// `im`.
pub fn dm_message(fake: &FakeSlack, text: &str) -> Value {
    let mut frame = channel_message(fake, text);
    frame["payload"]["event"]["channel"] = json!("D111");
    frame["payload"]["event"]["channel_type"] = json!("im");
    frame["payload"]["event_context"] = json!("1-message-T111-D111");
    frame
}

/// `frame`'s event as a reply in the thread started by `thread_ts`.
pub fn in_thread(mut frame: Value, thread_ts: &str) -> Value {
    frame["payload"]["event"]["thread_ts"] = json!(thread_ts);
    frame
}

/// `frame`'s event with files shared, as `file_share` messages carry them.
pub fn with_files(mut frame: Value, files: Value) -> Value {
    frame["payload"]["event"]["subtype"] = json!("file_share");
    frame["payload"]["event"]["files"] = files;
    frame
}

/// The recorded `app_mention` frame with `text`, fresh ids and `ts`.
pub fn app_mention(fake: &FakeSlack, text: &str) -> Value {
    fresh_event(fake, "socket-mode-events-api-app-mention", text)
}

/// The recorded `slash_commands` frame for `command` with `text`, a fresh envelope id and
/// trigger id.
pub fn slash_command(fake: &FakeSlack, command: &str, text: &str) -> Value {
    let mut frame = recorded("socket-mode-slash-command");
    frame["envelope_id"] = json!(fake.fresh("env-"));
    frame["payload"]["command"] = json!(command);
    frame["payload"]["text"] = json!(text);
    frame["payload"]["trigger_id"] = json!(fake.fresh("111.222."));
    frame
}
