//! The user's hooks through the real binary: a `PreToolUse` hook that denies a command (the
//! model reads why), run in the OS sandbox with its own grant (it cannot write the workspace);
//! a `UserPromptSubmit` hook whose output reaches the model; `hooks list` and `hooks test`.

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, message_texts, tool_results};

/// A home with `hooks` (`$DIR` standing for the temp dir the scripts are in) and exec in
/// `full` mode, granted, so that only a hook stands in a command's way.
fn home_with_hooks(hooks: Value, scripts: &[(&str, &str)]) -> Home {
    let home = Home::new(Wire::OpenAi);
    let dir = home.user_home().join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in scripts {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let hooks: Value = serde_json::from_str(
        &hooks
            .to_string()
            .replace("$DIR", &dir.display().to_string()),
    )
    .unwrap();
    let mut config = home.base_config();
    config["tools"] = json!({
        "exec": {"mode": "full", "sandbox": {"mode": "required"}},
        "grants": ["exec:sh"],
    });
    config["hooks"] = hooks;
    home.write_config(config);
    home
}

const GUARD: &str = r#"#!/bin/sh
input=$(cat)
# What a sandboxed hook may not do: write the workspace it reads.
touch "$CLAUDE_PROJECT_DIR/hook-was-here" 2>/dev/null
case "$input" in
  *'"rm '*) echo "rm is not allowed; move files to trash/ instead" >&2; exit 2 ;;
esac
exit 0
"#;

#[test]
fn a_pre_tool_use_hook_denies_a_command_and_the_model_reads_why() {
    let home = home_with_hooks(
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "sh $DIR/guard.sh", "timeout": 30}]}]}),
        &[("guard.sh", GUARD)],
    );
    std::fs::write(home.workspace().join("notes.md"), "keep me").unwrap();
    home.mock.push(Reply::tool_calls(vec![
        (
            "call_1".into(),
            "exec".into(),
            json!({"command": "rm notes.md"}),
        ),
        (
            "call_2".into(),
            "exec".into(),
            json!({"command": "echo kept"}),
        ),
    ]));
    home.mock.push(Reply::text("I left the file alone."));
    assert_eq!(home.ask("delete notes.md").trim(), "I left the file alone.");
    let requests = home.requests();
    let dir = home.user_home().join("hooks").display().to_string();
    let results: Vec<(String, String, bool)> = tool_results(&requests[1].body)
        .into_iter()
        .map(|(id, text, is_error)| {
            // The allowed command's output, without its untrusted-data fence.
            let text = if text.contains("kept") {
                "kept".to_owned()
            } else {
                text
            };
            (id, text, is_error)
        })
        .collect();
    assert_eq!(
        results,
        [
            (
                "call_1".to_owned(),
                format!(
                    "Error: the PreToolUse hook `sh {dir}/guard.sh` denied exec: rm is not allowed; move files to trash/ instead"
                ),
                true
            ),
            ("call_2".to_owned(), "kept".to_owned(), false),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("notes.md")).unwrap(),
        "keep me"
    );
    assert!(
        !home.workspace().join("hook-was-here").exists(),
        "a hook with the default grant wrote the workspace"
    );
    let audit = home.run(home.nanocrab().args(["audit", "hooks", "--json"]));
    assert!(audit.success, "{}", audit.stderr);
    let runs: Vec<(String, String, String, Value)> = audit
        .stdout
        .lines()
        .map(|line| {
            let run: Value = serde_json::from_str(line).unwrap();
            (
                run["event"].as_str().unwrap().to_owned(),
                run["tool"].as_str().unwrap().to_owned(),
                run["decision"].as_str().unwrap().to_owned(),
                run["reason"].clone(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            (
                "PreToolUse".into(),
                "exec".into(),
                "proceed".into(),
                Value::Null
            ),
            (
                "PreToolUse".into(),
                "exec".into(),
                "deny".into(),
                json!("rm is not allowed; move files to trash/ instead")
            ),
        ]
    );
}

#[test]
fn a_prompt_hook_adds_context_the_model_sees() {
    let home = home_with_hooks(
        json!({"UserPromptSubmit": [{"hooks": [{"command": "echo 'The build is green.'"}]}]}),
        &[],
    );
    home.mock.push(Reply::text("Good to hear."));
    home.ask("how is the build?");
    assert_eq!(
        message_texts(&home.requests()[0].body),
        [(
            "user".to_owned(),
            "how is the build?\n\n[Context from the user's hooks]\nThe build is green.".to_owned()
        )]
    );
}

#[test]
fn hooks_list_and_test_show_what_each_hook_would_decide() {
    let home = home_with_hooks(
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"command": "sh $DIR/guard.sh", "timeout": 30}]}]}),
        &[("guard.sh", GUARD)],
    );
    let dir = home.user_home().join("hooks").display().to_string();
    let list = home.run(home.nanocrab().args(["hooks", "list"]));
    assert!(list.success, "{}", list.stderr);
    assert_eq!(
        list.stdout,
        format!(
            "PreToolUse\n  [Bash] sh {dir}/guard.sh\n      timeout 30 s · reads the workspace · no network · sandboxed\n"
        )
    );
    let test = home.run(home.nanocrab().args([
        "hooks",
        "test",
        "PreToolUse",
        "--input",
        r#"{"command": "rm -rf notes"}"#,
    ]));
    assert!(test.success, "{}", test.stderr);
    let verdict = test.stdout.split("\n\n").nth(1).unwrap_or_default();
    assert_eq!(
        verdict,
        format!(
            "PreToolUse `sh {dir}/guard.sh`: deny (exit 2)\n    reason: rm is not allowed; move files to trash/ instead\nTogether: the call is denied; the model reads: rm is not allowed; move files to trash/ instead\n"
        )
    );
}
