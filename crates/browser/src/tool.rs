//! `browser(action, ...)`: open a URL, read the page as a numbered accessibility tree or as
//! text, click, type, select, scroll, wait for text, take a screenshot, close. What it returns
//! of a page is fenced as untrusted; a navigation the address checks refused is an error.

use std::time::Duration;

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, ResolveNodeParams};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, EventFrameStartedLoading, EventLoadEventFired,
};
use chromiumoxide::cdp::js_protocol::runtime::{CallArgument, CallFunctionOnParams};
use chromiumoxide::layout::Point;
use chromiumoxide::page::{Page, ScreenshotParams};
use futures::StreamExt as _;
use nanocrab_policy::{Capability, Invocation, Risk};
use nanocrab_schema::Image;
use nanocrab_tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use nanocrab_web::{capability_target, checked_url};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::proxy::{Refusal, refusal_reason};
use crate::session::{AgentBrowser, Running};
use crate::snapshot::render;

/// How long an action that may start a navigation (a click, Enter, a choice) waits for one
/// to begin; one that begins is then waited for up to `timeoutSeconds`.
const NAVIGATION_START: Duration = Duration::from_millis(500);
/// How often `wait` looks for its text.
const WAIT_POLL: Duration = Duration::from_millis(100);
/// Anthropic's limit for one image.
const MAX_SCREENSHOT_BYTES: usize = 5 * 1024 * 1024;

pub struct BrowserTool {
    browser: AgentBrowser,
}

impl BrowserTool {
    pub fn new(browser: AgentBrowser) -> Self {
        Self { browser }
    }

    /// The agent's browser (tests wait on its idle close).
    pub fn browser(&self) -> &AgentBrowser {
        &self.browser
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Open,
    Snapshot,
    Click,
    Type,
    Select,
    Scroll,
    Wait,
    Screenshot,
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Aria,
    Text,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowserArgs {
    action: Action,
    /// open: the page.
    url: Option<String>,
    /// click, type, select, scroll: an element's number in the last snapshot.
    #[serde(rename = "ref")]
    element: Option<usize>,
    /// type: the text to enter; wait: the text to wait for.
    text: Option<String>,
    /// type: press Enter after.
    submit: Option<bool>,
    /// select: the options, by value or label.
    values: Option<Vec<String>>,
    /// snapshot: aria (default, numbered) or text.
    mode: Option<Mode>,
    /// scroll without ref: up or down (default).
    up: Option<bool>,
    /// screenshot: the whole page, not only the window.
    full_page: Option<bool>,
}

fn rejected(text: impl Into<String>) -> ToolError {
    ToolError::Rejected(text.into())
}

fn missing(what: &str, action: &str) -> ToolError {
    rejected(format!("browser action \"{action}\" needs `{what}`"))
}

impl TypedTool for BrowserTool {
    type Args = BrowserArgs;

    const NAME: &'static str = "browser";

    fn description(&self) -> String {
        "Drive a headless browser: open a URL, snapshot the page (numbered elements), act on an \
         element by ref (click, type, select, scroll), wait for text, screenshot, close."
            .into()
    }

    /// Always guarded, with the capability `browser`: where it goes is checked at each
    /// request by the proxy.
    fn invocation(&self, args: &BrowserArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        let element = args.element.map(|n| format!(" [{n}]")).unwrap_or_default();
        let summary = match args.action {
            Action::Open => format!(
                "browser: open {}",
                args.url.as_deref().ok_or_else(|| missing("url", "open"))?
            ),
            Action::Snapshot => "browser: read the page".to_owned(),
            Action::Click => format!("browser: click{element}"),
            Action::Type => format!("browser: type into{element}"),
            Action::Select => format!("browser: choose in{element}"),
            Action::Scroll => "browser: scroll".to_owned(),
            Action::Wait => "browser: wait for text".to_owned(),
            Action::Screenshot => "browser: screenshot".to_owned(),
            Action::Close => "browser: close".to_owned(),
        };
        Ok(Invocation::new(
            Risk::Guarded,
            summary,
            vec![Capability::Browser],
        ))
    }

    async fn call(&self, args: BrowserArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        match args.action {
            Action::Close => {
                let text = if self.browser.close().await {
                    "Closed the browser."
                } else {
                    "The browser was not open."
                };
                return Ok(ToolOutput::trusted(text));
            }
            Action::Open => {
                let url = args.url.as_deref().ok_or_else(|| missing("url", "open"))?;
                let url = checked_url(url).map_err(|err| rejected(err.to_string()))?;
                // Refused before anything starts; the proxy checks again, and every hop after.
                self.browser
                    .checks()
                    .addresses(&url)
                    .await
                    .map_err(|err| rejected(refusal_reason(&err)))?;
                let mut running = self
                    .browser
                    .started()
                    .await
                    .map_err(|err| rejected(err.to_string()))?;
                let running = running
                    .as_mut()
                    .ok_or_else(|| rejected("the browser did not start"))?;
                running.refs.clear();
                let navigated = running.page.goto(url.as_str()).await;
                let status = self.status(&running.page).await?;
                if let Err(err) = navigated {
                    return Err(rejected(format!("cannot open {url}: {err}")));
                }
                let snapshot = self.aria(running).await?;
                return Ok(self.page_output(&status, snapshot));
            }
            Action::Snapshot
            | Action::Click
            | Action::Type
            | Action::Select
            | Action::Scroll
            | Action::Wait
            | Action::Screenshot => {}
        }
        let mut running = self.browser.current().await;
        let running = running.as_mut().ok_or_else(|| {
            rejected(
                "the browser is not open (it closes after tools.browser.idleMinutes unused): \
                 call browser with action \"open\" and a url first",
            )
        })?;
        match args.action {
            Action::Snapshot => {
                let text = match args.mode.unwrap_or(Mode::Aria) {
                    Mode::Aria => self.aria(running).await?,
                    Mode::Text => evaluate(
                        &running.page,
                        "document.body ? document.body.innerText : ''",
                    )
                    .await?
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                };
                let status = self.status(&running.page).await?;
                Ok(self.page_output(&status, text))
            }
            Action::Click => {
                let node = self.node(running, args.element, "click")?;
                let navigation = Navigation::watch(&running.page).await?;
                let centre = call_on(
                    &running.page,
                    node,
                    "function() { this.scrollIntoView({block: 'center', inline: 'center'}); \
                     const r = this.getBoundingClientRect(); \
                     return {x: r.left + r.width / 2, y: r.top + r.height / 2, \
                             seen: r.width > 0 && r.height > 0}; }",
                    Vec::new(),
                )
                .await?;
                if centre["seen"] != Value::Bool(true) {
                    return Err(rejected(format!(
                        "element [{}] takes no space on the page (hidden): it cannot be clicked",
                        args.element.unwrap_or_default()
                    )));
                }
                let point = Point {
                    x: centre["x"].as_f64().unwrap_or_default(),
                    y: centre["y"].as_f64().unwrap_or_default(),
                };
                running
                    .page
                    .click(point)
                    .await
                    .map_err(|err| rejected(format!("cannot click: {err}")))?;
                self.after(running, navigation, "Clicked").await
            }
            Action::Type => {
                let node = self.node(running, args.element, "type")?;
                let text = args
                    .text
                    .as_deref()
                    .ok_or_else(|| missing("text", "type"))?;
                call_on(
                    &running.page,
                    node,
                    "function() { this.scrollIntoView({block: 'center'}); this.focus(); \
                     if ('value' in this) { this.value = ''; } \
                     else if (this.isContentEditable) { this.textContent = ''; } }",
                    Vec::new(),
                )
                .await?;
                execute(&running.page, InsertTextParams::new(text)).await?;
                if args.submit != Some(true) {
                    let status = self.status(&running.page).await?;
                    return Ok(self.note_output(
                        &status,
                        format!("Typed into [{}].", args.element.unwrap_or_default()),
                    ));
                }
                let navigation = Navigation::watch(&running.page).await?;
                for kind in [DispatchKeyEventType::KeyDown, DispatchKeyEventType::KeyUp] {
                    let mut key = DispatchKeyEventParams::new(kind.clone());
                    key.key = Some("Enter".into());
                    key.code = Some("Enter".into());
                    key.windows_virtual_key_code = Some(13);
                    if kind == DispatchKeyEventType::KeyDown {
                        key.text = Some("\r".into());
                    }
                    execute(&running.page, key).await?;
                }
                self.after(running, navigation, "Typed and pressed Enter in")
                    .await
            }
            Action::Select => {
                let node = self.node(running, args.element, "select")?;
                let values = args
                    .values
                    .clone()
                    .filter(|values| !values.is_empty())
                    .ok_or_else(|| missing("values", "select"))?;
                let navigation = Navigation::watch(&running.page).await?;
                call_on(
                    &running.page,
                    node,
                    "function(values) { \
                     if (this.tagName !== 'SELECT') throw new Error('it is not a list of options'); \
                     const wanted = new Set(values); let found = 0; \
                     for (const o of this.options) { \
                       const hit = wanted.has(o.value) || wanted.has(o.label) || wanted.has(o.text.trim()); \
                       if (hit) { found++; } o.selected = hit && (this.multiple || found === 1); } \
                     if (!found) throw new Error('no option ' + JSON.stringify(values) + '; it has ' + \
                       [...this.options].map(o => JSON.stringify(o.label)).join(', ')); \
                     this.dispatchEvent(new Event('input', {bubbles: true})); \
                     this.dispatchEvent(new Event('change', {bubbles: true})); }",
                    vec![json!(values)],
                )
                .await?;
                self.after(running, navigation, "Chose in").await
            }
            Action::Scroll => {
                let text = match args.element {
                    Some(_) => {
                        let node = self.node(running, args.element, "scroll")?;
                        call_on(
                            &running.page,
                            node,
                            "function() { this.scrollIntoView({block: 'center'}); }",
                            Vec::new(),
                        )
                        .await?;
                        format!("Scrolled [{}] into view.", args.element.unwrap_or_default())
                    }
                    None => {
                        let sign = if args.up == Some(true) { "-" } else { "" };
                        let position = evaluate(
                            &running.page,
                            &format!(
                                "window.scrollBy(0, {sign}0.8 * window.innerHeight); \
                                 `${{Math.round(window.scrollY)}} of \
                                 ${{document.documentElement.scrollHeight}}`"
                            ),
                        )
                        .await?;
                        format!(
                            "Scrolled; the window's top is now at pixel {}.",
                            position.as_str().unwrap_or_default()
                        )
                    }
                };
                let status = self.status(&running.page).await?;
                Ok(self.note_output(&status, text))
            }
            Action::Wait => {
                let text = args
                    .text
                    .as_deref()
                    .ok_or_else(|| missing("text", "wait"))?;
                let probe = format!(
                    "document.body ? document.body.innerText.includes({}) : false",
                    json!(text)
                );
                let timeout = self.browser.settings().timeout;
                let found = tokio::time::timeout(timeout, async {
                    loop {
                        match evaluate(&running.page, &probe).await {
                            Ok(Value::Bool(true)) => return,
                            // Between two documents: no body yet, or no context to ask.
                            Ok(_) | Err(_) => tokio::time::sleep(WAIT_POLL).await,
                        }
                    }
                })
                .await
                .is_ok();
                let status = self.status(&running.page).await?;
                if !found {
                    return Err(rejected(format!(
                        "{} did not show {text:?} within {} s (tools.browser.timeoutSeconds)",
                        status.url,
                        timeout.as_secs()
                    )));
                }
                Ok(self.note_output(&status, format!("The page shows {text:?}.")))
            }
            Action::Screenshot => {
                let params = ScreenshotParams::builder()
                    .format(CaptureScreenshotFormat::Png)
                    .full_page(args.full_page == Some(true))
                    .build();
                let png = running
                    .page
                    .screenshot(params)
                    .await
                    .map_err(|err| rejected(format!("cannot take a screenshot: {err}")))?;
                if png.len() > MAX_SCREENSHOT_BYTES {
                    return Err(rejected(format!(
                        "the screenshot is {} bytes, more than a model takes ({} bytes): take \
                         it without full_page",
                        png.len(),
                        MAX_SCREENSHOT_BYTES
                    )));
                }
                let status = self.status(&running.page).await?;
                let mut output = self.note_output(
                    &status,
                    format!("A screenshot ({} bytes of PNG) follows.", png.len()),
                );
                output.images.push(Image {
                    media_type: "image/png".into(),
                    data: base64::engine::general_purpose::STANDARD.encode(&png),
                    file: None,
                });
                Ok(output)
            }
            Action::Open | Action::Close => Err(rejected("unreachable browser action")),
        }
    }
}

/// Where the page is, and what the proxy refused since the last action.
struct Status {
    url: String,
    title: String,
    refused: Vec<Refusal>,
}

impl BrowserTool {
    /// The page's address and title, and the refusals; an error when the page itself is one
    /// the proxy refused.
    async fn status(&self, page: &Page) -> Result<Status, ToolError> {
        let url = page.url().await.ok().flatten().unwrap_or_default();
        let title = page.get_title().await.ok().flatten().unwrap_or_default();
        let refused = self.browser.refusals().take();
        let host = url::Url::parse(&url)
            .ok()
            .and_then(|url| capability_target(&url));
        if let Some(refusal) = refused.iter().find(|refusal| {
            Some(&refusal.host) == host.as_ref() || url.starts_with("chrome-error:")
        }) {
            return Err(rejected(format!(
                "the browser did not load {}: {}",
                if url.starts_with("chrome-error:") {
                    refusal.host.as_str()
                } else {
                    url.as_str()
                },
                refusal.reason
            )));
        }
        Ok(Status {
            url,
            title,
            refused,
        })
    }

    /// The page's header and `body`, cut to `maxChars`, fenced as untrusted.
    fn page_output(&self, status: &Status, body: String) -> ToolOutput {
        let max = self.browser.settings().max_chars;
        let total = body.chars().count();
        let mut text: String = body.chars().take(max).collect();
        if total > max {
            text.push_str(&format!(
                "\n[Cut at {max} of {total} characters (tools.browser.maxChars); scroll or act \
                 on what is shown.]"
            ));
        }
        self.note_output(status, text)
    }

    fn note_output(&self, status: &Status, body: String) -> ToolOutput {
        let mut text = format!("URL: {}\nTitle: {}\n\n{body}", status.url, status.title);
        for refusal in &status.refused {
            text.push_str(&format!(
                "\n[Refused a request to {}: {}]",
                refusal.host, refusal.reason
            ));
        }
        ToolOutput::untrusted(format!("browser {}", status.url), text)
    }

    /// The numbered tree of the page, remembering what each number is.
    async fn aria(&self, running: &mut Running) -> Result<String, ToolError> {
        let tree = execute(&running.page, GetFullAxTreeParams::default()).await?;
        let nodes: Vec<Value> = tree
            .nodes
            .iter()
            .filter_map(|node| serde_json::to_value(node).ok())
            .collect();
        let snapshot = render(&nodes);
        running.refs = snapshot.refs;
        Ok(snapshot.text)
    }

    /// The DOM node behind `[n]` of the last snapshot.
    fn node(
        &self,
        running: &Running,
        element: Option<usize>,
        action: &str,
    ) -> Result<i64, ToolError> {
        let n = element.ok_or_else(|| missing("ref", action))?;
        n.checked_sub(1)
            .and_then(|index| running.refs.get(index))
            .copied()
            .ok_or_else(|| {
                rejected(format!(
                    "there is no [{n}] in the last snapshot ({} numbered elements): take a \
                     snapshot and use its numbers",
                    running.refs.len()
                ))
            })
    }

    /// After an action that may navigate: waits for the navigation, if one starts, and says
    /// where the page is.
    async fn after(
        &self,
        running: &mut Running,
        navigation: Navigation,
        done: &str,
    ) -> Result<ToolOutput, ToolError> {
        let navigated = navigation.wait(self.browser.settings().timeout).await;
        if navigated {
            // The numbers were of the page before.
            running.refs.clear();
        }
        let status = self.status(&running.page).await?;
        let note = if navigated {
            "The page changed: take a snapshot to see it."
        } else {
            ""
        };
        Ok(self.note_output(&status, format!("{done} the element. {note}")))
    }
}

/// A navigation that an action may start, watched from before the action.
struct Navigation {
    started: chromiumoxide::listeners::EventStream<EventFrameStartedLoading>,
    loaded: chromiumoxide::listeners::EventStream<EventLoadEventFired>,
}

impl Navigation {
    async fn watch(page: &Page) -> Result<Self, ToolError> {
        let cdp = |err: chromiumoxide::error::CdpError| rejected(format!("the browser: {err}"));
        Ok(Self {
            started: page.event_listener().await.map_err(cdp)?,
            loaded: page.event_listener().await.map_err(cdp)?,
        })
    }

    /// Whether a navigation started; if so, it has loaded or `timeout` passed.
    async fn wait(mut self, timeout: Duration) -> bool {
        if tokio::time::timeout(NAVIGATION_START, self.started.next())
            .await
            .is_err()
        {
            return false;
        }
        let _ = tokio::time::timeout(timeout, self.loaded.next()).await;
        true
    }
}

async fn execute<T: chromiumoxide::types::Command>(
    page: &Page,
    command: T,
) -> Result<T::Response, ToolError> {
    page.execute(command)
        .await
        .map(|response| response.result)
        .map_err(|err| rejected(format!("the browser: {err}")))
}

/// The value of `expression` in the page.
async fn evaluate(page: &Page, expression: &str) -> Result<Value, ToolError> {
    page.evaluate(expression)
        .await
        .map_err(|err| rejected(format!("the page: {err}")))
        .map(|result| result.value().cloned().unwrap_or(Value::Null))
}

/// `function` called with the element as `this` and `arguments`; its value.
async fn call_on(
    page: &Page,
    node: i64,
    function: &str,
    arguments: Vec<Value>,
) -> Result<Value, ToolError> {
    let resolved = page
        .execute(
            ResolveNodeParams::builder()
                .backend_node_id(BackendNodeId::new(node))
                .build(),
        )
        .await
        .map_err(|_| {
            rejected("that element is no longer on the page (it changed): take a new snapshot")
        })?;
    let object = resolved
        .result
        .object
        .object_id
        .clone()
        .ok_or_else(|| rejected("that element cannot be acted on"))?;
    let mut call = CallFunctionOnParams::builder()
        .function_declaration(function)
        .object_id(object)
        .return_by_value(true)
        .await_promise(true);
    for argument in arguments {
        call = call.argument(CallArgument::builder().value(argument).build());
    }
    let call = call.build().map_err(rejected)?;
    let returned = execute(page, call).await?;
    if let Some(exception) = returned.exception_details {
        let reason = exception
            .exception
            .and_then(|thrown| thrown.description)
            .unwrap_or(exception.text);
        return Err(rejected(format!("the page refused: {reason}")));
    }
    Ok(returned.result.value.unwrap_or(Value::Null))
}
