#![allow(clippy::unwrap_used, clippy::expect_used)]
//! exec: what runs, what is refused, timeouts, output caps and the scrubbed environment.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nanocrab_config::{ExecConfig, ExecMode, SandboxConfig, SandboxMode, ToolsConfig};
use nanocrab_policy::{ExecPolicy, PathGuard};
use nanocrab_tools::{ExecSandbox, ExecTool, SandboxLauncher, Tool, ToolContext, ToolError};
use pretty_assertions::assert_eq;
use serde_json::json;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/notes")).unwrap();
        std::fs::write(root.join("ws/notes/a.md"), "b\na\nb\n").unwrap();
        Self { _dir: dir, root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn tool(&self, mode: ExecMode, timeout: Duration) -> ExecTool {
        self.sandboxed_tool(mode, timeout, ExecSandbox::unsandboxed())
    }

    fn sandboxed_tool(&self, mode: ExecMode, timeout: Duration, sandbox: ExecSandbox) -> ExecTool {
        let guard = PathGuard::new(
            &self.ws(),
            &ToolsConfig::default(),
            Some(&self.root.join("home")),
        )
        .unwrap();
        let policy = ExecPolicy::new(&ExecConfig {
            mode,
            ..ExecConfig::default()
        })
        .unwrap();
        let env: Vec<(OsString, OsString)> = vec![
            (
                "PATH".into(),
                format!(
                    "/usr/local/bin:/usr/bin:/bin:.:relative/bin:{}",
                    self.ws().join("bin").display()
                )
                .into(),
            ),
            ("HOME".into(), self.root.join("home").into()),
            ("OPENAI_API_KEY".into(), "sk-secret-must-not-leak".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ];
        ExecTool::new(Arc::new(guard), policy, timeout, env, sandbox)
    }

    async fn run(&self, tool: &ExecTool, input: serde_json::Value) -> Result<String, String> {
        let ctx = ToolContext::new(self.ws());
        let prepared = tool.prepare(input, &ctx).map_err(|err| err.to_string())?;
        prepared
            .run
            .await
            .map(|output| output.text)
            .map_err(|err| err.to_string())
    }
}

#[tokio::test]
async fn allowlist_runs_a_pipeline_without_a_shell() {
    let fx = Fixture::new();
    let tool = fx.tool(ExecMode::Allowlist, Duration::from_secs(10));
    assert_eq!(
        fx.run(
            &tool,
            json!({"command": "cat notes/a.md | sort | uniq -c | wc -l"})
        )
        .await,
        Ok("[stdout]\n2\n".to_owned())
    );
    assert_eq!(
        fx.run(&tool, json!({"command": "ls", "working_dir": "notes"}))
            .await,
        Ok("[stdout]\na.md\n".to_owned())
    );
    // `$HOME` reaches echo literally: there is no shell to expand it.
    assert_eq!(
        fx.run(&tool, json!({"command": "echo '$HOME' \"a  b\""}))
            .await,
        Ok("[stdout]\n$HOME a  b\n".to_owned())
    );
}

#[tokio::test]
async fn failures_report_stderr_and_the_exit_code() {
    let fx = Fixture::new();
    let tool = fx.tool(ExecMode::Allowlist, Duration::from_secs(10));
    let out = fx
        .run(&tool, json!({"command": "cat missing.txt"}))
        .await
        .unwrap();
    assert!(
        out.starts_with("[stderr]\ncat: missing.txt: No such file or directory\n"),
        "{out}"
    );
    assert!(out.ends_with("[exit code 1]\n"), "{out}");
}

#[tokio::test]
async fn denials_are_errors_with_the_reason() {
    let fx = Fixture::new();
    let tool = fx.tool(ExecMode::Allowlist, Duration::from_secs(10));
    for (command, reason) in [
        (
            "ls && rm -rf /",
            "`&&` is not allowed in allowlist mode: run each command separately",
        ),
        (
            "echo x > notes/a.md",
            "redirection `> notes/a.md` is not allowed in allowlist mode",
        ),
        (
            "bash -c 'rm -rf /'",
            "`bash` is a shell or interpreter that runs arbitrary code",
        ),
        (
            "cat $(ls)",
            "command substitution `$(...)` in `$(ls)` is not allowed",
        ),
        (
            "cat /etc/passwd",
            "`cat`: cannot read `/etc/passwd`: it resolves to /etc/passwd",
        ),
        ("rm -rf notes", "`rm` is not a safe bin"),
    ] {
        let err = fx
            .run(&tool, json!({"command": command}))
            .await
            .unwrap_err();
        assert!(err.starts_with(reason), "{command}: {err}");
    }
    assert!(fx.ws().join("notes/a.md").exists());
    let err = fx
        .run(&tool, json!({"command": "ls", "working_dir": "../.."}))
        .await
        .unwrap_err();
    assert!(
        err.starts_with("cannot read `../..`: it resolves to"),
        "{err}"
    );
    let deny = fx.tool(ExecMode::Deny, Duration::from_secs(10));
    assert_eq!(
        fx.run(&deny, json!({"command": "ls"})).await.unwrap_err(),
        "exec is disabled by configuration (tools.exec.mode is \"deny\"); no command can run"
    );
}

#[tokio::test]
async fn the_child_environment_is_scrubbed() {
    let fx = Fixture::new();
    let tool = fx.tool(ExecMode::Full, Duration::from_secs(10));
    let out = fx
        .run(&tool, json!({"command": "env | sort"}))
        .await
        .unwrap();
    assert!(!out.contains("sk-secret-must-not-leak"), "{out}");
    assert!(!out.contains("OPENAI_API_KEY"), "{out}");
    assert!(out.contains("LANG=C.UTF-8\n"), "{out}");
    // Relative PATH entries and those inside the workspace are dropped so the workspace
    // cannot shadow a program.
    assert!(out.contains("PATH=/usr/local/bin:/usr/bin:/bin\n"), "{out}");
}

#[tokio::test]
async fn full_mode_runs_through_sh_in_the_working_dir() {
    let fx = Fixture::new();
    let tool = fx.tool(ExecMode::Full, Duration::from_secs(10));
    assert_eq!(
        fx.run(
            &tool,
            json!({"command": "pwd && echo err >&2; exit 3", "working_dir": "notes"})
        )
        .await,
        Ok(format!(
            "[stdout]\n{}\n[stderr]\nerr\n[exit code 3]\n",
            fx.ws().join("notes").display()
        ))
    );
}

// On a paused clock the timeout fires only once nothing can run and no blocking work is under
// way: here, once the grandchild has opened the pipe the test holds, so by then the command
// has printed `started`, on a machine of any speed. Whether the grandchild was killed is read
// from the pipe: it closes when the grandchild dies, with nothing written if it was killed.
#[tokio::test(start_paused = true)]
async fn timeout_kills_the_whole_group_including_grandchildren() {
    let fx = Fixture::new();
    let tool = fx.tool(ExecMode::Full, Duration::from_millis(700));
    let pipe = fx.ws().join("grandchild");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap()
            .success()
    );
    let opened = {
        let pipe = pipe.clone();
        tokio::task::spawn_blocking(move || std::fs::File::open(pipe).unwrap())
    };
    let command = format!(
        "echo started; (sleep 30; echo survived) > {} & sleep 60",
        pipe.display()
    );
    let ctx = ToolContext::new(fx.ws());
    let err = tool
        .prepare(json!({"command": command}), &ctx)
        .unwrap()
        .run
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::TimedOut { .. }));
    assert_eq!(
        err.to_string(),
        "the command timed out after 0.7 s and was killed with its whole process group; output \
         so far:\n[stdout]\nstarted\n"
    );
    let mut pipe = opened.await.unwrap();
    let written = tokio::task::spawn_blocking(move || {
        let mut written = String::new();
        std::io::Read::read_to_string(&mut pipe, &mut written).unwrap();
        written
    })
    .await
    .unwrap();
    assert_eq!(written, "", "the backgrounded grandchild was not killed");
}

#[tokio::test]
async fn long_output_is_capped_keeping_head_and_tail() {
    let fx = Fixture::new();
    let lines: String = (0..5000).map(|n| format!("line {n}\n")).collect();
    std::fs::write(fx.ws().join("big.txt"), lines).unwrap();
    let tool = fx.tool(ExecMode::Allowlist, Duration::from_secs(10));
    let out = fx
        .run(&tool, json!({"command": "cat big.txt"}))
        .await
        .unwrap();
    assert!(out.chars().count() < 10_300, "{}", out.len());
    assert!(out.starts_with("[stdout]\nline 0\nline 1\n"));
    assert!(out.ends_with("line 4998\nline 4999\n"));
    assert!(out.contains(
        "characters omitted: output is capped at 10000 characters; narrow the command with \
         head, tail or grep ...]"
    ));
}

fn sandbox_config(mode: SandboxMode) -> SandboxConfig {
    SandboxConfig {
        mode,
        ..SandboxConfig::default()
    }
}

#[tokio::test]
async fn a_required_sandbox_that_cannot_start_refuses_every_command_naming_the_key() {
    let fx = Fixture::new();
    let missing = SandboxLauncher {
        program: fx.root.join("no-such-nanocrab"),
        state_dir: fx.root.join("state"),
        agent_id: "main".into(),
    };
    for (launcher, reason) in [
        (None, "this process has no sandbox launcher".to_owned()),
        (
            Some(&missing),
            format!(
                "the sandbox launcher {} does not exist",
                missing.program.display()
            ),
        ),
    ] {
        let sandbox = ExecSandbox::from_config(&sandbox_config(SandboxMode::Required), launcher);
        let tool = fx.sandboxed_tool(ExecMode::Allowlist, Duration::from_secs(10), sandbox);
        assert_eq!(
            fx.run(&tool, json!({"command": "ls"})).await,
            Err(format!(
                "{reason}; exec is refused because tools.exec.sandbox.mode is `required` (set \
                 it to `auto` or `off` to run commands unsandboxed)"
            ))
        );
    }
    assert!(!fx.root.join("state").exists(), "nothing was set up");
}

#[tokio::test]
async fn auto_without_a_launcher_and_off_run_commands_unsandboxed() {
    let fx = Fixture::new();
    for mode in [SandboxMode::Auto, SandboxMode::Off] {
        let sandbox = ExecSandbox::from_config(&sandbox_config(mode), None);
        assert_eq!(sandbox.provider_name(), "off");
        let tool = fx.sandboxed_tool(ExecMode::Allowlist, Duration::from_secs(10), sandbox);
        assert_eq!(
            fx.run(&tool, json!({"command": "ls"})).await,
            Ok("[stdout]\nnotes\n".to_owned())
        );
    }
}
