//! What a guest can reach: the host functions of module `nanocrab`, each linked only when the
//! tool's manifest requests (and config grants) its capability, and the store's limits.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanocrab_policy::{PathGuard, Redactor};
use serde::Deserialize;
use serde_json::json;
use wasmtime::{Caller, Extern, Linker, ResourceLimiter};

use crate::tool::GuestFailure;

/// The module guests import host functions from.
pub const HOST_MODULE: &str = "nanocrab";

/// What a host function needs the manifest to request before it is linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    FsRead,
    Net,
}

/// The host functions a guest may import from [`HOST_MODULE`].
pub const HOST_FUNCTIONS: [(&str, Needs); 3] = [
    ("log", Needs::Nothing),
    ("read_file", Needs::FsRead),
    ("http_get", Needs::Net),
];

/// The largest buffer a guest may hand the host (a path, a log line, a request).
const MAX_GUEST_INPUT: usize = 64 * 1024;
/// A log line is cut here.
const MAX_LOG_LINE: usize = 2 * 1024;
/// The largest file `read_file` returns.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The largest response body `http_get` returns; the rest is cut.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Tables are small in real guests; this only stops a runaway `table.grow`.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// What a tool's host functions may use; fixed at load.
pub struct HostEnv {
    pub tool: String,
    pub guard: Arc<PathGuard>,
    /// Resolved directories `read_file` may read under.
    pub fs_roots: Vec<PathBuf>,
    /// Lowercase hosts `http_get` may connect to.
    pub net_hosts: Vec<String>,
    /// Names of the secrets the tool may have injected.
    pub secret_names: Vec<String>,
    /// All secrets the host knows; only `secret_names` are ever looked up.
    pub secrets: Arc<BTreeMap<String, String>>,
    pub client: reqwest::Client,
}

/// The per-call state of a store.
pub struct HostState {
    pub env: Arc<HostEnv>,
    pub runtime: tokio::runtime::Handle,
    pub memory_limit: usize,
    pub deadline: Instant,
    pub timeout_ms: u64,
    /// Set by the host when it stops the guest, so the call reports why.
    pub failure: Option<GuestFailure>,
}

impl ResourceLimiter for HostState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            // A trap, not a soft -1: guests rarely handle a failed grow, and the user should
            // learn which limit was hit rather than see a confused guest.
            self.failure = Some(GuestFailure::OutOfMemory {
                limit_mb: u64::try_from(self.memory_limit >> 20).unwrap_or(u64::MAX),
            });
            return Err(wasmtime::Error::msg("memory limit reached"));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        1
    }

    fn memories(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }
}

/// A linker with `log`, plus `read_file` and `http_get` when the manifest asked for them.
pub fn linker(
    engine: &wasmtime::Engine,
    fs_read: bool,
    net: bool,
) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    linker.func_wrap(
        HOST_MODULE,
        "log",
        |mut caller: Caller<'_, HostState>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let bytes = read_guest(&mut caller, ptr, len)?;
            let text = String::from_utf8_lossy(&bytes);
            let line: String = text.chars().take(MAX_LOG_LINE).collect();
            tracing::info!(tool = %caller.data().env.tool, "wasm tool log: {line}");
            Ok(())
        },
    )?;
    if fs_read {
        linker.func_wrap(
            HOST_MODULE,
            "read_file",
            |mut caller: Caller<'_, HostState>, ptr: i32, len: i32| -> wasmtime::Result<i64> {
                let bytes = read_guest(&mut caller, ptr, len)?;
                let answer = match read_file(&caller.data().env, &bytes) {
                    Ok(content) => json!({ "content": content }),
                    Err(message) => json!({ "error": message }),
                };
                write_guest(&mut caller, answer.to_string().as_bytes())
            },
        )?;
    }
    if net {
        linker.func_wrap(
            HOST_MODULE,
            "http_get",
            |mut caller: Caller<'_, HostState>, ptr: i32, len: i32| -> wasmtime::Result<i64> {
                let bytes = read_guest(&mut caller, ptr, len)?;
                let state = caller.data();
                let remaining = state.deadline.saturating_duration_since(Instant::now());
                let timeout_ms = state.timeout_ms;
                let outcome = if remaining.is_zero() {
                    Err(HttpFailure::TimedOut)
                } else {
                    http_get(state, &bytes, remaining)
                };
                let answer = match outcome {
                    Ok(answer) => answer,
                    Err(HttpFailure::Refused(message)) => json!({ "error": message }),
                    Err(HttpFailure::TimedOut) => {
                        caller.data_mut().failure = Some(GuestFailure::TimedOut { timeout_ms });
                        return Err(wasmtime::Error::msg("wall time is up"));
                    }
                };
                write_guest(&mut caller, answer.to_string().as_bytes())
            },
        )?;
    }
    Ok(linker)
}

fn memory(caller: &mut Caller<'_, HostState>) -> wasmtime::Result<wasmtime::Memory> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        Some(_) | None => Err(wasmtime::Error::msg("the guest exports no `memory`")),
    }
}

/// Copies a buffer the guest named out of its memory; a bad pointer or length traps.
pub fn read_guest(
    caller: &mut Caller<'_, HostState>,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<Vec<u8>> {
    let (Ok(ptr), Ok(len)) = (usize::try_from(ptr), usize::try_from(len)) else {
        return Err(wasmtime::Error::msg(
            "the guest passed a negative pointer or length to the host",
        ));
    };
    if len > MAX_GUEST_INPUT {
        return Err(wasmtime::Error::msg(format!(
            "the guest passed {len} bytes to the host; the most is {MAX_GUEST_INPUT}"
        )));
    }
    let memory = memory(caller)?;
    let mut buffer = vec![0; len];
    memory.read(&*caller, ptr, &mut buffer).map_err(|_| {
        wasmtime::Error::msg("the guest passed the host a buffer outside its memory")
    })?;
    Ok(buffer)
}

/// Copies `bytes` into a buffer the guest allocates with its `alloc`, and returns the buffer
/// as `ptr << 32 | len`.
pub fn write_guest(caller: &mut Caller<'_, HostState>, bytes: &[u8]) -> wasmtime::Result<i64> {
    let len = i32::try_from(bytes.len())
        .map_err(|_| wasmtime::Error::msg("a host answer does not fit the guest"))?;
    let alloc = match caller.get_export("alloc") {
        Some(Extern::Func(func)) => func.typed::<i32, i32>(&*caller)?,
        Some(_) | None => return Err(wasmtime::Error::msg("the guest exports no `alloc`")),
    };
    let ptr = alloc.call(&mut *caller, len)?;
    let start = usize::try_from(ptr)
        .map_err(|_| wasmtime::Error::msg("the guest's `alloc` returned a negative pointer"))?;
    memory(caller)?
        .write(&mut *caller, start, bytes)
        .map_err(|_| {
            wasmtime::Error::msg("the guest's `alloc` returned a buffer outside its memory")
        })?;
    Ok(pack(ptr, len))
}

pub fn pack(ptr: i32, len: i32) -> i64 {
    // Both halves as unsigned 32-bit values: the guest reads them back with shifts and wraps.
    (i64::from(ptr.cast_unsigned()) << 32) | i64::from(len.cast_unsigned())
}

/// The halves of `ptr << 32 | len`.
pub fn unpack(packed: i64) -> (usize, usize) {
    let bits = packed.cast_unsigned();
    let ptr = usize::try_from(bits >> 32).unwrap_or(usize::MAX);
    let len = usize::try_from(bits & 0xffff_ffff).unwrap_or(usize::MAX);
    (ptr, len)
}

/// A workspace file, as text; the error is for the guest.
fn read_file(env: &HostEnv, path: &[u8]) -> Result<String, String> {
    let asked = std::str::from_utf8(path).map_err(|_| "the path is not UTF-8".to_owned())?;
    let resolved = env
        .guard
        .check_read(asked)
        .map_err(|denial| denial.to_string())?;
    // The guard may allow roots outside the workspace for the built-in tools; a WASM tool
    // only ever reads inside it, under the directories its manifest named.
    let inside = resolved.starts_with(env.guard.workspace())
        && env.fs_roots.iter().any(|root| resolved.starts_with(root));
    if !inside {
        return Err(format!(
            "{asked}: outside what this tool may read ({})",
            env.fs_roots
                .iter()
                .map(|root| root.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let metadata =
        std::fs::metadata(&resolved).map_err(|err| format!("cannot read {asked}: {err}"))?;
    if metadata.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{asked} is {} bytes; read_file returns at most {MAX_FILE_BYTES}",
            metadata.len()
        ));
    }
    let bytes = std::fs::read(&resolved).map_err(|err| format!("cannot read {asked}: {err}"))?;
    String::from_utf8(bytes).map_err(|_| format!("{asked} is not UTF-8 text"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpRequest {
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

enum HttpFailure {
    /// Told to the guest, which may carry on.
    Refused(String),
    /// The call's wall time ran out while waiting.
    TimedOut,
}

/// One GET, on the runtime the call came from: the guest runs on a blocking thread, so the
/// host function can wait for the async client there.
fn http_get(
    state: &HostState,
    request: &[u8],
    remaining: Duration,
) -> Result<serde_json::Value, HttpFailure> {
    let env = &state.env;
    let refused = |message: String| HttpFailure::Refused(message);
    let request: HttpRequest = serde_json::from_slice(request).map_err(|err| {
        refused(format!(
            "http_get takes {{\"url\": string, \"headers\"?: {{name: value}}}}: {err}"
        ))
    })?;
    let mut used = Vec::new();
    let url = substitute(env, &request.url, &mut used).map_err(refused)?;
    let mut headers = Vec::with_capacity(request.headers.len());
    for (name, value) in &request.headers {
        headers.push((
            name.clone(),
            substitute(env, value, &mut used).map_err(refused)?,
        ));
    }
    // Everything that goes back to the guest, errors included, passes through this: a server
    // that echoes a header, or an error that quotes the URL, must not hand it the secret.
    let redactor = Redactor::new(used);
    let hide = |text: &str| redactor.redact(text).into_owned();
    let url = reqwest::Url::parse(&url)
        .map_err(|err| refused(hide(&format!("bad URL `{url}`: {err}"))))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refused(format!(
            "http_get only speaks http and https, not {}",
            url.scheme()
        )));
    }
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    if !env.net_hosts.contains(&host) {
        return Err(refused(format!(
            "net:{host} is not among this tool's capabilities ({}); http_get was refused",
            env.net_hosts
                .iter()
                .map(|host| format!("net:{host}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut builder = env.client.get(url);
    for (name, value) in &headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let fetch = async {
        let response = builder.send().await?;
        let status = response.status().as_u16();
        let mut response = response;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            body.extend_from_slice(&chunk);
            if body.len() >= MAX_BODY_BYTES {
                body.truncate(MAX_BODY_BYTES);
                break;
            }
        }
        Ok::<_, reqwest::Error>((status, body))
    };
    let (status, body) = state
        .runtime
        .block_on(async { tokio::time::timeout(remaining, fetch).await })
        .map_err(|_| HttpFailure::TimedOut)?
        .map_err(|err| refused(hide(&format!("http_get failed: {err}"))))?;
    Ok(json!({
        "status": status,
        "body": hide(&String::from_utf8_lossy(&body)),
    }))
}

/// Replaces each `{{secret:NAME}}` with the secret's value; `used` collects what was put in.
fn substitute(
    env: &HostEnv,
    text: &str,
    used: &mut Vec<(String, String)>,
) -> Result<String, String> {
    const OPEN: &str = "{{secret:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find("}}") else {
            return Err("an unclosed {{secret:...}} placeholder".into());
        };
        let name = &after[..end];
        if !env.secret_names.iter().any(|granted| granted == name) {
            return Err(format!(
                "secret:{name} is not among this tool's capabilities; the placeholder was refused"
            ));
        }
        let Some(value) = env.secrets.get(name) else {
            return Err(format!(
                "the secret {name} is not set on this nanocrab; ask the user to provide it"
            ));
        };
        out.push_str(value);
        used.push((name.to_owned(), value.clone()));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}
