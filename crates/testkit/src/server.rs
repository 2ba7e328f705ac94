//! The mock LLM HTTP server: scripted replies in order, every request recorded.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::Value;
use tokio::sync::watch;

use crate::reply::{Endpoint, Reply};
use crate::transcription::{Transcription, TranscriptionRequest};

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    /// The path without the query, e.g. `/v1/messages`.
    pub path: String,
    /// Lower-case header names; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The JSON body; a body that is not JSON is kept as a string (`Null` when empty).
    pub body: Value,
}

#[derive(Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    /// Answers every request once the queue is empty (benchmarks).
    fallback: Mutex<Option<Reply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// `/v1/audio/transcriptions`: its own script and record.
    transcriptions: Mutex<VecDeque<Transcription>>,
    transcription_requests: Mutex<Vec<TranscriptionRequest>>,
    /// Model requests being answered now, and the most there ever were at once.
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
}

/// Counts a model request as being answered until dropped.
struct InFlight<'a>(&'a Script);

impl<'a> InFlight<'a> {
    fn enter(script: &'a Script) -> Self {
        let now = script.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        script.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(script)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A mock LLM on 127.0.0.1 speaking Anthropic Messages (`POST /v1/messages`), OpenAI Chat
/// Completions (`POST /v1/chat/completions`), the OpenAI Responses API (`POST /v1/responses`)
/// and Gemini (`POST /v1beta/models/{model}:generateContent` or `:streamGenerateContent`),
/// with OpenAI's embeddings (`POST /v1/embeddings`) and transcriptions
/// (`POST /v1/audio/transcriptions`, scripted by [`MockLlm::push_transcription`]).
/// Clones share the same server; it stops when the last clone is dropped.
#[derive(Clone)]
pub struct MockLlm {
    addr: SocketAddr,
    script: Arc<Script>,
    /// Dropping the last clone of this closes the channel, which stops the server.
    alive: Arc<watch::Sender<()>>,
}

impl MockLlm {
    /// Starts the server on the current tokio runtime, on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let script = Arc::new(Script::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("mock LLM: bind 127.0.0.1:0");
        let addr = listener
            .local_addr()
            .expect("mock LLM: local address of the listener");
        let (alive, mut stopped) = watch::channel(());
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&script));
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    // Errs once every sender is gone, i.e. the last handle was dropped.
                    while stopped.changed().await.is_ok() {}
                })
                .await
                .expect("mock LLM: server failed");
        });
        Self {
            addr,
            script,
            alive: Arc::new(alive),
        }
    }

    /// Starts the server on a thread and runtime of its own, for synchronous tests (e.g. the
    /// binary under test run with `assert_cmd`). The thread ends when the last handle drops.
    pub fn spawn() -> Self {
        let (handover, handle) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("mock-llm".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("mock LLM: tokio runtime");
                runtime.block_on(async move {
                    let mock = Self::start().await;
                    let mut stopped = mock.alive.subscribe();
                    handover
                        .send(mock)
                        .expect("mock LLM: the spawning test went away");
                    while stopped.changed().await.is_ok() {}
                });
            })
            .expect("mock LLM: spawn its thread");
        handle.recv().expect("mock LLM: server thread died")
    }

    /// Anthropic SDK style base URL: the host root, `http://127.0.0.1:PORT`.
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// OpenAI SDK style base URL, with `/v1`: `http://127.0.0.1:PORT/v1` (Chat Completions and
    /// the Responses API).
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Queues the reply to the next request not yet answered, whichever endpoint it hits.
    pub fn push(&self, reply: Reply) {
        lock(&self.script.replies).push_back(reply);
    }

    /// Answers with `reply` whenever the queue is empty, instead of the 500.
    pub fn set_fallback(&self, reply: Reply) {
        *lock(&self.script.fallback) = Some(reply);
    }

    /// Every request received so far, in order, including those answered with an error.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.script.requests).clone()
    }

    /// Every request received since the last call (or the start), which the mock then
    /// forgets: a benchmark sending thousands of growing conversations keeps its own memory
    /// flat this way.
    pub fn take_requests(&self) -> Vec<RecordedRequest> {
        std::mem::take(&mut *lock(&self.script.requests))
    }

    /// The most model requests (not embeddings) the mock was answering at once, each counted
    /// from its arrival until its reply starts, the reply's delay included: with
    /// [`Reply::with_delay`], how many calls a client had open concurrently.
    pub fn peak_concurrency(&self) -> usize {
        self.script.peak_in_flight.load(Ordering::SeqCst)
    }

    /// Queues the answer to the next upload to `POST /v1/audio/transcriptions`.
    pub fn push_transcription(&self, reply: Transcription) {
        lock(&self.script.transcriptions).push_back(reply);
    }

    /// Every upload to `POST /v1/audio/transcriptions` so far, in order (not among
    /// [`MockLlm::requests`]).
    pub fn transcription_requests(&self) -> Vec<TranscriptionRequest> {
        lock(&self.script.transcription_requests).clone()
    }

    /// How many queued replies have not been used yet.
    pub fn pending(&self) -> usize {
        lock(&self.script.replies).len()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide the next test's failure.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn answer(
    State(script): State<Arc<Script>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if (&method, uri.path()) == (&Method::POST, "/v1/audio/transcriptions") {
        let upload = crate::transcription::read_upload(&headers, &body);
        let next = lock(&script.transcriptions).pop_front();
        let response = crate::transcription::answer(upload.as_ref(), next);
        if let Ok(upload) = upload {
            lock(&script.transcription_requests).push(upload);
        }
        return response;
    }
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&body).into_owned()))
    };
    let mut recorded_headers = BTreeMap::<String, String>::new();
    for (name, value) in &headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        recorded_headers
            .entry(name.as_str().to_owned())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    let recorded = RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        headers: recorded_headers,
        body,
    };
    let record = |recorded: RecordedRequest| {
        let mut requests = lock(&script.requests);
        requests.push(recorded);
        requests.len()
    };
    // Gemini names the model and the streaming mode in the path; the renderer reads both from
    // the body, so they are copied there (not into what is recorded).
    let gemini = uri
        .path()
        .strip_prefix("/v1beta/models/")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(_, action)| matches!(*action, "generateContent" | "streamGenerateContent"));
    let mut body = std::borrow::Cow::Borrowed(&recorded.body);
    if let Some((model, action)) = gemini {
        let body = body.to_mut();
        body["model"] = Value::from(model);
        body["stream"] = Value::Bool(action == "streamGenerateContent");
    }
    if (&method, uri.path()) == (&Method::POST, "/v1/embeddings") {
        let response = embeddings(&body);
        record(recorded);
        return response;
    }
    let endpoint = match (&method, uri.path()) {
        (&Method::POST, _) if gemini.is_some() => Endpoint::Gemini,
        (&Method::POST, "/v1/messages") => Endpoint::AnthropicMessages,
        (&Method::POST, "/v1/chat/completions") => Endpoint::OpenAiChat,
        (&Method::POST, "/v1/responses") => Endpoint::OpenAiResponses,
        (other_method, other_path) => {
            let response = (
                StatusCode::NOT_FOUND,
                format!(
                    "mock LLM: no endpoint {other_method} {other_path} \
                     (POST /v1/messages, /v1/chat/completions, /v1/responses or \
                     /v1beta/models/MODEL:streamGenerateContent)"
                ),
            )
                .into_response();
            record(recorded);
            return response;
        }
    };
    let _in_flight = InFlight::enter(&script);
    let reply = lock(&script.replies)
        .pop_front()
        .or_else(|| lock(&script.fallback).clone());
    let Some(reply) = reply else {
        let number = record(recorded);
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("mock LLM: no scripted reply left for request {number}"),
        )
            .into_response();
    };
    // Rendered before it is recorded, so the body need not be copied; recorded before any
    // delay, so a test sees a request whose reply is still held back.
    let rendered = reply.render(endpoint, &body);
    drop(body);
    record(recorded);
    if let Some(gate) = reply.gate() {
        gate.passed().await;
    }
    if !reply.delay().is_zero() {
        tokio::time::sleep(reply.delay()).await;
    }
    // A JSON answer goes out whole, with a content-length, as real ones do; a stream goes out
    // frame by frame.
    let chunk_delay = reply.chunk_delay();
    let body = match <[Bytes; 1]>::try_from(rendered.frames) {
        Ok([whole]) if rendered.content_type == "application/json" && !rendered.hold => {
            Body::from(whole)
        }
        Ok(frames) => Body::from_stream(paced(frames.into(), chunk_delay, rendered.hold)),
        Err(frames) => Body::from_stream(paced(frames, chunk_delay, rendered.hold)),
    };
    let mut response = (
        rendered.status,
        [(header::CONTENT_TYPE, rendered.content_type)],
        body,
    )
        .into_response();
    for (name, value) in reply.headers() {
        response.headers_mut().append(name.clone(), value.clone());
    }
    response
}

/// Dimensions of the mock's embeddings.
pub const EMBEDDING_DIMENSIONS: usize = 64;

/// OpenAI's `POST /v1/embeddings`, answered without the script: each text's vector counts its
/// words, each word hashed to one of 64 dimensions, so texts sharing words are alike and the
/// same text always gets the same vector.
fn embeddings(body: &Value) -> Response {
    let inputs: Vec<String> = match &body["input"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({"error": {
                    "message": "'input' must be a string or an array of strings",
                    "type": "invalid_request_error"}})),
            )
                .into_response();
        }
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let mut vector = vec![0.0f32; EMBEDDING_DIMENSIONS];
            for word in text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                // FNV-1a: stable across runs and platforms.
                let hash = word
                    .to_lowercase()
                    .bytes()
                    .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                    });
                vector[(hash % EMBEDDING_DIMENSIONS as u64) as usize] += 1.0;
            }
            serde_json::json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    let tokens: usize = inputs.iter().map(|t| t.split_whitespace().count()).sum();
    axum::Json(serde_json::json!({
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
    }))
    .into_response()
}

/// The frames of a body, `delay` apart; with `hold`, the body then stays open, sending nothing.
fn paced(
    frames: Vec<Bytes>,
    delay: Duration,
    hold: bool,
) -> futures::stream::BoxStream<'static, Result<Bytes, Infallible>> {
    let frames = futures::stream::iter(frames.into_iter().enumerate()).then(
        move |(index, frame)| async move {
            if index > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok(frame)
        },
    );
    if hold {
        frames.chain(futures::stream::pending()).boxed()
    } else {
        frames.boxed()
    }
}
