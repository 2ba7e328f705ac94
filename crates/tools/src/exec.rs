//! The `exec` tool: runs what the exec policy accepted, in its own process group, with a
//! scrubbed environment, a timeout that kills the whole group, and capped output, inside the
//! OS sandbox ([`ExecSandbox`]).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nanocrab_config::ExecMode;
use nanocrab_policy::{Capability, ExecPlan, ExecPolicy, Invocation, PathGuard, Risk};
use nanocrab_schema::SessionKey;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::{Child, Command};

use crate::arguments::TypedTool;
use crate::exec_sandbox::ExecSandbox;
use crate::note_marks::NotesWatch;
use crate::process_group::ProcessGroup;
use crate::tool::{ToolContext, ToolError, ToolOutput};

/// The only variables a command sees: enough to find programs and format text, and nothing
/// like an API key.
pub const PASSED_ENV_VARS: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER"];
/// Characters of output returned to the model; the middle of longer output is cut.
pub const MAX_OUTPUT_CHARS: usize = 10_000;
/// Bytes kept from the start and from the end of each stream while the command runs.
const KEEP_BYTES: usize = 16 * 1024;
/// How long to wait for pipes to close after the group was killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

pub struct ExecTool {
    guard: Arc<PathGuard>,
    policy: ExecPolicy,
    timeout: Duration,
    env: Vec<(OsString, OsString)>,
    sandbox: ExecSandbox,
}

impl ExecTool {
    /// `base_env` is the environment to take [`PASSED_ENV_VARS`] from (the process's own in
    /// production); relative PATH entries, and absolute ones inside the workspace (links
    /// followed), are dropped so a file the agent wrote cannot shadow a safe bin. Every command
    /// runs under `sandbox`.
    pub fn new(
        guard: Arc<PathGuard>,
        policy: ExecPolicy,
        timeout: Duration,
        base_env: impl IntoIterator<Item = (OsString, OsString)>,
        sandbox: ExecSandbox,
    ) -> Self {
        let env = command_env(base_env, guard.workspace());
        Self {
            guard,
            policy,
            timeout,
            env,
            sandbox,
        }
    }

    /// The directory the command runs in: `working_dir` if the guard lets it be read and the
    /// sandbox lets the model choose, else the workspace (or the scratch directory when the
    /// workspace is not the command's to use).
    fn working_dir(
        &self,
        args: &ExecArgs,
        session: Option<&SessionKey>,
    ) -> Result<PathBuf, ToolError> {
        let cwd = match &args.working_dir {
            Some(_) if !self.sandbox.allows_working_dir() => {
                return Err(ToolError::Rejected(
                    "working_dir is not available: commands run in their scratch directory \
                     (tools.exec.sandbox.workspaceAccess is `none`)"
                        .into(),
                ));
            }
            Some(dir) => self.guard.check_read(dir)?,
            None => self.sandbox.default_cwd(self.guard.workspace(), session)?,
        };
        if !cwd.is_dir() {
            return Err(ToolError::Rejected(format!(
                "working_dir {} is not an existing directory",
                cwd.display()
            )));
        }
        Ok(cwd)
    }

    /// `argv` wrapped by the sandbox, not started yet.
    fn command(
        &self,
        argv: &[String],
        cwd: &Path,
        session: Option<&SessionKey>,
    ) -> Result<Command, ToolError> {
        self.sandbox
            .hold_instruction_paths(self.guard.workspace())?;
        let wrapped = self.sandbox.wrap(
            argv,
            self.guard.workspace(),
            self.guard.allowed_paths(),
            // The instruction files too: a command's writes cannot be asked about one by one.
            &[self.guard.protected_paths(), &self.guard.guarded_paths()].concat(),
            session,
        )?;
        let Some((program, args)) = wrapped.split_first() else {
            return Err(ToolError::Rejected("the command is empty".into()));
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        Ok(command)
    }
}

/// The environment a command of `workspace` runs with: only [`PASSED_ENV_VARS`] of
/// `base_env`, with relative PATH entries, and absolute ones inside the workspace (links
/// followed), dropped so a file the agent wrote cannot shadow a safe bin.
pub fn command_env(
    base_env: impl IntoIterator<Item = (OsString, OsString)>,
    workspace: &Path,
) -> Vec<(OsString, OsString)> {
    base_env
        .into_iter()
        .filter(|(key, _)| PASSED_ENV_VARS.iter().any(|passed| key == passed))
        .map(|(key, value)| {
            if key != "PATH" {
                return (key, value);
            }
            let absolute: Vec<_> = std::env::split_paths(&value)
                .filter(|dir| {
                    dir.is_absolute()
                        && !std::fs::canonicalize(dir)
                            .unwrap_or_else(|_| dir.clone())
                            .starts_with(workspace)
                })
                .collect();
            (key, std::env::join_paths(absolute).unwrap_or_default())
        })
        .collect()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    command: String,
    /// default: workspace
    working_dir: Option<String>,
}

impl TypedTool for ExecTool {
    type Args = ExecArgs;

    const NAME: &'static str = "exec";

    fn description(&self) -> String {
        let secs = self.timeout.as_secs();
        let description = match self.policy.mode() {
            ExecMode::Deny => "Run a command. Disabled by configuration: every call fails.".into(),
            ExecMode::Allowlist => format!(
                "Run a command (no shell). Allowed programs: {}. Pipes (|) allowed; no \
                 redirection, &&, ;, $() or variables. Timeout {secs}s.",
                self.policy.safe_bins().join(" ")
            ),
            ExecMode::Full => format!("Run a shell command (sh -c). Timeout {secs}s."),
        };
        match (self.policy.mode(), self.sandbox.describe()) {
            (ExecMode::Allowlist | ExecMode::Full, Some(sandbox)) => {
                format!("{description} {sandbox}")
            }
            (ExecMode::Deny, _) | (_, None) => description,
        }
    }

    /// A pipeline the allowlist accepted is safe: it runs only safe bins with no shell
    /// syntax. A shell command is guarded inside the OS sandbox, which holds its writes to the
    /// workspace; without the sandbox it can do anything the account can, so it is unsafe.
    /// When the sandbox lets commands reach the network, that is a capability of its own.
    fn invocation(&self, args: &ExecArgs, ctx: &ToolContext) -> Result<Invocation, ToolError> {
        let cwd = self.working_dir(args, ctx.session.as_ref())?;
        Ok(
            match self.policy.analyze(&args.command, &cwd, &self.guard)? {
                ExecPlan::Pipeline(argvs) => Invocation::new(
                    Risk::Safe,
                    format!("run `{}` in {}", args.command, cwd.display()),
                    argvs
                        .iter()
                        .filter_map(|argv| argv.first())
                        .map(|program| Capability::Exec(program.clone()))
                        .collect(),
                ),
                ExecPlan::Shell(_) => {
                    let mut capabilities = vec![Capability::Exec("sh".into())];
                    if self.sandbox.allows_network() {
                        capabilities.push(Capability::Net("*".into()));
                    }
                    let (risk, how) = if self.sandbox.is_sandboxed() {
                        (Risk::Guarded, "sh -c")
                    } else {
                        (Risk::Unsafe, "sh -c, no sandbox")
                    };
                    Invocation::new(
                        risk,
                        format!("run `{}` ({how}) in {}", args.command, cwd.display()),
                        capabilities,
                    )
                }
            },
        )
    }

    async fn call(&self, args: ExecArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        // A shell command can write memory notes from anywhere; the watch marks those it
        // changed once it has finished, however it ends.
        let _notes = matches!(self.policy.mode(), ExecMode::Full)
            .then(|| {
                NotesWatch::start(
                    ctx,
                    self.guard.workspace(),
                    format!("exec {}", args.command),
                )
            })
            .flatten();
        let cwd = self.working_dir(&args, ctx.session.as_ref())?;
        let plan = self.policy.analyze(&args.command, &cwd, &self.guard)?;
        let argvs = match plan {
            ExecPlan::Pipeline(argvs) => argvs,
            ExecPlan::Shell(command) => {
                vec![vec!["sh".to_owned(), "-c".to_owned(), command]]
            }
        };
        let mut group = ProcessGroup::default();
        let mut children: Vec<Child> = Vec::with_capacity(argvs.len());
        let stdout = Arc::new(Mutex::new(Capture::default()));
        let stderr = Arc::new(Mutex::new(Capture::default()));
        let mut readers = Vec::new();
        for (index, argv) in argvs.iter().enumerate() {
            let Some(program) = argv.first() else {
                return Err(ToolError::Rejected("the command is empty".into()));
            };
            // Each stage gets its own launcher, with the same policy: the pipes stay wired
            // here, in one place, rather than the launcher growing a pipeline runner, and a
            // launcher costs a fork and an exec per stage.
            let mut command = self.command(argv, &cwd, ctx.session.as_ref())?;
            // The first process leads a new group (0); the others join it.
            let pgid = group.pgid.and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
            command.process_group(pgid);
            match children.last_mut().and_then(|prev| prev.stdout.take()) {
                Some(previous) => {
                    let stdin: Stdio = previous.try_into().map_err(|source| ToolError::Spawn {
                        program: program.clone(),
                        source,
                    })?;
                    command.stdin(stdin);
                }
                None => {
                    command.stdin(Stdio::null());
                }
            }
            let mut child = command.spawn().map_err(|source| ToolError::Spawn {
                program: program.clone(),
                source,
            })?;
            if group.pgid.is_none() {
                group.pgid = child.id();
            }
            if let Some(err) = child.stderr.take() {
                readers.push(tokio::spawn(drain(err, Arc::clone(&stderr))));
            }
            if index + 1 == argvs.len()
                && let Some(out) = child.stdout.take()
            {
                readers.push(tokio::spawn(drain(out, Arc::clone(&stdout))));
            }
            children.push(child);
        }
        let run = async {
            let mut last: Option<ExitStatus> = None;
            for child in &mut children {
                last = Some(child.wait().await?);
            }
            for reader in &mut readers {
                // A reader task only ends early if it panicked; the output is then partial.
                let _ = reader.await;
            }
            Ok::<_, std::io::Error>(last)
        };
        match tokio::time::timeout(self.timeout, run).await {
            Ok(status) => {
                let status = status.map_err(|source| ToolError::Io {
                    action: "wait for the command in",
                    path: cwd.clone(),
                    source,
                })?;
                group.pgid = None;
                Ok(ToolOutput::untrusted(
                    format!("exec {}", args.command),
                    format_output(&stdout, &stderr, status),
                ))
            }
            Err(_) => {
                group.kill();
                let _ = tokio::time::timeout(DRAIN_GRACE, async {
                    for reader in readers {
                        let _ = reader.await;
                    }
                })
                .await;
                let seconds = if self.timeout.subsec_nanos() == 0 {
                    self.timeout.as_secs().to_string()
                } else {
                    format!("{:.1}", self.timeout.as_secs_f64())
                };
                Err(ToolError::TimedOut {
                    seconds,
                    output: format_output(&stdout, &stderr, None),
                })
            }
        }
    }
}

/// The start and the end of a stream, with the count of bytes dropped between them.
#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: usize,
}

async fn drain(mut stream: impl AsyncRead + Unpin, capture: Arc<Mutex<Capture>>) {
    let mut buf = [0u8; 8192];
    while let Ok(read) = stream.read(&mut buf).await {
        if read == 0 {
            break;
        }
        let Ok(mut capture) = capture.lock() else {
            break;
        };
        for &byte in &buf[..read] {
            if capture.head.len() < KEEP_BYTES {
                capture.head.push(byte);
            } else {
                capture.tail.push_back(byte);
                if capture.tail.len() > KEEP_BYTES {
                    capture.tail.pop_front();
                    capture.dropped += 1;
                }
            }
        }
    }
}

fn format_output(
    stdout: &Mutex<Capture>,
    stderr: &Mutex<Capture>,
    status: Option<ExitStatus>,
) -> String {
    let mut text = String::new();
    for (label, capture) in [("stdout", stdout), ("stderr", stderr)] {
        let Ok(capture) = capture.lock() else {
            continue;
        };
        if capture.head.is_empty() {
            continue;
        }
        let mut bytes = capture.head.clone();
        if capture.dropped > 0 {
            bytes.extend_from_slice(
                format!("\n[... {} bytes omitted ...]\n", capture.dropped).as_bytes(),
            );
        }
        bytes.extend(capture.tail.iter());
        text.push_str(&format!("[{label}]\n{}", String::from_utf8_lossy(&bytes)));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if text.is_empty() {
        text.push_str("(no output)\n");
    }
    if let Some(status) = status
        && !status.success()
    {
        use std::os::unix::process::ExitStatusExt as _;
        match (status.code(), status.signal()) {
            (Some(code), _) => text.push_str(&format!("[exit code {code}]\n")),
            (None, Some(signal)) => text.push_str(&format!("[killed by signal {signal}]\n")),
            (None, None) => text.push_str("[failed]\n"),
        }
    }
    let chars = text.chars().count();
    if chars <= MAX_OUTPUT_CHARS {
        return text;
    }
    let head: String = text.chars().take(MAX_OUTPUT_CHARS * 6 / 10).collect();
    let tail: String = text
        .chars()
        .skip(chars - MAX_OUTPUT_CHARS * 4 / 10)
        .collect();
    format!(
        "{head}\n[... {} characters omitted: output is capped at {MAX_OUTPUT_CHARS} characters; \
         narrow the command with head, tail or grep ...]\n{tail}",
        chars - head.chars().count() - tail.chars().count()
    )
}
