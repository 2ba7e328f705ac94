//! A headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`, which
//! `scripts/test-deps` installs), for the web page's tests: the few commands they use, over
//! the W3C wire protocol.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// How long a step waits for the page; never reached when things work.
const PATIENCE: Duration = Duration::from_secs(60);
/// The id in an element reference (`{"element-6066-…": "ID"}`), whatever the key's spelling.
fn element_id(reference: &Value) -> Option<Element> {
    let object = reference.as_object()?;
    let (key, id) = object.iter().next()?;
    key.starts_with("element-")
        .then(|| id.as_str().map(|id| Element(id.to_owned())))
        .flatten()
}

pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
pub const CHROMIUM: &str = "/usr/bin/chromium";

pub struct Browser {
    driver: Child,
    // Dropped before the runtime its connections live on.
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
}

/// An element of the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium window of `width`×`height`.
    pub fn start(width: u32, height: u32) -> Self {
        assert!(
            Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists(),
            "the browser tests need Debian's chromium and chromium-driver: run scripts/test-deps"
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = nanocrab_config::http::client_builder(nanocrab_config::http::Timeouts {
            connect: Duration::from_secs(5),
            read: None,
            total: Some(PATIENCE),
        })
        .build()
        .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--disable-extensions",
                    format!("--window-size={width},{height}"),
                ],
            },
        }}});
        let start = Instant::now();
        let session = loop {
            let answer = runtime.block_on(async {
                client
                    .post(format!("{base}/session"))
                    .json(&capabilities)
                    .send()
                    .await
            });
            match answer {
                Ok(response) => {
                    let body: Value = runtime.block_on(response.json()).unwrap();
                    let id = body["value"]["sessionId"]
                        .as_str()
                        .unwrap_or_else(|| panic!("no browser session: {body}"));
                    break format!("{base}/session/{id}");
                }
                // chromedriver is still starting.
                Err(_) if start.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(err) => panic!("chromedriver did not start: {err}"),
            }
        };
        Self {
            driver,
            client,
            runtime,
            session,
        }
    }

    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.session);
        let mut request = self.client.request(method, &url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let body: Value = self
            .runtime
            .block_on(async { request.send().await?.json().await })
            .unwrap();
        body["value"].clone()
    }

    fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body))
    }

    pub fn goto(&self, url: &str) {
        let answer = self.post("/url", json!({ "url": url }));
        assert!(answer.is_null(), "{answer}");
    }

    /// The first element matching `css` once there is one.
    pub fn find(&self, css: &str) -> Element {
        self.wait_for(&format!("an element {css}"), || {
            let found = self.post("/element", json!({"using": "css selector", "value": css}));
            element_id(&found)
        })
    }

    /// Every element matching `css` now.
    pub fn find_all(&self, css: &str) -> Vec<Element> {
        let found = self.post("/elements", json!({"using": "css selector", "value": css}));
        found
            .as_array()
            .map(|all| all.iter().filter_map(element_id).collect())
            .unwrap_or_default()
    }

    /// Clicks the element `css` finds, once it is there.
    pub fn click_on(&self, css: &str) {
        // A click can land while the page redraws; it is tried again until it takes.
        self.wait_for(&format!("a click on {css}"), || {
            let element = self.find(css);
            let answer = self.post(&format!("/element/{}/click", element.0), json!({}));
            answer.is_null().then_some(())
        });
    }

    /// Types `text` into the element `css` finds, once it is there and takes it.
    pub fn type_on(&self, css: &str, text: &str) {
        self.wait_for(&format!("typing into {css}"), || {
            let element = self.find(css);
            let answer = self.post(
                &format!("/element/{}/value", element.0),
                json!({ "text": text }),
            );
            answer.is_null().then_some(())
        });
    }

    pub fn text(&self, element: &Element) -> String {
        self.call(
            reqwest::Method::GET,
            &format!("/element/{}/text", element.0),
            None,
        )
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub fn execute(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({ "script": script, "args": args }))
    }

    /// The text of the elements `css` finds, once `check` holds for it.
    pub fn text_when(&self, css: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
        self.wait_for(what, || {
            let text: String = self
                .find_all(css)
                .iter()
                .map(|e| self.text(e))
                .collect::<Vec<_>>()
                .join("\n");
            check(&text).then_some(text)
        })
    }

    /// Polls `check` until it gives a value; fails with the page's console after [`PATIENCE`].
    pub fn wait_for<T>(&self, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(value) = check() {
                return value;
            }
            if start.elapsed() > PATIENCE {
                panic!("waited too long for {what}; console:\n{}", self.console());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the page logged (errors, CSP reports), one line each.
    pub fn console(&self) -> String {
        let log = self.post("/se/log", json!({"type": "browser"}));
        log.as_array()
            .map(|lines| {
                lines
                    .iter()
                    .map(|l| format!("{} {}", l["level"], l["message"]))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }

    /// A PNG of the window, written to `path`.
    pub fn screenshot(&self, path: &Path) {
        let data = self.call(reqwest::Method::GET, "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap())
            .unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Sent inside the runtime: the request's timeout needs its clock.
        let request = self.client.delete(&self.session);
        let _ = self.runtime.block_on(async { request.send().await });
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
