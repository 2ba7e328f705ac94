//! The built-in tool set, as the agent gets it from the configuration.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nanocrab_config::ToolsConfig;
use nanocrab_policy::{
    CapabilityGrant, CapabilityPattern, ExecPolicy, ExecPolicyError, GrantSource, Grants,
    PathGuard, PathGuardError, PatternError,
};

use crate::edit_file::EditFileTool;
use crate::exec::ExecTool;
use crate::exec_sandbox::{ExecSandbox, SandboxLauncher};
use crate::list_dir::ListDirTool;
use crate::read_file::ReadFileTool;
use crate::registry::{ToolPolicy, ToolRegistry};
use crate::tool::Tool;
use crate::write_file::WriteFileTool;

#[derive(Debug, thiserror::Error)]
pub enum ToolSetupError {
    #[error(transparent)]
    PathGuard(#[from] PathGuardError),
    #[error(transparent)]
    ExecPolicy(#[from] ExecPolicyError),
    #[error("tools.exec.timeout must be at least 1 second")]
    ZeroTimeout,
    /// The pattern's error is part of the message, not a cause below it, so it is said once.
    #[error("{key}: {reason}")]
    Grant { key: String, reason: PatternError },
}

/// Parses the grants written under `key` (`tools.grants`, `channels.telegram.grants`); `~` is
/// the user's `home`. An error names the entry (`tools.grants[2]`).
pub fn grants_from_config(
    patterns: &[String],
    key: &str,
    home: Option<&Path>,
) -> Result<Grants, ToolSetupError> {
    patterns
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let key = format!("{key}[{index}]");
            match CapabilityPattern::parse(text, home) {
                Ok(pattern) => Ok(CapabilityGrant {
                    pattern,
                    source: GrantSource::Config { key },
                }),
                Err(reason) => Err(ToolSetupError::Grant { key, reason }),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Grants::new)
}

/// read_file, write_file, edit_file, list_dir, exec, then the tools `more_tools` makes with
/// the same path guard (the memory tools, from the crate that owns the memory index), in that
/// order, under `config`'s path and exec policy, every call checked against `policy` (whose
/// `grants` and approval timeout are taken from `config`). `exec` children get the allowed
/// variables of this process's environment. `launcher` runs `exec` commands in the OS sandbox
/// (`tools.exec.sandbox`); without it they run unsandboxed under `mode: auto` and are refused
/// under `mode: required`.
pub fn builtin_registry(
    config: &ToolsConfig,
    workspace: &Path,
    home: Option<&Path>,
    launcher: Option<&SandboxLauncher>,
    policy: ToolPolicy,
    more_tools: impl FnOnce(&Arc<PathGuard>) -> Vec<Arc<dyn Tool>>,
) -> Result<ToolRegistry, ToolSetupError> {
    if config.exec.timeout == 0 {
        return Err(ToolSetupError::ZeroTimeout);
    }
    let guard = Arc::new(
        PathGuard::new(workspace, config, home)?.with_skill_folders(&policy.skill_folders),
    );
    let exec_policy = ExecPolicy::new(&config.exec)?;
    let mut registry = ToolRegistry::new()
        .with_policy(ToolPolicy {
            grants: grants_from_config(&config.grants, "tools.grants", home)?,
            approval_timeout: Duration::from_secs(config.approvals.timeout),
            ..policy
        })
        .with_defer_above(config.defer_above.limits());
    registry.register(Arc::new(ReadFileTool::new(Arc::clone(&guard))));
    let history = registry.policy().workspace_history.clone();
    registry.register(Arc::new(WriteFileTool::new(
        Arc::clone(&guard),
        history.clone(),
    )));
    registry.register(Arc::new(EditFileTool::new(Arc::clone(&guard), history)));
    registry.register(Arc::new(ListDirTool::new(Arc::clone(&guard))));
    registry.register(Arc::new(ExecTool::new(
        Arc::clone(&guard),
        exec_policy,
        Duration::from_secs(config.exec.timeout),
        std::env::vars_os(),
        ExecSandbox::from_config(&config.exec.sandbox, launcher),
    )));
    for tool in more_tools(&guard) {
        registry.register(tool);
    }
    Ok(registry)
}
