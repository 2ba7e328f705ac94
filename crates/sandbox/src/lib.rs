//! The OS sandbox `exec` commands run in.
//!
//! A [`SandboxProvider`] turns the argv of a command and a per-call [`SandboxPolicy`] into the
//! argv to spawn. The Landlock provider prefixes it with the launcher,
//! `nanocrab __sandbox <policy-json> -- <argv…>`: a fresh, single-threaded process that
//! restricts itself (resource limits, then Landlock, then seccomp) and then `exec`s the command,
//! so the restrictions are inherited by the command and everything it starts, and never by
//! nanocrab itself. [`launch`] is that launcher's body.

#[cfg(target_os = "linux")]
mod linux;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// argv\[1\] that turns the `nanocrab` binary into the launcher.
pub const LAUNCHER_ARG: &str = "__sandbox";
/// The launcher's exit code when it could not set the sandbox up or exec the program (the
/// shell's "found but cannot run").
pub const EXIT_SETUP_FAILED: u8 = 126;
/// The launcher's exit code when the program does not exist (the shell's "not found").
pub const EXIT_NOT_FOUND: u8 = 127;

/// What the command of one `exec` call may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxPolicy {
    /// The agent's workspace.
    pub workspace: PathBuf,
    pub workspace_access: WorkspaceAccess,
    /// Directories (or files) writable besides the workspace: the scratch directory, allowed
    /// paths. Each must exist: a missing one is a setup error rather than a silently dropped
    /// rule.
    pub writable_roots: Vec<PathBuf>,
    /// Existing files or directories beneath a writable path that stay read-only
    /// (`tools.protectedPaths`, the agent's instructions). Landlock cannot take back a right a
    /// parent directory grants, so these are bound read-only over themselves in a mount
    /// namespace of the command's own ([`Self::binds`]); a launcher that cannot make one
    /// refuses to run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<PathBuf>,
    /// `TMPDIR` for the command: `/tmp` is not writable inside.
    pub tmp_dir: Option<PathBuf>,
    /// Sockets other than Unix ones. Decided per call by the caller.
    pub network: bool,
    pub limits: ResourceLimits,
}

impl SandboxPolicy {
    /// Every directory the command may write beneath.
    pub fn writable(&self) -> Vec<&Path> {
        let workspace = match self.workspace_access {
            WorkspaceAccess::ReadWrite => Some(self.workspace.as_path()),
            WorkspaceAccess::ReadOnly | WorkspaceAccess::None => None,
        };
        workspace
            .into_iter()
            .chain(self.writable_roots.iter().map(PathBuf::as_path))
            .collect()
    }

    /// The bind mounts that keep [`Self::read_only`] read-only, parents before children: each
    /// read-only path over itself, and each directory between it and the writable root it is
    /// in over itself, writable. Those are there because a mount point cannot be renamed
    /// (EBUSY): without them a command could move `memory/` aside and put a `memory/MEMORY.md`
    /// of its own where nanocrab reads it.
    pub fn binds(&self) -> Vec<Bind> {
        let roots = self.writable();
        let mut binds = std::collections::BTreeMap::new();
        for path in &self.read_only {
            binds.insert(path.clone(), true);
            for ancestor in path.ancestors().skip(1) {
                if roots.contains(&ancestor)
                    || self.read_only.iter().any(|p| ancestor.starts_with(p))
                    || !roots.iter().any(|root| ancestor.starts_with(root))
                {
                    break;
                }
                binds.entry(ancestor.to_path_buf()).or_insert(false);
            }
        }
        binds
            .into_iter()
            .map(|(path, read_only)| Bind { path, read_only })
            .collect()
    }
}

/// One bind mount of a path over itself (see [`SandboxPolicy::binds`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub path: PathBuf,
    pub read_only: bool,
}

/// What the command may do in the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WorkspaceAccess {
    /// Not writable, and the command runs in the scratch directory. Landlock restricts only
    /// writes here, so the workspace stays readable.
    None,
    #[serde(rename = "ro")]
    ReadOnly,
    #[serde(rename = "rw")]
    ReadWrite,
}

/// setrlimit(2) limits; `None` keeps the limit nanocrab itself runs with. Core dumps are always
/// off: a dump could carry whatever the command had read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceLimits {
    /// RLIMIT_AS: address space, which bounds memory.
    pub address_space_bytes: Option<u64>,
    /// RLIMIT_CPU: CPU time; the kernel kills the process when it is used up.
    pub cpu_seconds: Option<u64>,
    /// RLIMIT_FSIZE: the largest file the command may write.
    pub file_size_bytes: Option<u64>,
    /// RLIMIT_NOFILE: open file descriptors.
    pub open_files: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel (or platform) lacks something the sandbox needs.
    #[error("the OS sandbox is unavailable: {feature} {reason}")]
    Unavailable {
        feature: &'static str,
        reason: String,
    },
    #[error("cannot encode the sandbox policy: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("the sandbox launcher {} does not exist", path.display())]
    NoLauncher { path: PathBuf },
}

/// A way to run a command under restrictions.
pub trait SandboxProvider: Send + Sync + std::fmt::Debug {
    /// For logs and error messages.
    fn name(&self) -> &'static str;

    /// Whether this machine can run it; the error names what is missing.
    fn check(&self) -> Result<(), SandboxError>;

    /// Whether this machine lets it keep [`SandboxPolicy::read_only`] read-only; the error
    /// names what is missing.
    fn check_read_only(&self) -> Result<(), SandboxError>;

    /// The argv to spawn instead of `argv` so that it runs under `policy`.
    fn wrap(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Vec<OsString>, SandboxError>;
}

/// Landlock and seccomp, applied by the launcher (the `nanocrab` binary) before it execs the
/// command.
#[derive(Debug, Clone)]
pub struct LandlockProvider {
    launcher: PathBuf,
}

impl LandlockProvider {
    /// `launcher` is a binary whose `main` calls [`launch`] when argv\[1\] is [`LAUNCHER_ARG`]:
    /// the running `nanocrab` binary in production.
    pub fn new(launcher: impl Into<PathBuf>) -> Self {
        Self {
            launcher: launcher.into(),
        }
    }
}

impl SandboxProvider for LandlockProvider {
    fn name(&self) -> &'static str {
        "landlock"
    }

    fn check(&self) -> Result<(), SandboxError> {
        if !self.launcher.is_file() {
            return Err(SandboxError::NoLauncher {
                path: self.launcher.clone(),
            });
        }
        probe()
    }

    /// Runs `sh -c 'exit 0'` with the launcher itself bound read-only (`/` cannot be bound
    /// inside a user namespace): whether the launcher may create a mount namespace (and, not
    /// as root, a user namespace) depends on the kernel's settings and the container, not on
    /// Landlock.
    fn check_read_only(&self) -> Result<(), SandboxError> {
        self.check()?;
        let policy = SandboxPolicy {
            read_only: vec![self.launcher.clone()],
            ..SandboxPolicy::trial()
        };
        trial_run(
            &self.wrap(&["sh".into(), "-c".into(), "exit 0".into()], &policy)?,
            "read-only paths",
            "cannot be kept here: the launcher cannot create a mount namespace",
        )
    }

    fn wrap(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Vec<OsString>, SandboxError> {
        let mut wrapped = vec![
            self.launcher.clone().into_os_string(),
            LAUNCHER_ARG.into(),
            serde_json::to_string(policy)?.into(),
            "--".into(),
        ];
        wrapped.extend(argv.iter().map(OsString::from));
        Ok(wrapped)
    }
}

/// bubblewrap around the Landlock launcher: bwrap first (it needs the syscalls seccomp takes
/// away: it cannot start under our filter), then the launcher inside adds its restrictions.
/// What bwrap adds is namespaces: a PID namespace (the command sees only its own processes,
/// and they all die with it), a network namespace with only a downed loopback when network is
/// off, and a fresh `/proc`. Writes stay Landlock's job (`/` is bound read-write), so a denied
/// write fails the same way with or without bwrap; the read-only paths are bwrap's binds, so
/// the launcher inside needs no namespace of its own.
#[derive(Debug, Clone)]
pub struct BwrapProvider {
    bwrap: PathBuf,
    launcher: LandlockProvider,
}

impl BwrapProvider {
    /// `bwrap` found in the directories of `path_var` (a `PATH` value), if any.
    pub fn find(path_var: Option<&OsStr>, launcher: impl Into<PathBuf>) -> Option<Self> {
        let bwrap = std::env::split_paths(path_var?)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join("bwrap"))
            .find(|candidate| candidate.is_file())?;
        Some(Self::new(bwrap, launcher))
    }

    pub fn new(bwrap: impl Into<PathBuf>, launcher: impl Into<PathBuf>) -> Self {
        Self {
            bwrap: bwrap.into(),
            launcher: LandlockProvider::new(launcher),
        }
    }
}

impl SandboxProvider for BwrapProvider {
    fn name(&self) -> &'static str {
        "bwrap"
    }

    /// Runs `sh -c 'exit 0'` through bwrap and the launcher: whether bwrap may create
    /// namespaces depends on the container and the kernel's settings, not on its presence.
    fn check(&self) -> Result<(), SandboxError> {
        self.launcher.check()?;
        let argv = self.wrap(
            &["sh".into(), "-c".into(), "exit 0".into()],
            &SandboxPolicy::trial(),
        )?;
        trial_run(&argv, "bubblewrap", "cannot set up its namespaces here")
    }

    /// The read-only paths are bwrap's own binds.
    fn check_read_only(&self) -> Result<(), SandboxError> {
        self.check()
    }

    fn wrap(&self, argv: &[String], policy: &SandboxPolicy) -> Result<Vec<OsString>, SandboxError> {
        let mut wrapped: Vec<OsString> = vec![
            self.bwrap.clone().into_os_string(),
            // Nothing inside outlives the call's process group leader (bwrap).
            "--die-with-parent".into(),
            "--unshare-pid".into(),
        ];
        if !policy.network {
            wrapped.push("--unshare-net".into());
        }
        wrapped.extend(["--bind", "/", "/"].map(OsString::from));
        for Bind { path, read_only } in policy.binds() {
            let bind = if read_only { "--ro-bind" } else { "--bind" };
            wrapped.extend([bind.into(), path.clone().into(), path.into()]);
        }
        wrapped.extend(["--dev-bind", "/dev", "/dev", "--proc", "/proc", "--"].map(OsString::from));
        let inside = SandboxPolicy {
            read_only: Vec::new(),
            ..policy.clone()
        };
        wrapped.extend(self.launcher.wrap(argv, &inside)?);
        Ok(wrapped)
    }
}

/// No sandbox: the command runs as it is. The explicit opt-out, and what `auto` falls back to
/// on a kernel without Landlock.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unsandboxed;

impl SandboxProvider for Unsandboxed {
    fn name(&self) -> &'static str {
        "off"
    }

    fn check(&self) -> Result<(), SandboxError> {
        Ok(())
    }

    fn check_read_only(&self) -> Result<(), SandboxError> {
        Err(SandboxError::Unavailable {
            feature: "read-only paths",
            reason: "need the OS sandbox, and commands run without it".into(),
        })
    }

    fn wrap(&self, argv: &[String], _: &SandboxPolicy) -> Result<Vec<OsString>, SandboxError> {
        Ok(argv.iter().map(OsString::from).collect())
    }
}

impl SandboxPolicy {
    /// What a trial run asks for: nothing writable, no network.
    fn trial() -> Self {
        Self {
            workspace: "/".into(),
            workspace_access: WorkspaceAccess::ReadOnly,
            writable_roots: Vec::new(),
            read_only: Vec::new(),
            tmp_dir: None,
            network: false,
            limits: ResourceLimits::default(),
        }
    }
}

/// Runs a wrapped `sh -c 'exit 0'`: `Ok` when it exits 0, else `feature` is unavailable
/// because of `failing`, with the status and what it said.
fn trial_run(argv: &[OsString], feature: &'static str, failing: &str) -> Result<(), SandboxError> {
    let unavailable = |reason: String| SandboxError::Unavailable { feature, reason };
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| unavailable("has no command".into()))?;
    let output = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|err| unavailable(format!("cannot start {}: {err}", program.display())))?;
    if output.status.success() {
        return Ok(());
    }
    Err(unavailable(format!(
        "{failing} ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// Whether this kernel has what the launcher needs (Landlock and seccomp filters), without
/// restricting the calling process.
pub fn probe() -> Result<(), SandboxError> {
    #[cfg(target_os = "linux")]
    {
        linux::probe()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(SandboxError::Unavailable {
            feature: "Landlock",
            reason: "exists only on Linux".into(),
        })
    }
}

/// The launcher: `args` are what follows [`LAUNCHER_ARG`] (`<policy-json> -- <argv…>`).
/// Returns only on failure, with the exit code, after a `nanocrab sandbox: …` line on stderr;
/// on success the process has become the command.
pub fn launch(args: impl IntoIterator<Item = OsString>) -> u8 {
    let (code, message) = match run_launcher(args) {
        Ok(never) => match never {},
        Err(failure) => failure,
    };
    eprintln!("nanocrab sandbox: {message}");
    code
}

/// An exit code and what went wrong.
type Failure = (u8, String);

fn run_launcher(
    args: impl IntoIterator<Item = OsString>,
) -> Result<std::convert::Infallible, Failure> {
    let (policy, argv) = parse_launcher_args(args).map_err(|m| (EXIT_SETUP_FAILED, m))?;
    #[cfg(target_os = "linux")]
    {
        linux::restrict_and_exec(&policy, &argv)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (policy, argv);
        Err((
            EXIT_SETUP_FAILED,
            "the OS sandbox exists only on Linux".into(),
        ))
    }
}

/// `<policy-json> -- <program> [args…]`.
fn parse_launcher_args(
    args: impl IntoIterator<Item = OsString>,
) -> Result<(SandboxPolicy, Vec<OsString>), String> {
    let mut args = args.into_iter();
    let usage = "usage: nanocrab __sandbox <policy-json> -- <program> [args...]";
    let policy = args.next().ok_or(usage)?;
    let policy = policy
        .to_str()
        .ok_or("the policy is not valid UTF-8")?
        .to_owned();
    let policy: SandboxPolicy =
        serde_json::from_str(&policy).map_err(|err| format!("invalid policy: {err}"))?;
    if args.next().as_deref() != Some(OsStr::new("--")) {
        return Err(usage.into());
    }
    let argv: Vec<OsString> = args.collect();
    if argv.is_empty() {
        return Err(usage.into());
    }
    Ok((policy, argv))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn policy() -> SandboxPolicy {
        SandboxPolicy {
            workspace: "/home/me/workspace".into(),
            workspace_access: WorkspaceAccess::ReadOnly,
            writable_roots: vec!["/home/me/.nanocrab/state/sandbox/shared".into()],
            read_only: Vec::new(),
            tmp_dir: Some("/home/me/.nanocrab/state/sandbox/shared".into()),
            network: false,
            limits: ResourceLimits {
                address_space_bytes: Some(1 << 30),
                cpu_seconds: Some(60),
                file_size_bytes: None,
                open_files: Some(1024),
            },
        }
    }

    #[test]
    fn the_policy_survives_the_trip_through_the_launcher_argv() {
        let policy = policy();
        let wrapped = LandlockProvider::new("/usr/bin/nanocrab")
            .wrap(&["sh".into(), "-c".into(), "echo hi".into()], &policy)
            .unwrap();
        assert_eq!(wrapped[..2], ["/usr/bin/nanocrab", LAUNCHER_ARG]);
        assert_eq!(wrapped[3..], ["--", "sh", "-c", "echo hi"]);
        let (parsed, argv) = parse_launcher_args(wrapped.into_iter().skip(2)).unwrap();
        assert_eq!(parsed, policy);
        assert_eq!(argv, ["sh", "-c", "echo hi"]);
    }

    #[test]
    fn the_policy_json_is_camel_case_with_short_access_names() {
        let json = serde_json::to_value(policy()).unwrap();
        assert_eq!(json["workspaceAccess"], "ro");
        assert_eq!(json["limits"]["addressSpaceBytes"], 1u64 << 30);
        assert_eq!(
            json["writableRoots"][0],
            "/home/me/.nanocrab/state/sandbox/shared"
        );
        // Absent when empty, so a policy without read-only paths reads as it always did.
        assert_eq!(json.get("readOnly"), None);
    }

    #[test]
    fn only_a_read_write_workspace_is_writable() {
        let mut policy = policy();
        let scratch = Path::new("/home/me/.nanocrab/state/sandbox/shared");
        assert_eq!(policy.writable(), [scratch]);
        policy.workspace_access = WorkspaceAccess::None;
        assert_eq!(policy.writable(), [scratch]);
        policy.workspace_access = WorkspaceAccess::ReadWrite;
        assert_eq!(
            policy.writable(),
            [Path::new("/home/me/workspace"), scratch]
        );
    }

    #[test]
    fn malformed_launcher_arguments_are_refused_with_the_usage() {
        let json: OsString = serde_json::to_string(&policy()).unwrap().into();
        for args in [
            vec![],
            vec![json.clone()],
            vec![json.clone(), "--".into()],
            vec![json.clone(), "true".into()],
        ] {
            let err = parse_launcher_args(args.clone()).unwrap_err();
            assert!(
                err.starts_with("usage: nanocrab __sandbox"),
                "{args:?}: {err}"
            );
        }
        let err = parse_launcher_args(["{\"network\": 1}".into(), "--".into(), "true".into()])
            .unwrap_err();
        assert!(err.starts_with("invalid policy: "), "{err}");
    }

    #[test]
    fn bwrap_runs_the_launcher_inside_its_namespaces() {
        let provider = BwrapProvider::new("/usr/bin/bwrap", "/usr/bin/nanocrab");
        let mut policy = policy();
        let argv = ["make".to_owned()];
        let json = serde_json::to_string(&policy).unwrap();
        let namespaces = ["/usr/bin/bwrap", "--die-with-parent", "--unshare-pid"];
        let mounts = [
            "--bind",
            "/",
            "/",
            "--dev-bind",
            "/dev",
            "/dev",
            "--proc",
            "/proc",
            "--",
        ];
        let launcher = ["/usr/bin/nanocrab", LAUNCHER_ARG, &json, "--", "make"];
        let offline: Vec<&str> = namespaces
            .iter()
            .chain(&["--unshare-net"])
            .chain(&mounts)
            .chain(&launcher)
            .copied()
            .collect();
        assert_eq!(provider.wrap(&argv, &policy).unwrap(), offline);

        policy.network = true;
        let json = serde_json::to_string(&policy).unwrap();
        let launcher = ["/usr/bin/nanocrab", LAUNCHER_ARG, &json, "--", "make"];
        let online: Vec<&str> = namespaces
            .iter()
            .chain(&mounts)
            .chain(&launcher)
            .copied()
            .collect();
        assert_eq!(provider.wrap(&argv, &policy).unwrap(), online);
    }

    #[test]
    fn under_bwrap_the_read_only_paths_are_its_binds_and_the_launcher_gets_none() {
        let provider = BwrapProvider::new("/usr/bin/bwrap", "/usr/bin/nanocrab");
        let mut policy = policy();
        policy.read_only = vec![
            "/home/me/workspace/SOUL.md".into(),
            "/home/me/workspace/skills".into(),
        ];
        let inside = serde_json::to_string(&SandboxPolicy {
            read_only: Vec::new(),
            ..policy.clone()
        })
        .unwrap();
        let expected = [
            "/usr/bin/bwrap",
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-net",
            "--bind",
            "/",
            "/",
            "--ro-bind",
            "/home/me/workspace/SOUL.md",
            "/home/me/workspace/SOUL.md",
            "--ro-bind",
            "/home/me/workspace/skills",
            "/home/me/workspace/skills",
            "--dev-bind",
            "/dev",
            "/dev",
            "--proc",
            "/proc",
            "--",
            "/usr/bin/nanocrab",
            LAUNCHER_ARG,
            &inside,
            "--",
            "make",
        ];
        assert_eq!(
            provider.wrap(&["make".to_owned()], &policy).unwrap(),
            expected
        );
    }

    #[test]
    fn the_directories_between_a_read_only_path_and_its_writable_root_are_pinned() {
        let mut policy = policy();
        policy.workspace_access = WorkspaceAccess::ReadWrite;
        policy.read_only = vec![
            "/home/me/workspace/memory/notes/MEMORY.md".into(),
            "/home/me/workspace/skills/web/SKILL.md".into(),
            "/home/me/workspace/skills".into(),
        ];
        let bind = |path: &str, read_only| Bind {
            path: path.into(),
            read_only,
        };
        // skills/web needs no pin: it is inside the read-only skills.
        let expected = vec![
            bind("/home/me/workspace/memory", false),
            bind("/home/me/workspace/memory/notes", false),
            bind("/home/me/workspace/memory/notes/MEMORY.md", true),
            bind("/home/me/workspace/skills", true),
            bind("/home/me/workspace/skills/web/SKILL.md", true),
        ];
        assert_eq!(policy.binds(), expected);
    }

    #[test]
    fn bwrap_is_looked_up_in_the_absolute_directories_of_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("bwrap"), "").unwrap();
        let path =
            std::env::join_paths(["relative/bin".into(), dir.path().join("empty"), bin.clone()])
                .unwrap();
        let found = BwrapProvider::find(Some(&path), "/usr/bin/nanocrab").unwrap();
        assert_eq!(found.bwrap, bin.join("bwrap"));
        let relative = std::env::join_paths(["relative/bin"]).unwrap();
        assert!(BwrapProvider::find(Some(&relative), "/usr/bin/nanocrab").is_none());
        assert!(BwrapProvider::find(None, "/usr/bin/nanocrab").is_none());
    }

    #[test]
    fn unsandboxed_runs_the_argv_as_it_is() {
        let argv = ["ls".to_owned(), "-l".to_owned()];
        assert_eq!(Unsandboxed.wrap(&argv, &policy()).unwrap(), ["ls", "-l"]);
    }

    #[test]
    fn a_missing_launcher_fails_the_check() {
        let err = LandlockProvider::new("/nonexistent/nanocrab")
            .check()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the sandbox launcher /nonexistent/nanocrab does not exist"
        );
    }
}
