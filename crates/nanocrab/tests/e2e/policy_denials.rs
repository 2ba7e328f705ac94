use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, tool_results};

/// Sends all `calls` as one parallel tool-call reply and returns the results the model got.
fn results_for(home: &Home, calls: &[(&str, Value)]) -> Vec<(String, String, bool)> {
    home.mock.push(Reply::tool_calls(
        calls
            .iter()
            .enumerate()
            .map(|(i, (name, input))| (format!("call_{i}"), (*name).to_owned(), input.clone()))
            .collect(),
    ));
    home.mock.push(Reply::text("done"));
    home.ask("try these");
    let requests = home.requests();
    tool_results(&requests.last().unwrap().body)
}

#[test]
fn every_path_escape_is_denied_and_reported_to_the_model() {
    let home = Home::new(Wire::Anthropic);
    let ws = home.workspace();
    let outside = home.user_home().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "TOP-SECRET").unwrap();
    std::fs::write(home.user_home().join("home-secret.txt"), "TOP-SECRET").unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), ws.join("file-link")).unwrap();
    let sibling = home.user_home().join("workspace2");
    std::fs::create_dir_all(&sibling).unwrap();

    let calls = [
        ("read_file", json!({"path": "../outside/secret.txt"})),
        ("read_file", json!({"path": outside.join("secret.txt")})),
        ("read_file", json!({"path": "~/home-secret.txt"})),
        ("read_file", json!({"path": "link/secret.txt"})),
        ("read_file", json!({"path": "file-link"})),
        ("read_file", json!({"path": "sub/../../outside/secret.txt"})),
        ("read_file", json!({"path": "link/../outside/secret.txt"})),
        (
            "write_file",
            json!({"path": "link/new.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "file-link", "content": "overwritten"}),
        ),
        (
            "write_file",
            json!({"path": "../workspace2/x.txt", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "../outside/secret.txt", "old_text": "TOP", "new_text": "NOT"}),
        ),
        ("list_dir", json!({"path": "/"})),
        ("list_dir", json!({"path": "link"})),
        ("exec", json!({"command": "ls", "working_dir": "/"})),
    ];
    let results = results_for(&home, &calls);

    assert_eq!(results.len(), calls.len());
    for ((name, input), (_, text, is_error)) in calls.iter().zip(&results) {
        assert!(is_error, "{name} {input} was allowed: {text}");
        assert!(
            !text.contains("TOP-SECRET"),
            "{name} {input} leaked: {text}"
        );
        assert!(
            text.len() > 20,
            "{name} {input}: the error says why: {text}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "TOP-SECRET"
    );
    assert!(!outside.join("new.txt").exists());
    assert!(!sibling.join("x.txt").exists());
}

#[test]
fn every_exec_bypass_is_denied_and_reported_to_the_model() {
    let home = Home::new(Wire::OpenAi);
    let ws = home.workspace();
    std::fs::write(ws.join("keep.txt"), "still here").unwrap();

    let commands = [
        "ls && rm keep.txt",
        "ls; rm keep.txt",
        "ls || rm keep.txt",
        "ls & rm keep.txt",
        "echo hi > out.txt",
        "echo hi >> out.txt",
        "cat < /etc/passwd",
        "echo `rm keep.txt`",
        "echo $(rm keep.txt)",
        "echo $HOME",
        "(rm keep.txt)",
        "{ rm keep.txt; }",
        "bash -c 'rm keep.txt'",
        "sh -c 'rm keep.txt'",
        "python3 -c 'import os; os.remove(\"keep.txt\")'",
        "node -e 'require(\"fs\").unlinkSync(\"keep.txt\")'",
        "perl -e 'unlink \"keep.txt\"'",
        "rm keep.txt",
        "/bin/rm keep.txt",
        "FOO=1 rm keep.txt",
        "ls | sh",
        "cat /etc/passwd",
        "cat ../../../etc/passwd",
        "cat ~/.bashrc",
    ];
    let calls: Vec<(&str, Value)> = commands
        .iter()
        .map(|c| ("exec", json!({"command": c})))
        .collect();
    let results = results_for(&home, &calls);

    assert_eq!(results.len(), commands.len());
    for (command, (_, text, is_error)) in commands.iter().zip(&results) {
        assert!(is_error, "`{command}` was allowed: {text}");
        assert!(text.len() > 20, "`{command}`: the error says why: {text}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("keep.txt")).unwrap(),
        "still here"
    );
    assert!(!ws.join("out.txt").exists());
}

#[test]
fn an_allowlisted_pipeline_runs() {
    let home = Home::new(Wire::Anthropic);
    std::fs::write(home.workspace().join("names.txt"), "bob\nada\nbob\n").unwrap();

    let results = results_for(
        &home,
        &[(
            "exec",
            json!({"command": "cat names.txt | sort | uniq | tr a-z A-Z"}),
        )],
    );

    assert_eq!(results.len(), 1);
    assert!(!results[0].2, "{results:?}");
    assert!(results[0].1.contains("ADA\nBOB"), "{results:?}");
}

#[test]
fn exec_deny_mode_refuses_everything() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["tools"] = json!({"exec": {"mode": "deny"}});
    home.write_config(config);

    let results = results_for(&home, &[("exec", json!({"command": "ls"}))]);

    assert!(results[0].2, "{results:?}");
}
