//! A client of the web page's API for the tests: what the page's script does, over HTTP, with
//! the sign-in cookie and the CSRF header kept as a browser keeps them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Home, Wire};

/// One event of a server-sent event stream.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub name: String,
    pub data: Value,
}

/// The events of a whole stream's text.
pub fn parse_sse(text: &str) -> Vec<SseEvent> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = "message".to_owned();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    name = value.trim().to_owned();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.trim_start());
                }
            }
            (!data.is_empty()).then(|| SseEvent {
                name,
                data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
            })
        })
        .collect()
}

/// An answer: status and body (JSON when it is).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

pub struct WebClient {
    // Dropped before the runtime its connections live on.
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    pub base: String,
    pub csrf: Option<String>,
    pub cookie: Option<String>,
    /// Sent as `Host` instead of the address's own.
    pub host: Option<String>,
}

impl WebClient {
    /// A client of the gateway at `base` (`http://127.0.0.1:PORT`); `me` not yet asked.
    pub fn new(base: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // nanocrab's own builder installs the TLS provider reqwest needs.
        let client = nanocrab_config::http::client_builder(nanocrab_config::http::Timeouts {
            connect: Duration::from_secs(10),
            read: None,
            total: None,
        })
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
        Self {
            client,
            runtime,
            base: base.to_owned(),
            csrf: None,
            cookie: None,
            host: None,
        }
    }

    /// A client that asked `GET /api/me` for its CSRF header, as the page does first.
    pub fn signed_in(base: &str) -> Self {
        let mut client = Self::new(base);
        let me = client.get("/api/me");
        assert_eq!(me.status, 200, "{me:?}");
        client.csrf = Some(me.body["csrf"].as_str().unwrap().to_owned());
        client
    }

    /// The client, for a request built by hand.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(csrf) = &self.csrf {
            request = request.header("X-Nanocrab-CSRF", csrf);
        }
        if let Some(cookie) = &self.cookie {
            request = request.header("Cookie", cookie);
        }
        if let Some(host) = &self.host {
            request = request.header("Host", host);
        }
        request
    }

    pub fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        self.runtime.block_on(async {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let text = response.text().await.unwrap();
            let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
            Answer {
                status,
                body,
                headers,
            }
        })
    }

    pub fn get(&self, path: &str) -> Answer {
        self.send(self.request(reqwest::Method::GET, path))
    }

    pub fn post(&self, path: &str, body: &Value) -> Answer {
        self.send(self.request(reqwest::Method::POST, path).json(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> Answer {
        self.send(self.request(reqwest::Method::PUT, path).json(body))
    }

    pub fn delete(&self, path: &str) -> Answer {
        self.send(self.request(reqwest::Method::DELETE, path))
    }

    /// A request with `body` as its raw bytes and `headers`, for malformed input.
    pub fn raw(&self, method: &str, path: &str, body: &str, headers: &[(&str, &str)]) -> Answer {
        let mut request = self
            .request(method.parse().unwrap(), path)
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request)
    }

    /// `POST /api/chat` read to its end: the stream's events.
    pub fn chat(&self, body: &Value) -> Vec<SseEvent> {
        let answer = self.send(
            self.request(reqwest::Method::POST, "/api/chat")
                .json(body)
                .timeout(Duration::from_secs(120)),
        );
        assert_eq!(answer.status, 200, "{answer:?}");
        parse_sse(answer.body.as_str().unwrap())
    }

    /// `POST /api/chat`, reading only until an event named `until` arrives, then hanging up;
    /// the events read.
    pub fn chat_until(&self, body: &Value, until: &str) -> Vec<SseEvent> {
        self.stream_until(
            self.request(reqwest::Method::POST, "/api/chat").json(body),
            until,
        )
    }

    /// `GET path`, an event stream, read until an event named `until` arrives; `started` is
    /// called once the stream is open.
    pub fn events_until(&self, path: &str, until: &str, started: impl FnOnce()) -> Vec<SseEvent> {
        let request = self.request(reqwest::Method::GET, path);
        self.runtime.block_on(async {
            let response = request.send().await.unwrap();
            assert_eq!(response.status().as_u16(), 200);
            started();
            read_until(response, until).await
        })
    }

    fn stream_until(&self, request: reqwest::RequestBuilder, until: &str) -> Vec<SseEvent> {
        self.runtime.block_on(async {
            let response = request.send().await.unwrap();
            assert_eq!(response.status().as_u16(), 200);
            read_until(response, until).await
        })
    }

    /// `POST /api/chat` that reads nothing of the answer until `wait` returns, then all of it.
    pub fn chat_read_late(&self, body: &Value, wait: impl FnOnce()) -> Vec<SseEvent> {
        let request = self.request(reqwest::Method::POST, "/api/chat").json(body);
        let response = self.runtime.block_on(request.send()).unwrap();
        assert_eq!(response.status().as_u16(), 200);
        wait();
        parse_sse(&self.runtime.block_on(response.text()).unwrap())
    }

    /// The path of session `id`'s resource `rest` (`""`, `/history`...).
    pub fn session_path(id: &str, rest: &str) -> String {
        format!("/api/sessions/{}{rest}", id.replace(':', "%3A"))
    }
}

async fn read_until(mut response: reqwest::Response, until: &str) -> Vec<SseEvent> {
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
        let events = parse_sse(&text);
        if events.iter().any(|e| e.name == until) && text.ends_with("\n\n") {
            return events;
        }
    }
    panic!("the stream ended without {until}: {text}");
}

/// The text of the stream's `token` events, joined.
pub fn streamed_text(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter(|e| e.name == "token")
        .map(|e| e.data["content"].as_str().unwrap())
        .collect()
}

/// The names of the stream's events, in order, with runs of `token` as one.
pub fn event_names(events: &[SseEvent]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for event in events {
        if event.name == "token" && names.last().is_some_and(|n| n == "token") {
            continue;
        }
        names.push(event.name.clone());
    }
    names
}

/// A home whose gateway listens on a free port, with `extra` merged into the config.
pub fn web_home(extra: Value) -> Home {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["gateway"] = json!({ "port": 0 });
    for (key, value) in extra.as_object().unwrap() {
        config[key] = value.clone();
    }
    home.write_config(config);
    home
}

/// Polls `check` until it gives a value, failing with `what` after a minute: for what the
/// gateway does on its own time (never reached when things work).
pub fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    eventually_said(|| what.to_owned(), check)
}

/// [`eventually`], whose failure says `what()` as it is then (a log that grew meanwhile).
pub fn eventually_said<T>(what: impl Fn() -> String, mut check: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "waited too long for {}",
            what()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
