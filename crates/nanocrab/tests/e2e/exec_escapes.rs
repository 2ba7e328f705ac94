//! What a fooled model tries through `exec` in `full` mode beyond writing outside the workspace
//! (sandbox.rs): reading nanocrab's environment through `/proc`, and writing the protected
//! paths and the agent's instructions. Each is played with and without bubblewrap, and as root
//! and as an ordinary user where the tests run as root (as CI does).

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, Wire, tool_results};

/// An API key in nanocrab's own environment, where docs/security.md says keys may live.
const ENV_SECRET: &str = "sk-env-5ecret-in-the-environment";

#[derive(Debug, Clone, Copy)]
enum User {
    /// Whoever runs the tests.
    Tester,
    /// `nobody`, when the tests run as root.
    Nobody,
}

/// Every (bubblewrap, user) the machine can play.
fn setups() -> Vec<(bool, User)> {
    let mut users = vec![User::Tester];
    if rustix::process::geteuid().is_root() {
        users.push(User::Nobody);
    }
    [true, false]
        .into_iter()
        .flat_map(|bwrap| users.iter().map(move |user| (bwrap, *user)))
        .collect()
}

/// A home whose exec runs anything through `sh -c` (granted, so no approval is asked), with
/// `tools` merged into its tools config.
fn full_exec_home(bubblewrap: bool, tools: serde_json::Value) -> Home {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["tools"] = json!({
        "exec": {"mode": "full", "sandbox": {"bubblewrap": bubblewrap}},
        "grants": ["exec:sh"],
    });
    for (key, value) in tools.as_object().unwrap() {
        config["tools"][key] = value.clone();
    }
    home.write_config(config);
    home
}

/// Runs one turn in which the model calls exec with `command` as `user`, with [`ENV_SECRET`]
/// in nanocrab's environment; returns what the model got back and every request body.
fn exec_as(home: &Home, user: User, command: &str) -> (String, String) {
    home.mock.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": command}),
    ));
    home.mock.push(Reply::text("done"));
    let mut cmd = match user {
        User::Tester => home.nanocrab(),
        User::Nobody => home.nanocrab_as_nobody(),
    };
    let run = home.run(
        cmd.env("NANOCRAB_E2E_KEY", ENV_SECRET)
            .args(["agent", "-m", "do it"]),
    );
    assert!(run.success, "{}\n{}", run.stdout, run.stderr);
    let requests = home.requests();
    let (_, result, _) = tool_results(&requests.last().unwrap().body)
        .into_iter()
        .next()
        .unwrap();
    let bodies = requests
        .iter()
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    // The fence's first and last lines, which name the command and vary.
    let lines: Vec<&str> = result.lines().collect();
    (
        format!("{}\n", lines[1..lines.len() - 1].join("\n")),
        bodies,
    )
}

/// One shell script that tries each of `attempts` and says, per line, whether it was
/// `written` or `refused`; and what it must print: every attempt refused except those that
/// write `fine` (an ordinary file, which stays writable).
fn attempts_script(attempts: &[&str]) -> (String, String) {
    let script = attempts
        .iter()
        .map(|attempt| {
            format!(
                "if sh -c '{attempt}' 2>/dev/null; then echo '{attempt}: written'; \
                 else echo '{attempt}: refused'; fi"
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let expected = attempts
        .iter()
        .map(|attempt| {
            let outcome = if attempt.starts_with("echo fine") {
                "written"
            } else {
                "refused"
            };
            format!("{attempt}: {outcome}\n")
        })
        .collect::<String>();
    (script, expected)
}

/// Whether the command ran in a PID namespace of bubblewrap's, printed by the command itself.
const PID_NAMESPACE: &str = "if [ \"$(cat /proc/1/comm)\" = bwrap ]; then echo 'pid namespace: bwrap'; \
                             else echo \"pid namespace: the machine's\"; fi";

#[test]
fn a_command_cannot_read_nanocrabs_environment_through_proc() {
    // The attack: the parent's environ, reversed past the redaction; then every process
    // the command can see. The last line shows that reading an environ works at all.
    let attack = format!(
        "{{ tr '\\0' '\\n' < /proc/$PPID/environ; \
         for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$e\"; done; }} 2>/dev/null \
         | grep NANOCRAB_E2E_KEY | rev; \
         grep -ac PATH= /proc/self/environ; {PID_NAMESPACE}"
    );
    for (bubblewrap, user) in setups() {
        let home = full_exec_home(bubblewrap, json!({}));
        let (result, bodies) = exec_as(&home, user, &attack);
        let namespace = if bubblewrap { "bwrap" } else { "the machine's" };
        assert_eq!(
            result,
            format!("[stdout]\n1\npid namespace: {namespace}\n"),
            "bubblewrap {bubblewrap}, {user:?}"
        );
        let reversed: String = ENV_SECRET.chars().rev().collect();
        assert!(
            !bodies.contains(ENV_SECRET) && !bodies.contains(&reversed),
            "bubblewrap {bubblewrap}, {user:?}: the key reached the model"
        );
    }
}

#[test]
fn commands_cannot_write_the_protected_paths() {
    let attempts = [
        "echo evil >> SOUL.md",
        "rm SOUL.md",
        "mv SOUL.md SOUL.old",
        "echo evil > memory/MEMORY.md",
        "mv memory memory.old",
        "rm -r memory",
        "echo evil > skills/web/SKILL.md",
        "mkdir skills/evil",
        "mv skills skills.old",
        "echo fine > notes.md",
        "echo fine > memory/2026-11-26.md",
    ];
    let (script, expected) = attempts_script(&attempts);
    for (bubblewrap, user) in setups() {
        let home = full_exec_home(
            bubblewrap,
            json!({"protectedPaths": ["SOUL.md", "memory/MEMORY.md", "skills"]}),
        );
        let workspace = home.workspace();
        std::fs::create_dir_all(workspace.join("memory")).unwrap();
        std::fs::create_dir_all(workspace.join("skills/web")).unwrap();
        for file in ["SOUL.md", "memory/MEMORY.md", "skills/web/SKILL.md"] {
            std::fs::write(workspace.join(file), "mine\n").unwrap();
        }

        let (result, _) = exec_as(&home, user, &script);

        assert_eq!(
            result,
            format!("[stdout]\n{expected}"),
            "bubblewrap {bubblewrap}, {user:?}"
        );
        for file in ["SOUL.md", "memory/MEMORY.md", "skills/web/SKILL.md"] {
            assert_eq!(
                std::fs::read_to_string(workspace.join(file)).unwrap(),
                "mine\n",
                "bubblewrap {bubblewrap}, {user:?}: {file}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(workspace.join("notes.md")).unwrap(),
            "fine\n"
        );
    }
}

#[test]
fn commands_cannot_write_or_create_the_agents_instructions() {
    // No protectedPaths and a workspace without the bootstrap files: the instruction files
    // and skills/ are read-only all the same, missing ones included.
    let attempts = [
        "echo evil >> AGENTS.md",
        "echo evil > SOUL.md",
        "echo evil > USER.md",
        "mkdir -p skills/evil",
        "rm -r skills",
        "echo fine > notes.md",
    ];
    let (script, expected) = attempts_script(&attempts);
    for (bubblewrap, user) in setups() {
        let home = full_exec_home(bubblewrap, json!({}));
        let workspace = home.workspace();
        std::fs::write(workspace.join("AGENTS.md"), "mine\n").unwrap();

        let (result, _) = exec_as(&home, user, &script);

        assert_eq!(
            result,
            format!("[stdout]\n{expected}"),
            "bubblewrap {bubblewrap}, {user:?}"
        );
        assert_eq!(
            std::fs::read_to_string(workspace.join("AGENTS.md")).unwrap(),
            "mine\n"
        );
        // Held by empty ones, which the system prompt reads as absent.
        assert_eq!(
            std::fs::read_to_string(workspace.join("SOUL.md")).unwrap(),
            ""
        );
        assert_eq!(
            std::fs::read_dir(workspace.join("skills")).unwrap().count(),
            0
        );
    }
}
