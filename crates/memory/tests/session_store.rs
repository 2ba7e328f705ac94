#![allow(clippy::unwrap_used, clippy::expect_used)]

use nanocrab_memory::{SessionEntry, SessionStore};
use nanocrab_schema::{ContentBlock, LlmMessage, Role, SessionKey, ToolCall, ToolResult};
use pretty_assertions::assert_eq;

fn key() -> SessionKey {
    SessionKey::parse("cli:default").unwrap()
}

fn tool_call(id: &str) -> LlmMessage {
    LlmMessage {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse(ToolCall {
            id: id.into(),
            name: "read_file".into(),
            input: serde_json::json!({"path": "a.md"}),
        })],
    }
}

#[test]
fn appended_messages_load_back_with_metadata_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    let messages = vec![
        LlmMessage::user("hi"),
        tool_call("c1"),
        LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::ok("c1", "content"))],
        },
        LlmMessage::assistant("done"),
    ];
    store
        .append(&key(), &[SessionEntry::now(messages[0].clone())])
        .unwrap();
    let rest: Vec<_> = messages[1..]
        .iter()
        .cloned()
        .map(SessionEntry::now)
        .collect();
    store.append(&key(), &rest).unwrap();

    let text = std::fs::read_to_string(store.path(&key())).unwrap();
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains(r#""_type":"metadata""#),
        "{text}"
    );
    assert_eq!(text.lines().count(), 5);
    assert_eq!(store.load(&key()).unwrap().messages(), messages);
}

#[test]
fn a_torn_last_line_is_skipped_and_the_next_append_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    store
        .append(&key(), &[SessionEntry::now(LlmMessage::user("one"))])
        .unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(store.path(&key()))
        .unwrap();
    std::io::Write::write_all(&mut file, br#"{"role":"assistant","content":[{"type":"te"#).unwrap();

    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![LlmMessage::user("one")]
    );
    store
        .append(&key(), &[SessionEntry::now(LlmMessage::user("two"))])
        .unwrap();
    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![LlmMessage::user("one"), LlmMessage::user("two")]
    );
}

#[test]
fn calls_without_results_are_answered_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    let entries: Vec<_> = [LlmMessage::user("go"), tool_call("c1")]
        .into_iter()
        .map(SessionEntry::now)
        .collect();
    store.append(&key(), &entries).unwrap();

    let messages = store.load(&key()).unwrap().messages();
    assert_eq!(
        messages[2],
        LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::error(
                "c1",
                "Error: interrupted: no result was recorded for this call"
            ))],
        }
    );
}

#[test]
fn long_tool_results_are_shortened_in_the_file_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    let long = LlmMessage {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResult::ok(
            "c1",
            "x".repeat(20_000),
        ))],
    };
    store.append(&key(), &[SessionEntry::now(long)]).unwrap();
    let loaded = store.load(&key()).unwrap().messages();
    let stored = loaded[0].tool_results().next().unwrap();
    assert!(stored.content.len() < 16_200);
    assert!(
        stored.content.ends_with("the model saw all of it]"),
        "{}",
        &stored.content[16_000..]
    );
}

#[test]
fn reset_archives_and_list_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    store
        .append(
            &key(),
            &[SessionEntry::now(LlmMessage::user("plan my week"))],
        )
        .unwrap();
    let list = store.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (
            list[0].key.as_str(),
            list[0].messages,
            list[0].title.as_str()
        ),
        ("cli:default", 1, "plan my week")
    );

    let archived = store.reset(&key()).unwrap().unwrap();
    assert!(archived.starts_with(dir.path().join("archive")));
    assert!(!store.exists(&key()));
    assert_eq!(store.load(&key()).unwrap().entries, vec![]);
    assert_eq!(store.list().unwrap(), vec![]);
    assert_eq!(store.reset(&key()).unwrap(), None);
}
