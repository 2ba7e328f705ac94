//! Approvals through the CLI: a guarded call waits for the person at the terminal, runs only
//! on a yes, and lands in the audit log with the answer.

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, Wire, tool_results};

/// A home whose exec runs shell commands (guarded: each needs a grant or an approval), with
/// the model scripted to run `command` and then say "done".
fn shell_home(command: &str) -> Home {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["tools"] = json!({"exec": {"mode": "full"}});
    home.write_config(config);
    home.mock.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": command}),
    ));
    home.mock.push(Reply::text("done"));
    home
}

/// Runs one turn with `answer` typed on stdin; returns stderr and the tool result the model got.
fn turn_answering(home: &Home, answer: &str) -> (String, (String, String, bool)) {
    let run = home.run(
        home.nanocrab()
            .args(["agent", "-m", "make the file"])
            .write_stdin(answer),
    );
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.stdout, "done\n");
    let requests = home.requests();
    let result = tool_results(&requests[1].body).remove(0);
    (run.stderr, result)
}

fn audit(home: &Home, args: &[&str]) -> String {
    let run = home.run(home.nanocrab().arg("audit").args(args));
    assert!(run.success, "{}", run.stderr);
    run.stdout
}

#[test]
fn a_shell_command_runs_once_the_user_says_yes_and_the_audit_log_shows_who() {
    let home = shell_home("echo approved > made.txt && echo made");
    let (stderr, result) = turn_answering(&home, "y\n");
    assert!(
        stderr.contains(&format!(
            "? exec wants to run `echo approved > made.txt && echo made` (sh -c) in {}\n    risk: guarded; needs: exec:sh\n    allow? [y]es once, [a]lways in this session, [n]o: ",
            home.workspace().canonicalize().unwrap().display()
        )),
        "{stderr}"
    );
    assert_eq!(
        result,
        (
            "call_1".to_owned(),
            "<untrusted-data source=\"exec echo approved > made.txt && echo made\">\n[stdout]\nmade\n</untrusted-data>".to_owned(),
            false
        )
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("made.txt")).unwrap(),
        "approved\n"
    );

    let list = audit(&home, &["list"]);
    assert!(
        list.contains("exec        ok      guarded · approval allowed_once  cli:default  run `echo approved > made.txt && echo made` (sh -c)"),
        "{list}"
    );
    let shown = audit(&home, &["show", "1"]);
    let approval = shown
        .lines()
        .find(|line| line.starts_with("  approval"))
        .unwrap();
    assert!(approval.ends_with("(allowed_once, by cli)"), "{shown}");
    let granted = shown
        .lines()
        .find(|line| line.starts_with("  granted"))
        .unwrap();
    assert!(granted.contains("exec:sh (approval "), "{shown}");
    assert!(granted.ends_with(" by cli (once))"), "{shown}");

    let json_line = audit(&home, &["list", "--json", "--session", "cli:default"]);
    let record: serde_json::Value = serde_json::from_str(json_line.trim()).unwrap();
    assert_eq!(
        (
            &record["tool"],
            &record["status"],
            &record["risk"],
            &record["requested"],
            &record["approval"]["result"],
            &record["approval"]["by"],
        ),
        (
            &json!("exec"),
            &json!("ok"),
            &json!("guarded"),
            &json!(["exec:sh"]),
            &json!("allowed_once"),
            &json!("cli"),
        )
    );
    assert_eq!(
        audit(&home, &["list", "--session", "cli:other"]),
        "no tool calls match\n"
    );
}

#[test]
fn a_no_is_reported_to_the_model_and_nothing_runs() {
    let home = shell_home("touch made.txt");
    let (_, (_, text, is_error)) = turn_answering(&home, "n\n");
    assert!(is_error);
    assert!(
        text.starts_with("Error: cli denied exec (approval ")
            && text.ends_with("). Do not retry it; ask the user what to do instead."),
        "{text}"
    );
    assert!(!home.workspace().join("made.txt").exists());
    assert!(audit(&home, &["list"]).contains("exec        denied  guarded · approval denied"));
}

#[test]
fn with_nobody_at_stdin_a_guarded_call_is_denied() {
    let home = shell_home("touch made.txt");
    // stdin is closed at once: nobody will answer.
    let (_, (_, text, is_error)) = turn_answering(&home, "");
    assert!(is_error);
    assert_eq!(
        text,
        "Error: exec needs approval (guarded) for exec:sh, and no one can be asked here: stdin \
         closed before an answer. Do without it, or tell the user it must be granted in config \
         (tools.grants)."
    );
    assert!(!home.workspace().join("made.txt").exists());
}

#[test]
fn a_config_grant_runs_without_asking() {
    let home = shell_home("touch made.txt");
    let mut config = home.base_config();
    config["tools"] = json!({"exec": {"mode": "full"}, "grants": ["exec:sh"]});
    home.write_config(config);
    let (stderr, (_, _, is_error)) = turn_answering(&home, "");
    assert!(!is_error);
    assert!(!stderr.contains("allow?"), "{stderr}");
    assert!(home.workspace().join("made.txt").exists());
}

#[test]
fn a_bad_grant_is_a_config_error_naming_the_file_and_key() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["tools"] = json!({"grants": ["exec:git", "exe:rm"]});
    home.write_config(config);
    let run = home.agent("hi", &[]);
    assert!(!run.success);
    assert_eq!(
        run.stderr,
        format!(
            "error: tools ({}): tools.grants[1]: unknown capability `exe`; known: fs.read, \
             fs.write, exec, net, message, spawn, schedule, memory.write, secret, mcp, browser\n",
            home.config_path().display()
        )
    );
}
