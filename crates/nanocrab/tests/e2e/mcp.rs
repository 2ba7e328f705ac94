//! MCP servers through the real binary, with the `everything` reference server (npm, installed
//! by scripts/test-deps): a Claude Desktop `mcpServers` block as it is, its `echo` offered to
//! the model and called within a grant (the result fenced), denied without one; `nanocrab mcp
//! list` and `nanocrab mcp call`.

use std::path::Path;

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, tool_names, tool_results};

fn everything() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.test-deps/mcp/node_modules/.bin/mcp-server-everything");
    assert!(
        path.exists(),
        "the MCP reference servers are missing: run scripts/test-deps (the README's test \
         command, scripts/test, does)"
    );
    path.canonicalize().unwrap().display().to_string()
}

/// The base config with `everything` in a top-level `mcpServers` block, as Claude Desktop
/// writes one, and `grants`.
fn config(home: &Home, grants: &[&str]) -> Value {
    let mut config = home.base_config();
    config["mcpServers"] = json!({
        "everything": {"command": everything(), "args": ["stdio"], "env": {"LOG_LEVEL": "warn"}}
    });
    config["tools"] = json!({"grants": grants});
    config
}

#[test]
fn a_granted_mcp_tool_is_called_and_its_result_comes_back_fenced() {
    let home = Home::new(Wire::OpenAi);
    home.write_config(config(&home, &["mcp:everything:*"]));
    home.mock.push(Reply::tool_call(
        "call_1",
        "everything__echo",
        json!({"message": "hi from the model"}),
    ));
    home.mock.push(Reply::text("It echoed."));
    assert_eq!(home.ask("echo something"), "It echoed.\n");
    let requests = home.requests();
    assert!(
        tool_names(&requests[0].body).contains(&"everything__echo".to_owned()),
        "{:?}",
        tool_names(&requests[0].body)
    );
    assert_eq!(
        tool_results(&requests[1].body),
        [(
            "call_1".to_owned(),
            "<untrusted-data source=\"mcp everything__echo\">\nEcho: hi from the model\n</untrusted-data>"
                .to_owned(),
            false
        )]
    );
    let audit = home.run(home.nanocrab().args(["audit", "list", "--json"]));
    let record: Value = serde_json::from_str(audit.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            &record["tool"],
            &record["requested"],
            &record["status"],
            &record["granted"]
        ),
        (
            &json!("everything__echo"),
            &json!(["mcp:everything:echo"]),
            &json!("ok"),
            &json!(["mcp:everything:* (config tools.grants[0])"])
        )
    );
}

#[test]
fn without_a_grant_and_nobody_to_approve_an_mcp_call_is_denied() {
    let home = Home::new(Wire::OpenAi);
    home.write_config(config(&home, &[]));
    home.mock.push(Reply::tool_call(
        "call_1",
        "everything__echo",
        json!({"message": "hi"}),
    ));
    home.mock.push(Reply::text("Not allowed."));
    assert_eq!(home.ask("echo something"), "Not allowed.\n");
    let results = tool_results(&home.requests()[1].body);
    assert_eq!(results.len(), 1);
    let (_, text, is_error) = &results[0];
    assert!(is_error);
    assert!(
        text.starts_with(
            "Error: everything__echo needs approval (guarded) for mcp:everything:echo, and no one"
        ),
        "{text}"
    );
}

#[test]
fn mcp_list_and_call_show_what_the_model_would_get() {
    let home = Home::new(Wire::OpenAi);
    let mut config = config(&home, &[]);
    config["mcpServers"]["broken"] =
        json!({"command": "/nonexistent/mcp-server", "args": ["--port", "1"]});
    home.write_config(config);
    let list = home.run(home.nanocrab().args(["mcp", "list"]));
    assert!(list.success, "{}", list.stderr);
    // The everything server adds a tool or two after it starts, so its tools are checked
    // apart from the snapshot.
    assert!(
        list.stdout
            .contains("everything__echo, everything__get-annotated-message"),
        "{}",
        list.stdout
    );
    let shown: Vec<String> = list
        .stdout
        .replace(&everything(), "[mcp-server-everything]")
        .lines()
        .map(|line| match line.split_once(" · running · ") {
            Some((head, tail)) => format!(
                "{head} · running · N tools{}",
                &tail[tail.find(" (").unwrap()..]
            ),
            None if line.starts_with("  tools: ") => "  tools: [its tools]".to_owned(),
            None => line.to_owned(),
        })
        .collect();
    insta::assert_snapshot!(shown.join("\n"));

    let json_list = home.run(home.nanocrab().args(["mcp", "list", "--json"]));
    let servers: Value = serde_json::from_str(&json_list.stdout).unwrap();
    assert_eq!(
        servers
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["name"].as_str().unwrap(), s["state"].as_str().unwrap()))
            .collect::<Vec<_>>(),
        [("broken", "failed"), ("everything", "running")]
    );

    let call = home.run(home.nanocrab().args([
        "mcp",
        "call",
        "everything",
        "echo",
        r#"{"message": "by hand"}"#,
    ]));
    assert!(call.success, "{}", call.stderr);
    assert_eq!(
        call.stdout,
        "<untrusted-data source=\"mcp everything__echo\">\nEcho: by hand\n</untrusted-data>\n"
    );
    let failing =
        home.run(
            home.nanocrab()
                .args(["mcp", "call", "everything", "get-sum", r#"{"a": "one"}"#]),
        );
    assert!(!failing.success);
    assert!(
        failing
            .stderr
            .contains("error: get-sum of the MCP server `everything` reported an error"),
        "{}",
        failing.stderr
    );
    let unknown = home.run(home.nanocrab().args(["mcp", "call", "nope", "echo"]));
    assert_eq!(
        unknown.stderr,
        "error: no MCP server `nope` is configured; configured: broken, everything\n"
    );
}
