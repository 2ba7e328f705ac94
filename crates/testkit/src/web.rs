//! A fake web on 127.0.0.1 for `web_fetch` and `web_search`: pages with boilerplate around an
//! article, redirects (to anywhere a test names), a 50 MB body, a gzip bomb, a server that
//! never answers, a PDF, JSON, an image, and the search providers (Brave, Tavily, SearXNG,
//! DuckDuckGo) answering with the bodies in `crates/testkit/fixtures/web/` (their sources are
//! in its README). Every request is recorded.
//!
//! | path | answer |
//! |---|---|
//! | `/article` | an HTML article inside navigation, a cookie banner, scripts and a footer |
//! | `/redirect?to=URL` | `302 Location: URL` |
//! | `/hops/N` | `302` to `/hops/N-1`; `/hops/0` is text |
//! | `/big` | 50 MB of text, streamed (never held in memory) |
//! | `/bomb` | 64 MiB of zeros, gzip-encoded (about 64 KiB on the wire) |
//! | `/slow` | the headers never come |
//! | `/boiler.pdf` | a two-page PDF (`crates/memory/tests/data/boiler.pdf`) |
//! | `/data.json`, `/image.png`, `/no-store` | JSON; PNG bytes; text with `Cache-Control: no-store` |
//! | `/res/v1/web/search` | Brave (`X-Subscription-Token: rate-limited` answers 429) |
//! | `POST /search` | Tavily; `GET /search` SearXNG; `GET /html/` DuckDuckGo |

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;

/// The article page: the article, and the boilerplate a readable version leaves out.
pub const ARTICLE_HTML: &str = include_str!("../fixtures/web/article.html");

const BIG_BYTES: usize = 50 * 1024 * 1024;
const BOMB_BYTES: usize = 64 * 1024 * 1024;

/// One request as the fake web got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebRequest {
    pub method: String,
    /// Path and query, as sent.
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl WebRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<WebRequest>>,
}

/// The fake web; clones share the server, which stops when the last one is dropped.
#[derive(Clone)]
pub struct FakeWeb {
    addr: SocketAddr,
    shared: Arc<Shared>,
    alive: Arc<watch::Sender<()>>,
}

impl FakeWeb {
    /// Starts on the current tokio runtime, on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake web: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("fake web: local address");
        let shared = Arc::new(Shared::default());
        let (alive, mut stopped) = watch::channel(());
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { while stopped.changed().await.is_ok() {} })
                .await
                .expect("fake web: server failed");
        });
        Self {
            addr,
            shared,
            alive: Arc::new(alive),
        }
    }

    /// Starts on a thread of its own, for synchronous tests (the binary under test).
    pub fn spawn() -> Self {
        let (handover, handle) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("fake-web".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake web: tokio runtime");
                runtime.block_on(async move {
                    let web = Self::start().await;
                    let mut stopped = web.alive.subscribe();
                    handover.send(web).expect("fake web: the test went away");
                    while stopped.changed().await.is_ok() {}
                });
            })
            .expect("fake web: thread");
        handle.recv().expect("fake web: did not start")
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<WebRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The requests whose path (before `?`) is `path`.
    pub fn requests_to(&self, path: &str) -> Vec<WebRequest> {
        self.requests()
            .into_iter()
            .filter(|request| request.uri.split('?').next() == Some(path))
            .collect()
    }
}

async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let headers = request.headers().clone();
    let body = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    shared.requests.lock().unwrap().push(WebRequest {
        method: method.to_string(),
        uri: uri.to_string(),
        headers: headers
            .iter()
            .map(|(name, value)| {
                (
                    name.to_string(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let query = uri.query().unwrap_or_default();
    let param = |name: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    let path = uri.path();
    match (method, path) {
        (Method::GET, "/article") => html(ARTICLE_HTML.as_bytes().to_vec()),
        (Method::GET, "/redirect") => redirect(&param("to").unwrap_or_default()),
        (Method::GET, hops) if hops.starts_with("/hops/") => {
            match hops["/hops/".len()..].parse::<u32>() {
                Ok(0) | Err(_) => typed("text/plain", b"arrived".to_vec()),
                Ok(n) => redirect(&format!("/hops/{}", n - 1)),
            }
        }
        (Method::GET, "/big") => big(),
        (Method::GET, "/bomb") => bomb(),
        (Method::GET, "/slow") => {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            typed("text/plain", b"too late".to_vec())
        }
        (Method::GET, "/boiler.pdf") => typed(
            "application/pdf",
            include_bytes!("../../memory/tests/data/boiler.pdf").to_vec(),
        ),
        (Method::GET, "/data.json") => typed(
            "application/json; charset=utf-8",
            br#"{"boiler": {"pressure_bar": 1.5, "serviced": "May"}}"#.to_vec(),
        ),
        (Method::GET, "/image.png") => typed("image/png", b"\x89PNG\r\n\x1a\n....".to_vec()),
        (Method::GET, "/no-store") => (
            [
                (header::CONTENT_TYPE, "text/plain"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            "personal",
        )
            .into_response(),
        (Method::GET, "/res/v1/web/search") => brave(&headers),
        (Method::POST, "/search") => typed(
            "application/json",
            include_bytes!("../fixtures/web/tavily-search.json").to_vec(),
        ),
        (Method::GET, "/search") if param("format").as_deref() == Some("json") => typed(
            "application/json",
            include_bytes!("../fixtures/web/searxng-search.json").to_vec(),
        ),
        (Method::GET, "/html/") => {
            html(include_bytes!("../fixtures/web/duckduckgo-html-hello.html").to_vec())
        }
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

fn typed(content_type: &'static str, body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn html(body: Vec<u8>) -> Response {
    typed("text/html; charset=UTF-8", body)
}

fn redirect(to: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to.to_owned())], "").into_response()
}

/// 50 MB in 64 KiB chunks, made as they are sent.
fn big() -> Response {
    let chunk = Bytes::from(vec![b'a'; 64 * 1024]);
    let chunks = BIG_BYTES / chunk.len();
    let stream =
        futures::stream::iter((0..chunks).map(move |_| Ok::<Bytes, std::io::Error>(chunk.clone())));
    (
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(stream),
    )
        .into_response()
}

fn bomb() -> Response {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..BOMB_BYTES / zeros.len() {
        encoder.write_all(&zeros).unwrap();
    }
    let body = encoder.finish().unwrap();
    (
        [
            (header::CONTENT_TYPE, "text/plain"),
            (header::CONTENT_ENCODING, "gzip"),
        ],
        body,
    )
        .into_response()
}

fn brave(headers: &HeaderMap) -> Response {
    match headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok())
    {
        None => (StatusCode::UNAUTHORIZED, "missing token").into_response(),
        Some("rate-limited") => (
            StatusCode::TOO_MANY_REQUESTS,
            [
                (header::CONTENT_TYPE, "application/json"),
                (
                    header::HeaderName::from_static("x-ratelimit-reset"),
                    "1, 1419704",
                ),
            ],
            include_bytes!("../fixtures/web/brave-rate-limited.json").to_vec(),
        )
            .into_response(),
        Some(_) => typed(
            "application/json",
            include_bytes!("../fixtures/web/brave-web-search.json").to_vec(),
        ),
    }
}
