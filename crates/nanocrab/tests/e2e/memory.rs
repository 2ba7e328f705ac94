//! `nanocrab memory` and the memory tools through the real binary: the index is built from the
//! workspace's files, follows their edits, and answers the agent.

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, tool_results};

fn write(home: &Home, path: &str, text: &str) {
    let path = home.workspace().join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn memory(home: &Home, args: &[&str]) -> String {
    let run = home.run(home.nanocrab().arg("memory").args(args));
    assert!(run.success, "{}", run.stderr);
    run.stdout
}

/// A few hundred daily notes and one that matters.
fn home_with_notes() -> Home {
    let home = Home::new(Wire::Anthropic);
    for day in 1..=300 {
        write(
            &home,
            &format!(
                "memory/2026-{:02}-{:02}.md",
                day / 28 % 12 + 1,
                day % 28 + 1
            ),
            &format!("# Day {day}\nWalked {day} minutes. Read a chapter. Watered the plants.\n"),
        );
    }
    write(
        &home,
        "memory/MEMORY.md",
        "# People\n- Ada is my sister; she lives in Lisbon.\n\n# Health\n- Dentist: Dr. Okafor, every March.\n",
    );
    write(&home, "knowledge/bike.txt", "The bike lock code is 4711.\n");
    home
}

#[test]
fn memory_search_finds_the_right_note_among_hundreds() {
    let home = home_with_notes();
    let out = memory(&home, &["search", "who is my dentist?"]);
    assert!(
        out.starts_with("1. memory/MEMORY.md:4-5  1.00  (Health)\n   # Health\n   - Dentist: Dr. Okafor, every March.\n"),
        "{out}"
    );
    let json: Value = serde_json::from_str(&memory(
        &home,
        &["search", "bike lock", "--json", "--limit", "1"],
    ))
    .unwrap();
    assert_eq!(
        json,
        json!({
            "mode": {"mode": "keyword", "reason": "the model `all-minilm-l6-v2` is not installed; run `nanocrab models pull all-minilm-l6-v2`"},
            "hits": [{"path": "knowledge/bike.txt", "startLine": 1, "endLine": 1, "heading": "",
                      "snippet": "The bike lock code is 4711.", "score": 1.0}]
        })
    );
    let status = memory(&home, &["status"]);
    assert!(
        status.contains("files      302 (memory/ 301, knowledge/ 1)"),
        "{status}"
    );
}

#[test]
fn index_follows_edits_and_rebuilds_on_request() {
    let home = home_with_notes();
    let first = memory(&home, &["index"]);
    assert!(
        first.starts_with("302 files: 302 added, 0 changed, 0 removed;"),
        "{first}"
    );
    assert!(
        memory(&home, &["index"]).starts_with("302 files: 0 added, 0 changed, 0 removed; 0 chunks")
    );

    write(
        &home,
        "memory/MEMORY.md",
        "# People\n- Ada moved to Porto.\n",
    );
    std::fs::remove_file(home.workspace().join("knowledge/bike.txt")).unwrap();
    // Search brings the index up to date by itself.
    assert!(memory(&home, &["search", "Porto"]).starts_with("1. memory/MEMORY.md:1-2"));
    assert!(memory(&home, &["search", "lock code"]).starts_with("no matches"));

    let rebuilt = memory(&home, &["index", "--rebuild"]);
    assert!(
        rebuilt.starts_with("301 files: 301 added, 0 changed, 0 removed;"),
        "{rebuilt}"
    );
}

#[test]
fn the_agent_searches_memory_and_reads_the_lines_it_found() {
    let home = home_with_notes();
    home.mock.push(Reply::tool_call(
        "call_s",
        "memory_search",
        json!({"query": "dentist"}),
    ));
    home.mock.push(Reply::tool_call(
        "call_g",
        "memory_get",
        json!({"path": "memory/MEMORY.md", "start_line": 4, "end_line": 5}),
    ));
    home.mock.push(Reply::text("Dr. Okafor, in March."));

    assert_eq!(home.ask("who is my dentist?"), "Dr. Okafor, in March.\n");

    let requests = home.requests();
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"memory_search") && tools.contains(&"memory_get"),
        "{tools:?}"
    );
    assert_eq!(
        tool_results(&requests[1].body).last().unwrap().1,
        // The user's own note: shown as it is (a document's snippet would come fenced).
        "1. memory/MEMORY.md:4-5 (score 1.00)\n# Health\n- Dentist: Dr. Okafor, every March."
    );
    assert_eq!(
        tool_results(&requests[2].body).last().unwrap().1,
        "memory/MEMORY.md:4-5\n# Health\n- Dentist: Dr. Okafor, every March."
    );
}

#[test]
fn rag_mode_attaches_the_matching_notes_instead_of_the_whole_memory_file() {
    let home = home_with_notes();
    let mut config = home.base_config();
    config["memory"] = json!({"ragMode": true, "maxResults": 2});
    home.write_config(config);
    home.mock.push(Reply::text("Dr. Okafor."));

    let run = home.agent("who is my dentist?", &[]);
    assert!(run.success, "{}", run.stderr);
    assert!(
        run.stderr.contains("⌕ memory: memory/MEMORY.md:4-5"),
        "{}",
        run.stderr
    );
    let body = &home.requests()[0].body;
    let system = crate::harness::system_prompt(body);
    assert!(!system.contains("Lisbon"), "{system}");
    let question = &body["messages"][0]["content"];
    assert_eq!(question[0]["text"], "who is my dentist?");
    assert!(
        question[1]["text"]
            .as_str()
            .unwrap()
            .contains("memory/MEMORY.md:4-5\n# Health\n- Dentist: Dr. Okafor, every March."),
        "{question}"
    );
    assert!(!home.transcript().contains("Memory retrieved"));
}

#[test]
fn older_conversation_is_consolidated_after_the_answer_and_new_consolidates_the_rest() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["memory"] = json!({"consolidateAfter": 4});
    home.write_config(config);
    for answer in ["Noted.", "Lisbon it is."] {
        home.mock.push(Reply::text(answer));
    }
    home.ask("Ada moved to Lisbon.");
    home.ask("Plan a trip there in May.");
    home.mock.push(Reply::text("Booked."));
    home.mock.push(Reply::tool_call(
        "save",
        "save_memory",
        json!({"history_entry": "Ada moved to Lisbon; trip planned for May.",
               "memory_update": "# People\n- Ada (sister) lives in Lisbon.\n"}),
    ));
    let run = home.agent("Book the dentist.", &[]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.stdout, "Booked.\n", "the answer comes first");
    assert!(
        run.stderr.contains(
            "  ⟳ consolidating memory (4 messages)…\n  ⟳ memory: 4 messages consolidated into memory/HISTORY.md and memory/MEMORY.md"
        ),
        "progress first, then what was done: {}",
        run.stderr
    );
    let memory_dir = home.workspace().join("memory");
    assert_eq!(
        std::fs::read_to_string(memory_dir.join("MEMORY.md")).unwrap(),
        "# People\n- Ada (sister) lives in Lisbon.\n"
    );
    assert!(
        std::fs::read_to_string(memory_dir.join("HISTORY.md"))
            .unwrap()
            .ends_with("] Ada moved to Lisbon; trip planned for May.\n\n")
    );

    home.mock.push(Reply::tool_call(
        "save",
        "save_memory",
        json!({"history_entry": "Dentist to be booked.", "memory_update": ""}),
    ));
    assert!(home.ask("/new").starts_with("Started a new conversation."));
    assert!(
        std::fs::read_to_string(memory_dir.join("HISTORY.md"))
            .unwrap()
            .ends_with("] Dentist to be booked.\n\n")
    );
    // Both consolidations are searchable at once.
    let found = memory(&home, &["search", "trip May"]);
    assert!(found.starts_with("1. memory/HISTORY.md"), "{found}");
}

#[test]
fn conversations_are_searchable_when_index_sessions_is_on() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["memory"] = json!({"indexSessions": true});
    home.write_config(config);
    home.mock
        .push(Reply::text("Noted: the plumber Kwame is on 0117 496 0321."));
    home.ask("remember the plumber's number");
    let found = memory(&home, &["search", "plumber Kwame"]);
    assert!(
        found.starts_with("1. sessions/cli:default.jsonl:2-3"),
        "{found}"
    );
    assert!(
        memory(&home, &["status"]).contains("files      1 (memory/ 0, knowledge/ 0, sessions/ 1)")
    );
}
