//! nanocrab's MCP client. The servers of the config (`tools.mcpServers`, `mcpServers`) start
//! when a turn first needs their tools, each a program spoken to on its stdin and stdout or a
//! Streamable HTTP endpoint; their tools are offered to the agent as `<server>__<tool>` and
//! go through the registry's policy like any other (capability `mcp:<server>:<tool>`). A server
//! that fails is reported once and tried again with backoff; none blocks a turn for longer
//! than its `startupTimeout`. One [`McpServers`] serves the whole process: agents configured
//! with the same server share it.

mod names;
mod process;
mod result;
mod schema;
mod server;
mod tool;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nanocrab_config::McpServerConfig;
use nanocrab_policy::Redactor;
use nanocrab_tools::{SourcedTools, Tool, ToolSource, wrap_untrusted};

pub use names::{MAX_TOOL_NAME, tool_name};
pub use process::{PASSED_ENV_VARS, server_env};
pub use result::{MAX_RESULT_CHARS, Rendered};
pub use schema::clean_schema;
pub use server::ServerState;

use crate::server::Server;
use crate::tool::McpTool;

/// How long a server that failed waits before it is started again: `first` after the first
/// failure, twice as long after each further one in a row, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The wait after `failures` failures in a row.
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(32);
        self.first
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.max)
    }
}

/// What every server of a process is started with.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// nanocrab's environment; a stdio server gets only its plain variables
    /// ([`PASSED_ENV_VARS`], `LC_*`) and its own `env`.
    pub host_env: Vec<(String, String)>,
    /// The user's home, for `~` in a server's `cwd`.
    pub home: Option<PathBuf>,
    /// The process's secrets, kept out of what is logged and printed.
    pub redactor: Redactor,
    pub backoff: Backoff,
    /// How long a turn waits for a server to start, instead of each server's
    /// `startupTimeout`.
    pub startup_wait: Option<Duration>,
    /// How long a start may take in all (a first `npx` fetches the package) before it counts
    /// as failed.
    pub startup_limit: Duration,
}

impl McpOptions {
    pub fn new(host_env: Vec<(String, String)>, home: Option<PathBuf>, redactor: Redactor) -> Self {
        Self {
            host_env,
            home,
            redactor,
            backoff: Backoff::default(),
            startup_wait: None,
            startup_limit: Duration::from_secs(120),
        }
    }
}

/// One server as config gives it to an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    pub name: String,
    /// Where it is configured (`tools.mcpServers.github`), for errors.
    pub key: String,
    pub config: McpServerConfig,
    /// Why it cannot start as configured (a `${VAR}` of its entry is not set).
    pub problem: Option<String>,
}

/// Why a call from `nanocrab mcp call` could not be made.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("no MCP server `{server}` is configured{}", known_servers(.known))]
    UnknownServer { server: String, known: Vec<String> },
    #[error("the arguments must be a JSON object, such as {{\"text\": \"hi\"}}")]
    NotAnObject,
    #[error("{0}")]
    Call(String),
}

fn known_servers(known: &[String]) -> String {
    if known.is_empty() {
        " (none is)".to_owned()
    } else {
        format!("; configured: {}", known.join(", "))
    }
}

/// Every MCP server of the process. Cheap to clone.
#[derive(Clone)]
pub struct McpServers {
    options: Arc<McpOptions>,
    servers: Arc<Mutex<Vec<Arc<Server>>>>,
}

impl McpServers {
    pub fn new(options: McpOptions) -> Self {
        Self {
            options: Arc::new(options),
            servers: Arc::default(),
        }
    }

    /// The servers of one agent as a source of its tools. A server with the same name and
    /// config as one already known (another agent's) is that one.
    pub fn source(&self, entries: Vec<ServerEntry>) -> McpToolSource {
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        let members = entries
            .into_iter()
            .map(|entry| {
                let known = servers.iter().find(|server| {
                    server.name == entry.name
                        && server.config == entry.config
                        && server.problem == entry.problem
                });
                match known {
                    Some(server) => Arc::clone(server),
                    None => {
                        let server = Arc::new(Server::new(
                            entry.name,
                            entry.key,
                            entry.config,
                            entry.problem,
                            Arc::clone(&self.options),
                        ));
                        servers.push(Arc::clone(&server));
                        server
                    }
                }
            })
            .collect();
        McpToolSource {
            members,
            redactor: self.options.redactor.clone(),
        }
    }

    /// Stops every server: sessions closed, programs and what they started ended. None starts
    /// again afterwards.
    pub async fn shutdown(&self) {
        let servers: Vec<Arc<Server>> = self
            .servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        futures::future::join_all(servers.iter().map(|server| server.shutdown())).await;
    }
}

/// One server's state for `nanocrab mcp list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    /// Where it is configured.
    pub key: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The command line or the URL, secrets redacted.
    pub target: String,
    pub state: ServerState,
    /// The names its tools are offered under.
    pub tools: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its last output on stderr, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

/// The MCP servers of one agent, whose tools each turn is offered.
pub struct McpToolSource {
    members: Vec<Arc<Server>>,
    redactor: Redactor,
}

impl McpToolSource {
    /// Each server's state, after starting those that are not running (waiting for each at
    /// most its startup wait).
    pub async fn statuses(&self) -> Vec<ServerStatus> {
        futures::future::join_all(
            self.members
                .iter()
                .map(|server| async move { server.tools(server.startup_wait()).await }),
        )
        .await;
        self.members
            .iter()
            .map(|server| {
                let (state, tools, error, stderr) = server.status();
                let config = &server.config;
                let (transport, target) = match (&config.command, &config.url) {
                    (Some(command), _) => (
                        "stdio",
                        std::iter::once(command)
                            .chain(&config.args)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(" "),
                    ),
                    (None, Some(url)) => ("http", url.clone()),
                    (None, None) => ("stdio", String::new()),
                };
                let redact = |text: String| self.redactor.redact(&text).into_owned();
                ServerStatus {
                    name: server.name.clone(),
                    key: server.key.clone(),
                    transport,
                    target: redact(target),
                    state,
                    tools,
                    error: error.map(redact),
                    stderr: stderr.map(redact),
                }
            })
            .collect()
    }

    /// Calls the tool `tool` (its name on the server) of server `server` with `arguments`, as
    /// the agent would, without the policy: for a person at the terminal. The result is the
    /// text the model would be given, fenced and with secrets redacted; an error result is
    /// `Ok` with `is_error`.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: serde_json::Value,
    ) -> Result<Rendered, McpError> {
        let Some(member) = self.members.iter().find(|member| member.name == server) else {
            return Err(McpError::UnknownServer {
                server: server.to_owned(),
                known: self.members.iter().map(|m| m.name.clone()).collect(),
            });
        };
        let arguments = match arguments {
            serde_json::Value::Object(arguments) => Some(arguments),
            serde_json::Value::Null => None,
            serde_json::Value::Bool(_)
            | serde_json::Value::Number(_)
            | serde_json::Value::String(_)
            | serde_json::Value::Array(_) => return Err(McpError::NotAnObject),
        };
        let name = tool_name(server, tool);
        let rendered = member
            .call(&name, tool, arguments)
            .await
            .map_err(|message| McpError::Call(self.redactor.redact(&message).into_owned()))?;
        Ok(Rendered {
            text: self
                .redactor
                .redact(&wrap_untrusted(&format!("mcp {name}"), &rendered.text))
                .into_owned(),
            is_error: rendered.is_error,
        })
    }

    fn offered(&self, server: &Arc<Server>, tools: Vec<server::Offered>) -> Vec<Arc<dyn Tool>> {
        tools
            .into_iter()
            .map(|offered| {
                Arc::new(McpTool {
                    server: Arc::clone(server),
                    offered,
                }) as Arc<dyn Tool>
            })
            .collect()
    }
}

impl ToolSource for McpToolSource {
    fn tools(&self) -> SourcedTools<'_> {
        Box::pin(async move {
            let offered = futures::future::join_all(
                self.members
                    .iter()
                    .filter(|server| !server.config.disabled && server.problem.is_none())
                    .map(|server| async move {
                        self.offered(server, server.tools(server.startup_wait()).await)
                    }),
            )
            .await;
            offered.into_iter().flatten().collect()
        })
    }

    fn known_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.members
            .iter()
            .flat_map(|server| self.offered(server, server.known_tools()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn backoff_doubles_from_its_first_wait_up_to_its_most() {
        let backoff = Backoff::default();
        assert_eq!(
            [1, 2, 3, 9, 10, 100].map(|failures| backoff.delay(failures).as_secs()),
            [1, 2, 4, 256, 300, 300]
        );
    }
}
