//! One hook's program: `sh -c COMMAND` in the exec sandbox with the hook's own grant, in the
//! workspace, with `exec`'s scrubbed environment, its input on stdin, its output capped, and
//! its whole process group killed at the timeout.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nanocrab_tools::{ExecSandbox, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::Command;

/// Bytes kept of each of a hook's stdout and stderr; the rest is read and dropped.
pub const MAX_HOOK_OUTPUT: usize = 64 * 1024;
/// How long to wait for pipes to close after the group was killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How the program ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code (`None`: killed by a signal).
    Code(Option<i32>),
    /// It ran past its timeout and its group was killed.
    TimedOut,
    /// It could not be started (the sandbox refused, the shell is missing).
    NotStarted(String),
}

/// What a run of the program left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
}

/// What a hook's program runs with.
pub struct Launch<'a> {
    pub command: &'a str,
    pub workspace: &'a Path,
    pub sandbox: &'a ExecSandbox,
    pub env: &'a [(OsString, OsString)],
    pub stdin: Vec<u8>,
    pub timeout: Duration,
}

impl Launch<'_> {
    pub async fn run(self) -> Finished {
        let not_started = |reason: String| Finished {
            exit: Exit::NotStarted(reason),
            stdout: String::new(),
            stderr: String::new(),
        };
        let mut command = match self.command() {
            Ok(command) => command,
            Err(reason) => return not_started(reason),
        };
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(err) => return not_started(format!("cannot start `sh`: {err}")),
        };
        let mut group = ProcessGroup { pgid: child.id() };
        let stdin = child.stdin.take();
        let input = self.stdin;
        // A hook that never reads its input is fine: the write then fails, unnoticed.
        let writer = tokio::spawn(async move {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(&input).await;
                let _ = stdin.shutdown().await;
            }
        });
        let stdout = child.stdout.take().map(|out| tokio::spawn(capped(out)));
        let stderr = child.stderr.take().map(|err| tokio::spawn(capped(err)));
        let exit = match tokio::time::timeout(self.timeout, child.wait()).await {
            Ok(Ok(status)) => {
                group.pgid = None;
                Exit::Code(status.code())
            }
            Ok(Err(err)) => {
                group.kill();
                Exit::NotStarted(format!("cannot wait for the hook: {err}"))
            }
            Err(_) => {
                group.kill();
                Exit::TimedOut
            }
        };
        writer.abort();
        let read = |task: Option<tokio::task::JoinHandle<Vec<u8>>>| async move {
            let Some(task) = task else {
                return String::new();
            };
            // A grandchild holding the pipe open is killed with the group at a timeout; one
            // left behind by a hook that exited is not waited for long.
            match tokio::time::timeout(DRAIN_GRACE, task).await {
                Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                Ok(Err(_)) | Err(_) => String::new(),
            }
        };
        Finished {
            exit,
            stdout: read(stdout).await,
            stderr: read(stderr).await,
        }
    }

    fn command(&self) -> Result<Command, String> {
        let argv = ["sh".to_owned(), "-c".to_owned(), self.command.to_owned()];
        self.sandbox
            .hold_instruction_paths(self.workspace)
            .map_err(|err| err.to_string())?;
        // The agent's instructions stay read-only to a hook that may write the workspace.
        let read_only: Vec<PathBuf> = nanocrab_policy::INSTRUCTION_PATHS
            .iter()
            .map(|name| self.workspace.join(name.trim_end_matches('/')))
            .collect();
        let cwd = self
            .sandbox
            .default_cwd(self.workspace, None)
            .map_err(|err| err.to_string())?;
        let wrapped = self
            .sandbox
            .wrap(&argv, self.workspace, &[], &read_only, None)
            .map_err(|err| err.to_string())?;
        let Some((program, args)) = wrapped.split_first() else {
            return Err("the command is empty".to_owned());
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        Ok(command)
    }
}

/// The first [`MAX_HOOK_OUTPUT`] bytes of `stream`, read to its end.
async fn capped(mut stream: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(read) = stream.read(&mut buf).await {
        if read == 0 {
            break;
        }
        let room = MAX_HOOK_OUTPUT.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..read.min(room)]);
    }
    kept
}
