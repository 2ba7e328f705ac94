//! `nanocrab sessions list`: a table a person reads, and JSON a script reads.

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::harness::{Home, Wire};

#[test]
fn sessions_list_is_a_table_with_a_header_and_json_on_request() {
    let home = Home::new(Wire::Anthropic);
    home.mock.push(Reply::text("Hi."));
    home.ask("hello there");
    home.mock.push(Reply::text("Nothing due."));
    let run = home.agent("what is on my todo list today?", &["-s", "cli:work"]);
    assert!(run.success, "{}", run.stderr);

    let run = home.run(home.nanocrab().args(["sessions", "list", "--json"]));
    assert!(run.success, "{}", run.stderr);
    let listed: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let fields: Vec<(&str, u64, &str)> = listed
        .iter()
        .map(|s| {
            (
                s["key"].as_str().unwrap(),
                s["messages"].as_u64().unwrap(),
                s["title"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("cli:work", 2, "what is on my todo list today?"),
            ("cli:default", 2, "hello there"),
        ],
        "most recent first"
    );
    for session in &listed {
        for time in ["createdAt", "updatedAt"] {
            let stamp = session[time].as_str().unwrap();
            assert!(stamp.parse::<jiff::Timestamp>().is_ok(), "{time}: {stamp}");
        }
    }

    // The table: each value starts where its column's header does (the count ends where
    // MESSAGES does); the times are relative to the clock, so only their place is checked.
    let run = home.run(home.nanocrab().args(["sessions", "list"]));
    assert!(run.success, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let header = lines[0];
    let column = |name: &str| header.find(name).unwrap();
    assert!(header.starts_with("KEY "), "{header}");
    assert!(
        column("KEY") < column("MESSAGES")
            && column("MESSAGES") < column("UPDATED")
            && column("UPDATED") < column("TITLE"),
        "{header}"
    );
    assert_eq!(lines.len(), 1 + listed.len(), "{}", run.stdout);
    for ((key, messages, title), row) in fields.iter().zip(&lines[1..]) {
        assert_eq!(row[..column("MESSAGES")].trim_end(), *key, "{}", run.stdout);
        assert_eq!(
            row[column("MESSAGES")..column("MESSAGES") + "MESSAGES".len()].trim_start(),
            messages.to_string(),
            "{}",
            run.stdout
        );
        assert!(
            row[column("UPDATED")..column("TITLE")].ends_with("  "),
            "{}",
            run.stdout
        );
        assert_eq!(&row[column("TITLE")..], *title, "{}", run.stdout);
    }
}
