#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 7's bypass table through the tools themselves (read_file, write_file, edit_file,
//! list_dir, exec's working_dir and commands): the policy's answers reach the model unchanged,
//! and afterwards nothing outside the workspace, nor in its protected path, has changed.
//! crates/policy/tests/bypass_table.rs has the full table at the policy layer,
//! crates/memory/tests/memory_tools.rs memory_get's rows.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nanocrab_config::{ExecConfig, ExecMode, ToolsConfig};
use nanocrab_policy::{ExecPolicy, PathGuard};
use nanocrab_schema::ToolCall;
use nanocrab_tools::{
    ExecSandbox, ExecTool, Tool, ToolContext, ToolPolicy, ToolRegistry, builtin_registry,
};
use pretty_assertions::assert_eq;
use serde_json::json;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    /// The file tools as production builds them.
    registry: ToolRegistry,
    /// exec with a PATH that would find the workspace's `ls` if relative entries were kept.
    exec: ExecTool,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        for sub in ["ws/notes", "ws/secrets", "outside/sub", "home"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(ws.join("notes/a.md"), "a\n").unwrap();
        std::fs::write(ws.join("secrets/key"), "k\n").unwrap();
        std::fs::write(root.join("outside/secret"), "s\n").unwrap();
        std::fs::write(root.join("outside/hard_target"), "outside original\n").unwrap();
        std::fs::hard_link(root.join("outside/hard_target"), ws.join("hard")).unwrap();
        std::fs::write(root.join("outside/hard_edit_target"), "old\n").unwrap();
        std::fs::hard_link(root.join("outside/hard_edit_target"), ws.join("hard_edit")).unwrap();
        std::fs::hard_link(ws.join("secrets/key"), ws.join("hard_key")).unwrap();
        for (target, link) in [
            (root.join("outside/secret"), "link_file"),
            (root.join("outside"), "link_dir"),
            (PathBuf::from("../outside"), "relative_link"),
            (PathBuf::from("relative_link/sub"), "chain1"),
            (root.join("outside/new"), "dangling"),
            (PathBuf::from("../outside/new_rel"), "relative_dangling"),
            (PathBuf::from("secrets"), "to_secrets"),
        ] {
            symlink(target, ws.join(link)).unwrap();
        }
        // A program named like a safe bin in the workspace: it must never be the one run.
        std::fs::write(ws.join("ls"), "#!/bin/sh\necho PWNED\n").unwrap();
        std::fs::set_permissions(ws.join("ls"), std::fs::Permissions::from_mode(0o755)).unwrap();

        let config = ToolsConfig {
            protected_paths: vec![PathBuf::from("secrets")],
            ..ToolsConfig::default()
        };
        let guard = Arc::new(PathGuard::new(&ws, &config, Some(&root.join("home"))).unwrap());
        let policy = ExecPolicy::new(&ExecConfig {
            mode: ExecMode::Allowlist,
            ..ExecConfig::default()
        })
        .unwrap();
        // `.`, an empty entry and a relative one would all find the workspace's `ls`.
        let env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), ".::bin:/usr/bin:/bin".into()),
            ("HOME".into(), root.join("home").into()),
        ];
        let exec = ExecTool::new(
            guard,
            policy,
            Duration::from_secs(10),
            env,
            ExecSandbox::unsandboxed(),
        );
        let registry = builtin_registry(
            &config,
            &ws,
            Some(&root.join("home")),
            None,
            ToolPolicy::default(),
            |_| Vec::new(),
        )
        .unwrap();
        Self {
            _dir: dir,
            root,
            ws,
            registry,
            exec,
        }
    }

    async fn call(&self, tool: &str, input: serde_json::Value) -> Result<String, String> {
        let ctx = ToolContext::new(&self.ws);
        if tool == "exec" {
            let prepared = self
                .exec
                .prepare(input, &ctx)
                .map_err(|err| err.to_string())?;
            return prepared
                .run
                .await
                .map(|output| output.text)
                .map_err(|err| err.to_string());
        }
        let call = ToolCall {
            id: "call_1".into(),
            name: tool.into(),
            input,
        };
        let result = self.registry.execute(&call, &ctx).await;
        if result.is_error {
            let message = result
                .content
                .strip_prefix("Error: ")
                .unwrap_or(&result.content);
            Err(message.to_owned())
        } else {
            // What was read, without the fence that labels it untrusted for the model (the
            // fence drops the content's last newline).
            Ok(
                match result.content.strip_prefix("<untrusted-data source=") {
                    Some(fenced) => {
                        let (_, body) = fenced.split_once('\n').unwrap();
                        body.strip_suffix("\n</untrusted-data>").unwrap().to_owned()
                    }
                    None => result.content,
                },
            )
        }
    }

    fn outside(&self, access: &str, asked: &str, resolved: &Path) -> Result<String, String> {
        Err(format!(
            "cannot {access} `{asked}`: it resolves to {}, which is outside the workspace {}; no \
             other paths are allowed (tools.allowedPaths)",
            resolved.display(),
            self.ws.display()
        ))
    }
}

/// Every file under `dir` with its content (links as their target), to compare before and
/// after the attempts.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let value = if meta.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                pending.push(path.clone());
                "dir".to_owned()
            } else {
                std::fs::read_to_string(&path).unwrap()
            };
            files.insert(path, value);
        }
    }
    files
}

#[tokio::test]
async fn every_attempt_through_the_tools_is_denied_and_nothing_outside_changes() {
    let fx = Fixture::new();
    let (root, ws) = (&fx.root, &fx.ws);
    let outside_before = snapshot(&root.join("outside"));
    let secrets_before = snapshot(&ws.join("secrets"));
    let secret = root.join("outside/secret");
    let protected = |asked: &str, resolved: &str| {
        Err(format!(
            "cannot write `{asked}`: it resolves to {}, inside the protected path {}, which is \
             read-only (tools.protectedPaths)",
            ws.join(resolved).display(),
            ws.join("secrets").display()
        ))
    };
    let several = Err(
        "several commands (`;` or a newline) are not allowed in allowlist mode: \
                       run each command separately"
            .to_owned(),
    );
    let through_self = |program: &str, asked: &str| {
        Err(format!(
            "`{program}`: cannot read `{asked}`: it goes through /proc/self, which names the \
             process that opens it (the command, not nanocrab), so it cannot be checked; name \
             the file directly"
        ))
    };
    let rows: Vec<(&str, &str, serde_json::Value, Result<String, String>)> = vec![
        // read_file
        ("absolute path outside", "read_file", json!({"path": "/etc/passwd"}), fx.outside("read", "/etc/passwd", Path::new("/etc/passwd"))),
        ("`..` climbing", "read_file", json!({"path": "../outside/secret"}), fx.outside("read", "../outside/secret", &secret)),
        ("`~`", "read_file", json!({"path": "~/.ssh/id_rsa"}), fx.outside("read", "~/.ssh/id_rsa", &root.join("home/.ssh/id_rsa"))),
        ("`~user`", "read_file", json!({"path": "~root/.ssh/id_rsa"}), Err("cannot read `~root/.ssh/id_rsa`: `~root` (another user's home) is not supported; use an absolute path".into())),
        ("symlink to a file out", "read_file", json!({"path": "link_file"}), fx.outside("read", "link_file", &secret)),
        ("symlink to a dir out", "read_file", json!({"path": "link_dir/secret"}), fx.outside("read", "link_dir/secret", &secret)),
        ("relative symlink to a dir out", "read_file", json!({"path": "relative_link/secret"}), fx.outside("read", "relative_link/secret", &secret)),
        ("/proc/self/root", "read_file", json!({"path": "/proc/self/root/etc/passwd"}), fx.outside("read", "/proc/self/root/etc/passwd", Path::new("/etc/passwd"))),
        ("NUL byte", "read_file", json!({"path": "notes/a.md\u{0}"}), Err(format!("cannot read {}: file name contained an unexpected NUL byte", ws.join("notes/a.md\u{0}").display()))),
        ("hard link to an outside file (allowed: it is the file, as a copy would be)", "read_file", json!({"path": "hard"}), Ok("outside original".into())),
        // write_file
        ("write `..` climbing", "write_file", json!({"path": "../outside/pwned", "content": "x"}), fx.outside("write", "../outside/pwned", &root.join("outside/pwned"))),
        ("write through a symlinked dir", "write_file", json!({"path": "link_dir/pwned", "content": "x"}), fx.outside("write", "link_dir/pwned", &root.join("outside/pwned"))),
        ("write a dangling symlink out", "write_file", json!({"path": "dangling", "content": "x"}), fx.outside("write", "dangling", &root.join("outside/new"))),
        ("write a relative dangling symlink out", "write_file", json!({"path": "relative_dangling", "content": "x"}), fx.outside("write", "relative_dangling", &root.join("outside/new_rel"))),
        ("write `~`", "write_file", json!({"path": "~/.bashrc", "content": "x"}), fx.outside("write", "~/.bashrc", &root.join("home/.bashrc"))),
        ("write the protected path", "write_file", json!({"path": "secrets/key", "content": "x"}), protected("secrets/key", "secrets/key")),
        ("write the protected path via a link", "write_file", json!({"path": "to_secrets/key", "content": "x"}), protected("to_secrets/key", "secrets/key")),
        ("write fullwidth dots (allowed: a new folder in the workspace)", "write_file", json!({"path": "．．/outside/pwned", "content": "x"}), Ok(format!("Wrote 1 bytes to {}", ws.join("．．/outside/pwned").display()))),
        ("write a hard link to an outside file (allowed: replaces the name, not the inode)", "write_file", json!({"path": "hard", "content": "replaced\n"}), Ok(format!("Wrote 9 bytes to {}", ws.join("hard").display()))),
        ("write a hard link to a protected file (allowed: replaces the name, not the inode)", "write_file", json!({"path": "hard_key", "content": "replaced\n"}), Ok(format!("Wrote 9 bytes to {}", ws.join("hard_key").display()))),
        // edit_file
        ("edit a symlink out", "edit_file", json!({"path": "link_file", "old_text": "s", "new_text": "x"}), fx.outside("write", "link_file", &secret)),
        ("edit `..` climbing", "edit_file", json!({"path": "../outside/secret", "old_text": "s", "new_text": "x"}), fx.outside("write", "../outside/secret", &secret)),
        ("edit the protected path", "edit_file", json!({"path": "secrets/key", "old_text": "k", "new_text": "x"}), protected("secrets/key", "secrets/key")),
        ("edit a hard link to an outside file (allowed: replaces the name, not the inode)", "edit_file", json!({"path": "hard_edit", "old_text": "old", "new_text": "new"}), Ok(format!("Edited {}", ws.join("hard_edit").display()))),
        // list_dir
        ("list a symlinked dir out", "list_dir", json!({"path": "link_dir"}), fx.outside("read", "link_dir", &root.join("outside"))),
        ("list a chain of links out", "list_dir", json!({"path": "chain1"}), fx.outside("read", "chain1", &root.join("outside/sub"))),
        ("list the parent", "list_dir", json!({"path": ".."}), fx.outside("read", "..", root)),
        ("list the root", "list_dir", json!({"path": "/"}), fx.outside("read", "/", Path::new("/"))),
        ("list `~`", "list_dir", json!({"path": "~"}), fx.outside("read", "~", &root.join("home"))),
        // exec working_dir
        ("working_dir absolute outside", "exec", json!({"command": "ls", "working_dir": "/etc"}), fx.outside("read", "/etc", Path::new("/etc"))),
        ("working_dir `..`", "exec", json!({"command": "ls", "working_dir": ".."}), fx.outside("read", "..", root)),
        ("working_dir `~`", "exec", json!({"command": "ls", "working_dir": "~"}), fx.outside("read", "~", &root.join("home"))),
        ("working_dir symlink out", "exec", json!({"command": "ls", "working_dir": "link_dir"}), fx.outside("read", "link_dir", &root.join("outside"))),
        ("working_dir relative symlink out", "exec", json!({"command": "ls", "working_dir": "relative_link/sub"}), fx.outside("read", "relative_link/sub", &root.join("outside/sub"))),
        ("working_dir /proc/self/root", "exec", json!({"command": "ls", "working_dir": "/proc/self/root/tmp"}), fx.outside("read", "/proc/self/root/tmp", Path::new("/tmp"))),
        ("working_dir a file", "exec", json!({"command": "ls", "working_dir": "notes/a.md"}), Err(format!("working_dir {} is not an existing directory", ws.join("notes/a.md").display()))),
        // exec commands
        ("chaining", "exec", json!({"command": "ls; cat /etc/passwd"}), several),
        ("symlink out as an argument", "exec", json!({"command": "cat link_file"}), Err(format!("`cat`: {}", fx.outside("read", "link_file", &secret).unwrap_err()))),
        ("glued option value through a link", "exec", json!({"command": "date -flink_file"}), Err(format!("`date`: {}", fx.outside("read", "link_file", &secret).unwrap_err()))),
        ("substitution writing outside", "exec", json!({"command": "echo $(touch ../outside/pwned)"}), Err("command substitution `$(...)` in `$(touch ../outside/pwned)` is not allowed in allowlist mode: run the inner command separately and use its output".into())),
        ("redirection outside", "exec", json!({"command": "ls > ../outside/pwned"}), Err("redirection `> ../outside/pwned` is not allowed in allowlist mode: use read_file and write_file for files, or pipe with `|`".into())),
        ("/proc/self/cwd in the command", "exec", json!({"command": "ls /proc/self/cwd/.."}), through_self("ls", "/proc/self/cwd/..")),
        ("interpreter", "exec", json!({"command": "python3 -c 'open(\"../outside/pwned\", \"w\")'"}), Err("`python3` is a shell or interpreter that runs arbitrary code (`python3 -c`, `python3 -e`, a script or stdin), so allowlist mode refuses it even if it is in safeBins".into())),
        ("`./ls` from the workspace", "exec", json!({"command": "./ls"}), Err("`./ls`: programs must be named without a path in allowlist mode (`cat`, not `/bin/cat` or `./cat`); safe bins are looked up in PATH".into())),
        ("`ls` with `.` in PATH runs the real ls (allowed)", "exec", json!({"command": "ls notes"}), Ok("[stdout]\na.md\n".into())),
    ];
    let mut expected = Vec::new();
    let mut got = Vec::new();
    for (name, tool, input, outcome) in rows {
        got.push((name, fx.call(tool, input).await));
        expected.push((name, outcome));
    }
    assert_eq!(got, expected);

    // Nothing outside the workspace, nor in its protected path, changed: the hard links were
    // replaced by new files, their outside (and protected) inodes kept their content.
    assert_eq!(snapshot(&root.join("outside")), outside_before);
    assert_eq!(snapshot(&ws.join("secrets")), secrets_before);
    for (name, content) in [
        ("hard", "replaced\n"),
        ("hard_key", "replaced\n"),
        ("hard_edit", "new\n"),
    ] {
        assert_eq!(
            std::fs::read_to_string(ws.join(name)).unwrap(),
            content,
            "{name}"
        );
        assert_eq!(
            std::fs::metadata(ws.join(name)).unwrap().nlink(),
            1,
            "{name}"
        );
    }
}
