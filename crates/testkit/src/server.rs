//! The mock LLM HTTP server.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::fixtures::Protocol;
use crate::reply::Reply;

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Lower-case header names.
    pub headers: BTreeMap<String, String>,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    /// Answer every request with this once the queue is empty (benchmarks).
    fallback: Mutex<Option<Reply>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// A mock LLM on 127.0.0.1 that speaks Anthropic Messages (`POST /v1/messages`) and OpenAI
/// Chat Completions (`POST /v1/chat/completions`). Replies are scripted with [`MockLlm::push`]
/// and served in order whichever endpoint is hit; every request is recorded. When the script
/// runs out the mock answers 500 with a message saying so, so a test fails instead of hanging.
#[derive(Clone)]
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl MockLlm {
    /// Starts the server on the current tokio runtime.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            axum::serve(listener, app).await.expect("mock LLM server");
        });
        Self { addr, shared }
    }

    /// Starts the server on a thread of its own, for synchronous tests (the binary under test
    /// runs as a child process). The thread lives as long as the test process.
    pub fn spawn() -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(async move {
                tx.send(Self::start().await).expect("hand over the mock");
                std::future::pending::<()>().await;
            });
        });
        rx.recv().expect("mock LLM started")
    }

    /// Anthropic SDK style base: the host root.
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// OpenAI SDK style base: includes `/v1`.
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Queues the reply to the next unanswered request.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Answers with `reply` whenever the queue is empty.
    pub fn set_fallback(&self, reply: Reply) {
        *lock(&self.shared.fallback) = Some(reply);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Replies still queued.
    pub fn pending(&self) -> usize {
        lock(&self.shared.replies).len()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide the next test's failure.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: axum::http::Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let recorded = RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.clone(),
    };
    let number = {
        let mut requests = lock(&shared.requests);
        requests.push(recorded);
        requests.len()
    };
    let protocol = match uri.path() {
        "/v1/messages" => Protocol::Anthropic,
        "/v1/chat/completions" => Protocol::OpenAiChat,
        other => {
            return (
                StatusCode::NOT_FOUND,
                format!("mock LLM: no endpoint {other}"),
            )
                .into_response();
        }
    };
    let reply = lock(&shared.replies)
        .pop_front()
        .or_else(|| lock(&shared.fallback).clone());
    let Some(reply) = reply else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("mock LLM: no scripted reply left for request {number}"),
        )
            .into_response();
    };
    if !reply.delay().is_zero() {
        tokio::time::sleep(reply.delay()).await;
    }
    let stream = body["stream"].as_bool().unwrap_or(false);
    let model = body["model"].as_str().unwrap_or("mock-model");
    let rendered = reply.render(protocol, stream, model);
    let mut response = (
        StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, rendered.content_type)],
        rendered.body,
    )
        .into_response();
    for (name, value) in reply.headers() {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(name.as_bytes()),
            axum::http::HeaderValue::from_str(value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
