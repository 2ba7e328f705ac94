//! What the policy point costs per tool call, without the model: working out the call's
//! capabilities, deciding on grants, fencing and redacting the output, and appending the call
//! to the audit log (SQLite, WAL), against the same calls with no audit log.
//!
//!     cargo bench -p nanocrab-tools --bench tool_call
//!     python3 scripts/bench.py --tools
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use nanocrab_config::ToolsConfig;
use nanocrab_policy::{AuditLog, Redactor};
use nanocrab_schema::{SessionKey, ToolCall};
use nanocrab_tools::{ToolContext, ToolPolicy, ToolRegistry, builtin_registry};
use serde_json::json;

const CALLS: usize = 2_000;

fn registry(dir: &std::path::Path, audit: bool, grants: &[&str]) -> ToolRegistry {
    let redactor = Redactor::new([("OPENAI_API_KEY".to_owned(), "sk-bench-123456789".to_owned())]);
    let mut config = ToolsConfig {
        grants: grants.iter().map(|g| g.to_string()).collect(),
        ..ToolsConfig::default()
    };
    config.exec.mode = nanocrab_config::ExecMode::Full;
    builtin_registry(
        &config,
        &dir.join("ws"),
        None,
        None,
        ToolPolicy {
            audit: audit.then(|| {
                Arc::new(AuditLog::open(&dir.join("state/audit.sqlite"), redactor.clone()).unwrap())
            }),
            redactor,
            ..ToolPolicy::default()
        },
        |_| Vec::new(),
    )
    .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let notes: String = (0..200)
        .map(|n| format!("line {n} of the notes\n"))
        .collect();
    std::fs::write(dir.path().join("ws/notes.md"), &notes).unwrap();
    let ctx = ToolContext {
        session: Some(SessionKey::parse("cli:bench").unwrap()),
        ..ToolContext::new(dir.path().join("ws").canonicalize().unwrap())
    };
    let read = ToolCall {
        id: "call_1".into(),
        name: "read_file".into(),
        input: json!({"path": "notes.md"}),
    };
    let unknown = ToolCall {
        id: "call_2".into(),
        name: "no_such_tool".into(),
        input: json!({}),
    };
    let shell = ToolCall {
        id: "call_3".into(),
        name: "exec".into(),
        input: json!({"command": "true"}),
    };
    println!("{CALLS} calls each, µs per call (median / p99)");
    for (label, call, audit, calls) in [
        ("read_file 200 lines, no audit log", &read, false, CALLS),
        ("read_file 200 lines, audit log", &read, true, CALLS),
        (
            "unknown tool (refused), no audit log",
            &unknown,
            false,
            CALLS,
        ),
        ("unknown tool (refused), audit log", &unknown, true, CALLS),
        (
            "exec `true` (sh -c, granted, unsandboxed), audit log",
            &shell,
            true,
            200,
        ),
    ] {
        let tools = registry(dir.path(), audit, &["exec:sh", "net"]);
        // Warm the page cache and SQLite's statement cache.
        for _ in 0..20 {
            runtime.block_on(tools.execute(call, &ctx));
        }
        let mut samples: Vec<Duration> = (0..calls)
            .map(|_| {
                let start = Instant::now();
                let result = runtime.block_on(tools.execute(call, &ctx));
                let took = start.elapsed();
                assert_eq!(result.is_error, call.name == "no_such_tool", "{result:?}");
                took
            })
            .collect();
        samples.sort();
        println!(
            "{label:<42} {:>8.1} / {:>8.1}",
            percentile(&samples, 0.5),
            percentile(&samples, 0.99)
        );
    }
    let size = std::fs::metadata(dir.path().join("state/audit.sqlite"))
        .map(|m| m.len())
        .unwrap_or(0)
        + std::fs::metadata(dir.path().join("state/audit.sqlite-wal"))
            .map(|m| m.len())
            .unwrap_or(0);
    println!(
        "audit log after {} calls: {:.0} bytes per call",
        2 * CALLS + 200 + 60,
        size as f64 / (2 * CALLS + 200 + 60) as f64
    );
}
