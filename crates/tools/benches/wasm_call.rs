#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The per-call overhead of a trivial WASM tool (fresh store and instance, arguments in,
//! result out, on a blocking thread), directly and through the registry's policy path.
//!
//! `cargo bench -p nanocrab-tools --bench wasm_call` (release), or add `--profile dev` for a
//! quick figure with the dev profile's optimised dependencies.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use nanocrab_config::ToolsConfig;
use nanocrab_policy::PathGuard;
use nanocrab_schema::ToolCall;
use nanocrab_tools::wasm::WasmTools;
use nanocrab_tools::{ToolContext, ToolRegistry};
use serde_json::json;

const ECHO: &str = r#"(module
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 1024))
  (func (export "alloc") (param $len i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $len)))
    (local.get $ptr))
  (func (export "run") (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
            (i64.extend_i32_u (local.get $len)))))"#;

const CALLS: u32 = 2_000;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let tool_dir = root.join("tools/echo");
    std::fs::create_dir_all(&tool_dir).unwrap();
    std::fs::write(
        tool_dir.join("tool.json"),
        json!({"name": "echo", "description": "Echo.", "parameters": {"type": "object"}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(tool_dir.join("tool.wasm"), wat::parse_str(ECHO).unwrap()).unwrap();
    let guard = Arc::new(PathGuard::new(&root, &ToolsConfig::default(), None).unwrap());
    let mut wasm = WasmTools::new(guard, BTreeMap::new()).unwrap();
    let mut registry = ToolRegistry::new();
    let started = Instant::now();
    wasm.sync(&mut registry);
    println!("first sync (compile): {:?}", started.elapsed());
    let started = Instant::now();
    for _ in 0..100 {
        wasm.sync(&mut registry);
    }
    println!("unchanged sync (stat only): {:?}", started.elapsed() / 100);
    let ctx = ToolContext::new(&root);
    let call = ToolCall {
        id: "1".into(),
        name: "echo".into(),
        input: json!({"city": "Paris"}),
    };
    runtime.block_on(async {
        for _ in 0..50 {
            registry.execute(&call, &ctx).await;
        }
        let started = Instant::now();
        for _ in 0..CALLS {
            let result = registry.execute(&call, &ctx).await;
            assert!(!result.is_error, "{}", result.content);
        }
        println!(
            "registry.execute of a trivial WASM tool: {:?} per call ({CALLS} calls)",
            started.elapsed() / CALLS
        );
    });
}
