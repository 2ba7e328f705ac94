//! A fake Telegram Bot API on 127.0.0.1, for the Telegram channel adapter's tests.
//!
//! ```no_run
//! # async fn demo() {
//! use nanocrab_testkit::telegram::{self, FakeTelegram, TelegramError};
//!
//! let fake = FakeTelegram::start("123:secret").await;
//! fake.push_update(telegram::private_text("hello"));
//! fake.fail_next("sendMessage", 1, TelegramError::too_many_requests(1));
//! // Point the adapter at fake.api_base()...
//! let sent = fake.sent_messages();
//! # }
//! ```
//!
//! - `POST /bot<token>/<method>` with a JSON or form body (and query parameters), as the Bot
//!   API takes them; `/file/bot<token>/<file_path>` serves the files added with
//!   [`FakeTelegram::add_file`]. Another token gets 401 (`/file`: 404), as Telegram answers.
//! - `getUpdates` works as Telegram's: `offset` confirms, and forgets, every update before it;
//!   the rest are answered up to `limit`, or the call waits up to `timeout` seconds for
//!   [`FakeTelegram::push_update`]. `allowed_updates` is recorded but not applied, so a test
//!   can show what the adapter does with a kind of update it did not ask for.
//! - `sendMessage` and `editMessageText` check `parse_mode=HTML` text as Telegram does (known
//!   tags, well nested, else 400 `can't parse entities`) and its length after parsing (4096
//!   UTF-16 code units, else 400 `message is too long`), and answer a message shaped like the
//!   recorded `sendMessage-response.json`, with increasing `message_id`s.
//! - `sendDocument` takes a `multipart/form-data` body, as Telegram takes a new file, and
//!   records the file ([`FakeTelegram::sent_documents`]).
//! - `getMe`, `deleteWebhook`, `setMyCommands`, `sendChatAction`, `setMessageReaction` and
//!   `getFile` answer as Telegram does. Every call is recorded, answered or not.
//! - [`FakeTelegram::fail_next`] makes the next calls of a method fail with a
//!   [`TelegramError`] in the recorded error bodies' shape; [`FakeTelegram::stall_next`]
//!   makes them never answer.
//! - The update builders ([`private_text`], [`group_text`], [`forum_topic_text`],
//!   [`anonymous_admin_text`], [`photo_with_caption`], [`private_photo`]) start from the
//!   recorded payloads in `shared/fixtures/channels/telegram/` and mark `@mentions` and
//!   leading `/commands` as entities the way Telegram's servers do; [`edited`],
//!   [`forwarded`], [`quoting`], [`quoting_elsewhere`] and [`via_bot`] change one into an
//!   edit, a forward, a quoting reply (to this chat or another) or an inline bot's result,
//!   with the Bot API's fields for those and recorded people ([`someone_else`],
//!   [`another_bot`]).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, watch};

use crate::fixtures::fixture_bytes;
use crate::multipart::multipart_parts;

/// One call the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The Bot API method (`sendMessage`), or `file/<file_path>` for a file download.
    pub method: String,
    /// The parameters: the JSON body as sent, or a form body and query parameters as an
    /// object of strings.
    pub body: Value,
}

/// A message the bot sent, as Telegram took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentText {
    pub message_id: i64,
    pub chat_id: String,
    pub message_thread_id: Option<i64>,
    /// The text as sent (HTML when `parse_mode` says so).
    pub text: String,
    pub parse_mode: Option<String>,
    /// From `reply_parameters.message_id` or the older `reply_to_message_id`.
    pub reply_to_message_id: Option<i64>,
}

/// A file the bot sent with `sendDocument`, as Telegram took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentDocument {
    pub message_id: i64,
    pub chat_id: String,
    pub message_thread_id: Option<i64>,
    pub file_name: String,
    pub bytes: Vec<u8>,
    pub caption: Option<String>,
}

/// An error answer, in the Bot API's shape: `{"ok":false,"error_code":...,"description":...}`.
#[derive(Debug, Clone, PartialEq)]
pub struct TelegramError {
    pub status: u16,
    pub body: Value,
}

impl TelegramError {
    /// A 400 with Telegram's wording, e.g. `Bad Request: chat not found`.
    pub fn bad_request(description: &str) -> Self {
        Self {
            status: 400,
            body: json!({"ok": false, "error_code": 400, "description": description}),
        }
    }

    /// The recorded `error-400-chat-not-found.json`.
    pub fn chat_not_found() -> Self {
        Self::recorded(400, "channels/telegram/error-400-chat-not-found.json")
    }

    /// What Telegram says of HTML it cannot parse.
    pub fn cant_parse_entities() -> Self {
        Self::bad_request(
            "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\"",
        )
    }

    /// 429 with `parameters.retry_after`.
    pub fn too_many_requests(retry_after: u64) -> Self {
        Self {
            status: 429,
            body: json!({
                "ok": false,
                "error_code": 429,
                "description": format!("Too Many Requests: retry after {retry_after}"),
                "parameters": {"retry_after": retry_after},
            }),
        }
    }

    /// The recorded `error-409-conflict.json`: another `getUpdates` poller.
    pub fn conflict() -> Self {
        Self::recorded(409, "channels/telegram/error-409-conflict.json")
    }

    /// The recorded `error-401-unauthorized.json`: a bad token.
    pub fn unauthorized() -> Self {
        Self::recorded(401, "channels/telegram/error-401-unauthorized.json")
    }

    fn recorded(status: u16, fixture: &str) -> Self {
        Self {
            status,
            body: serde_json::from_slice(&fixture_bytes(fixture))
                .unwrap_or_else(|err| panic!("{fixture} is not JSON: {err}")),
        }
    }

    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        (status, axum::Json(self.body)).into_response()
    }
}

/// What the next call of a method gets instead of its answer.
#[derive(Debug, Clone)]
enum Fault {
    Error(TelegramError),
    /// No answer, ever (until the client gives up).
    Stall,
}

#[derive(Debug, Clone)]
struct StoredFile {
    file_path: String,
    /// What `getFile` says; the bytes' length unless claimed otherwise.
    size: u64,
    bytes: Option<Vec<u8>>,
}

struct Shared {
    token: String,
    state: Mutex<FakeState>,
    /// Woken by each pushed update, for the `getUpdates` calls waiting.
    news: Notify,
}

struct FakeState {
    bot: Value,
    /// Not yet confirmed by an `offset`, oldest first.
    updates: VecDeque<Value>,
    next_update_id: i64,
    next_message_id: i64,
    calls: Vec<Call>,
    sent: Vec<SentText>,
    documents: Vec<SentDocument>,
    faults: HashMap<String, VecDeque<Fault>>,
    files: HashMap<String, StoredFile>,
    commands: Value,
}

/// The fake Bot API. Clones share the same server; it stops when the last clone is dropped.
#[derive(Clone)]
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// Dropping the last clone of this closes the channel, which stops the server.
    alive: Arc<watch::Sender<()>>,
}

/// `getUpdates` waits at most this long however large its `timeout`, so a test that forgot
/// to push never hangs for long.
const MAX_POLL_WAIT: Duration = Duration::from_secs(60);

/// Telegram's limit on a message's text after entity parsing.
const MESSAGE_LIMIT: usize = 4096;

impl FakeTelegram {
    /// Starts the fake on the current tokio runtime, on a free port of 127.0.0.1, for a bot
    /// whose token is `token`.
    pub async fn start(token: &str) -> Self {
        let sent_fixture: Value = serde_json::from_slice(&fixture_bytes(
            "channels/telegram/sendMessage-response.json",
        ))
        .expect("sendMessage-response.json is JSON");
        let bot = sent_fixture["result"]["from"].clone();
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            state: Mutex::new(FakeState {
                bot,
                updates: VecDeque::new(),
                next_update_id: 100_000,
                next_message_id: sent_fixture["result"]["message_id"].as_i64().unwrap_or(1),
                calls: Vec::new(),
                sent: Vec::new(),
                documents: Vec::new(),
                faults: HashMap::new(),
                files: HashMap::new(),
                commands: Value::Null,
            }),
            news: Notify::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake Telegram: bind 127.0.0.1:0");
        let addr = listener
            .local_addr()
            .expect("fake Telegram: local address of the listener");
        let (alive, mut stopped) = watch::channel(());
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    // Errs once every sender is gone, i.e. the last handle was dropped.
                    while stopped.changed().await.is_ok() {}
                })
                .await
                .expect("fake Telegram: server failed");
        });
        Self {
            addr,
            shared,
            alive: Arc::new(alive),
        }
    }

    /// Starts the fake on a thread and runtime of its own, for synchronous tests. The thread
    /// ends when the last handle drops.
    pub fn spawn(token: &str) -> Self {
        let token = token.to_owned();
        let (handover, handle) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("fake-telegram".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake Telegram: tokio runtime");
                runtime.block_on(async move {
                    let fake = Self::start(&token).await;
                    let mut stopped = fake.alive.subscribe();
                    handover
                        .send(fake)
                        .expect("fake Telegram: the spawning test went away");
                    while stopped.changed().await.is_ok() {}
                });
            })
            .expect("fake Telegram: spawn its thread");
        handle.recv().expect("fake Telegram: server thread died")
    }

    /// The `apiBase` to configure: `http://127.0.0.1:PORT`.
    pub fn api_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bot `getMe` describes (the recorded one unless changed).
    pub fn bot(&self) -> Value {
        self.state().bot.clone()
    }

    /// Changes the username `getMe` gives.
    pub fn set_bot_username(&self, username: &str) {
        self.state().bot["username"] = json!(username);
    }

    /// Queues an update for `getUpdates`, giving it the next `update_id` unless it has one,
    /// and returns its id.
    pub fn push_update(&self, mut update: Value) -> i64 {
        let id = {
            let mut state = self.state();
            let id = match update.get("update_id").and_then(Value::as_i64) {
                Some(id) => id,
                None => {
                    let id = state.next_update_id;
                    update["update_id"] = json!(id);
                    id
                }
            };
            state.next_update_id = state.next_update_id.max(id + 1);
            state.updates.push_back(update);
            id
        };
        self.shared.news.notify_waiters();
        id
    }

    /// The ids of the updates no `offset` has confirmed yet.
    pub fn pending_update_ids(&self) -> Vec<i64> {
        self.state()
            .updates
            .iter()
            .filter_map(|update| update["update_id"].as_i64())
            .collect()
    }

    /// The next `count` calls of `method` answer `error`.
    pub fn fail_next(&self, method: &str, count: usize, error: TelegramError) {
        let mut state = self.state();
        let queue = state.faults.entry(method.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(Fault::Error(error), count));
    }

    /// The next `count` calls of `method` never answer.
    pub fn stall_next(&self, method: &str, count: usize) {
        let mut state = self.state();
        let queue = state.faults.entry(method.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(Fault::Stall, count));
    }

    /// A file `getFile` describes and `/file/bot<token>/<file_path>` serves.
    pub fn add_file(&self, file_id: &str, file_path: &str, bytes: Vec<u8>) {
        let file = StoredFile {
            file_path: file_path.to_owned(),
            size: bytes.len() as u64,
            bytes: Some(bytes),
        };
        self.state().files.insert(file_id.to_owned(), file);
    }

    /// A file `getFile` says is `size` bytes, as a local Bot API server describes files over
    /// the cloud API's 20 MB; its bytes are never served.
    pub fn add_large_file(&self, file_id: &str, file_path: &str, size: u64) {
        let file = StoredFile {
            file_path: file_path.to_owned(),
            size,
            bytes: None,
        };
        self.state().files.insert(file_id.to_owned(), file);
    }

    /// Every call so far, in order, including those answered with an error.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// The calls of one method, in order.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.state()
            .calls
            .iter()
            .filter(|call| call.method == method)
            .cloned()
            .collect()
    }

    /// The messages `sendMessage` accepted, in order.
    pub fn sent_messages(&self) -> Vec<SentText> {
        self.state().sent.clone()
    }

    /// The texts `sendMessage` accepted for `chat_id`, in order.
    pub fn texts_sent_to(&self, chat_id: &str) -> Vec<String> {
        self.state()
            .sent
            .iter()
            .filter(|sent| sent.chat_id == chat_id)
            .map(|sent| sent.text.clone())
            .collect()
    }

    /// The messages `sendMessage` accepted after the first `seen`, in order: a caller polling
    /// for answers through thousands of them copies only what is new.
    pub fn sent_messages_after(&self, seen: usize) -> Vec<SentText> {
        self.state().sent.get(seen..).unwrap_or_default().to_vec()
    }

    /// The files `sendDocument` accepted, in order.
    pub fn sent_documents(&self) -> Vec<SentDocument> {
        self.state().documents.clone()
    }

    /// The last `setMyCommands` list (`Null` before any).
    pub fn commands(&self) -> Value {
        self.state().commands.clone()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        lock(&self.shared.state)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide the next test's failure.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn not_found() -> Response {
    TelegramError {
        status: 404,
        body: json!({"ok": false, "error_code": 404, "description": "Not Found"}),
    }
    .into_response()
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(rest) = uri.path().strip_prefix("/file/bot") {
        return file(&shared, rest);
    }
    let Some((token, method)) = uri
        .path()
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
    else {
        return not_found();
    };
    let (params, upload) = parameters(&headers, uri.query(), &body);
    let fault = {
        let mut state = lock(&shared.state);
        state.calls.push(Call {
            method: method.to_owned(),
            body: params.clone(),
        });
        if token != shared.token {
            return TelegramError::unauthorized().into_response();
        }
        state.faults.get_mut(method).and_then(VecDeque::pop_front)
    };
    match fault {
        Some(Fault::Error(error)) => return error.into_response(),
        Some(Fault::Stall) => std::future::pending::<()>().await,
        None => {}
    }
    match method {
        "getUpdates" => get_updates(&shared, &params).await,
        "getMe" => ok(lock(&shared.state).bot.clone()),
        "deleteWebhook" | "sendChatAction" | "setMessageReaction" => ok(json!(true)),
        "setMyCommands" => {
            lock(&shared.state).commands = json_field(&params, "commands").unwrap_or(Value::Null);
            ok(json!(true))
        }
        "sendMessage" => send_message(&shared, &params),
        "sendDocument" => send_document(&shared, &params, upload),
        "editMessageText" => edit_message_text(&shared, &params),
        "getFile" => get_file(&shared, &params),
        _ => not_found(),
    }
}

/// A file sent in a `multipart/form-data` body.
struct Upload {
    field: String,
    file_name: String,
    bytes: Vec<u8>,
}

/// The call's parameters as one object: the query string, then a JSON, form or multipart
/// body (whose file is given apart, its field in the parameters as `"attached"`).
fn parameters(headers: &HeaderMap, query: Option<&str>, body: &[u8]) -> (Value, Option<Upload>) {
    let mut params = Map::new();
    let mut upload = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        params.insert(key.into_owned(), Value::String(value.into_owned()));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if content_type.starts_with("application/x-www-form-urlencoded") {
        for (key, value) in form_urlencoded::parse(body) {
            params.insert(key.into_owned(), Value::String(value.into_owned()));
        }
    } else if let Some(boundary) = content_type
        .strip_prefix("multipart/form-data")
        .and_then(|rest| rest.split_once("boundary="))
        .map(|(_, boundary)| boundary.trim_matches('"'))
    {
        for part in multipart_parts(body, boundary) {
            match part.file_name {
                Some(file_name) => {
                    params.insert(part.name.clone(), json!("attached"));
                    upload = Some(Upload {
                        field: part.name,
                        file_name,
                        bytes: part.bytes,
                    });
                }
                None => {
                    let value = String::from_utf8_lossy(&part.bytes).into_owned();
                    params.insert(part.name, Value::String(value));
                }
            }
        }
    } else if !body.is_empty() {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(fields)) => params.extend(fields),
            Ok(other) => {
                params.insert("_body".to_owned(), other);
            }
            Err(_) => {
                params.insert(
                    "_body".to_owned(),
                    Value::String(String::from_utf8_lossy(body).into_owned()),
                );
            }
        }
    }
    (Value::Object(params), upload)
}

/// An integer parameter, sent as a number (JSON) or as text (a form).
fn int_field(params: &Value, key: &str) -> Option<i64> {
    match &params[key] {
        Value::Number(number) => number.as_i64(),
        Value::String(text) => text.parse().ok(),
        _ => None,
    }
}

/// A text parameter; numbers (a JSON `chat_id`) as their text.
fn text_field(params: &Value, key: &str) -> Option<String> {
    match &params[key] {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// An object or array parameter: as JSON, or as a form field holding JSON text.
fn json_field(params: &Value, key: &str) -> Option<Value> {
    match &params[key] {
        Value::String(text) => serde_json::from_str(text).ok(),
        Value::Null => None,
        other => Some(other.clone()),
    }
}

async fn get_updates(shared: &Shared, params: &Value) -> Response {
    let offset = int_field(params, "offset");
    let limit = int_field(params, "limit").unwrap_or(100).clamp(1, 100) as usize;
    let timeout = Duration::from_secs(int_field(params, "timeout").unwrap_or(0).max(0) as u64);
    let deadline = tokio::time::Instant::now() + timeout.min(MAX_POLL_WAIT);
    loop {
        let news = shared.news.notified();
        tokio::pin!(news);
        // Registered before looking, so an update pushed in between still wakes this call.
        news.as_mut().enable();
        {
            let mut state = lock(&shared.state);
            if let Some(offset) = offset {
                state
                    .updates
                    .retain(|update| update["update_id"].as_i64().unwrap_or(i64::MAX) >= offset);
            }
            if !state.updates.is_empty() {
                let batch: Vec<Value> = state.updates.iter().take(limit).cloned().collect();
                return ok(Value::Array(batch));
            }
        }
        tokio::select! {
            () = &mut news => {}
            () = tokio::time::sleep_until(deadline) => return ok(json!([])),
        }
    }
}

/// Checks `text` as Telegram does for `parse_mode`, giving what it would show.
fn parsed_text(text: &str, parse_mode: Option<&str>) -> Result<String, TelegramError> {
    let visible = match parse_mode {
        None => text.to_owned(),
        Some(mode) if mode.eq_ignore_ascii_case("html") => html_text(text).map_err(|detail| {
            TelegramError::bad_request(&format!("Bad Request: can't parse entities: {detail}"))
        })?,
        Some(other) => {
            return Err(TelegramError::bad_request(&format!(
                "Bad Request: unsupported parse_mode \"{other}\""
            )));
        }
    };
    if visible.trim().is_empty() {
        return Err(TelegramError::bad_request(
            "Bad Request: message text is empty",
        ));
    }
    if visible.encode_utf16().count() > MESSAGE_LIMIT {
        return Err(TelegramError::bad_request(
            "Bad Request: message is too long",
        ));
    }
    Ok(visible)
}

/// The text of Telegram-flavoured HTML, or why Telegram would refuse it, in its words.
fn html_text(html: &str) -> Result<String, String> {
    const TAGS: [&str; 15] = [
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-spoiler",
        "span",
    ];
    let mut text = String::new();
    let mut open: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        let offset = html.len() - rest.len();
        match c {
            '<' => {
                let end = rest
                    .find('>')
                    .ok_or_else(|| format!("Unclosed start tag at byte offset {offset}"))?;
                let tag = &rest[1..end];
                if let Some(name) = tag.strip_prefix('/') {
                    let name = name.trim();
                    match open.pop() {
                        Some(expected) if expected == name => {}
                        Some(expected) => {
                            return Err(format!(
                                "Unmatched end tag at byte offset {offset}, expected \"</{expected}>\", found \"</{name}>\""
                            ));
                        }
                        None => {
                            return Err(format!("Unexpected end tag at byte offset {offset}"));
                        }
                    }
                } else {
                    let name = tag.split_whitespace().next().unwrap_or_default();
                    if !TAGS.contains(&name) {
                        return Err(format!(
                            "Unsupported start tag \"{name}\" at byte offset {offset}"
                        ));
                    }
                    open.push(name.to_owned());
                }
                rest = &rest[end + 1..];
            }
            '&' => {
                let entity = rest
                    .find(';')
                    .map(|end| &rest[..=end])
                    .filter(|entity| entity.len() <= 10);
                let decoded = match entity {
                    Some("&lt;") => Some('<'),
                    Some("&gt;") => Some('>'),
                    Some("&amp;") => Some('&'),
                    Some("&quot;") => Some('"'),
                    _ => None,
                };
                match (entity, decoded) {
                    (Some(entity), Some(decoded)) => {
                        text.push(decoded);
                        rest = &rest[entity.len()..];
                    }
                    _ => {
                        text.push('&');
                        rest = &rest[1..];
                    }
                }
            }
            other => {
                text.push(other);
                rest = &rest[other.len_utf8()..];
            }
        }
    }
    match open.pop() {
        Some(name) => Err(format!(
            "Can't find end tag corresponding to start tag \"{name}\""
        )),
        None => Ok(text),
    }
}

/// A message the bot posted into `chat_id`, shaped like the recorded sendMessage answer.
fn bot_message(state: &FakeState, message_id: i64, chat_id: &str, text: &str) -> Value {
    let id: Value = chat_id
        .parse::<i64>()
        .map_or_else(|_| json!(chat_id), |id| json!(id));
    let kind = if id.as_i64().is_some_and(|id| id > 0) {
        "private"
    } else {
        "supergroup"
    };
    json!({
        "message_id": message_id,
        "from": state.bot,
        "date": unix_now(),
        "chat": {"id": id, "type": kind},
        "text": text,
    })
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}

fn send_message(shared: &Shared, params: &Value) -> Response {
    let (Some(chat_id), Some(text)) = (text_field(params, "chat_id"), text_field(params, "text"))
    else {
        return TelegramError::bad_request("Bad Request: message text is empty").into_response();
    };
    let parse_mode = text_field(params, "parse_mode");
    let visible = match parsed_text(&text, parse_mode.as_deref()) {
        Ok(visible) => visible,
        Err(error) => return error.into_response(),
    };
    let thread = int_field(params, "message_thread_id");
    let reply_to = json_field(params, "reply_parameters")
        .and_then(|reply| int_field(&reply, "message_id"))
        .or_else(|| int_field(params, "reply_to_message_id"));
    let mut state = lock(&shared.state);
    let message_id = state.next_message_id;
    state.next_message_id += 1;
    state.sent.push(SentText {
        message_id,
        chat_id: chat_id.clone(),
        message_thread_id: thread,
        text,
        parse_mode,
        reply_to_message_id: reply_to,
    });
    let mut message = bot_message(&state, message_id, &chat_id, &visible);
    if let Some(thread) = thread {
        message["message_thread_id"] = json!(thread);
        message["is_topic_message"] = json!(true);
    }
    ok(message)
}

fn send_document(shared: &Shared, params: &Value, upload: Option<Upload>) -> Response {
    let Some(chat_id) = text_field(params, "chat_id") else {
        return TelegramError::bad_request("Bad Request: chat_id is empty").into_response();
    };
    let Some(upload) = upload.filter(|upload| upload.field == "document") else {
        return TelegramError::bad_request("Bad Request: there is no document in the request")
            .into_response();
    };
    if upload.bytes.is_empty() {
        return TelegramError::bad_request("Bad Request: file must be non-empty").into_response();
    }
    let thread = int_field(params, "message_thread_id");
    let caption = text_field(params, "caption");
    let mut state = lock(&shared.state);
    let message_id = state.next_message_id;
    state.next_message_id += 1;
    let mut message = bot_message(&state, message_id, &chat_id, "");
    if let Some(fields) = message.as_object_mut() {
        fields.remove("text");
        fields.insert(
            "document".to_owned(),
            json!({
                "file_name": upload.file_name,
                "file_id": format!("document-{message_id}"),
                "file_unique_id": format!("unique-{message_id}"),
                "file_size": upload.bytes.len(),
            }),
        );
    }
    state.documents.push(SentDocument {
        message_id,
        chat_id,
        message_thread_id: thread,
        file_name: upload.file_name,
        bytes: upload.bytes,
        caption,
    });
    ok(message)
}

fn edit_message_text(shared: &Shared, params: &Value) -> Response {
    let (Some(chat_id), Some(message_id), Some(text)) = (
        text_field(params, "chat_id"),
        int_field(params, "message_id"),
        text_field(params, "text"),
    ) else {
        return TelegramError::bad_request("Bad Request: message to edit not found")
            .into_response();
    };
    let visible = match parsed_text(&text, text_field(params, "parse_mode").as_deref()) {
        Ok(visible) => visible,
        Err(error) => return error.into_response(),
    };
    let state = lock(&shared.state);
    let mut message = bot_message(&state, message_id, &chat_id, &visible);
    message["edit_date"] = json!(unix_now());
    ok(message)
}

fn get_file(shared: &Shared, params: &Value) -> Response {
    let file_id = text_field(params, "file_id").unwrap_or_default();
    let state = lock(&shared.state);
    let Some(file) = state.files.get(&file_id) else {
        return TelegramError::bad_request("Bad Request: invalid file_id").into_response();
    };
    ok(json!({
        "file_id": file_id,
        "file_unique_id": format!("unique-{file_id}"),
        "file_size": file.size,
        "file_path": file.file_path,
    }))
}

/// `/file/bot<token>/<file_path>`, `rest` being what follows `/file/bot`.
fn file(shared: &Shared, rest: &str) -> Response {
    let Some((token, path)) = rest.split_once('/') else {
        return not_found();
    };
    let mut state = lock(&shared.state);
    state.calls.push(Call {
        method: format!("file/{path}"),
        body: Value::Null,
    });
    if token != shared.token {
        return not_found();
    }
    let bytes = state
        .files
        .values()
        .find(|file| file.file_path == path)
        .and_then(|file| file.bytes.clone());
    match bytes {
        Some(bytes) => {
            ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
        }
        None => not_found(),
    }
}

/// A recorded payload from `shared/fixtures/channels/telegram/`.
fn recorded(name: &str) -> Value {
    let path = format!("channels/telegram/{name}");
    serde_json::from_slice(&fixture_bytes(&path))
        .unwrap_or_else(|err| panic!("{path} is not JSON: {err}"))
}

/// The entities Telegram's servers find in a plain text: each `@username`, and a `/command`
/// (with its `@bot`) at the start. Offsets and lengths count UTF-16 code units.
pub fn entities_of(text: &str) -> Vec<Value> {
    let mut entities = Vec::new();
    let mut units = 0;
    let mut chars = text.char_indices().peekable();
    let mut previous: Option<char> = None;
    while let Some((index, c)) = chars.next() {
        let starts_word = previous.is_none_or(|p| !p.is_alphanumeric() && p != '_');
        let kind = match c {
            '/' if index == 0 => Some("bot_command"),
            '@' if starts_word => Some("mention"),
            _ => None,
        };
        let mut length = c.len_utf16();
        previous = Some(c);
        if let Some(kind) = kind {
            let start = units;
            while let Some(&(_, next)) = chars.peek() {
                let part_of =
                    next.is_alphanumeric() || next == '_' || (kind == "bot_command" && next == '@');
                if !part_of {
                    break;
                }
                length += next.len_utf16();
                previous = Some(next);
                chars.next();
            }
            // A lone `@` or `/` is no entity.
            if length > 1 {
                entities.push(json!({"offset": start, "length": length, "type": kind}));
            }
        }
        units += length;
    }
    entities
}

/// `message` with `text` and the entities Telegram would find in it.
fn with_text(mut message: Value, text: &str) -> Value {
    message["text"] = json!(text);
    let entities = entities_of(text);
    match message.as_object_mut() {
        Some(fields) if entities.is_empty() => {
            fields.remove("entities");
        }
        Some(fields) => {
            fields.insert("entities".to_owned(), Value::Array(entities));
        }
        None => {}
    }
    message
}

/// An update: a private chat's text message (the recorded `update-private-text.json`).
pub fn private_text(text: &str) -> Value {
    let update = recorded("update-private-text.json");
    json!({"message": with_text(update["message"].clone(), text)})
}

/// An update: a supergroup's text message (from the recorded
/// `update-supergroup-command-reply.json`, without its reply and thread).
pub fn group_text(text: &str) -> Value {
    let update = recorded("update-supergroup-command-reply.json");
    let mut message = update["message"].clone();
    if let Some(fields) = message.as_object_mut() {
        fields.remove("reply_to_message");
        fields.remove("message_thread_id");
    }
    json!({"message": with_text(message, text)})
}

/// An update: a message in a forum topic, with the implicit reply to the topic's creation
/// that Telegram adds (the recorded `message-forum-topic.json`; thread 4).
pub fn forum_topic_text(text: &str) -> Value {
    json!({"message": with_text(recorded("message-forum-topic.json"), text)})
}

/// An update: a supergroup message by an anonymous admin, `GroupAnonymousBot` with the
/// group as `sender_chat` (the recorded `message-anonymous-admin.json`, with a text instead
/// of its service content).
pub fn anonymous_admin_text(text: &str) -> Value {
    let mut message = recorded("message-anonymous-admin.json");
    if let Some(fields) = message.as_object_mut() {
        fields.remove("video_chat_started");
    }
    json!({"message": with_text(message, text)})
}

/// An update: a private photo in four sizes, captioned `www.example.com` (the recorded
/// `message-photo-caption-entities.json`).
pub fn photo_with_caption() -> Value {
    json!({"message": recorded("message-photo-caption-entities.json")})
}

/// An update: a private photo in four sizes (those of the recorded
/// `message-photo-caption-entities.json`) captioned `caption`, sent in the chat of
/// [`private_text`].
pub fn private_photo(caption: &str) -> Value {
    let mut message = private_text("")["message"].clone();
    if let Some(fields) = message.as_object_mut() {
        for text_only in ["text", "entities", "link_preview_options"] {
            fields.remove(text_only);
        }
        fields.insert(
            "photo".to_owned(),
            recorded("message-photo-caption-entities.json")["photo"].clone(),
        );
        fields.insert("caption".to_owned(), json!(caption));
        let entities = entities_of(caption);
        if !entities.is_empty() {
            fields.insert("caption_entities".to_owned(), Value::Array(entities));
        }
    }
    json!({"message": message})
}

/// An update: a private voice note of `size` bytes lasting `duration` seconds, file
/// `file_id`, in the chat of [`private_text`]. The recorded updates hold no voice note: this
/// is the recorded private message with its text replaced by the `voice` object of the Bot
/// API's documentation (`file_id`, `file_unique_id`, `duration`, `mime_type`, `file_size`).
pub fn private_voice(file_id: &str, duration: u64, size: u64) -> Value {
    let mut message = private_text("")["message"].clone();
    if let Some(fields) = message.as_object_mut() {
        for text_only in ["text", "entities", "link_preview_options"] {
            fields.remove(text_only);
        }
        fields.insert(
            "voice".to_owned(),
            json!({
                "file_id": file_id,
                "file_unique_id": format!("unique-{file_id}"),
                "duration": duration,
                "mime_type": "audio/ogg",
                "file_size": size,
            }),
        );
    }
    json!({"message": message})
}

/// A person other than the private chat's: the sender of the recorded
/// `message-photo-caption-entities.json`.
pub fn someone_else() -> Value {
    recorded("message-photo-caption-entities.json")["from"].clone()
}

/// A bot other than the fake's: `GroupAnonymousBot`, the sender of the recorded
/// `message-anonymous-admin.json`.
pub fn another_bot() -> Value {
    recorded("message-anonymous-admin.json")["from"].clone()
}

/// The update as a forward of `sender_user`'s message: the Bot API's `forward_origin` (a
/// MessageOriginUser), first sent a minute before.
pub fn forwarded(mut update: Value, sender_user: Value) -> Value {
    let date = update["message"]["date"].as_i64().unwrap_or_default();
    update["message"]["forward_origin"] =
        json!({"type": "user", "date": date - 60, "sender_user": sender_user});
    update
}

/// The update as a reply to `replied` (a message of the same chat) quoting all its text: the
/// Bot API's `reply_to_message` and `quote` (a TextQuote).
pub fn quoting(mut update: Value, replied: Value) -> Value {
    let text = replied["text"].clone();
    update["message"]["reply_to_message"] = replied;
    update["message"]["quote"] = json!({"text": text, "position": 0});
    update
}

/// The update as a reply to `quoted`, a message of another chat, quoting all its text: the
/// Bot API's `external_reply` (an ExternalReplyInfo: the origin, and for a supergroup or a
/// channel its chat and message id) and `quote`, with no `reply_to_message`.
pub fn quoting_elsewhere(mut update: Value, quoted: Value) -> Value {
    let mut external = json!({"origin": {
        "type": "user",
        "date": quoted["date"],
        "sender_user": quoted["from"],
    }});
    if matches!(
        quoted["chat"]["type"].as_str(),
        Some("supergroup" | "channel")
    ) {
        external["chat"] = quoted["chat"].clone();
        external["message_id"] = quoted["message_id"].clone();
    }
    update["message"]["external_reply"] = external;
    update["message"]["quote"] = json!({"text": quoted["text"], "position": 0});
    update
}

/// The update as sent through the inline bot `bot` (a User): the Bot API's `via_bot`.
pub fn via_bot(mut update: Value, bot: Value) -> Value {
    update["message"]["via_bot"] = bot;
    update
}

/// The update as an edit: `edited_message` with an `edit_date` a minute after its `date`.
pub fn edited(update: Value) -> Value {
    let mut message = update["message"].clone();
    let date = message["date"].as_i64().unwrap_or_default();
    message["edit_date"] = json!(date + 60);
    let mut edited = json!({"edited_message": message});
    if let Some(id) = update.get("update_id") {
        edited["update_id"] = id.clone();
    }
    edited
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn entities_are_found_as_telegram_finds_them() {
        assert_eq!(
            entities_of("/new@bot hi @alice, mail a@b 😀 @bob"),
            vec![
                json!({"offset": 0, "length": 8, "type": "bot_command"}),
                json!({"offset": 12, "length": 6, "type": "mention"}),
                json!({"offset": 32, "length": 4, "type": "mention"}),
            ]
        );
        assert_eq!(entities_of("a / b @"), Vec::<Value>::new());
    }

    #[tokio::test]
    async fn form_bodies_query_parameters_limit_and_wrong_tokens() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let fake = FakeTelegram::start("1:abc").await;
        let base = format!("{}/bot1:abc", fake.api_base());
        let first = fake.push_update(private_text("one"));
        fake.push_update(private_text("two"));
        fake.push_update(private_text("three"));

        let answer: Value = client
            .get(format!("{base}/getUpdates?offset={}&limit=1", first + 1))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(answer["result"][0]["message"]["text"], "two");
        assert_eq!(answer["result"].as_array().map(Vec::len), Some(1));
        assert_eq!(fake.pending_update_ids(), [first + 1, first + 2]);

        let form = form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("chat_id", "-100123"),
                ("message_thread_id", "4"),
                ("text", "<b>hi</b> &amp; bye"),
                ("parse_mode", "HTML"),
                ("reply_parameters", r#"{"message_id": 9}"#),
            ])
            .finish();
        let answer: Value = client
            .post(format!("{base}/sendMessage"))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(answer["result"]["text"], "hi & bye");
        assert_eq!(answer["result"]["chat"]["id"], -100123);
        assert_eq!(
            fake.sent_messages(),
            [SentText {
                message_id: 2746,
                chat_id: "-100123".to_owned(),
                message_thread_id: Some(4),
                text: "<b>hi</b> &amp; bye".to_owned(),
                parse_mode: Some("HTML".to_owned()),
                reply_to_message_id: Some(9),
            }]
        );

        let long = client
            .post(format!("{base}/sendMessage"))
            .json(&json!({"chat_id": 1, "text": "x".repeat(4097)}))
            .send()
            .await
            .unwrap();
        assert_eq!(long.status(), 400);
        let wrong = client
            .post(format!("{}/bot1:wrong/getMe", fake.api_base()))
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401);
        let file = client
            .get(format!("{}/file/bot1:wrong/photos/a.jpg", fake.api_base()))
            .send()
            .await
            .unwrap();
        assert_eq!(file.status(), 404);
    }

    #[test]
    fn html_is_checked_as_telegram_checks_it() {
        assert_eq!(
            html_text("<b>a &amp; <i>b</i></b> &lt;3 & more"),
            Ok("a & b <3 & more".to_owned())
        );
        assert_eq!(
            html_text("<b>open"),
            Err("Can't find end tag corresponding to start tag \"b\"".to_owned())
        );
        assert_eq!(
            html_text("a<br>b"),
            Err("Unsupported start tag \"br\" at byte offset 1".to_owned())
        );
        assert_eq!(
            html_text("<b><i>x</b></i>"),
            Err("Unmatched end tag at byte offset 7, expected \"</i>\", found \"</b>\"".to_owned())
        );
    }
}
