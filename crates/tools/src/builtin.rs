//! The built-in tool set, as the agent gets it from the configuration.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nanocrab_config::{MemoryConfig, ToolsConfig};
use nanocrab_memory::{IndexSetup, SearchOptions};
use nanocrab_policy::{ExecPolicy, ExecPolicyError, PathGuard, PathGuardError};

use crate::edit_file::EditFileTool;
use crate::exec::ExecTool;
use crate::exec_sandbox::{ExecSandbox, SandboxLauncher};
use crate::list_dir::ListDirTool;
use crate::memory_get::MemoryGetTool;
use crate::memory_search::MemorySearchTool;
use crate::read_file::ReadFileTool;
use crate::registry::ToolRegistry;
use crate::write_file::WriteFileTool;

#[derive(Debug, thiserror::Error)]
pub enum ToolSetupError {
    #[error(transparent)]
    PathGuard(#[from] PathGuardError),
    #[error(transparent)]
    ExecPolicy(#[from] ExecPolicyError),
    #[error("tools.exec.timeout must be at least 1 second")]
    ZeroTimeout,
}

/// read_file, write_file, edit_file, list_dir, exec, memory_search and memory_get, in that
/// order, under `config`'s policy. `exec` children get the allowed variables of this process's
/// environment. `index` says how memory is searched. `launcher` runs `exec` commands in the OS
/// sandbox (`tools.exec.sandbox`); without it they run unsandboxed under `mode: auto` and are
/// refused under `mode: required`.
pub fn builtin_registry(
    config: &ToolsConfig,
    memory: &MemoryConfig,
    workspace: &Path,
    index: &IndexSetup,
    home: Option<&Path>,
    launcher: Option<&SandboxLauncher>,
) -> Result<ToolRegistry, ToolSetupError> {
    if config.exec.timeout == 0 {
        return Err(ToolSetupError::ZeroTimeout);
    }
    let guard = Arc::new(PathGuard::new(workspace, config, home)?);
    let policy = ExecPolicy::new(&config.exec)?;
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(ReadFileTool::new(Arc::clone(&guard))));
    registry.register(Arc::new(WriteFileTool::new(Arc::clone(&guard))));
    registry.register(Arc::new(EditFileTool::new(Arc::clone(&guard))));
    registry.register(Arc::new(ListDirTool::new(Arc::clone(&guard))));
    registry.register(Arc::new(ExecTool::new(
        Arc::clone(&guard),
        policy,
        Duration::from_secs(config.exec.timeout),
        std::env::vars_os(),
        ExecSandbox::from_config(&config.exec.sandbox, launcher),
    )));
    registry.register(Arc::new(MemorySearchTool::new(
        IndexSetup {
            workspace: guard.workspace().to_path_buf(),
            ..index.clone()
        },
        SearchOptions::from_config(memory),
    )));
    registry.register(Arc::new(MemoryGetTool::new(guard)));
    Ok(registry)
}
