//! How `exec` commands are sandboxed: `tools.exec.sandbox` mapped to a provider and a per-call
//! policy.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use nanocrab_config::{SandboxConfig, SandboxMode, SandboxScope, WorkspaceAccess};
use nanocrab_sandbox::{
    BwrapProvider, LandlockProvider, ResourceLimits, SandboxPolicy, SandboxProvider, Unsandboxed,
};

use nanocrab_policy::INSTRUCTION_PATHS;
use nanocrab_schema::SessionKey;

use crate::tool::ToolError;

/// The sandbox launcher: the running `nanocrab` binary, and where its scratch directories go.
/// The binary passes itself: inside a library, `current_exe` may be a test harness, which has
/// no launcher.
#[derive(Debug, Clone)]
pub struct SandboxLauncher {
    pub program: PathBuf,
    /// `$NANOCRAB_HOME/state`.
    pub state_dir: PathBuf,
    /// The agent the tools are for (`main` for the default one).
    pub agent_id: String,
}

/// The provider `exec` wraps every command with, and what each call's policy starts from.
#[derive(Debug, Clone)]
pub struct ExecSandbox {
    provider: Arc<dyn SandboxProvider>,
    /// `required` on a machine without the sandbox: why every call fails.
    unavailable: Option<String>,
    workspace_access: WorkspaceAccess,
    /// Writable besides the workspace, and the commands' `TMPDIR`; none when unsandboxed.
    /// With `scope: session`, the one of runs that have no session.
    scratch: Option<PathBuf>,
    /// `scope: session`: each conversation has its own scratch directory next to `scratch`.
    per_session: bool,
    network: bool,
    limits: ResourceLimits,
}

/// `auto` falling back is said once per process, not once per agent.
static FALLBACK_WARNED: AtomicBool = AtomicBool::new(false);

impl ExecSandbox {
    /// Commands run as they are. For `sandbox.mode: off` and for tests of the exec tool itself.
    pub fn unsandboxed() -> Self {
        Self {
            provider: Arc::new(Unsandboxed),
            unavailable: None,
            workspace_access: WorkspaceAccess::ReadWrite,
            scratch: None,
            per_session: false,
            network: true,
            limits: ResourceLimits::default(),
        }
    }

    /// `tools.exec.sandbox` on this machine. `launcher: None` means this process cannot
    /// launch the sandbox: `auto` then runs commands unsandboxed and `required` fails them.
    pub fn from_config(config: &SandboxConfig, launcher: Option<&SandboxLauncher>) -> Self {
        match config.mode {
            SandboxMode::Off => {
                tracing::warn!(
                    "tools.exec.sandbox.mode is `off`: exec commands run without the OS sandbox"
                );
                return Self::unsandboxed();
            }
            SandboxMode::Auto | SandboxMode::Required => {}
        }
        let checked = match launcher {
            None => Err("this process has no sandbox launcher".to_owned()),
            Some(launcher) => {
                let landlock = LandlockProvider::new(&launcher.program);
                landlock
                    .check()
                    .map(|()| {
                        let provider: Arc<dyn SandboxProvider> = Arc::new(FirstUse {
                            landlock,
                            launcher: launcher.program.clone(),
                            bubblewrap: config.bubblewrap,
                            chosen: OnceLock::new(),
                            read_only: OnceLock::new(),
                        });
                        (provider, launcher)
                    })
                    .map_err(|err| err.to_string())
            }
        };
        let (provider, launcher) = match (checked, config.mode) {
            (Ok(found), _) => found,
            (Err(reason), SandboxMode::Auto) => {
                if !FALLBACK_WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "{reason}; exec commands run unsandboxed (tools.exec.sandbox.mode is \
                         `auto`; `required` would refuse them)"
                    );
                }
                return Self::unsandboxed();
            }
            (Err(reason), SandboxMode::Required | SandboxMode::Off) => {
                return Self {
                    unavailable: Some(format!(
                        "{reason}; exec is refused because tools.exec.sandbox.mode is \
                         `required` (set it to `auto` or `off` to run commands unsandboxed)"
                    )),
                    ..Self::unsandboxed()
                };
            }
        };
        let scratch = launcher.state_dir.join("sandbox").join(match config.scope {
            SandboxScope::Shared => "shared".to_owned(),
            SandboxScope::Agent | SandboxScope::Session => format!("agent-{}", launcher.agent_id),
        });
        let mib = |value: u64| (value > 0).then(|| value.saturating_mul(1 << 20));
        let nonzero = |value: u64| (value > 0).then_some(value);
        Self {
            provider,
            unavailable: None,
            workspace_access: config.workspace_access,
            scratch: Some(scratch),
            per_session: config.scope == SandboxScope::Session,
            network: config.network,
            limits: ResourceLimits {
                address_space_bytes: mib(config.memory_mb),
                cpu_seconds: nonzero(config.cpu_seconds),
                file_size_bytes: mib(config.file_size_mb),
                open_files: nonzero(config.open_files),
            },
        }
    }

    /// The provider's name (`bwrap`, `landlock`, `off`).
    pub fn provider_name(&self) -> &'static str {
        self.provider.name()
    }

    /// A sentence for the tool's description, so that the model expects a denied write or
    /// socket rather than retrying it; none when commands run unsandboxed.
    pub(crate) fn describe(&self) -> Option<String> {
        self.scratch.as_ref()?;
        let writable = match self.workspace_access {
            WorkspaceAccess::ReadWrite => "in the workspace and $TMPDIR",
            WorkspaceAccess::ReadOnly | WorkspaceAccess::None => "in $TMPDIR only",
        };
        let network = if self.network { "" } else { ", no network" };
        Some(format!("Sandboxed: writes {writable}{network}."))
    }

    /// The scratch directory of a call from `session`.
    fn scratch(&self, session: Option<&SessionKey>) -> Option<PathBuf> {
        let scratch = self.scratch.as_ref()?;
        match (self.per_session, session, scratch.parent()) {
            // Session keys are made to be file names (`sessions/<key>.jsonl`).
            (true, Some(key), Some(root)) => Some(root.join(format!("session-{key}"))),
            (true, Some(_), None) | (true, None, _) | (false, _, _) => Some(scratch.clone()),
        }
    }

    /// Where a command of `session` runs when it names no working directory: the scratch
    /// directory when the workspace is not the command's to use.
    pub fn default_cwd(
        &self,
        workspace: &Path,
        session: Option<&SessionKey>,
    ) -> Result<PathBuf, ToolError> {
        self.usable()?;
        match (self.workspace_access, self.scratch(session)) {
            (WorkspaceAccess::None, Some(scratch)) => {
                create_private_dir(&scratch)?;
                Ok(scratch)
            }
            (WorkspaceAccess::None, None)
            | (WorkspaceAccess::ReadOnly | WorkspaceAccess::ReadWrite, _) => {
                Ok(workspace.to_path_buf())
            }
        }
    }

    /// Whether commands run in the OS sandbox (not `off`, nor `auto` on a kernel without it).
    pub fn is_sandboxed(&self) -> bool {
        self.scratch.is_some()
    }

    /// Whether commands may open network sockets: always without the sandbox.
    pub(crate) fn allows_network(&self) -> bool {
        self.network
    }

    /// Whether the model may choose a working directory.
    pub(crate) fn allows_working_dir(&self) -> bool {
        match self.workspace_access {
            WorkspaceAccess::None => false,
            WorkspaceAccess::ReadOnly | WorkspaceAccess::ReadWrite => true,
        }
    }

    /// Makes each missing instruction file (empty) and folder, where commands may write the
    /// workspace in the sandbox: a path that does not exist cannot be bound read-only, so a
    /// command could create it holding a standing instruction. An empty file reads as absent to
    /// the system prompt, and `onboard` fills an empty bootstrap file with its template.
    pub fn hold_instruction_paths(&self, workspace: &Path) -> Result<(), ToolError> {
        match (self.is_sandboxed(), self.workspace_access) {
            (true, WorkspaceAccess::ReadWrite) => {}
            (false, _) | (true, WorkspaceAccess::ReadOnly | WorkspaceAccess::None) => {
                return Ok(());
            }
        }
        for name in INSTRUCTION_PATHS {
            let path = workspace.join(name.trim_end_matches('/'));
            let made = if name.ends_with('/') {
                std::fs::create_dir(&path)
            } else {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map(drop)
            };
            match made {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(ToolError::Io {
                        action: "keep the place of an instruction file",
                        path,
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// The argv that runs `argv` in the sandbox for one call. `allowed` (`allowedPaths`) are
    /// writable like the workspace, as the file tools may write them too; `read_only`
    /// (`protectedPaths`, the agent's instructions) stay read-only even there.
    pub fn wrap(
        &self,
        argv: &[String],
        workspace: &Path,
        allowed: &[PathBuf],
        read_only: &[PathBuf],
        session: Option<&SessionKey>,
    ) -> Result<Vec<OsString>, ToolError> {
        self.usable()?;
        let scratch = self.scratch(session);
        if let Some(scratch) = &scratch {
            create_private_dir(scratch)?;
        }
        let mut policy = self.policy(workspace, allowed, scratch);
        let writable = policy.writable();
        // A bind needs an existing path, and one outside every writable root is read-only
        // already.
        let read_only = read_only
            .iter()
            .filter(|path| path.exists() && writable.iter().any(|root| path.starts_with(root)))
            .cloned()
            .collect();
        policy.read_only = read_only;
        self.provider
            .wrap(argv, &policy)
            .map_err(|err| ToolError::Rejected(err.to_string()))
    }

    fn policy(
        &self,
        workspace: &Path,
        allowed: &[PathBuf],
        scratch: Option<PathBuf>,
    ) -> SandboxPolicy {
        let allowed = match self.workspace_access {
            // One that does not exist (yet) would make the launcher refuse the whole call.
            WorkspaceAccess::ReadWrite => allowed.iter().filter(|p| p.exists()).cloned().collect(),
            WorkspaceAccess::ReadOnly | WorkspaceAccess::None => Vec::new(),
        };
        SandboxPolicy {
            workspace: workspace.to_path_buf(),
            workspace_access: match self.workspace_access {
                WorkspaceAccess::None => nanocrab_sandbox::WorkspaceAccess::None,
                WorkspaceAccess::ReadOnly => nanocrab_sandbox::WorkspaceAccess::ReadOnly,
                WorkspaceAccess::ReadWrite => nanocrab_sandbox::WorkspaceAccess::ReadWrite,
            },
            writable_roots: scratch.iter().cloned().chain(allowed).collect(),
            read_only: Vec::new(),
            tmp_dir: scratch,
            network: self.network,
            limits: self.limits,
        }
    }

    fn usable(&self) -> Result<(), ToolError> {
        match &self.unavailable {
            Some(reason) => Err(ToolError::Rejected(reason.clone())),
            None => Ok(()),
        }
    }
}

/// bubblewrap around the launcher when `bwrap` is on nanocrab's PATH, may create namespaces
/// here and `bubblewrap` is on; the launcher alone otherwise, which confines writes and sockets
/// just the same. Finding out takes a trial run (tens of milliseconds), so it happens at the
/// first command, not when the tools are built: a turn that runs no command never pays for it.
#[derive(Debug)]
struct FirstUse {
    landlock: LandlockProvider,
    launcher: PathBuf,
    bubblewrap: bool,
    chosen: OnceLock<Arc<dyn SandboxProvider>>,
    /// Whether the chosen provider can keep paths read-only here; asked at the first command
    /// that has some.
    read_only: OnceLock<Result<(), String>>,
}

impl FirstUse {
    fn chosen(&self) -> &Arc<dyn SandboxProvider> {
        self.chosen.get_or_init(|| {
            let found = self
                .bubblewrap
                .then(|| BwrapProvider::find(std::env::var_os("PATH").as_deref(), &self.launcher))
                .flatten();
            let Some(bwrap) = found else {
                return Arc::new(self.landlock.clone());
            };
            match bwrap.check() {
                Ok(()) => Arc::new(bwrap),
                Err(err) => {
                    tracing::debug!("{err}; exec commands are sandboxed without bubblewrap");
                    Arc::new(self.landlock.clone())
                }
            }
        })
    }
}

impl SandboxProvider for FirstUse {
    fn name(&self) -> &'static str {
        self.chosen().name()
    }

    fn check(&self) -> Result<(), nanocrab_sandbox::SandboxError> {
        self.chosen().check()
    }

    fn check_read_only(&self) -> Result<(), nanocrab_sandbox::SandboxError> {
        self.chosen().check_read_only()
    }

    /// Where the kernel lets no one keep paths read-only, commands still run, with the
    /// protected paths as writable as the rest of the workspace: the file tools keep refusing
    /// them, this is logged once, and `nanocrab security audit` reports it.
    fn wrap(
        &self,
        argv: &[String],
        policy: &SandboxPolicy,
    ) -> Result<Vec<OsString>, nanocrab_sandbox::SandboxError> {
        if policy.read_only.is_empty() {
            return self.chosen().wrap(argv, policy);
        }
        let read_only = self.read_only.get_or_init(|| {
            self.check_read_only().map_err(|err| {
                tracing::warn!(
                    "{err}; exec commands can write the protected paths and the agent's \
                     instructions (the file tools still guard them)"
                );
                err.to_string()
            })
        });
        match read_only {
            Ok(()) => self.chosen().wrap(argv, policy),
            Err(_) => self.chosen().wrap(
                argv,
                &SandboxPolicy {
                    read_only: Vec::new(),
                    ..policy.clone()
                },
            ),
        }
    }
}

/// 0700: other users of the machine have no business in what commands leave there. Made on
/// use, so a scratch directory the user deleted comes back.
fn create_private_dir(dir: &Path) -> Result<(), ToolError> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| ToolError::Io {
            action: "create the sandbox scratch directory",
            path: dir.to_path_buf(),
            source,
        })
}
