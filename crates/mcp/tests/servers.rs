//! The MCP client against real servers: the reference servers from npm (`everything` over
//! stdio and Streamable HTTP, `filesystem`), run with the machine's Node.js, and a server
//! written with the PyPI `mcp` package for what goes wrong (tests/servers/errors.py). All of
//! them are installed by scripts/test-deps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use nanocrab_mcp::{Backoff, McpOptions, McpServers, McpToolSource, ServerEntry, ServerState};
use nanocrab_policy::{CapabilityGrant, CapabilityPattern, GrantSource, Grants, Redactor};
use nanocrab_schema::{ToolCall, ToolResult};
use nanocrab_tools::{ToolContext, ToolPolicy, ToolRegistry, ToolSource as _};
use pretty_assertions::assert_eq;
use serde_json::json;

fn test_deps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-deps")
}

fn installed(path: PathBuf) -> String {
    assert!(
        path.exists(),
        "{} is missing: run scripts/test-deps (the README's test command, scripts/test, does)",
        path.display()
    );
    path.display().to_string()
}

fn node_bin(name: &str) -> String {
    installed(test_deps().join("mcp/node_modules/.bin").join(name))
}

fn python() -> String {
    installed(test_deps().join("venv/bin/python"))
}

fn errors_py() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/servers/errors.py")
        .display()
        .to_string()
}

/// nanocrab's environment as the servers are started from it: the machine's PATH (node is
/// found through it), and secrets a server must never see.
fn host_env() -> Vec<(String, String)> {
    vec![
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        (
            "HOME".to_owned(),
            std::env::temp_dir().display().to_string(),
        ),
        ("LC_ALL".to_owned(), "C.UTF-8".to_owned()),
        (
            "OPENAI_API_KEY".to_owned(),
            "sk-test-never-passed".to_owned(),
        ),
        ("NANOCRAB_HOME".to_owned(), "/nowhere".to_owned()),
    ]
}

/// Servers that start again at once after a failure, and that a call waits up to 60 s for
/// (Node.js takes its time on a loaded machine); `startup_wait` overrides that.
fn servers(startup_wait: Duration) -> McpServers {
    McpServers::new(McpOptions {
        backoff: Backoff {
            first: Duration::ZERO,
            max: Duration::ZERO,
        },
        startup_wait: Some(startup_wait),
        startup_limit: Duration::from_secs(60),
        ..McpOptions::new(
            host_env(),
            None,
            Redactor::new([(
                "mcpServers.remote.headers.Authorization".to_owned(),
                "Bearer sesame-open-up".to_owned(),
            )]),
        )
    })
}

const PATIENT: Duration = Duration::from_secs(60);

fn entry(name: &str, config: serde_json::Value) -> ServerEntry {
    ServerEntry {
        name: name.to_owned(),
        key: format!("mcpServers.{name}"),
        config: serde_json::from_value(config).unwrap(),
        problem: None,
    }
}

/// A registry with the source's tools, granted `grants` (`mcp:everything:*`).
async fn registry(source: &McpToolSource, grants: &[&str]) -> ToolRegistry {
    let grants = Grants::new(
        grants
            .iter()
            .map(|grant| CapabilityGrant {
                pattern: CapabilityPattern::parse(grant, None).unwrap(),
                source: GrantSource::Config {
                    key: "tools.grants".to_owned(),
                },
            })
            .collect(),
    );
    let mut registry = ToolRegistry::new().with_policy(ToolPolicy {
        grants,
        ..ToolPolicy::default()
    });
    for tool in source.tools().await {
        registry.register(tool);
    }
    registry
}

async fn call(registry: &ToolRegistry, name: &str, input: serde_json::Value) -> ToolResult {
    registry
        .execute(
            &ToolCall {
                id: "call-1".to_owned(),
                name: name.to_owned(),
                input,
            },
            &ToolContext::new(std::env::temp_dir()),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_offers_its_tools_and_answers_them() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![entry(
        "everything",
        json!({"command": node_bin("mcp-server-everything"), "args": ["stdio"]}),
    )]);
    let registry = registry(&source, &["mcp:everything:*"]).await;
    let names = registry.names();
    for name in [
        "everything__echo",
        "everything__get-sum",
        "everything__get-tiny-image",
        "everything__get-structured-content",
    ] {
        assert!(names.contains(&name.to_owned()), "{name} not in {names:?}");
    }
    let echo = registry
        .definitions()
        .iter()
        .find(|d| d.name == "everything__echo")
        .unwrap();
    insta::assert_json_snapshot!("everything_echo_definition", echo);

    assert_eq!(
        call(
            &registry,
            "everything__echo",
            json!({"message": "hi from nanocrab"})
        )
        .await,
        ToolResult::ok(
            "call-1",
            "<untrusted-data source=\"mcp everything__echo\">\nEcho: hi from nanocrab\n</untrusted-data>"
        )
    );
    let image = call(&registry, "everything__get-tiny-image", json!({})).await;
    assert!(!image.is_error, "{}", image.content);
    assert!(
        image.content.contains("[image: image/png, 4 KB]"),
        "{}",
        image.content
    );
    let weather = call(
        &registry,
        "everything__get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    assert!(
        weather
            .content
            .contains(r#"{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}"#),
        "{}",
        weather.content
    );
    // A wrong argument is the server's error, told to the model.
    let wrong = call(
        &registry,
        "everything__get-sum",
        json!({"a": "one", "b": 2}),
    )
    .await;
    assert!(wrong.is_error, "{}", wrong.content);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_a_grant_and_nobody_to_ask_is_denied() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![entry(
        "everything",
        json!({"command": node_bin("mcp-server-everything")}),
    )]);
    let registry = registry(&source, &["mcp:other:*"]).await;
    let denied = call(&registry, "everything__echo", json!({"message": "hi"})).await;
    assert_eq!(
        denied,
        ToolResult::error(
            "call-1",
            "Error: everything__echo needs approval (guarded) for mcp:everything:echo, and no \
             one can approve it in this run. Do without it, or tell the user it must be granted \
             in config (tools.grants)."
        )
    );
    servers.shutdown().await;
}

/// A free port on 127.0.0.1 for a server to listen on.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `command` until dropped, and waits until it listens on `port`.
struct Listening {
    _child: tokio::process::Child,
}

impl Listening {
    async fn start(mut command: tokio::process::Command, port: u16) -> Self {
        let child = command
            .kill_on_drop(true)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Self { _child: child };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("nothing listens on port {port}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    let port = free_port();
    let mut command = tokio::process::Command::new(node_bin("mcp-server-everything"));
    command.arg("streamableHttp").env("PORT", port.to_string());
    let _server = Listening::start(command, port).await;
    let servers = servers(PATIENT);
    let source = servers.source(vec![entry(
        "everything",
        json!({"url": format!("http://127.0.0.1:{port}/mcp"), "type": "streamableHttp"}),
    )]);
    let registry = registry(&source, &["mcp:everything"]).await;
    assert_eq!(
        call(&registry, "everything__get-sum", json!({"a": 2, "b": 40})).await,
        ToolResult::ok(
            "call-1",
            "<untrusted-data source=\"mcp everything__get-sum\">\nThe sum of 2 and 40 is 42.\n</untrusted-data>"
        )
    );
    let statuses = source.statuses().await;
    assert_eq!(
        (statuses[0].transport, statuses[0].state),
        ("http", ServerState::Running)
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_reach_a_streamable_http_server_and_are_redacted() {
    let port = free_port();
    let mut command = tokio::process::Command::new(python());
    command.arg(errors_py()).arg("http").arg(port.to_string());
    let _server = Listening::start(command, port).await;
    let servers = servers(PATIENT);
    let source = servers.source(vec![entry(
        "remote",
        json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "headers": {"Authorization": "Bearer sesame-open-up", "X-Trace": "abc"}
        }),
    )]);
    let answer = source
        .call("remote", "authorization", json!({}))
        .await
        .unwrap();
    assert_eq!(
        answer.text,
        "<untrusted-data source=\"mcp remote__authorization\">\n{\"authorization\": \"[redacted: mcpServers.remote.headers.Authorization]\", \"x-trace\": \"abc\"}\n</untrusted-data>"
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filesystem_server_reads_a_file_of_its_folder() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("notes.txt"), "buy milk\n").unwrap();
    let folder = std::fs::canonicalize(folder.path()).unwrap();
    let servers = servers(PATIENT);
    let source = servers.source(vec![entry(
        "filesystem",
        json!({"command": node_bin("mcp-server-filesystem"), "args": [folder]}),
    )]);
    let answer = source
        .call(
            "filesystem",
            "read_text_file",
            json!({"path": folder.join("notes.txt")}),
        )
        .await
        .unwrap();
    assert_eq!(
        answer.text,
        "<untrusted-data source=\"mcp filesystem__read_text_file\">\nbuy milk\n</untrusted-data>"
    );
    servers.shutdown().await;
}

fn errors_server(tool_timeout: u64) -> ServerEntry {
    entry(
        "errors",
        json!({
            "command": python(),
            "args": [errors_py()],
            "env": {"ERRORS_MODE": "test"},
            "toolTimeout": tool_timeout
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_raises_is_an_error_result_with_the_servers_text() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![errors_server(60)]);
    let registry = registry(&source, &["mcp:errors:*"]).await;
    let result = call(&registry, "errors__raises", json!({"reason": "smoke"})).await;
    assert!(result.is_error);
    assert!(
        result.content.starts_with(
            "Error: errors__raises reported an error:\n<untrusted-data source=\"mcp errors__raises\">\n"
        ) && result.content.contains("the disk is on fire: smoke"),
        "{}",
        result.content
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_hangs_past_its_timeout_is_cancelled_and_the_server_goes_on() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![errors_server(1)]);
    let registry = registry(&source, &["mcp:errors:*"]).await;
    assert_eq!(
        call(&registry, "errors__hangs", json!({})).await,
        ToolResult::error(
            "call-1",
            "Error: errors__hangs did not answer within 1 s (toolTimeout of mcpServers.errors) \
             and was cancelled"
        )
    );
    let after = call(&registry, "errors__raises", json!({"reason": "still here"})).await;
    assert!(after.content.contains("still here"), "{}", after.content);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_mid_call_is_reported_with_its_stderr_and_restarted() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![errors_server(60)]);
    let registry = registry(&source, &["mcp:errors:*"]).await;
    let died = call(&registry, "errors__exits", json!({})).await;
    assert!(died.is_error);
    assert!(
        died.content.starts_with(
            "Error: the MCP server `errors` stopped during the call of exits (it ended with \
             exit status 3); it is started again when next needed. Its last output on stderr:\n"
        ) && died
            .content
            .contains("errors.py: going away in the middle of a call"),
        "{}",
        died.content
    );
    // The backoff is zero here: the next call starts the server again.
    let next = call(&registry, "errors__raises", json!({"reason": "back"})).await;
    assert!(next.content.contains("back"), "{}", next.content);
    servers.shutdown().await;
}

/// rmcp drops a response it cannot read, so the call ends at its time limit rather than at
/// once; the server is still usable afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_result_ends_at_the_time_limit_and_the_server_goes_on() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![errors_server(1)]);
    let registry = registry(&source, &["mcp:errors:*"]).await;
    assert_eq!(
        call(&registry, "errors__malformed", json!({})).await,
        ToolResult::error(
            "call-1",
            "Error: errors__malformed did not answer within 1 s (toolTimeout of \
             mcpServers.errors) and was cancelled"
        )
    );
    let after = call(&registry, "errors__raises", json!({"reason": "still here"})).await;
    assert!(after.content.contains("still here"), "{}", after.content);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_offered_from_the_next_turn() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![errors_server(60)]);
    let before: Vec<String> = source
        .tools()
        .await
        .iter()
        .map(|t| t.definition().name)
        .collect();
    assert!(!before.contains(&"errors__added".to_owned()), "{before:?}");
    let grown = source.call("errors", "grow", json!({})).await.unwrap();
    assert!(grown.text.contains("added a tool"), "{}", grown.text);
    // The notice travels apart from the answer, so it is looked for turn after turn, for as
    // long as a start may take (PATIENT), not a guessed moment.
    let mut after = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENT;
    while tokio::time::Instant::now() < deadline {
        after = source
            .tools()
            .await
            .iter()
            .map(|t| t.definition().name)
            .collect();
        if after.contains(&"errors__added".to_owned()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(after.contains(&"errors__added".to_owned()), "{after:?}");
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_sees_only_the_plain_variables_and_its_own() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![errors_server(60)]);
    let answer = source
        .call("errors", "environment", json!({}))
        .await
        .unwrap();
    let json_text = answer.text.lines().nth(1).unwrap_or_default().to_owned();
    let env: std::collections::BTreeMap<String, String> = serde_json::from_str(&json_text).unwrap();
    // Python adds LC_CTYPE itself when it coerces the C locale; anything else comes from us.
    let names: Vec<&str> = env
        .keys()
        .map(String::as_str)
        .filter(|name| *name != "LC_CTYPE")
        .collect();
    assert_eq!(names, ["ERRORS_MODE", "HOME", "LC_ALL", "PATH"]);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_with_its_stderr_and_blocks_no_turn() {
    let servers = servers(PATIENT);
    let source = servers.source(vec![
        entry("missing", json!({"command": "/nonexistent/mcp-server"})),
        entry(
            "crashing",
            json!({"command": python(), "args": ["-c", "import sys; sys.stderr.write('no token configured\\n'); sys.exit(3)"]}),
        ),
        errors_server(60),
    ]);
    let tools = source.tools().await;
    assert!(
        tools
            .iter()
            .all(|t| t.definition().name.starts_with("errors__")),
        "only the good server's tools are offered"
    );
    assert!(!tools.is_empty());
    let statuses = source.statuses().await;
    let failed: Vec<(String, ServerState, Option<String>, Option<String>)> = statuses
        .iter()
        .filter(|s| s.name != "errors")
        .map(|s| (s.name.clone(), s.state, s.error.clone(), s.stderr.clone()))
        .collect();
    assert_eq!(
        failed,
        [
            (
                "missing".to_owned(),
                ServerState::Failed,
                Some(
                    "did not start: cannot start `/nonexistent/mcp-server`: No such file or \
                     directory (os error 2)"
                        .to_owned()
                ),
                None
            ),
            (
                "crashing".to_owned(),
                ServerState::Failed,
                Some(failed[1].2.clone().unwrap_or_default()),
                Some("no token configured".to_owned())
            ),
        ]
    );
    assert!(
        failed[1]
            .2
            .as_deref()
            .is_some_and(|e| e.starts_with("did not start: ")
                && e.ends_with("(it ended with exit status 3)")),
        "{:?}",
        failed[1].2
    );
    // A call the model makes meanwhile is told why, the server's words fenced.
    let call = source.call("crashing", "anything", json!({})).await;
    // How the start broke (a closed pipe, a refused `initialize`) depends on timing; where
    // the server's words are and that they are fenced does not.
    let message = call.err().map(|err| err.to_string()).unwrap_or_default();
    assert!(
        message.starts_with(
            "the MCP server `crashing` is not available (it is tried again in 0 s); what went \
             wrong:\n<untrusted-data source=\"start of the MCP server crashing\">\nit did not \
             start: "
        ) && message.ends_with(
            "(it ended with exit status 3)\n</untrusted-data>; its last output on stderr:\n\
             <untrusted-data source=\"stderr of the MCP server crashing\">\nno token \
             configured\n</untrusted-data>"
        ),
        "{message}"
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_waits_no_longer_than_the_startup_wait_for_a_slow_server() {
    // A program that never answers `initialize`; a turn given no time offers the others.
    let servers = servers(Duration::ZERO);
    let source = servers.source(vec![entry(
        "silent",
        json!({"command": python(), "args": ["-c", "import time; time.sleep(3600)"]}),
    )]);
    assert!(source.tools().await.is_empty());
    let statuses = source.statuses().await;
    assert_eq!(statuses[0].state, ServerState::Starting);
    servers.shutdown().await;
    let after: Vec<ServerState> = source.statuses().await.iter().map(|s| s.state).collect();
    assert_eq!(after, [ServerState::Stopped]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_with_the_same_server_share_it() {
    let servers = servers(PATIENT);
    let first = servers.source(vec![errors_server(60)]);
    let same = servers.source(vec![errors_server(60)]);
    let other = servers.source(vec![errors_server(5)]);
    let started = first.tools().await.len();
    assert!(started > 0);
    // Known without starting anything: only a server that runs has tools.
    assert_eq!(same.known_tools().len(), started);
    assert!(other.known_tools().is_empty());
    servers.shutdown().await;
}
