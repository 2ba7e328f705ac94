//! The MCP conformance suite (`@modelcontextprotocol/conformance`, npm, installed by
//! scripts/test-deps) against nanocrab's MCP client, through `nanocrab mcp conformance-client`:
//! the scenarios of what the client does (the handshake, a tool called, a Streamable HTTP
//! stream resumed). Elicitation and OAuth, which nanocrab does not do, are left out; the
//! closing note of issue 18 lists every scenario's result.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::harness::{Home, Wire};

/// Runs `scenario` and returns its checks' verdicts (`INFO` ones left out), by id.
fn verdicts(home: &Home, scenario: &str) -> Vec<(String, String)> {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.test-deps/mcp/node_modules/.bin/conformance");
    assert!(
        suite.exists(),
        "the MCP conformance suite is missing: run scripts/test-deps (the README's test \
         command, scripts/test, does)"
    );
    let out = home.user_home().join(format!("conformance-{scenario}"));
    let client = format!(
        "{} mcp conformance-client",
        assert_cmd::cargo::cargo_bin("nanocrab").display()
    );
    let run = std::process::Command::new(suite)
        .args(["client", "--command", &client, "--scenario", scenario, "-o"])
        .arg(&out)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.user_home())
        .env("NANOCRAB_HOME", home.home())
        .output()
        .unwrap();
    let runs: Vec<_> = std::fs::read_dir(&out)
        .unwrap_or_else(|err| {
            panic!(
                "{scenario}: no results in {} ({err}); the suite said:\n{}{}",
                out.display(),
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            )
        })
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let checks: Vec<Value> =
        serde_json::from_slice(&std::fs::read(runs[0].join("checks.json")).unwrap()).unwrap();
    checks
        .iter()
        .filter(|check| check["status"] != "INFO")
        .map(|check| {
            (
                check["id"].as_str().unwrap().to_owned(),
                check["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn success(ids: &[&str]) -> Vec<(String, String)> {
    ids.iter()
        .map(|id| ((*id).to_owned(), "SUCCESS".to_owned()))
        .collect()
}

#[test]
fn the_client_passes_the_conformance_scenarios_of_what_it_does() {
    let home = Home::new(Wire::OpenAi);
    home.write_config(home.base_config());
    assert_eq!(
        verdicts(&home, "initialize"),
        success(&["mcp-client-initialization"])
    );
    assert_eq!(
        verdicts(&home, "tools_call"),
        success(&["tool-add-numbers"])
    );
    // How soon the client comes back after the stream closes is measured too; a loaded
    // machine decides that one, not the client, so it is left out.
    let resumed: Vec<_> = verdicts(&home, "sse-retry")
        .into_iter()
        .filter(|(id, _)| id != "client-sse-retry-timing")
        .collect();
    assert_eq!(
        resumed,
        success(&["client-sse-graceful-reconnect", "client-sse-last-event-id"])
    );
}
