//! Custom tools from `workspace/tools/<name>/`: a WASM module (`tool.wasm`) and its manifest
//! (`tool.json`), run under wasmtime with fuel, memory and wall-time limits. A tool gets host
//! functions only for the capabilities its manifest requests, and it is loaded only when the
//! agent's config grants all of them. The guest ABI is described in `docs/tools.md`.

mod host;
mod loader;
mod manifest;
mod ticker;
mod tool;

use std::fmt;
use std::path::PathBuf;

pub use loader::{WasmScan, WasmSetupError, WasmTools};
pub use manifest::{
    DEFAULT_FUEL, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_MS, MAX_FUEL, MAX_MEMORY_MB, MAX_TIMEOUT_MS,
};
pub use tool::WasmTool;

/// Where a tool's files live in its directory.
pub const MANIFEST_FILE: &str = "tool.json";
pub const MODULE_FILE: &str = "tool.wasm";

/// Why a tool in `workspace/tools/` was not loaded. Shown to the user as it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum WasmLoadError {
    #[error("{}: `{key}`: {reason}", path.display())]
    Manifest {
        path: PathBuf,
        key: String,
        reason: String,
    },
    #[error("cannot read {}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    #[error("{}: not a valid WASM module: {reason}", path.display())]
    Compile { path: PathBuf, reason: String },
    /// The module does not follow the guest ABI, or imports what its manifest did not ask for.
    #[error("{}: {reason}", path.display())]
    Abi { path: PathBuf, reason: String },
    #[error(
        "the WASM tool `{tool}` was refused: it asks for {}, which config does not grant; \
         to allow it, add {} to `tools.grants` ({})",
        Listed(missing, "`"), Listed(missing, "\""), manifest.display()
    )]
    NotGranted {
        tool: String,
        manifest: PathBuf,
        missing: Vec<String>,
    },
    #[error(
        "the WASM tool in {} is named `{tool}`, like a built-in tool; rename it (directory \
         and `name`)", dir.display()
    )]
    NameTaken { tool: String, dir: PathBuf },
}

/// `a`, `b` and `c`, each in `quote`s.
struct Listed<'a>(&'a [String], &'a str);

impl fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Listed(items, quote) = self;
        for (index, item) in items.iter().enumerate() {
            let separator = match index {
                0 => "",
                _ if index + 1 == items.len() => " and ",
                _ => ", ",
            };
            write!(f, "{separator}{quote}{item}{quote}")?;
        }
        Ok(())
    }
}
