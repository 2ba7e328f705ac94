//! One configured MCP server: started when first needed, its tools listed (again after it says
//! they changed), called with a time limit, restarted with backoff after it failed or died,
//! stopped with nanocrab.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nanocrab_config::McpServerConfig;
use nanocrab_schema::ToolDef;
use nanocrab_tools::wrap_untrusted;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion,
};
use rmcp::service::{MaybeSendFuture, NotificationContext, RunningService};
use rmcp::{ClientCacheConfig, ClientHandler, Peer, RoleClient, ServiceError, ServiceExt as _};
use tokio::sync::watch;

use crate::process::{ServerProcess, server_env};
use crate::result::{Rendered, render};
use crate::schema::clean_schema;
use crate::{McpOptions, names};

/// The longest tool description passed on to the model; some servers write manuals.
const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Tools offered of one server, pages of its list read, and characters of one tool's cleaned
/// schema: bounds on what an untrusted server can make each turn carry.
const MAX_TOOLS: usize = 500;
const MAX_TOOL_PAGES: usize = 50;
const MAX_SCHEMA_CHARS: usize = 32_000;

/// What `nanocrab mcp list` shows of a server's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerState {
    /// `disabled` in config, or a `${VAR}` of its entry is not set.
    Disabled,
    /// Not needed yet.
    Idle,
    Starting,
    Running,
    /// Failed to start, or died; started again when needed after its backoff.
    Failed,
    /// nanocrab is shutting down.
    Stopped,
}

/// A tool of a running server, as the agent is offered it.
#[derive(Debug, Clone)]
pub(crate) struct Offered {
    /// `<server>__<tool>`, the name the model calls it by.
    pub(crate) name: String,
    /// Its name on the server.
    pub(crate) tool: String,
    pub(crate) definition: ToolDef,
}

/// Why a server is not running: what went wrong, what it last wrote to stderr, and when it
/// may be tried again.
#[derive(Debug, Clone)]
struct Failure {
    error: String,
    stderr: String,
    /// Failures in a row, this one included.
    failures: u32,
    retry_at: Instant,
}

enum State {
    Idle,
    /// The receiver wakes (its sender is dropped) when the start is over, either way.
    Starting(watch::Receiver<()>),
    Running(Arc<Connection>),
    Failed(Failure),
    Stopped,
}

/// A connection to a running server.
pub(crate) struct Connection {
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<RunningService<RoleClient, Handler>>,
    /// The program of a stdio server.
    process: Option<ServerProcess>,
    tools: Mutex<Vec<Offered>>,
    /// Set when the server says its tools changed; they are listed again before next use.
    stale: Arc<AtomicBool>,
}

impl Connection {
    /// Why the server is gone, if it is.
    fn death(&self) -> Option<String> {
        match self.process.as_ref().and_then(ServerProcess::exit) {
            Some(exit) => Some(format!("it ended with {exit}")),
            None if self.peer.is_transport_closed() => Some("the connection closed".to_owned()),
            None => None,
        }
    }

    fn stderr(&self) -> String {
        self.process
            .as_ref()
            .map(ServerProcess::stderr)
            .unwrap_or_default()
    }

    pub(crate) fn offered(&self) -> Vec<Offered> {
        lock(&self.tools).clone()
    }

    /// Closes the session (a stdio server's stdin) and sees its program out.
    async fn close(&self) {
        let _ = self
            .service
            .lock()
            .await
            .close_with_timeout(Duration::from_secs(5))
            .await;
        if let Some(process) = &self.process {
            process.stop().await;
        }
    }
}

/// Answers the server: nanocrab offers no sampling, roots or elicitation, and notes when the
/// server's tools change.
struct Handler {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.stale.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        // The newest version with the `initialize` handshake: every server of the last two
        // years speaks it, and its tool-list notifications need no subscription.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("nanocrab", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

pub(crate) struct Server {
    pub(crate) name: String,
    /// Where it is configured (`tools.mcpServers.github`).
    pub(crate) key: String,
    pub(crate) config: McpServerConfig,
    /// Why it can never start as configured (a `${VAR}` of its entry is not set).
    pub(crate) problem: Option<String>,
    options: Arc<McpOptions>,
    state: Mutex<State>,
}

impl Server {
    pub(crate) fn new(
        name: String,
        key: String,
        config: McpServerConfig,
        problem: Option<String>,
        options: Arc<McpOptions>,
    ) -> Self {
        Self {
            name,
            key,
            config,
            problem,
            options,
            state: Mutex::new(State::Idle),
        }
    }

    /// How long a turn waits for this server to start.
    pub(crate) fn startup_wait(&self) -> Duration {
        self.options
            .startup_wait
            .unwrap_or(Duration::from_secs(self.config.startup_timeout))
    }

    /// The connection, once the server runs: started (again, when its backoff is over) if it
    /// is not, waiting at most `wait`. The error says why there is none.
    pub(crate) async fn connection(
        self: &Arc<Self>,
        wait: Duration,
    ) -> Result<Arc<Connection>, String> {
        if self.config.disabled {
            return Err(format!(
                "the MCP server `{}` is disabled ({})",
                self.name, self.key
            ));
        }
        if let Some(problem) = &self.problem {
            return Err(format!(
                "the MCP server `{}` cannot start: {problem}",
                self.name
            ));
        }
        // A wait too long to add (a `startupTimeout` of centuries) is as good as none.
        let now = tokio::time::Instant::now();
        let deadline = now
            .checked_add(wait)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        // A start this call waited for is not tried again in the same call when it failed.
        let mut waited = false;
        loop {
            let mut done = {
                let mut state = lock(&self.state);
                let died = match &*state {
                    State::Running(connection) => connection
                        .death()
                        .map(|reason| self.died(&reason, connection.stderr())),
                    State::Idle | State::Starting(_) | State::Failed(_) | State::Stopped => None,
                };
                if let Some(failure) = died {
                    *state = State::Failed(failure);
                }
                /// What this call does next.
                enum Step {
                    /// Start the server, after this many failures in a row.
                    Start(u32),
                    /// Wait for the start under way.
                    Wait(watch::Receiver<()>),
                }
                let step = match &*state {
                    State::Running(connection) => return Ok(Arc::clone(connection)),
                    State::Idle => Step::Start(0),
                    State::Failed(failure) if !waited && Instant::now() >= failure.retry_at => {
                        Step::Start(failure.failures)
                    }
                    State::Failed(failure) => return Err(self.unavailable(failure)),
                    State::Starting(done) => Step::Wait(done.clone()),
                    State::Stopped => {
                        return Err(format!(
                            "the MCP server `{}` is stopped: nanocrab is shutting down",
                            self.name
                        ));
                    }
                };
                match step {
                    Step::Start(failures) => self.start(&mut state, failures),
                    Step::Wait(done) => done,
                }
            };
            waited = true;
            if tokio::time::timeout_at(deadline, done.changed())
                .await
                .is_err()
            {
                return Err(format!(
                    "the MCP server `{}` is still starting (it had {} s, startupTimeout); its \
                     tools are offered once it is up",
                    self.name,
                    wait.as_secs_f32()
                ));
            }
        }
    }

    /// Starts the server in the background; the receiver wakes when the start is over.
    fn start(self: &Arc<Self>, state: &mut State, failures: u32) -> watch::Receiver<()> {
        let (sender, done) = watch::channel(());
        *state = State::Starting(done.clone());
        let server = Arc::clone(self);
        tokio::spawn(async move {
            let outcome = server.connect().await;
            let leftover = {
                let mut state = lock(&server.state);
                match (outcome, &*state) {
                    (Ok(connection), State::Stopped) => Some(connection),
                    (Err(_), State::Stopped) => None,
                    (
                        Ok(connection),
                        State::Idle | State::Starting(_) | State::Running(_) | State::Failed(_),
                    ) => {
                        if failures > 0 {
                            tracing::info!("the MCP server `{}` is running again", server.name);
                        }
                        *state = State::Running(Arc::new(connection));
                        None
                    }
                    (
                        Err((error, stderr)),
                        State::Idle | State::Starting(_) | State::Running(_) | State::Failed(_),
                    ) => {
                        let failures = failures + 1;
                        server.report(&error, &stderr, failures);
                        *state = State::Failed(Failure {
                            retry_at: Instant::now() + server.options.backoff.delay(failures),
                            error,
                            stderr,
                            failures,
                        });
                        None
                    }
                }
            };
            if let Some(connection) = leftover {
                connection.close().await;
            }
            drop(sender);
        });
        done
    }

    /// Says once, in the log, that the server failed (the first failure of a row: the retries
    /// that follow fail the same way, and `nanocrab mcp list` shows the latest).
    fn report(&self, error: &str, stderr: &str, failures: u32) {
        let redactor = &self.options.redactor;
        let stderr = if stderr.is_empty() {
            String::new()
        } else {
            format!("; its last output on stderr:\n{}", redactor.redact(stderr))
        };
        if failures == 1 {
            tracing::warn!(
                "the MCP server `{}` ({}) {}{stderr}",
                self.name,
                self.key,
                redactor.redact(error)
            );
        } else {
            tracing::debug!(
                "the MCP server `{}` failed again ({failures} in a row): {}",
                self.name,
                redactor.redact(error)
            );
        }
    }

    /// The failure of a server that was running and is gone, which is reported.
    fn died(&self, reason: &str, stderr: String) -> Failure {
        let error = format!("stopped: {reason}");
        self.report(&error, &stderr, 1);
        Failure {
            error,
            stderr,
            failures: 1,
            retry_at: Instant::now() + self.options.backoff.delay(1),
        }
    }

    fn unavailable(&self, failure: &Failure) -> String {
        let wait = failure.retry_at.saturating_duration_since(Instant::now());
        // What went wrong may quote the server (its answer to `initialize`, an HTTP body):
        // fenced, as everything it writes is.
        let mut text = format!(
            "the MCP server `{}` is not available (it is tried again in {} s); what went \
             wrong:\n{}",
            self.name,
            wait.as_secs(),
            wrap_untrusted(
                &format!("start of the MCP server {}", self.name),
                &format!("it {}", failure.error)
            )
        );
        if !failure.stderr.is_empty() {
            text.push_str(&format!(
                "; its last output on stderr:\n{}",
                wrap_untrusted(
                    &format!("stderr of the MCP server {}", self.name),
                    &failure.stderr
                )
            ));
        }
        text
    }

    /// Starts the program or opens the session, and lists the tools; the error is what went
    /// wrong (`did not start: ...`) and the program's last words on stderr.
    async fn connect(&self) -> Result<Connection, (String, String)> {
        let stale = Arc::new(AtomicBool::new(false));
        let handler = Handler {
            stale: Arc::clone(&stale),
        };
        let limit = self.options.startup_limit;
        let too_slow = |what: &str| format!("did not {what} within {} s", limit.as_secs());
        let (service, process) = match (&self.config.command, &self.config.url) {
            (Some(program), _) => {
                let env = server_env(&self.options.host_env, &self.config.env);
                let cwd = self
                    .config
                    .cwd
                    .as_ref()
                    .map(|cwd| nanocrab_config::expand_home(cwd, self.options.home.as_deref()));
                let (process, stdout, stdin) =
                    ServerProcess::spawn(program, &self.config.args, &env, cwd.as_deref())
                        .map_err(|err| (format!("did not start: {err}"), String::new()))?;
                match tokio::time::timeout(limit, handler.serve((stdout, stdin))).await {
                    Ok(Ok(service)) => (service, Some(process)),
                    Ok(Err(err)) => {
                        process.settle().await;
                        let ended = process
                            .exit()
                            .map(|exit| format!(" (it ended with {exit})"))
                            .unwrap_or_default();
                        return Err((format!("did not start: {err}{ended}"), process.stderr()));
                    }
                    Err(_) => {
                        return Err((too_slow("answer `initialize`"), process.stderr()));
                    }
                }
            }
            (None, Some(url)) => {
                let transport = self
                    .http_transport(url)
                    .map_err(|err| (err, String::new()))?;
                match tokio::time::timeout(limit, handler.serve(transport)).await {
                    Ok(Ok(service)) => (service, None),
                    Ok(Err(err)) => {
                        // rmcp's message names its transport's types; what went wrong is at
                        // the end of the chain (`Connection refused`, a status, a bad answer).
                        let mut cause: &dyn std::error::Error = match &err {
                            rmcp::service::ClientInitializeError::TransportError {
                                error, ..
                            } => error,
                            _ => &err,
                        };
                        while let Some(source) = cause.source() {
                            cause = source;
                        }
                        return Err((
                            format!("did not start a session at {url}: {cause}"),
                            String::new(),
                        ));
                    }
                    Err(_) => return Err((too_slow("answer `initialize`"), String::new())),
                }
            }
            (None, None) => {
                return Err(("has neither `command` nor `url`".to_owned(), String::new()));
            }
        };
        let peer = service.peer().clone();
        // The tool list is asked for again after each change notice; a cached copy would hide
        // a change.
        peer.set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        let connection = Connection {
            peer,
            service: tokio::sync::Mutex::new(service),
            process,
            tools: Mutex::new(Vec::new()),
            stale,
        };
        match tokio::time::timeout(limit, self.list_tools(&connection.peer)).await {
            Ok(Ok(tools)) => {
                *lock(&connection.tools) = tools;
                Ok(connection)
            }
            Ok(Err(err)) => {
                let stderr = connection.stderr();
                connection.close().await;
                Err((format!("started, but cannot list its tools: {err}"), stderr))
            }
            Err(_) => {
                let stderr = connection.stderr();
                connection.close().await;
                Err((too_slow("list its tools"), stderr))
            }
        }
    }

    /// The Streamable HTTP transport to `url`, with the configured headers on every request.
    fn http_transport(
        &self,
        url: &str,
    ) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, String> {
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut headers = HashMap::new();
        for (name, value) in &self.config.headers {
            // The value is a secret: the error names the header only.
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{}.headers`: `{name}` is not a header name", self.key))?;
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                format!(
                    "`{}.headers.{name}`: the value is not one an HTTP header can carry",
                    self.key
                )
            })?;
            headers.insert(name, value);
        }
        let client = nanocrab_config::http::client_builder(nanocrab_config::http::Timeouts {
            connect: Duration::from_secs(10),
            read: None,
            total: None,
        })
        // The headers carry the server's secrets (`X-API-Key`), which reqwest would pass on
        // to wherever a redirect points; an MCP endpoint has no reason to move.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| format!("cannot make an HTTP client: {err}"))?;
        Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
            client,
            StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers),
        ))
    }

    /// The server's tools that config offers (`enabledTools`), named and described for the
    /// model.
    async fn list_tools(&self, peer: &Peer<RoleClient>) -> Result<Vec<Offered>, ServiceError> {
        let mut listed = Vec::new();
        let mut cursor = None;
        // Page by page, as rmcp's `list_all_tools` does, but only so far: a server is
        // untrusted, and one listing without end would hold the turn (and the memory) forever.
        for _ in 0..MAX_TOOL_PAGES {
            let page = peer
                .list_tools(Some(
                    rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
                ))
                .await?;
            listed.extend(page.tools);
            cursor = page.next_cursor;
            if cursor.is_none() || listed.len() >= MAX_TOOLS {
                break;
            }
        }
        if cursor.is_some() || listed.len() > MAX_TOOLS {
            tracing::warn!(
                "the MCP server `{}` lists more than {MAX_TOOLS} tools (or more than \
                 {MAX_TOOL_PAGES} pages of them); only the first {MAX_TOOLS} are offered",
                self.name
            );
            listed.truncate(MAX_TOOLS);
        }
        let mut offered: Vec<Offered> = Vec::new();
        for tool in listed {
            if !self.config.offers(&tool.name) {
                continue;
            }
            // The name is shown in approval questions and the audit log as the server wrote it:
            // one with line breaks or terminal escapes could dress up a question.
            let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
            if tool.name.is_empty() || tool.name.len() > 128 || !tool.name.chars().all(plain) {
                tracing::warn!(
                    "the MCP server `{}` has a tool named {:?}, which is not offered: a tool name \
                     is 1 to 128 letters, digits, `_`, `-`, `.` or `/`",
                    self.name,
                    tool.name.chars().take(64).collect::<String>()
                );
                continue;
            }
            let parameters = clean_schema(&tool.input_schema);
            let schema_chars = parameters.to_string().len();
            if schema_chars > MAX_SCHEMA_CHARS {
                tracing::warn!(
                    "the MCP server `{}` describes the arguments of `{}` in {schema_chars} \
                     characters, more than the {MAX_SCHEMA_CHARS} a tool may take; it is not offered",
                    self.name,
                    tool.name
                );
                continue;
            }
            let taken: Vec<String> = offered.iter().map(|o| o.name.clone()).collect();
            let name = names::unique_tool_name(&self.name, &tool.name, &taken);
            let description = tool
                .description
                .as_deref()
                .or(tool.title.as_deref())
                .map(str::trim)
                .filter(|text| !text.is_empty())
                .map_or_else(
                    || {
                        format!(
                            "The tool `{}` of the MCP server `{}`.",
                            tool.name, self.name
                        )
                    },
                    |text| match text.char_indices().nth(MAX_DESCRIPTION_CHARS) {
                        Some((cut, _)) => format!("{}…", &text[..cut]),
                        None => text.to_owned(),
                    },
                );
            offered.push(Offered {
                definition: ToolDef {
                    name: name.clone(),
                    description,
                    parameters,
                },
                name,
                tool: tool.name.to_string(),
            });
        }
        Ok(offered)
    }

    /// The tools to offer now, starting the server if need be (waiting at most `wait`), listed
    /// again first when the server said they changed. None while it is not running.
    pub(crate) async fn tools(self: &Arc<Self>, wait: Duration) -> Vec<Offered> {
        let Ok(connection) = self.connection(wait).await else {
            return Vec::new();
        };
        if connection.stale.swap(false, Ordering::SeqCst) {
            match tokio::time::timeout(wait, self.list_tools(&connection.peer)).await {
                Ok(Ok(tools)) => *lock(&connection.tools) = tools,
                Ok(Err(err)) => {
                    tracing::warn!(
                        "the MCP server `{}` changed its tools, and listing them failed: {err}",
                        self.name
                    );
                    connection.stale.store(true, Ordering::SeqCst);
                }
                Err(_) => connection.stale.store(true, Ordering::SeqCst),
            }
        }
        connection.offered()
    }

    /// The tools of a running server, without starting or waiting for anything.
    pub(crate) fn known_tools(&self) -> Vec<Offered> {
        match &*lock(&self.state) {
            State::Running(connection) if connection.death().is_none() => connection.offered(),
            State::Running(_)
            | State::Idle
            | State::Starting(_)
            | State::Failed(_)
            | State::Stopped => Vec::new(),
        }
    }

    /// Calls the server's tool `tool` (offered as `name`) with `arguments`, within the
    /// server's `toolTimeout`. The error is what the model is told.
    pub(crate) async fn call(
        self: &Arc<Self>,
        name: &str,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Rendered, String> {
        let connection = self.connection(self.startup_wait()).await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let timeout = Duration::from_secs(self.config.tool_timeout);
        // Dropped at the time limit, the request sends `notifications/cancelled`.
        let answer = tokio::time::timeout(timeout, connection.peer.call_tool_once(params)).await;
        let source = format!("MCP server {}", self.name);
        match answer {
            Err(_) => Err(format!(
                "{name} did not answer within {} s (toolTimeout of {}) and was cancelled",
                timeout.as_secs(),
                self.key
            )),
            Ok(Ok(CallToolResponse::Complete(result))) => Ok(render(&result)),
            Ok(Ok(CallToolResponse::InputRequired(_))) => Err(format!(
                "{name} asked for more input in the middle of the call, which nanocrab does not \
                 give MCP servers"
            )),
            Ok(Ok(CallToolResponse::Task(_))) => Err(format!(
                "{name} answered with a task to poll, which nanocrab does not follow"
            )),
            Ok(Ok(_)) => Err(format!(
                "{name} answered in a way this nanocrab does not know"
            )),
            Ok(Err(ServiceError::McpError(error))) => Err(format!(
                "the MCP server `{}` refused the call of {tool}: {}",
                self.name,
                wrap_untrusted(&source, &error.message)
            )),
            Ok(Err(ServiceError::UnexpectedResponse)) => Err(format!(
                "the MCP server `{}` answered the call of {tool} with something that is not a \
                 tool result",
                self.name
            )),
            Ok(Err(err)) => {
                if let Some(process) = &connection.process {
                    process.settle().await;
                }
                let Some(reason) = connection.death() else {
                    return Err(format!(
                        "the call to the MCP server `{}` failed: {err}",
                        self.name
                    ));
                };
                let stderr = connection.stderr();
                {
                    let mut state = lock(&self.state);
                    if matches!(&*state, State::Running(running) if Arc::ptr_eq(running, &connection))
                    {
                        *state = State::Failed(self.died(&reason, stderr.clone()));
                    }
                }
                let mut text = format!(
                    "the MCP server `{}` stopped during the call of {tool} ({reason}); it is \
                     started again when next needed",
                    self.name
                );
                if !stderr.is_empty() {
                    text.push_str(&format!(
                        ". Its last output on stderr:\n{}",
                        wrap_untrusted(&format!("stderr of the {source}"), &stderr)
                    ));
                }
                Err(text)
            }
        }
    }

    /// A snapshot for `nanocrab mcp list`: its state, tool names, and error with stderr.
    pub(crate) fn status(&self) -> (ServerState, Vec<String>, Option<String>, Option<String>) {
        if self.config.disabled {
            return (ServerState::Disabled, Vec::new(), None, None);
        }
        if let Some(problem) = &self.problem {
            return (
                ServerState::Disabled,
                Vec::new(),
                Some(problem.clone()),
                None,
            );
        }
        match &*lock(&self.state) {
            State::Idle => (ServerState::Idle, Vec::new(), None, None),
            State::Starting(_) => (ServerState::Starting, Vec::new(), None, None),
            State::Running(connection) => match connection.death() {
                None => (
                    ServerState::Running,
                    connection.offered().into_iter().map(|o| o.name).collect(),
                    None,
                    None,
                ),
                Some(reason) => (
                    ServerState::Failed,
                    Vec::new(),
                    Some(format!("stopped: {reason}")),
                    Some(connection.stderr()).filter(|s| !s.is_empty()),
                ),
            },
            State::Failed(failure) => (
                ServerState::Failed,
                Vec::new(),
                Some(failure.error.clone()),
                Some(failure.stderr.clone()).filter(|s| !s.is_empty()),
            ),
            State::Stopped => (ServerState::Stopped, Vec::new(), None, None),
        }
    }

    /// Stops the server for good: the session closed, the program and what it started ended.
    pub(crate) async fn shutdown(&self) {
        let running = match std::mem::replace(&mut *lock(&self.state), State::Stopped) {
            State::Running(connection) => Some(connection),
            State::Idle | State::Starting(_) | State::Failed(_) | State::Stopped => None,
        };
        if let Some(connection) = running {
            connection.close().await;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
