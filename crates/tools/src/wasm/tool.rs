//! One loaded WASM tool, as the registry sees it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanocrab_policy::{Capability, Invocation, Risk};
use nanocrab_schema::ToolDef;
use wasmtime::{Engine, InstancePre, ResourceLimiter, Store, Trap};

use super::host::{HostEnv, HostState, unpack};
use super::manifest::Manifest;
use super::ticker::Ticker;
use crate::tool::{GuestFailure, PreparedCall, Tool, ToolContext, ToolError, ToolOutput};

/// The most text a tool's result may have.
pub const MAX_RESULT_BYTES: usize = 1024 * 1024;

/// A custom tool from `workspace/tools/<name>/`, compiled and linked with the host functions
/// its manifest requested. Each call gets a fresh instance: no state survives between calls.
#[derive(Clone)]
pub struct WasmTool {
    inner: Arc<Inner>,
}

struct Inner {
    manifest: Manifest,
    dir: PathBuf,
    capabilities: Vec<Capability>,
    engine: Engine,
    pre: InstancePre<HostState>,
    env: Arc<HostEnv>,
    ticker: Arc<Ticker>,
}

impl WasmTool {
    pub(super) fn new(
        manifest: Manifest,
        dir: PathBuf,
        capabilities: Vec<Capability>,
        engine: Engine,
        pre: InstancePre<HostState>,
        env: Arc<HostEnv>,
        ticker: Arc<Ticker>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                manifest,
                dir,
                capabilities,
                engine,
                pre,
                env,
                ticker,
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.manifest.name
    }

    /// The tool's directory, `workspace/tools/<name>`.
    pub fn dir(&self) -> &std::path::Path {
        &self.inner.dir
    }

    /// What its manifest requested, as checked against the grants at load.
    pub fn capabilities(&self) -> &[Capability] {
        &self.inner.capabilities
    }
}

impl Tool for WasmTool {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: self.inner.manifest.name.clone(),
            description: self.inner.manifest.description.clone(),
            parameters: self.inner.manifest.parameters.clone(),
        }
    }

    /// Guarded with the manifest's capabilities: config grants covered them at load, so the
    /// call runs without asking, but the registry checks them again against the run's grants
    /// (a grant removed since the last scan stops the tool at once) and the audit log records
    /// the grant behind each capability.
    fn prepare<'a>(
        &'a self,
        input: serde_json::Value,
        _: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let invocation = Invocation::new(
            Risk::Guarded,
            format!("run the WASM tool {}", self.inner.dir.display()),
            self.inner.capabilities.clone(),
        );
        let inner = Arc::clone(&self.inner);
        let name = self.inner.manifest.name.clone();
        Ok(PreparedCall::new(invocation, async move {
            let runtime = tokio::runtime::Handle::current();
            let failed = |failure| ToolError::Wasm {
                tool: name.clone(),
                failure,
            };
            // wasmtime's sync API on a blocking thread: a guest never holds up the async
            // runtime, and its host functions can wait on the runtime for HTTP.
            let text = tokio::task::spawn_blocking(move || inner.run(&input, runtime))
                .await
                .map_err(|err| failed(GuestFailure::Trap(format!("the call panicked: {err}"))))?
                .map_err(failed)?;
            Ok(ToolOutput::untrusted(format!("WASM tool {name}"), text))
        }))
    }
}

impl Inner {
    fn run(
        &self,
        input: &serde_json::Value,
        runtime: tokio::runtime::Handle,
    ) -> Result<String, GuestFailure> {
        let limits = self.manifest.limits;
        let mut store = Store::new(
            &self.engine,
            HostState {
                env: Arc::clone(&self.env),
                runtime,
                memory_limit: limits.memory_bytes,
                deadline: Instant::now() + Duration::from_millis(limits.timeout_ms),
                timeout_ms: limits.timeout_ms,
                failure: None,
            },
        );
        store.limiter(|state: &mut HostState| -> &mut dyn ResourceLimiter { state });
        let _running = self.ticker.running();
        store.set_epoch_deadline(Ticker::ticks(limits.timeout_ms));
        let outcome = store
            .set_fuel(limits.fuel)
            .and_then(|()| call_guest(&mut store, &self.pre, input));
        let (packed, memory) = match outcome {
            Ok(done) => done,
            Err(err) => return Err(classify(&mut store, &err, limits)),
        };
        let (ptr, len) = unpack(packed);
        if len > MAX_RESULT_BYTES {
            return Err(GuestFailure::BadResult(format!(
                "{len} bytes; the most is {MAX_RESULT_BYTES}"
            )));
        }
        let mut bytes = vec![0; len];
        memory.read(&store, ptr, &mut bytes).map_err(|_| {
            GuestFailure::BadResult("the result buffer lies outside the guest's memory".into())
        })?;
        result_text(&bytes)
    }
}

fn call_guest(
    store: &mut Store<HostState>,
    pre: &InstancePre<HostState>,
    input: &serde_json::Value,
) -> wasmtime::Result<(i64, wasmtime::Memory)> {
    let instance = pre.instantiate(&mut *store)?;
    let bytes = input.to_string().into_bytes();
    let len = i32::try_from(bytes.len())
        .map_err(|_| wasmtime::Error::msg("the arguments are too large for the guest"))?;
    let alloc = instance.get_typed_func::<i32, i32>(&mut *store, "alloc")?;
    let run = instance.get_typed_func::<(i32, i32), i64>(&mut *store, "run")?;
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| wasmtime::Error::msg("the guest exports no `memory`"))?;
    let ptr = alloc.call(&mut *store, len)?;
    let start = usize::try_from(ptr)
        .map_err(|_| wasmtime::Error::msg("`alloc` returned a negative pointer"))?;
    memory
        .write(&mut *store, start, &bytes)
        .map_err(|_| wasmtime::Error::msg("`alloc` returned a buffer outside the memory"))?;
    Ok((run.call(&mut *store, (ptr, len))?, memory))
}

/// Why a call failed: what the host recorded when it stopped the guest, else the trap.
fn classify(
    store: &mut Store<HostState>,
    err: &wasmtime::Error,
    limits: super::manifest::Limits,
) -> GuestFailure {
    if let Some(failure) = store.data_mut().failure.take() {
        return failure;
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => GuestFailure::OutOfFuel { fuel: limits.fuel },
        Some(Trap::Interrupt) => GuestFailure::TimedOut {
            timeout_ms: limits.timeout_ms,
        },
        Some(trap) => {
            let text = trap.to_string();
            GuestFailure::Trap(text.strip_prefix("wasm trap: ").unwrap_or(&text).to_owned())
        }
        None => GuestFailure::Trap(err.to_string()),
    }
}

/// The result `run` returned: UTF-8 JSON; a JSON string is shown as its text, and an object
/// with only `error` is the guest reporting a failure.
fn result_text(bytes: &[u8]) -> Result<String, GuestFailure> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| GuestFailure::BadResult("it is not UTF-8".into()))?;
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|err| GuestFailure::BadResult(format!("it is not JSON ({err})")))?;
    match value {
        serde_json::Value::String(text) => Ok(text),
        serde_json::Value::Object(object) if object.len() == 1 && object.contains_key("error") => {
            Err(GuestFailure::Reported(match &object["error"] {
                serde_json::Value::String(message) => message.clone(),
                other => other.to_string(),
            }))
        }
        other => Ok(other.to_string()),
    }
}
