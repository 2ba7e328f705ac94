#![allow(clippy::unwrap_used, clippy::expect_used)]
//! WASM tools from `workspace/tools/`: loading against grants, the host functions, the limits
//! and hot reloading. Guests are written in WAT and compiled to `tool.wasm` here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use nanocrab_config::ToolsConfig;
use nanocrab_policy::{CapabilityGrant, CapabilityPattern, GrantSource, Grants, PathGuard};
use nanocrab_schema::{ToolCall, ToolResult};
use nanocrab_tools::wasm::{WasmLoadError, WasmScan, WasmTools};
use nanocrab_tools::{ReadFileTool, Tool, ToolContext, ToolPolicy, ToolRegistry, wrap_untrusted};
use pretty_assertions::assert_eq;
use serde_json::json;

/// The allocator and the packing every test guest shares; `$body` is the rest of the module.
fn guest(imports: &str, body: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
  {imports}
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 4096))
  (func $alloc (export "alloc") (param $len i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $len)))
    (if (i32.gt_u (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.const 1)
        (i32.shr_u (i32.sub (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
                   (i32.const 16)))))))
    (local.get $ptr))
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
            (i64.extend_i32_u (local.get $len))))
  {body})"#
    ))
    .unwrap()
}

/// Returns its arguments as its result.
fn echo_guest() -> Vec<u8> {
    guest(
        "",
        r#"(func (export "run") (param $ptr i32) (param $len i32) (result i64)
             (call $pack (local.get $ptr) (local.get $len)))"#,
    )
}

/// Returns the JSON text of a data segment.
fn constant_guest(result: &str) -> Vec<u8> {
    let escaped = result.replace('\\', "\\\\").replace('"', "\\\"");
    guest(
        "",
        &format!(
            r#"(data (i32.const 16) "{escaped}")
               (func (export "run") (param i32 i32) (result i64)
                 (call $pack (i32.const 16) (i32.const {len})))"#,
            len = result.len()
        ),
    )
}

/// Reads the file its argument (a JSON string) names and returns the host's answer.
fn read_file_guest() -> Vec<u8> {
    guest(
        r#"(import "nanocrab" "read_file" (func $read_file (param i32 i32) (result i64)))"#,
        r#"(func (export "run") (param $ptr i32) (param $len i32) (result i64)
             (call $read_file (i32.add (local.get $ptr) (i32.const 1))
                              (i32.sub (local.get $len) (i32.const 2))))"#,
    )
}

/// Hands its arguments to `http_get` as the request and returns the host's answer.
fn http_guest() -> Vec<u8> {
    guest(
        r#"(import "nanocrab" "http_get" (func $http_get (param i32 i32) (result i64)))"#,
        r#"(func (export "run") (param $ptr i32) (param $len i32) (result i64)
             (call $http_get (local.get $ptr) (local.get $len)))"#,
    )
}

fn spin_guest() -> Vec<u8> {
    guest(
        "",
        r#"(func (export "run") (param i32 i32) (result i64)
             (loop $forever (br $forever))
             (i64.const 0))"#,
    )
}

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    guard: Arc<PathGuard>,
}

impl Workspace {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(root.join("tools")).unwrap();
        let guard = Arc::new(PathGuard::new(&root, &ToolsConfig::default(), None).unwrap());
        Self {
            _dir: dir,
            root,
            guard,
        }
    }

    fn tool_dir(&self, name: &str) -> PathBuf {
        self.root.join("tools").join(name)
    }

    /// Writes `tools/<name>/tool.json` (the given fields on top of a minimal manifest) and
    /// `tools/<name>/tool.wasm`.
    fn add_tool(&self, name: &str, manifest: serde_json::Value, wasm: &[u8]) {
        let mut full = json!({
            "name": name,
            "description": format!("The {name} test tool."),
            "parameters": {"type": "object", "properties": {}},
        });
        for (key, value) in manifest.as_object().unwrap() {
            full[key] = value.clone();
        }
        let dir = self.tool_dir(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tool.json"), full.to_string()).unwrap();
        std::fs::write(dir.join("tool.wasm"), wasm).unwrap();
    }

    fn wasm_tools(&self, secrets: &[(&str, &str)]) -> WasmTools {
        let secrets: BTreeMap<String, String> = secrets
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        WasmTools::new(Arc::clone(&self.guard), secrets).unwrap()
    }

    fn context(&self) -> ToolContext {
        ToolContext::new(&self.root)
    }
}

fn registry(grants: &[&str]) -> ToolRegistry {
    let grants = grants
        .iter()
        .enumerate()
        .map(|(index, text)| CapabilityGrant {
            pattern: CapabilityPattern::parse(text, None).unwrap(),
            source: GrantSource::Config {
                key: format!("tools.grants[{index}]"),
            },
        })
        .collect();
    ToolRegistry::new().with_policy(ToolPolicy {
        grants: Grants::new(grants),
        ..ToolPolicy::default()
    })
}

fn scan(loaded: &[&str], removed: &[&str], refused: Vec<WasmLoadError>) -> WasmScan {
    WasmScan {
        loaded: loaded.iter().map(|name| (*name).to_owned()).collect(),
        removed: removed.iter().map(|name| (*name).to_owned()).collect(),
        refused,
    }
}

async fn call(
    registry: &ToolRegistry,
    ws: &Workspace,
    tool: &str,
    input: serde_json::Value,
) -> ToolResult {
    let call = ToolCall {
        id: "call-1".into(),
        name: tool.into(),
        input,
    };
    registry.execute(&call, &ws.context()).await
}

fn ok(content: &str, tool: &str) -> ToolResult {
    ToolResult {
        tool_use_id: "call-1".into(),
        content: wrap_untrusted(&format!("WASM tool {tool}"), content),
        is_error: false,
    }
}

fn error(content: &str) -> ToolResult {
    ToolResult {
        tool_use_id: "call-1".into(),
        content: content.into(),
        is_error: true,
    }
}

#[tokio::test]
async fn a_tool_runs_and_returns_its_json_result() {
    let ws = Workspace::new();
    ws.add_tool("echo", json!({}), &echo_guest());
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    assert_eq!(wasm.sync(&mut registry), scan(&["echo"], &[], vec![]));
    assert_eq!(
        serde_json::to_value(registry.definitions()).unwrap(),
        json!([{
            "name": "echo",
            "description": "The echo test tool.",
            "parameters": {"type": "object", "properties": {}},
        }])
    );
    let result = call(&registry, &ws, "echo", json!({"city": "Paris", "days": 2})).await;
    assert_eq!(result, ok(r#"{"city":"Paris","days":2}"#, "echo"));
}

#[tokio::test]
async fn a_json_string_result_is_shown_as_text_and_an_error_object_fails_the_call() {
    let ws = Workspace::new();
    ws.add_tool("text", json!({}), &constant_guest(r#""sunny, 21 °C""#));
    ws.add_tool(
        "fails",
        json!({}),
        &constant_guest(r#"{"error": "no such city"}"#),
    );
    ws.add_tool("garbage", json!({}), &constant_guest("not json"));
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    wasm.sync(&mut registry);
    let results = [
        call(&registry, &ws, "text", json!({})).await,
        call(&registry, &ws, "fails", json!({})).await,
        call(&registry, &ws, "garbage", json!({})).await,
    ];
    assert_eq!(
        results,
        [
            ok("sunny, 21 °C", "text"),
            error("Error: the WASM tool `fails` failed: no such city"),
            error(
                "Error: the WASM tool `garbage` returned an unusable result: it is not JSON \
                 (expected ident at line 1 column 2)"
            ),
        ]
    );
}

#[tokio::test]
async fn a_tool_granted_fs_read_reads_workspace_files_and_nothing_outside() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.root.join("data")).unwrap();
    std::fs::write(ws.root.join("data/city.txt"), "Paris\n").unwrap();
    std::fs::write(ws.root.join("private.txt"), "mine").unwrap();
    std::fs::write(ws.root.parent().unwrap().join("outside.txt"), "out").unwrap();
    ws.add_tool(
        "reader",
        json!({"capabilities": ["fs.read:data"]}),
        &read_file_guest(),
    );
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&["fs.read"]);
    assert_eq!(wasm.sync(&mut registry), scan(&["reader"], &[], vec![]));
    let mut results = Vec::new();
    for path in ["data/city.txt", "private.txt", "../outside.txt"] {
        results.push(call(&registry, &ws, "reader", json!(path)).await);
    }
    let data = ws.root.join("data");
    assert_eq!(
        results,
        [
            ok(r#"{"content":"Paris\n"}"#, "reader"),
            error(&format!(
                "Error: the WASM tool `reader` failed: private.txt: outside what this tool may \
                 read ({})",
                data.display()
            )),
            error(&format!(
                "Error: the WASM tool `reader` failed: {}",
                ws.guard.check_read("../outside.txt").unwrap_err()
            )),
        ]
    );
}

#[tokio::test]
async fn a_tool_asking_for_ungranted_capabilities_is_refused_at_load() {
    let ws = Workspace::new();
    ws.add_tool(
        "weather",
        json!({"capabilities": ["fs.read", "net:api.example.com", "secret:WEATHER_KEY"]}),
        &http_guest(),
    );
    let mut wasm = ws.wasm_tools(&[]);
    let mut ungranted = registry(&["net:*.example.com"]);
    let refusal = WasmLoadError::NotGranted {
        tool: "weather".into(),
        manifest: ws.tool_dir("weather").join("tool.json"),
        missing: vec![
            format!("fs.read:{}", ws.root.display()),
            "secret:WEATHER_KEY".into(),
        ],
    };
    assert_eq!(
        wasm.sync(&mut ungranted),
        scan(&[], &[], vec![refusal.clone()])
    );
    assert_eq!(
        refusal.to_string(),
        format!(
            "the WASM tool `weather` was refused: it asks for `fs.read:{root}` and \
             `secret:WEATHER_KEY`, which config does not grant; to allow it, add \
             \"fs.read:{root}\" and \"secret:WEATHER_KEY\" to `tools.grants` ({root}/tools/weather/tool.json)",
            root = ws.root.display()
        )
    );
    assert_eq!(ungranted.names(), Vec::<String>::new());
    // Reported once; still refused on the next turn.
    assert_eq!(wasm.sync(&mut ungranted), scan(&[], &[], vec![]));
    assert_eq!(wasm.refusals(), vec![refusal]);
    // Granted in config: loaded on the next turn without touching the files.
    let mut granted = registry(&["fs.read", "net:*.example.com", "secret:*"]);
    assert_eq!(wasm.sync(&mut granted), scan(&["weather"], &[], vec![]));
    assert_eq!(wasm.refusals(), vec![]);
}

#[tokio::test]
async fn a_module_importing_a_host_function_its_manifest_did_not_request_is_refused() {
    let ws = Workspace::new();
    ws.add_tool("sneaky", json!({}), &read_file_guest());
    ws.add_tool(
        "stranger",
        json!({}),
        &guest(
            r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
            r#"(func (export "run") (param i32 i32) (result i64) (i64.const 0))"#,
        ),
    );
    ws.add_tool(
        "no-run",
        json!({}),
        &wat::parse_str(r#"(module (memory (export "memory") 1))"#).unwrap(),
    );
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&["fs.read"]);
    let module = |name: &str| ws.tool_dir(name).join("tool.wasm");
    let mut refused: Vec<String> = wasm
        .sync(&mut registry)
        .refused
        .iter()
        .map(ToString::to_string)
        .collect();
    refused.sort();
    assert_eq!(
        refused,
        [
            format!(
                "{}: the module must export the function `alloc`: (type (func (param i32) (result i32)))",
                module("no-run").display()
            ),
            format!(
                "{}: it imports `nanocrab.read_file`, which needs the capability `fs.read`, and \
                 its tool.json does not request it",
                module("sneaky").display()
            ),
            format!(
                "{}: it imports `wasi_snapshot_preview1.fd_write`, which nanocrab does not \
                 provide; the host functions are `nanocrab.log`, `nanocrab.read_file`, \
                 `nanocrab.http_get`",
                module("stranger").display()
            ),
        ]
    );
    assert_eq!(registry.names(), Vec::<String>::new());
}

#[tokio::test]
async fn a_bad_manifest_is_refused_naming_the_file_and_the_key() {
    let ws = Workspace::new();
    ws.add_tool("big", json!({"limits": {"memoryMb": 4096}}), &echo_guest());
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    let refusal = WasmLoadError::Manifest {
        path: ws.tool_dir("big").join("tool.json"),
        key: "limits.memoryMb".into(),
        reason: "4096 is more than the maximum, 1024".into(),
    };
    assert_eq!(wasm.sync(&mut registry), scan(&[], &[], vec![refusal]));
}

#[tokio::test]
async fn an_endless_loop_runs_out_of_fuel() {
    let ws = Workspace::new();
    ws.add_tool(
        "spin",
        json!({"limits": {"fuel": 1_000_000}}),
        &spin_guest(),
    );
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    wasm.sync(&mut registry);
    assert_eq!(
        call(&registry, &ws, "spin", json!({})).await,
        error(
            "Error: the WASM tool `spin` ran out of fuel (limit 1000000 per call, \
             `limits.fuel` in its tool.json)"
        )
    );
}

#[tokio::test]
async fn an_endless_loop_with_plenty_of_fuel_is_stopped_at_its_wall_time() {
    let ws = Workspace::new();
    ws.add_tool(
        "spin",
        json!({"limits": {"fuel": 50_000_000_000_u64, "timeoutMs": 200}}),
        &spin_guest(),
    );
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    wasm.sync(&mut registry);
    // The fuel would last far longer than the wall time on any machine.
    assert_eq!(
        call(&registry, &ws, "spin", json!({})).await,
        error(
            "Error: the WASM tool `spin` ran longer than its wall-time limit of 200 ms \
             (`limits.timeoutMs` in its tool.json) and was stopped"
        )
    );
}

#[tokio::test]
async fn growing_memory_past_the_limit_fails_the_call() {
    let ws = Workspace::new();
    let grower = guest(
        "",
        r#"(func (export "run") (param i32 i32) (result i64)
             (drop (memory.grow (i32.const 100)))
             (i64.const 0))"#,
    );
    ws.add_tool("grow", json!({"limits": {"memoryMb": 2}}), &grower);
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    wasm.sync(&mut registry);
    assert_eq!(
        call(&registry, &ws, "grow", json!({})).await,
        error(
            "Error: the WASM tool `grow` went over its memory limit of 2 MiB \
             (`limits.memoryMb` in its tool.json)"
        )
    );
}

#[tokio::test]
async fn a_trap_fails_the_call_with_its_reason() {
    let ws = Workspace::new();
    let trapping = guest(
        "",
        r#"(func (export "run") (param i32 i32) (result i64) (unreachable))"#,
    );
    ws.add_tool("crash", json!({}), &trapping);
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    wasm.sync(&mut registry);
    assert_eq!(
        call(&registry, &ws, "crash", json!({})).await,
        error("Error: the WASM tool `crash` trapped: wasm `unreachable` instruction executed")
    );
}

/// A loopback server that records the `Authorization` header of each request and echoes it
/// back in the body, as a careless API would.
async fn echo_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    let app = axum::Router::new()
        .route(
            "/slow",
            // Never answers: only the tool's wall time can end a call to it.
            axum::routing::get(std::future::pending::<&'static str>),
        )
        .route(
            "/weather",
            axum::routing::get(move |headers: axum::http::HeaderMap| {
                let recorded = Arc::clone(&recorded);
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    recorded.lock().unwrap().push(auth.clone());
                    format!("sunny; you sent {auth}")
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), seen)
}

const SECRET: &str = "wk-0123456789abcdef";

#[tokio::test]
async fn http_get_reaches_a_granted_host_with_the_secret_injected_and_hidden_from_the_guest() {
    let (base, seen) = echo_server().await;
    let ws = Workspace::new();
    ws.add_tool(
        "weather",
        json!({"capabilities": ["net:127.0.0.1", "secret:WEATHER_KEY"]}),
        &http_guest(),
    );
    let mut wasm = ws.wasm_tools(&[("WEATHER_KEY", SECRET), ("OTHER", "other-secret-value")]);
    let mut registry = registry(&["net:127.0.0.1", "secret:WEATHER_KEY"]);
    assert_eq!(wasm.sync(&mut registry), scan(&["weather"], &[], vec![]));
    let request = |url: String, auth: &str| json!({"url": url, "headers": {"Authorization": format!("Bearer {auth}")}});
    let results = [
        call(
            &registry,
            &ws,
            "weather",
            request(format!("{base}/weather"), "{{secret:WEATHER_KEY}}"),
        )
        .await,
        call(
            &registry,
            &ws,
            "weather",
            request(format!("{base}/weather"), "{{secret:OTHER}}"),
        )
        .await,
    ];
    assert_eq!(
        results,
        [
            ok(
                r#"{"status":200,"body":"sunny; you sent Bearer [redacted: WEATHER_KEY]"}"#,
                "weather"
            ),
            error(
                "Error: the WASM tool `weather` failed: secret:OTHER is not among this tool's \
                 capabilities; the placeholder was refused"
            ),
        ]
    );
    assert_eq!(*seen.lock().unwrap(), [format!("Bearer {SECRET}")]);
}

#[tokio::test]
async fn http_get_to_a_host_the_tool_was_not_granted_is_refused() {
    let (base, seen) = echo_server().await;
    let ws = Workspace::new();
    ws.add_tool(
        "weather",
        json!({"capabilities": ["net:127.0.0.1"]}),
        &http_guest(),
    );
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&["net:*"]);
    wasm.sync(&mut registry);
    let url = base.replace("127.0.0.1", "localhost");
    let result = call(
        &registry,
        &ws,
        "weather",
        json!({"url": format!("{url}/weather")}),
    )
    .await;
    assert_eq!(
        result,
        error(
            "Error: the WASM tool `weather` failed: net:localhost is not among this tool's \
             capabilities (net:127.0.0.1); http_get was refused"
        )
    );
    assert_eq!(*seen.lock().unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn a_changed_module_is_reloaded_on_the_next_sync_and_a_removed_tool_disappears() {
    let ws = Workspace::new();
    ws.add_tool("mood", json!({}), &constant_guest(r#""calm""#));
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    assert_eq!(wasm.sync(&mut registry), scan(&["mood"], &[], vec![]));
    assert_eq!(
        call(&registry, &ws, "mood", json!({})).await,
        ok("calm", "mood")
    );
    assert_eq!(wasm.sync(&mut registry), scan(&[], &[], vec![]));
    std::fs::write(
        ws.tool_dir("mood").join("tool.wasm"),
        constant_guest(r#""cheerful""#),
    )
    .unwrap();
    assert_eq!(wasm.sync(&mut registry), scan(&["mood"], &[], vec![]));
    assert_eq!(
        call(&registry, &ws, "mood", json!({})).await,
        ok("cheerful", "mood")
    );
    std::fs::remove_dir_all(ws.tool_dir("mood")).unwrap();
    assert_eq!(wasm.sync(&mut registry), scan(&[], &["mood"], vec![]));
    assert_eq!(registry.names(), Vec::<String>::new());
}

#[tokio::test]
async fn a_tool_named_like_a_built_in_is_refused_and_leaves_the_built_in_alone() {
    let ws = Workspace::new();
    ws.add_tool("read_file", json!({}), &echo_guest());
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&[]);
    registry.register(Arc::new(ReadFileTool::new(Arc::clone(&ws.guard))));
    let refusal = WasmLoadError::NameTaken {
        tool: "read_file".into(),
        dir: ws.tool_dir("read_file"),
    };
    assert_eq!(wasm.sync(&mut registry), scan(&[], &[], vec![refusal]));
    assert_eq!(registry.names(), ["read_file"]);
    assert_eq!(
        registry.definitions()[0].description,
        ReadFileTool::new(Arc::clone(&ws.guard))
            .definition()
            .description
    );
}

/// The text of the first fenced block of `language` after `heading` in docs/tools.md.
fn doc_block(heading: &str, language: &str) -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/tools.md"),
    )
    .unwrap();
    let section = &doc[doc.find(heading).unwrap()..];
    let fence = format!("```{language}\n");
    let start = section.find(&fence).unwrap() + fence.len();
    let end = start + section[start..].find("```").unwrap();
    section[start..end].to_owned()
}

#[tokio::test]
async fn the_example_in_the_docs_runs_as_documented() {
    let ws = Workspace::new();
    std::fs::write(ws.root.join("motd.txt"), "Hello").unwrap();
    let dir = ws.tool_dir("motd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("tool.json"),
        doc_block("### A complete example", "json"),
    )
    .unwrap();
    let wasm_bytes = wat::parse_str(doc_block("### A complete example", "wat")).unwrap();
    std::fs::write(dir.join("tool.wasm"), wasm_bytes).unwrap();
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&["fs.read"]);
    assert_eq!(wasm.sync(&mut registry), scan(&["motd"], &[], vec![]));
    assert_eq!(
        call(&registry, &ws, "motd", json!({})).await,
        ok(r#"{"content":"Hello"}"#, "motd")
    );
}

#[tokio::test]
async fn a_slow_host_call_is_cut_at_the_tools_wall_time() {
    let (base, _) = echo_server().await;
    let ws = Workspace::new();
    ws.add_tool(
        "weather",
        json!({"capabilities": ["net:127.0.0.1"], "limits": {"timeoutMs": 300}}),
        &http_guest(),
    );
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = registry(&["net:127.0.0.1"]);
    wasm.sync(&mut registry);
    assert_eq!(
        call(
            &registry,
            &ws,
            "weather",
            json!({"url": format!("{base}/slow")}),
        )
        .await,
        error(
            "Error: the WASM tool `weather` ran longer than its wall-time limit of 300 ms \
             (`limits.timeoutMs` in its tool.json) and was stopped"
        )
    );
}

#[tokio::test]
async fn a_call_is_audited_as_guarded_with_the_grant_behind_each_capability() {
    let ws = Workspace::new();
    std::fs::write(ws.root.join("motd.txt"), "Hi").unwrap();
    ws.add_tool(
        "reader",
        json!({"capabilities": ["fs.read"]}),
        &read_file_guest(),
    );
    let audit = Arc::new(
        nanocrab_policy::AuditLog::open(
            &ws.root.parent().unwrap().join("audit.sqlite"),
            nanocrab_policy::Redactor::default(),
        )
        .unwrap(),
    );
    let mut wasm = ws.wasm_tools(&[]);
    let mut registry = ToolRegistry::new().with_policy(ToolPolicy {
        audit: Some(Arc::clone(&audit)),
        ..registry(&["fs.read"]).policy().clone()
    });
    wasm.sync(&mut registry);
    call(&registry, &ws, "reader", json!("motd.txt")).await;
    let records = audit.list(&nanocrab_policy::AuditQuery::default()).unwrap();
    let seen: Vec<_> = records
        .iter()
        .map(|record| {
            (
                record.tool.clone(),
                record.risk,
                record.requested.clone(),
                record.granted.clone(),
                record.summary.clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [(
            "reader".to_owned(),
            nanocrab_policy::Risk::Guarded,
            vec![format!("fs.read:{}", ws.root.display())],
            vec!["fs.read:* (config tools.grants[0])".to_owned()],
            format!("run the WASM tool {}", ws.tool_dir("reader").display()),
        )]
    );
}
