//! A loopback fake of the Hugging Face hub's file protocol. `HEAD`/`GET
//! /{owner}/{repo}/resolve/{revision}/{path}` answers 302 to a second server, the "CDN", with
//! the headers the real hub sends (`X-Repo-Commit`, `X-Linked-Etag`, `X-Linked-Size`); the CDN
//! serves the bytes and honours `Range: bytes=N-`. A [`HubMode`] scripts its failures, and
//! every request is recorded.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::models::sha256_hex;

/// A file in a repository of the fake hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubFile {
    /// `owner/name`.
    pub repo: String,
    /// The revision it is served at; a 40-hex revision is also the commit the hub reports.
    pub revision: String,
    /// Its path in the repository.
    pub path: String,
    pub bytes: Vec<u8>,
}

/// How the fake misbehaves, from the next request on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubMode {
    /// As the real hub and CDN do.
    Normal,
    /// The CDN ignores `Range` and sends the whole file with 200.
    IgnoreRange,
    /// The CDN promises the whole (rest of the) file, sends this many bytes, and closes the
    /// connection.
    DropAfter(usize),
    /// The CDN sends other bytes of the right length.
    WrongBytes,
    /// The hub's `X-Linked-Etag` names another sha256.
    WrongEtag,
    /// Every `resolve` answers 404 with this `X-Error-Code` (`RepoNotFound`,
    /// `RevisionNotFound`, `EntryNotFound`).
    NotFound(String),
}

/// Which of the two servers was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubServer {
    Hub,
    Cdn,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRequest {
    pub server: HubServer,
    pub method: String,
    pub path: String,
    /// The `Range` header, if any.
    pub range: Option<String>,
}

/// The commit a revision that is not itself a commit resolves to.
pub const FAKE_COMMIT: &str = "1111111111111111111111111111111111111111";

struct Shared {
    cdn: SocketAddr,
    files: Vec<HubFile>,
    mode: Mutex<HubMode>,
    requests: Mutex<Vec<HubRequest>>,
}

/// The fake hub and its CDN on 127.0.0.1, on a thread and runtime of their own. Stops when
/// dropped.
pub struct FakeHub {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl FakeHub {
    pub fn spawn(files: Vec<HubFile>) -> Self {
        let (handover, handle) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("fake hub: runtime");
            runtime.block_on(async move {
                let hub = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("fake hub: bind");
                let cdn = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("fake hub: bind the CDN");
                let addr = hub.local_addr().expect("fake hub: address");
                let shared = Arc::new(Shared {
                    cdn: cdn.local_addr().expect("fake hub: CDN address"),
                    files,
                    mode: Mutex::new(HubMode::Normal),
                    requests: Mutex::new(Vec::new()),
                });
                let hub_app = Router::new()
                    .route(
                        "/{owner}/{repo}/resolve/{revision}/{*path}",
                        axum::routing::get(resolve),
                    )
                    .with_state(shared.clone());
                let cdn_app = Router::new()
                    .route("/blobs/{sha256}", axum::routing::get(blob))
                    .with_state(shared.clone());
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                handover
                    .send((addr, shared, stop))
                    .expect("fake hub: handover");
                tokio::select! {
                    _ = axum::serve(hub, hub_app) => {}
                    _ = axum::serve(cdn, cdn_app) => {}
                    _ = stopped => {}
                }
            });
        });
        let (addr, shared, stop) = handle.recv().expect("fake hub: thread died");
        Self {
            addr,
            shared,
            _stop: stop,
        }
    }

    /// What `models.hubUrl` should be: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_mode(&self, mode: HubMode) {
        *self.shared.mode.lock().unwrap_or_else(|e| e.into_inner()) = mode;
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<HubRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Shared {
    fn record(&self, server: HubServer, method: &Method, path: String, headers: &HeaderMap) {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(HubRequest {
                server,
                method: method.to_string(),
                path,
                range: headers
                    .get(header::RANGE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
            });
    }

    fn mode(&self) -> HubMode {
        self.mode.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn not_found(code: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        [("x-error-code", code.to_owned())],
        format!("{code}\n"),
    )
        .into_response()
}

async fn resolve(
    State(shared): State<Arc<Shared>>,
    Path((owner, repo, revision, path)): Path<(String, String, String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let repo = format!("{owner}/{repo}");
    shared.record(
        HubServer::Hub,
        &method,
        format!("/{repo}/resolve/{revision}/{path}"),
        &headers,
    );
    let mode = shared.mode();
    if let HubMode::NotFound(code) = &mode {
        return not_found(code);
    }
    let in_repo: Vec<&HubFile> = shared.files.iter().filter(|f| f.repo == repo).collect();
    if in_repo.is_empty() {
        return not_found("RepoNotFound");
    }
    let at_revision: Vec<&&HubFile> = in_repo.iter().filter(|f| f.revision == revision).collect();
    if at_revision.is_empty() {
        return not_found("RevisionNotFound");
    }
    let Some(file) = at_revision.iter().find(|f| f.path == path) else {
        return not_found("EntryNotFound");
    };
    let sha256 = sha256_hex(&file.bytes);
    let etag = match mode {
        HubMode::WrongEtag => "0".repeat(64),
        HubMode::Normal
        | HubMode::IgnoreRange
        | HubMode::DropAfter(_)
        | HubMode::WrongBytes
        | HubMode::NotFound(_) => sha256.clone(),
    };
    let commit = if revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit()) {
        revision
    } else {
        FAKE_COMMIT.to_owned()
    };
    (
        StatusCode::FOUND,
        [
            (
                header::LOCATION.as_str(),
                format!("http://{}/blobs/{sha256}", shared.cdn),
            ),
            ("x-repo-commit", commit),
            ("x-linked-etag", format!("\"{etag}\"")),
            ("x-linked-size", file.bytes.len().to_string()),
            (header::ETAG.as_str(), format!("\"{etag}\"")),
        ],
    )
        .into_response()
}

async fn blob(
    State(shared): State<Arc<Shared>>,
    Path(sha256): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    shared.record(
        HubServer::Cdn,
        &method,
        format!("/blobs/{sha256}"),
        &headers,
    );
    let Some(file) = shared.files.iter().find(|f| sha256_hex(&f.bytes) == sha256) else {
        return (StatusCode::NOT_FOUND, "no such blob").into_response();
    };
    let mode = shared.mode();
    let mut bytes = file.bytes.clone();
    if mode == HubMode::WrongBytes
        && let Some(last) = bytes.last_mut()
    {
        *last ^= 0xff;
    }
    let len = bytes.len();
    let start = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.strip_suffix('-'))
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|_| mode != HubMode::IgnoreRange);
    let (status, start) = match start {
        Some(start) if start >= len => {
            return (
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{len}"))],
            )
                .into_response();
        }
        Some(start) => (StatusCode::PARTIAL_CONTENT, start),
        None => (StatusCode::OK, 0),
    };
    let rest = bytes.split_off(start);
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_LENGTH, rest.len())
        .header(header::ACCEPT_RANGES, "bytes");
    if status == StatusCode::PARTIAL_CONTENT {
        response = response.header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{len}", len - 1),
        );
    }
    let body = match mode {
        HubMode::DropAfter(sent) => {
            let sent = rest[..sent.min(rest.len())].to_vec();
            // The promised length is not reached: hyper aborts the connection. The pause lets
            // the headers and the bytes reach the client first, as on a real broken link.
            let broken = futures::stream::once(async {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                Err(std::io::Error::other("fake hub: dropped"))
            });
            Body::from_stream(futures::StreamExt::chain(
                futures::stream::iter([Ok(Bytes::from(sent))]),
                broken,
            ))
        }
        HubMode::Normal
        | HubMode::IgnoreRange
        | HubMode::WrongBytes
        | HubMode::WrongEtag
        | HubMode::NotFound(_) => Body::from(rest),
    };
    response
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
