//! The `browser` tool in Debian's headless Chromium (installed by `scripts/test-deps`) against
//! pages served here on 127.0.0.1: a form filled, submitted and read back, the screenshot,
//! navigations to private addresses refused, a missing Chromium named, the idle close.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::response::{Html, Redirect};
use axum::routing::{get, post};
use base64::Engine as _;
use nanocrab_browser::{BrowserTool, browser_tool};
use nanocrab_config::{BrowserConfig, WebConfig};
use nanocrab_policy::{CapabilityGrant, CapabilityPattern, GrantSource, Grants};
use nanocrab_schema::ToolCall;
use nanocrab_tools::{Executed, ToolContext, ToolPolicy, ToolRegistry};
use nanocrab_web::SystemResolver;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";

/// The shop: a form on `/`, its answer at `/order`, a redirect to a name on loopback at `/go`,
/// a page that loads an image from one at `/pixel-page`.
async fn serve() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let form = format!(
        "<!doctype html><title>Coffee</title><h1>Order a coffee</h1>\
         <form action=\"/order\" method=\"post\">\
         <label>Name <input name=\"name\"></label>\
         <label>Size <select name=\"size\"><option value=\"s\">Small</option>\
         <option value=\"l\">Large</option></select></label>\
         <button type=\"submit\">Order</button></form>\
         <p><a href=\"http://localhost:{port}/secret\">Intranet</a></p>"
    );
    let app =
        Router::new()
            .route("/", get(move || async move { Html(form) }))
            .route(
                "/order",
                post(|body: Bytes| async move {
                    let fields: Vec<(String, String)> =
                        url::form_urlencoded::parse(&body).into_owned().collect();
                    let field = |key: &str| {
                        fields
                            .iter()
                            .find(|(name, _)| name == key)
                            .map(|(_, value)| value.clone())
                            .unwrap_or_default()
                    };
                    Html(format!(
                        "<!doctype html><title>Thanks</title><h1>Thanks, {}: one {} coffee</h1>",
                        field("name"),
                        if field("size") == "l" {
                            "large"
                        } else {
                            "small"
                        }
                    ))
                }),
            )
            .route("/secret", get(|| async { Html("the intranet's secret") }))
            .route(
                "/go",
                get(move || async move {
                    Redirect::temporary(&format!("http://localhost:{port}/secret"))
                }),
            )
            .route(
                "/pixel-page",
                get(move || async move {
                    Html(format!(
                        "<!doctype html><title>Pixel</title><p>A page with an image</p>\
                     <img src=\"http://localhost:{port}/pixel.png\" alt=\"\">"
                    ))
                }),
            );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

struct Setup {
    registry: ToolRegistry,
    tool: Arc<BrowserTool>,
    _state: tempfile::TempDir,
}

/// The tool with `tools.browser` as `browser`, loopback on `port` allowed, `grants` given.
fn setup(port: u16, browser: Value, grants: &[&str]) -> Setup {
    let state = tempfile::tempdir().unwrap();
    let mut config = json!({"executable": CHROMIUM, "noSandbox": true});
    config
        .as_object_mut()
        .unwrap()
        .extend(browser.as_object().unwrap().clone());
    let config: BrowserConfig = serde_json::from_value(config).unwrap();
    let web: WebConfig =
        serde_json::from_value(json!({"allowPrivate": [format!("127.0.0.1:{port}")]})).unwrap();
    let tool = Arc::new(
        browser_tool(
            &config,
            &web,
            state.path().join("browser/main"),
            Vec::new(),
            Arc::new(SystemResolver),
        )
        .unwrap(),
    );
    let registry = registry(Arc::clone(&tool), grants);
    Setup {
        registry,
        tool,
        _state: state,
    }
}

/// A registry with `tool` alone, under `grants` and no approver.
fn registry(tool: Arc<BrowserTool>, grants: &[&str]) -> ToolRegistry {
    let grants = grants
        .iter()
        .map(|text| CapabilityGrant {
            pattern: CapabilityPattern::parse(text, None).unwrap(),
            source: GrantSource::Config {
                key: "tools.grants[0]".into(),
            },
        })
        .collect();
    let mut registry = ToolRegistry::new().with_policy(ToolPolicy {
        grants: Grants::new(grants),
        ..ToolPolicy::default()
    });
    registry.register(tool);
    registry
}

async fn call(setup: &Setup, input: Value) -> Executed {
    let call = ToolCall {
        id: "call_1".into(),
        name: "browser".into(),
        input,
    };
    setup
        .registry
        .execute_reporting(&call, &ToolContext::new("/ws"))
        .await
}

/// A successful call's text, without the untrusted fence around it.
async fn ok(setup: &Setup, input: Value) -> String {
    let executed = call(setup, input.clone()).await;
    assert!(
        !executed.result.is_error,
        "{input}: {}",
        executed.result.content
    );
    executed.result.content
}

async fn error(setup: &Setup, input: Value) -> String {
    let executed = call(setup, input.clone()).await;
    assert!(
        executed.result.is_error,
        "{input}: {}",
        executed.result.content
    );
    executed.result.content
}

/// The number of the snapshot's line that holds `needle`.
fn number(snapshot: &str, needle: &str) -> usize {
    let line = snapshot
        .lines()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in\n{snapshot}"));
    let (_, rest) = line.split_once('[').unwrap();
    rest.split_once(']').unwrap().0.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_a_form_submits_it_and_reads_the_answer() {
    let port = serve().await;
    let setup = setup(port, json!({}), &["browser"]);

    let opened = ok(
        &setup,
        json!({"action": "open", "url": format!("http://127.0.0.1:{port}/")}),
    )
    .await;
    insta::assert_snapshot!("form", opened.replace(&port.to_string(), "PORT"));

    let name = number(&opened, "textbox \"Name\"");
    let size = number(&opened, "combobox \"Size\"");
    let order = number(&opened, "button \"Order\"");
    ok(
        &setup,
        json!({"action": "type", "ref": name, "text": "Ada"}),
    )
    .await;
    ok(
        &setup,
        json!({"action": "select", "ref": size, "values": ["Large"]}),
    )
    .await;
    let filled = ok(&setup, json!({"action": "snapshot"})).await;
    assert!(
        filled.contains("textbox \"Name\" value=\"Ada\""),
        "{filled}"
    );
    assert!(
        filled.contains("combobox \"Size\" value=\"Large\""),
        "{filled}"
    );

    let clicked = ok(&setup, json!({"action": "click", "ref": order})).await;
    assert!(clicked.contains("Clicked the element."), "{clicked}");
    ok(&setup, json!({"action": "wait", "text": "Thanks, Ada"})).await;
    let answer = ok(&setup, json!({"action": "snapshot", "mode": "text"})).await;
    assert!(
        answer.contains(&format!(
            "URL: http://127.0.0.1:{port}/order\nTitle: Thanks\n\nThanks, Ada: one large coffee"
        )),
        "{answer}"
    );
    // The old page's numbers are gone with it.
    let stale = error(&setup, json!({"action": "click", "ref": order})).await;
    assert!(stale.contains("there is no ["), "{stale}");

    let shot = call(&setup, json!({"action": "screenshot"})).await;
    assert!(!shot.result.is_error, "{}", shot.result.content);
    assert_eq!(shot.images.len(), 1);
    assert_eq!(shot.images[0].media_type, "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(&shot.images[0].data)
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    assert!(
        ok(&setup, json!({"action": "close"}))
            .await
            .contains("Closed the browser.")
    );
    let closed = error(&setup, json!({"action": "snapshot"})).await;
    assert!(closed.contains("the browser is not open"), "{closed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_private_addresses_at_open_after_a_redirect_on_a_click_and_for_images() {
    let port = serve().await;
    let setup = setup(port, json!({}), &["browser"]);
    let refusal = "a loopback address: the browser reaches only public addresses unless the \
                   host is in tools.web.allowPrivate";

    // Before Chromium is even started.
    assert_eq!(
        error(
            &setup,
            json!({"action": "open", "url": "http://169.254.169.254/latest/meta-data/"})
        )
        .await,
        "Error: 169.254.169.254 is a link-local address (where cloud metadata services answer): \
         the browser reaches only public addresses unless the host is in tools.web.allowPrivate"
    );
    assert_eq!(
        error(
            &setup,
            json!({"action": "open", "url": format!("http://localhost:{port}/secret")})
        )
        .await,
        format!("Error: localhost resolves to 127.0.0.1, {refusal}")
    );
    assert_eq!(
        error(
            &setup,
            json!({"action": "open", "url": "file:///etc/passwd"})
        )
        .await,
        "Error: web_fetch reads only http:// and https:// URLs, not file:"
    );

    // A redirect from the allowed page to a name on loopback.
    let redirected = error(
        &setup,
        json!({"action": "open", "url": format!("http://127.0.0.1:{port}/go")}),
    )
    .await;
    assert_eq!(
        redirected,
        format!(
            "Error: the browser did not load http://localhost:{port}/secret: localhost resolves \
             to 127.0.0.1, {refusal}"
        )
    );

    // A link clicked.
    let opened = ok(
        &setup,
        json!({"action": "open", "url": format!("http://127.0.0.1:{port}/")}),
    )
    .await;
    let link = number(&opened, "link \"Intranet\"");
    let clicked = error(&setup, json!({"action": "click", "ref": link})).await;
    assert!(
        clicked.contains(&format!(
            "http://localhost:{port}/secret: localhost resolves to 127.0.0.1"
        )),
        "{clicked}"
    );

    // A page's image: the page loads, the image does not, and the model is told.
    let page = ok(
        &setup,
        json!({"action": "open", "url": format!("http://127.0.0.1:{port}/pixel-page")}),
    )
    .await;
    assert!(
        page.contains(&format!(
            "[Refused a request to localhost:{port}: localhost resolves to 127.0.0.1, {refusal}]"
        )),
        "{page}"
    );
    ok(&setup, json!({"action": "close"})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_guarded_and_names_the_package_when_chromium_is_missing() {
    let port = serve().await;
    let ungranted = setup(port, json!({}), &[]);
    let denied = error(
        &ungranted,
        json!({"action": "open", "url": format!("http://127.0.0.1:{port}/")}),
    )
    .await;
    assert!(denied.contains("browser"), "{denied}");
    assert!(!*ungranted.tool.browser().watch_open().borrow());

    let missing = setup(
        port,
        json!({"executable": "/nonexistent/chromium"}),
        &["browser"],
    );
    assert_eq!(
        error(
            &missing,
            json!({"action": "open", "url": format!("http://127.0.0.1:{port}/")})
        )
        .await,
        "Error: the browser needs Chromium, and /nonexistent/chromium is not a program: install \
         Debian's `chromium` package (`apt install chromium`) or set tools.browser.executable"
    );
    let state = tempfile::tempdir().unwrap();
    let searched = browser_tool(
        &BrowserConfig::default(),
        &WebConfig::default(),
        state.path().join("browser/main"),
        vec![PathBuf::from("/nonexistent")],
        Arc::new(SystemResolver),
    )
    .unwrap();
    let registry = registry(Arc::new(searched), &["browser"]);
    let result = registry
        .execute(
            &ToolCall {
                id: "call_1".into(),
                name: "browser".into(),
                // A public address: checked and let through, with no name to resolve.
                input: json!({"action": "open", "url": "https://93.184.215.14/"}),
            },
            &ToolContext::new("/ws"),
        )
        .await;
    assert_eq!(
        result.content,
        "Error: the browser needs Chromium, and none of chromium, chromium-browser, \
         google-chrome is on PATH: install Debian's `chromium` package (`apt install chromium`) \
         or set tools.browser.executable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closes_when_idle_and_starts_again_with_the_same_profile() {
    let port = serve().await;
    // Idle for no time at all: closed as soon as the call is done.
    let setup = setup(port, json!({"idleMinutes": 0}), &["browser"]);
    let mut open = setup.tool.browser().watch_open();
    ok(
        &setup,
        json!({"action": "open", "url": format!("http://127.0.0.1:{port}/")}),
    )
    .await;
    open.wait_for(|open| !*open).await.unwrap();
    let closed = error(&setup, json!({"action": "snapshot"})).await;
    assert!(closed.contains("the browser is not open"), "{closed}");
    assert!(setup._state.path().join("browser/main/Default").is_dir());
    let again = ok(
        &setup,
        json!({"action": "open", "url": format!("http://127.0.0.1:{port}/")}),
    )
    .await;
    assert!(again.contains("heading \"Order a coffee\""), "{again}");
}
