use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, Wire, message_texts, system_prompt, tool_results};

#[test]
fn tool_call_round_trip_writes_the_file_and_returns_the_result_under_the_same_call_id() {
    for wire in Wire::ALL {
        let home = Home::new(wire);
        home.mock.push(Reply::tool_call(
            "call_todo_1",
            "write_file",
            json!({"path": "notes/todo.md", "content": "- [ ] buy milk\n"}),
        ));
        home.mock
            .push(Reply::text("Your todo list is in notes/todo.md."));

        let stdout = home.ask("make a todo list in notes/todo.md");

        assert_eq!(stdout, "Your todo list is in notes/todo.md.\n", "{wire:?}");
        assert_eq!(
            std::fs::read_to_string(home.workspace().join("notes/todo.md")).unwrap(),
            "- [ ] buy milk\n"
        );
        let requests = home.requests();
        assert_eq!(requests.len(), 2, "{wire:?}");
        let results = tool_results(&requests[1].body);
        assert_eq!(results.len(), 1, "{wire:?}: {results:?}");
        assert_eq!(results[0].0, "call_todo_1");
        assert!(!results[0].2, "{wire:?}: {results:?}");
        assert!(results[0].1.contains("notes/todo.md"), "{results:?}");
    }
}

#[test]
fn history_persists_across_turns() {
    for wire in Wire::ALL {
        let home = Home::new(wire);
        home.mock.push(Reply::text("Nice to meet you, Ada."));
        home.mock.push(Reply::text("You are Ada."));

        home.ask("my name is Ada");
        assert_eq!(home.ask("what is my name?"), "You are Ada.\n");

        let second = &home.requests()[1].body;
        assert_eq!(
            message_texts(second),
            vec![
                ("user".to_owned(), "my name is Ada".to_owned()),
                ("assistant".to_owned(), "Nice to meet you, Ada.".to_owned()),
                ("user".to_owned(), "what is my name?".to_owned()),
            ],
            "{wire:?}"
        );
    }
}

#[test]
fn bootstrap_files_and_memory_reach_the_system_prompt_and_edits_apply_at_once() {
    let home = Home::new(Wire::Anthropic);
    let ws = home.workspace();
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    for (file, marker) in [
        ("AGENTS.md", "MARKER-AGENTS"),
        ("SOUL.md", "MARKER-SOUL"),
        ("USER.md", "MARKER-USER"),
        ("TOOLS.md", "MARKER-TOOLS"),
        ("IDENTITY.md", "MARKER-IDENTITY"),
        ("memory/MEMORY.md", "MARKER-LONG-TERM-MEMORY"),
    ] {
        std::fs::write(ws.join(file), format!("{marker}\n")).unwrap();
    }
    std::fs::create_dir_all(ws.join("skills/weather")).unwrap();
    std::fs::write(
        ws.join("skills/weather/SKILL.md"),
        "---\nname: weather\ndescription: MARKER-SKILL forecast lookups\n---\nUse curl.\n",
    )
    .unwrap();
    home.mock.push(Reply::text("ok"));
    home.mock.push(Reply::text("ok"));

    home.ask("hello");
    let system = system_prompt(&home.requests()[0].body);
    for marker in [
        "MARKER-AGENTS",
        "MARKER-SOUL",
        "MARKER-USER",
        "MARKER-TOOLS",
        "MARKER-IDENTITY",
        "MARKER-LONG-TERM-MEMORY",
        "MARKER-SKILL",
        "skills/weather/SKILL.md",
    ] {
        assert!(system.contains(marker), "{marker} missing from:\n{system}");
    }

    std::fs::write(ws.join("SOUL.md"), "MARKER-EDITED-SOUL\n").unwrap();
    home.ask("again");
    let system = system_prompt(&home.requests()[1].body);
    assert!(system.contains("MARKER-EDITED-SOUL"), "{system}");
    assert!(!system.contains("MARKER-SOUL\n"), "{system}");
}

#[test]
fn broken_tool_arguments_are_repaired() {
    for wire in Wire::ALL {
        let home = Home::new(wire);
        home.mock.push(Reply::tool_call_raw(
            "call_broken",
            "write_file",
            r#"{"path": "fixed.md", "content": "repaired",}"#,
        ));
        home.mock.push(Reply::text("done"));

        home.ask("write it");

        assert_eq!(
            std::fs::read_to_string(home.workspace().join("fixed.md")).unwrap(),
            "repaired",
            "{wire:?}"
        );
    }
}

#[test]
fn think_tags_never_reach_the_answer() {
    let home = Home::new(Wire::OpenAi);
    home.mock
        .push(Reply::text("<think>the user greets me</think>Hello!"));

    assert_eq!(home.ask("hi"), "Hello!\n");
}

#[test]
fn a_runaway_tool_loop_stops_at_max_tool_iterations() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["agents"]["defaults"]["maxToolIterations"] = json!(3);
    home.write_config(config);
    for i in 0..3 {
        home.mock.push(Reply::tool_call(
            format!("call_{i}"),
            "list_dir",
            json!({"path": format!("dir{i}")}),
        ));
    }

    let stdout = home.ask("loop forever");

    assert_eq!(home.requests().len(), 3);
    assert!(
        stdout.contains("3"),
        "the stop message names the limit: {stdout}"
    );
    assert!(
        stdout.to_lowercase().contains("maxtooliterations") || stdout.contains("tool"),
        "{stdout}"
    );
}

#[test]
fn a_repeated_identical_tool_call_is_stopped() {
    let home = Home::new(Wire::Anthropic);
    for i in 0..10 {
        home.mock.push(Reply::tool_call(
            format!("call_{i}"),
            "read_file",
            json!({"path": "same.md"}),
        ));
    }
    home.mock.push(Reply::text("giving up"));

    let run = home.agent("read it", &[]);

    let requests = home.requests();
    assert!(
        requests.len() < 10,
        "the loop was not stopped: {} requests",
        requests.len()
    );
    let last_results = tool_results(&requests.last().unwrap().body);
    assert!(
        last_results
            .iter()
            .any(|(_, text, is_error)| *is_error && text.contains("repeat")),
        "the model was told it repeats itself: {last_results:?}\n{}",
        run.stdout
    );
}

#[test]
fn slash_commands_are_answered_without_the_model() {
    let home = Home::new(Wire::Anthropic);

    let help = home.ask("/help");

    assert!(help.contains("/new"), "{help}");
    assert!(help.contains("/reset"), "{help}");
    assert_eq!(home.requests().len(), 0);
}
