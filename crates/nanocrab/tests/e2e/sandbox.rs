//! The OS sandbox of `exec` (Landlock + seccomp), through the real binary: commands the model
//! runs in `full` mode — a script it wrote, `make`, `cargo`, `python3` — cannot write outside
//! the workspace or open a network socket, and what they hit comes back to the model as
//! ordinary error output. These machines (and CI) have Landlock, so nothing here is skipped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, tool_results};

/// A home whose exec runs anything through `sh -c`, with `sandbox` as `tools.exec.sandbox`;
/// shell commands and the network are granted in config, so no approval is asked: what stops
/// the commands here is the OS sandbox alone.
fn full_exec_home(sandbox: Value) -> Home {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["tools"] = json!({
        "exec": {"mode": "full", "sandbox": sandbox},
        "grants": ["exec:sh", "net"],
    });
    home.write_config(config);
    home
}

/// Plays `steps` as consecutive model replies (each a batch of tool calls), then "done";
/// returns the text of every tool result the model got, in order.
fn run_steps(home: &Home, steps: &[Vec<(&str, Value)>]) -> Vec<String> {
    for (step, calls) in steps.iter().enumerate() {
        home.mock.push(Reply::tool_calls(
            calls
                .iter()
                .enumerate()
                .map(|(i, (name, input))| {
                    (
                        format!("call_{step}_{i}"),
                        (*name).to_owned(),
                        input.clone(),
                    )
                })
                .collect(),
        ));
    }
    home.mock.push(Reply::text("done"));
    home.ask("build it");
    let requests = home.requests();
    tool_results(&requests.last().unwrap().body)
        .into_iter()
        .map(|(_, text, _)| unfenced(text))
        .collect()
}

/// A command's output without the `<untrusted-data>` fence every one comes in (checked here).
fn unfenced(text: String) -> String {
    if !text.starts_with("<untrusted-data source=\"exec ") {
        return text;
    }
    let (_, body) = text.split_once('\n').unwrap();
    format!("{}\n", body.strip_suffix("\n</untrusted-data>").unwrap())
}

fn exec(command: impl Into<String>) -> (&'static str, Value) {
    ("exec", json!({"command": command.into()}))
}

/// A path outside the workspace (in the test's home directory) that the sandbox must keep
/// the command from creating.
fn outside(home: &Home, name: &str) -> PathBuf {
    home.user_home().join(name)
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn a_script_the_agent_wrote_writes_in_the_workspace_but_not_outside_it() {
    let home = full_exec_home(json!({}));
    let target = outside(&home, "escaped-script.txt");
    let script = "#!/bin/sh\necho inside > inside.txt\necho escaped > \"$1\"\necho after\n";

    let results = run_steps(
        &home,
        &[
            vec![(
                "write_file",
                json!({"path": "escape.sh", "content": script}),
            )],
            vec![exec(format!("sh escape.sh {}", shown(&target)))],
        ],
    );

    assert_eq!(
        results[1],
        format!(
            "[stdout]\nafter\n[stderr]\nescape.sh: 3: cannot create {}: Permission denied\n",
            shown(&target)
        )
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert!(!target.exists());
    let tools = &home.requests()[0].body["tools"];
    let exec = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "exec")
        .unwrap();
    assert_eq!(
        exec["function"]["description"],
        "Run a shell command (sh -c). Timeout 60s. Sandboxed: writes in the workspace and \
         $TMPDIR, no network."
    );
}

#[test]
fn make_cannot_write_outside_the_workspace() {
    let home = full_exec_home(json!({}));
    let target = outside(&home, "escaped-make.txt");
    let makefile = format!(
        "all:\n\t@echo made > built.txt\n\t@echo escaped > {}\n",
        shown(&target)
    );

    let results = run_steps(
        &home,
        &[
            vec![(
                "write_file",
                json!({"path": "Makefile", "content": makefile}),
            )],
            vec![exec("make")],
        ],
    );

    assert_eq!(
        results[1],
        format!(
            "[stderr]\n/bin/sh: 1: cannot create {}: Permission denied\n\
             make: *** [Makefile:3: all] Error 2\n[exit code 2]\n",
            shown(&target)
        )
    );
    assert!(home.workspace().join("built.txt").exists());
    assert!(!target.exists());
}

#[test]
fn a_cargo_build_script_cannot_write_outside_the_workspace() {
    let home = full_exec_home(json!({}));
    let target = outside(&home, "escaped-cargo.txt");
    let ws = home.workspace().join("tiny");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(
        ws.join("build.rs"),
        format!(
            "fn main() {{\n    match std::fs::write({:?}, \"escaped\") {{\n        \
             Ok(()) => println!(\"cargo:warning=ESCAPED\"),\n        \
             Err(err) => println!(\"cargo:warning=BLOCKED {{err}}\"),\n    }}\n}}\n",
            shown(&target)
        ),
    )
    .unwrap();
    // The toolchain's own cargo and rustc: the rustup proxies would look for their home
    // under HOME, which is the test's.
    let cargo = PathBuf::from(env!("CARGO"));
    let rustc = cargo.with_file_name("rustc");
    let command = format!(
        "cd tiny && RUSTC={} CARGO_HOME=$PWD/.cargo-home CARGO_TARGET_DIR=$PWD/target \
         {} build --offline 2>&1 | grep -o 'BLOCKED.*\\|ESCAPED'",
        shown(&rustc),
        shown(&cargo)
    );

    let results = run_steps(&home, &[vec![exec(command)]]);

    assert_eq!(
        results[0],
        "[stdout]\nBLOCKED Permission denied (os error 13)\n"
    );
    assert!(!target.exists());
    assert!(
        ws.join("target/debug/tiny").exists(),
        "the build itself ran"
    );
}

/// TCP and UDP to a listener this test holds on loopback, and a Unix socket pair, from
/// python3; prints one line each.
fn python_sockets(port: u16) -> String {
    format!(
        "python3 -c '
import socket
for name, make in [
    (\"tcp\", lambda: socket.create_connection((\"127.0.0.1\", {port}), timeout=5)),
    (\"udp\", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
    (\"tcp6\", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM)),
    (\"unix\", lambda: socket.socketpair()[0]),
]:
    try:
        make().close()
        print(name, \"ok\")
    except OSError as err:
        print(name, err)
'"
    )
}

#[test]
fn python_cannot_open_a_network_socket_without_network() {
    let home = full_exec_home(json!({}));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();

    let results = run_steps(&home, &[vec![exec(python_sockets(port))]]);

    assert_eq!(
        results[0],
        "[stdout]\ntcp [Errno 1] Operation not permitted\nudp [Errno 1] Operation not \
         permitted\ntcp6 [Errno 1] Operation not permitted\nunix ok\n"
    );
    assert!(listener.accept().is_err(), "nothing connected");
}

#[test]
fn python_connects_when_the_config_allows_network() {
    let home = full_exec_home(json!({"network": true}));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();

    let results = run_steps(&home, &[vec![exec(python_sockets(port))]]);

    assert_eq!(results[0], "[stdout]\ntcp ok\nudp ok\ntcp6 ok\nunix ok\n");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_ok(), "the connection arrived");
}

#[test]
fn memory_beyond_the_limit_fails_to_allocate() {
    let home = full_exec_home(json!({"memoryMb": 256}));
    let command = "python3 -c '
try:
    block = bytearray(1 << 30)
    print(\"allocated\")
except MemoryError:
    print(\"MemoryError\")
'";

    let results = run_steps(&home, &[vec![exec(command)]]);

    assert_eq!(results[0], "[stdout]\nMemoryError\n");
}

#[test]
fn a_read_only_workspace_leaves_only_the_scratch_directory_writable() {
    let home = full_exec_home(json!({"workspaceAccess": "ro", "scope": "shared"}));
    std::fs::write(home.workspace().join("notes.txt"), "kept\n").unwrap();
    let scratch = home.home().join("state/sandbox/shared");

    let results = run_steps(
        &home,
        &[vec![exec(
            "cat notes.txt; echo changed > notes.txt; echo $TMPDIR; mktemp -u >/dev/null && \
             echo tmp > \"$TMPDIR/t.txt\" && cat \"$TMPDIR/t.txt\"",
        )]],
    );

    assert_eq!(
        results[0],
        format!(
            "[stdout]\nkept\n{}\ntmp\n[stderr]\nsh: 1: cannot create notes.txt: Permission denied\n",
            shown(&scratch)
        )
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("notes.txt")).unwrap(),
        "kept\n"
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&scratch).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

#[test]
fn without_workspace_access_commands_run_in_the_agents_scratch_directory() {
    let home = full_exec_home(json!({"workspaceAccess": "none"}));

    let results = run_steps(
        &home,
        &[vec![
            exec("pwd; echo x > here.txt && ls"),
            ("exec", json!({"command": "ls", "working_dir": "."})),
        ]],
    );

    let scratch = home.home().join("state/sandbox/agent-main");
    assert_eq!(
        results,
        [
            format!("[stdout]\n{}\nhere.txt\n", shown(&scratch)),
            "Error: working_dir is not available: commands run in their scratch directory \
             (tools.exec.sandbox.workspaceAccess is `none`)"
                .to_owned(),
        ]
    );
}

#[test]
fn the_sandbox_can_be_turned_off() {
    let home = full_exec_home(json!({"mode": "off"}));
    let target = outside(&home, "written-unsandboxed.txt");

    let results = run_steps(
        &home,
        &[vec![exec(format!("echo free > {}", shown(&target)))]],
    );

    assert_eq!(results[0], "(no output)\n");
    assert!(target.exists());
}

#[test]
fn the_launcher_reports_setup_failures_with_its_exit_codes() {
    let home = Home::new(Wire::OpenAi);
    let policy = json!({
        "workspace": home.workspace(),
        "workspaceAccess": "rw",
        "writableRoots": [],
        "tmpDir": null,
        "network": false,
        "limits": {"addressSpaceBytes": null, "cpuSeconds": null, "fileSizeBytes": null, "openFiles": null},
    })
    .to_string();

    let missing = home
        .nanocrab()
        .args(["__sandbox", &policy, "--", "no-such-program-here"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(127));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr),
        "nanocrab sandbox: cannot run no-such-program-here: No such file or directory (os error 2)\n"
    );

    let bad = home
        .nanocrab()
        .args(["__sandbox", "{}", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(126));
    assert!(
        String::from_utf8_lossy(&bad.stderr).starts_with("nanocrab sandbox: invalid policy: "),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    let ok = home
        .nanocrab()
        .args([
            "__sandbox",
            &policy,
            "--",
            "sh",
            "-c",
            "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        "NoNewPrivs:\t1\nSeccomp:\t2\n"
    );
}

#[test]
fn allowed_paths_are_writable_like_the_workspace() {
    let home = Home::new(Wire::OpenAi);
    let shared = home.user_home().join("shared-notes");
    std::fs::create_dir_all(&shared).unwrap();
    let mut config = home.base_config();
    config["tools"] =
        json!({"exec": {"mode": "full"}, "allowedPaths": [shared], "grants": ["exec:sh"]});
    home.write_config(config);
    let target = outside(&home, "escaped-allowed.txt");

    let results = run_steps(
        &home,
        &[vec![exec(format!(
            "echo ok > {}/note.txt; echo no > {}",
            shown(&shared),
            shown(&target)
        ))]],
    );

    assert_eq!(
        results[0],
        format!(
            "[stderr]\nsh: 1: cannot create {}: Permission denied\n[exit code 2]\n",
            shown(&target)
        )
    );
    assert_eq!(
        std::fs::read_to_string(shared.join("note.txt")).unwrap(),
        "ok\n"
    );
    assert!(!target.exists());
}

#[test]
fn with_session_scope_each_conversation_has_its_own_scratch_directory() {
    let home = full_exec_home(json!({"workspaceAccess": "none", "scope": "session"}));
    home.mock.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": "pwd; echo $TMPDIR"}),
    ));
    home.mock.push(Reply::text("done"));
    let run = home.agent("where am I?", &["--session", "cli:one"]);
    assert!(run.success, "{}", run.stderr);
    let scratch = home.home().join("state/sandbox/session-cli:one");
    assert_eq!(
        tool_results(&home.requests()[1].body)
            .into_iter()
            .map(|(_, text, _)| unfenced(text))
            .collect::<Vec<_>>(),
        [format!("[stdout]\n{0}\n{0}\n", shown(&scratch))]
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&scratch).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}
