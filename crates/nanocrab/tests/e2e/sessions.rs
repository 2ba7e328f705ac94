use nanocrab_testkit::Reply;
use serde_json::json;

use crate::harness::{Home, Wire};

#[test]
fn sessions_list_show_and_reset() {
    let home = Home::new(Wire::Anthropic);
    home.mock.push(Reply::tool_call(
        "call_ls",
        "list_dir",
        json!({"path": "."}),
    ));
    home.mock.push(Reply::text("The workspace is empty."));
    home.ask("what is in my workspace?");

    let list = home.nanocrab().args(["sessions", "list"]).output().unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(list.contains("cli:default"), "{list}");

    let show = home
        .nanocrab()
        .args(["sessions", "show", "cli:default"])
        .output()
        .unwrap();
    assert!(show.status.success());
    let show = String::from_utf8(show.stdout).unwrap();
    for needle in [
        "what is in my workspace?",
        "list_dir",
        "call_ls",
        "The workspace is empty.",
    ] {
        assert!(show.contains(needle), "{needle} missing:\n{show}");
    }

    let json_out = home
        .nanocrab()
        .args(["sessions", "show", "cli:default", "--json"])
        .output()
        .unwrap();
    let json_out = String::from_utf8(json_out.stdout).unwrap();
    let records: Vec<serde_json::Value> = json_out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(records.len() >= 4, "{json_out}");

    let reset = home
        .nanocrab()
        .args(["sessions", "reset", "cli:default"])
        .output()
        .unwrap();
    assert!(reset.status.success());
    home.mock.push(Reply::text("fresh"));
    home.ask("hello again");
    let last = home.requests().last().unwrap().body.clone();
    assert_eq!(
        last["messages"].as_array().unwrap().len(),
        1,
        "history was reset: {last}"
    );
    let archive = home.home().join("sessions/archive");
    assert_eq!(
        std::fs::read_dir(archive).unwrap().count(),
        1,
        "nothing is lost"
    );
}

#[test]
fn showing_an_unknown_session_is_an_error() {
    let home = Home::new(Wire::Anthropic);
    let run = home.run(home.nanocrab().args(["sessions", "show", "cli:nope"]));
    assert!(!run.success);
    assert!(run.stderr.contains("cli:nope"));
}
