//! What a hook costs a tool call: one `PreToolUse` hook (`exit 0`, and one answering with a
//! JSON `allow`) run through `Hooks::run` with the audit log, unsandboxed, and sandboxed when
//! `NANOCRAB_LAUNCHER` names a `nanocrab` binary to launch through.
//!
//!     cargo bench -p nanocrab-hooks --bench hook_run
//!     cargo build --release -p nanocrab && \
//!       NANOCRAB_LAUNCHER=$CARGO_TARGET_DIR/release/nanocrab cargo bench -p nanocrab-hooks --bench hook_run
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use nanocrab_config::{HooksConfig, SandboxConfig, SandboxMode};
use nanocrab_core::hooks::{HookInput, HookScope, Hooks as _};
use nanocrab_hooks::{CommandHooks, HookSetup};
use nanocrab_policy::{AuditLog, Redactor};
use nanocrab_schema::{SessionKey, ToolCall};
use nanocrab_tools::SandboxLauncher;
use serde_json::json;

const RUNS: usize = 200;

fn ms(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let audit =
        Arc::new(AuditLog::open(&dir.path().join("audit.sqlite"), Redactor::default()).unwrap());
    let launcher = std::env::var_os("NANOCRAB_LAUNCHER").map(|program| SandboxLauncher {
        program: program.into(),
        state_dir: dir.path().join("state"),
        agent_id: "bench".into(),
    });
    let scope = HookScope {
        agent: "main".into(),
        session: SessionKey::parse("cli:bench").unwrap(),
        transcript_path: dir.path().join("sessions/cli:bench.jsonl"),
        cwd: workspace.clone(),
        trace_id: "t".into(),
        run_id: "r".into(),
    };
    let input = HookInput::PreToolUse {
        call: ToolCall {
            id: "call_1".into(),
            name: "exec".into(),
            input: json!({"command": "cargo test"}),
        },
    };
    println!("{RUNS} runs each, ms per PreToolUse (median / p99)");
    let allow = r#"echo '{"hookSpecificOutput": {"permissionDecision": "allow"}}'"#;
    let mut cases = vec![
        ("exit 0, unsandboxed", "exit 0", SandboxMode::Off),
        ("JSON allow, unsandboxed", allow, SandboxMode::Off),
    ];
    if launcher.is_some() {
        cases.push(("exit 0, sandboxed", "exit 0", SandboxMode::Required));
        cases.push(("JSON allow, sandboxed", allow, SandboxMode::Required));
    }
    for (label, command, mode) in cases {
        let config: HooksConfig = serde_json::from_value(
            json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"command": command}]}]}),
        )
        .unwrap();
        let hooks = CommandHooks::new(
            &config,
            HookSetup {
                sandbox: &SandboxConfig {
                    mode,
                    ..SandboxConfig::default()
                },
                launcher: launcher.as_ref(),
                base_env: std::env::vars_os().collect(),
                audit: Some(Arc::clone(&audit)),
                redactor: Redactor::default(),
            },
        )
        .unwrap();
        for _ in 0..10 {
            runtime.block_on(hooks.run(&input, &scope));
        }
        let mut samples: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                let outcome = runtime.block_on(hooks.run(&input, &scope));
                let took = start.elapsed();
                assert_eq!(outcome.halt, None);
                took
            })
            .collect();
        samples.sort();
        println!(
            "{label:<28} {:>7.2} / {:>7.2}",
            ms(&samples, 0.5),
            ms(&samples, 0.99)
        );
    }
}
