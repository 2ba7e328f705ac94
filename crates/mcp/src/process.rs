//! The program of a stdio server: started in a process group of its own with a scrubbed
//! environment, its stderr kept (the last lines) to say why it failed, and its whole group
//! stopped with it.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::watch;

/// The variables of nanocrab's environment a server gets (and `LC_*`); the server's `env`
/// adds its own. Nothing else: provider keys and tokens stay with nanocrab.
pub const PASSED_ENV_VARS: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR", "TZ"];

/// How much of a server's stderr is kept: its last lines, and at most this many bytes.
const STDERR_LINES: usize = 20;
const STDERR_BYTES: usize = 2048;

/// How long a server has to end after its stdin closes, and again after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The environment of a server: `PATH`, `HOME`, `USER`, `LANG`, `LC_*`, `TERM`, `TMPDIR` and
/// `TZ` from `host` (nanocrab's environment), then `own` (the server's `env`) over them.
pub fn server_env(
    host: &[(String, String)],
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = host
        .iter()
        .filter(|(name, _)| PASSED_ENV_VARS.contains(&name.as_str()) || name.starts_with("LC_"))
        .cloned()
        .collect();
    env.extend(
        own.iter()
            .map(|(name, value)| (name.clone(), value.clone())),
    );
    env
}

/// The last lines a server wrote to stderr.
#[derive(Debug, Default)]
pub struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    fn push(&mut self, line: String) {
        self.bytes += line.len() + 1;
        self.lines.push_back(line);
        while self.lines.len() > STDERR_LINES || (self.bytes > STDERR_BYTES && self.lines.len() > 1)
        {
            if let Some(dropped) = self.lines.pop_front() {
                self.bytes -= dropped.len() + 1;
            }
        }
    }

    pub fn text(&self) -> String {
        let text = self.lines.iter().cloned().collect::<Vec<_>>().join("\n");
        // One line longer than the whole budget keeps its end, where the error usually is.
        let chars = text.chars().count();
        if chars <= STDERR_BYTES {
            return text;
        }
        format!(
            "…{}",
            text.chars().skip(chars - STDERR_BYTES).collect::<String>()
        )
    }
}

/// A running (or exited) server program.
pub struct ServerProcess {
    /// Its process id, which is also its process group's.
    pid: Option<rustix::process::Pid>,
    /// How it ended, once it has: `exit status 1`, `signal 9`.
    exit: watch::Receiver<Option<String>>,
    stderr: Arc<Mutex<StderrTail>>,
    /// Flips to true when stderr reaches its end (the group's last writer is gone).
    stderr_done: watch::Receiver<bool>,
}

/// Why a program could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start `{program}`: {source}")]
pub struct SpawnError {
    program: String,
    source: std::io::Error,
}

impl ServerProcess {
    /// Starts `program` with `args` and exactly `env`, in `cwd` when given; returns it and its
    /// stdout and stdin, which the MCP client talks over.
    pub fn spawn(
        program: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
        cwd: Option<&Path>,
    ) -> Result<(Self, ChildStdout, ChildStdin), SpawnError> {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that what it starts (npx starts node) is stopped with it.
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        let spawn_error = |source| SpawnError {
            program: program.to_owned(),
            source,
        };
        let mut child = command.spawn().map_err(spawn_error)?;
        let pipes = (child.stdout.take(), child.stdin.take(), child.stderr.take());
        let (Some(stdout), Some(stdin), Some(stderr)) = pipes else {
            return Err(spawn_error(std::io::Error::other(
                "its standard streams were not set up",
            )));
        };
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let (stderr_sender, stderr_done) = watch::channel(false);
        let lines = Arc::clone(&tail);
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr);
            let mut line = Vec::new();
            // A line is kept up to the tail's budget: a progress bar redrawn with `\r` or
            // binary output never ends one, and must not grow without end.
            while let Ok(read) = (&mut reader)
                .take(STDERR_BYTES as u64)
                .read_until(b'\n', &mut line)
                .await
            {
                if read == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                lines
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(text);
                line.clear();
            }
            let _ = stderr_sender.send(true);
        });
        let (exit_sender, exit) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await;
            // What it started (npx's node, a browser) may outlive it, and has no use without
            // it: the group goes too, now, while its id cannot yet belong to anyone else.
            if let Some(pid) = pid
                && let Err(err) =
                    rustix::process::kill_process_group(pid, rustix::process::Signal::KILL)
                && err != rustix::io::Errno::SRCH
            {
                tracing::debug!("cannot stop what the MCP server {pid:?} started: {err}");
            }
            let ended = match status {
                Ok(status) => match (
                    status.code(),
                    std::os::unix::process::ExitStatusExt::signal(&status),
                ) {
                    (Some(code), _) => format!("exit status {code}"),
                    (None, Some(signal)) => format!("signal {signal}"),
                    (None, None) => status.to_string(),
                },
                Err(err) => format!("an unknown end ({err})"),
            };
            let _ = exit_sender.send(Some(ended));
        });
        Ok((
            Self {
                pid,
                exit,
                stderr: tail,
                stderr_done,
            },
            stdout,
            stdin,
        ))
    }

    /// How it ended, if it has.
    pub fn exit(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// What it last wrote to stderr.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .text()
    }

    /// Waits, up to a moment, for it to end and for its last words on stderr: a server that
    /// broke a connection is usually exiting, and says why on stderr as it does.
    pub async fn settle(&self) {
        let mut exit = self.exit.clone();
        let mut stderr_done = self.stderr_done.clone();
        let _ = tokio::time::timeout(EXIT_GRACE, async {
            let _ = exit.wait_for(Option::is_some).await;
            let _ = stderr_done.wait_for(|done| *done).await;
        })
        .await;
    }

    /// Stops it once its stdin is closed: it gets a moment to end by itself, then SIGTERM, then
    /// SIGKILL, each for its whole process group.
    pub async fn stop(&self) {
        let mut exit = self.exit.clone();
        for signal in [rustix::process::Signal::TERM, rustix::process::Signal::KILL] {
            if tokio::time::timeout(EXIT_GRACE, exit.wait_for(Option::is_some))
                .await
                .is_ok()
            {
                return;
            }
            self.signal(signal);
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        if let Some(pid) = self.pid
            && let Err(err) = rustix::process::kill_process_group(pid, signal)
            && err != rustix::io::Errno::SRCH
        {
            tracing::debug!("cannot signal the MCP server's process group {pid:?}: {err}");
        }
    }
}

impl Drop for ServerProcess {
    /// A server still running when its connection goes (nanocrab exits without a shutdown) is
    /// killed with everything it started; without a runtime there is nothing to wait with.
    fn drop(&mut self) {
        if self.exit().is_none() {
            self.signal(rustix::process::Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_server_gets_only_the_plain_variables_and_its_own() {
        let host: Vec<(String, String)> = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/me"),
            ("LC_TIME", "de_DE.UTF-8"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("TZ", "Europe/Berlin"),
        ]
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
        let own = [
            ("GITHUB_TOKEN".to_owned(), "ghp_x".to_owned()),
            ("TZ".to_owned(), "UTC".to_owned()),
        ]
        .into();
        assert_eq!(
            server_env(&host, &own)
                .into_iter()
                .collect::<Vec<(String, String)>>(),
            [
                ("GITHUB_TOKEN", "ghp_x"),
                ("HOME", "/home/me"),
                ("LC_TIME", "de_DE.UTF-8"),
                ("PATH", "/usr/bin"),
                ("TZ", "UTC"),
            ]
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
        );
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_lines_within_its_budget() {
        let mut tail = StderrTail::default();
        for i in 0..30 {
            tail.push(format!("line {i}"));
        }
        assert_eq!(
            tail.text(),
            (10..30)
                .map(|i| format!("line {i}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let mut long = StderrTail::default();
        long.push("x".repeat(3000) + "END");
        let text = long.text();
        assert!(text.starts_with('…') && text.ends_with("END"), "{text}");
        assert_eq!(text.chars().count(), STDERR_BYTES + 1);
    }
}
