#![allow(clippy::unwrap_used, clippy::expect_used)]

use nanocrab_schema::{ContentBlock, LlmMessage, Role, SessionKey, ToolCall, ToolResult};
use nanocrab_sessions::{SessionEntry, SessionStore};
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
    let long = SessionEntry::now(LlmMessage {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResult::ok(
            "c1",
            "é".repeat(20_000),
        ))],
    });
    let live = long.clone();
    store
        .append(&key(), &[SessionEntry::now(tool_call("c1")), long])
        .unwrap();
    let session = store.load(&key()).unwrap();
    let ContentBlock::ToolResult(stored) = &session.entries[1].content[0] else {
        panic!("{:?}", session.entries[1]);
    };
    assert_eq!(
        stored.content,
        format!(
            "{}\n[transcript note: result shortened from 20000 to 16000 characters; the model saw all of it]",
            "é".repeat(16_000)
        )
    );
    assert_eq!(
        live.content[0],
        ContentBlock::ToolResult(ToolResult::ok("c1", "é".repeat(20_000)))
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

fn results(ids: &[&str]) -> LlmMessage {
    LlmMessage {
        role: Role::User,
        content: ids
            .iter()
            .map(|id| ContentBlock::ToolResult(ToolResult::ok(*id, "ok")))
            .collect(),
    }
}

fn interrupted(id: &str) -> ContentBlock {
    ContentBlock::ToolResult(ToolResult::error(
        id,
        "Error: interrupted: no result was recorded for this call",
    ))
}

fn store_with(dir: &std::path::Path, messages: &[LlmMessage]) -> SessionStore {
    let store = SessionStore::new(dir);
    let entries: Vec<_> = messages.iter().cloned().map(SessionEntry::now).collect();
    store.append(&key(), &entries).unwrap();
    store
}

#[test]
fn a_line_torn_inside_a_multibyte_character_costs_only_that_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[LlmMessage::user("one")]);
    let line = r#"{"role":"assistant","content":[{"type":"text","text":"crab 🦀"}]"#.as_bytes();
    // Cut in the middle of the four bytes of the emoji.
    let torn = &line[..line.len() - 6];
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(store.path(&key()))
        .unwrap();
    std::io::Write::write_all(&mut file, torn).unwrap();
    assert!(std::str::from_utf8(torn).is_err());

    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![LlmMessage::user("one")]
    );
}

#[test]
fn a_bad_line_in_the_middle_is_skipped_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[LlmMessage::user("one")]);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(store.path(&key()))
        .unwrap();
    std::io::Write::write_all(&mut file, b"not json at all\n{\"role\":\"robot\"}\n").unwrap();
    store
        .append(&key(), &[SessionEntry::now(LlmMessage::assistant("two"))])
        .unwrap();

    let session = store.load(&key()).unwrap();
    assert_eq!(session.metadata.as_ref().unwrap().key, key());
    assert_eq!(
        session.messages(),
        vec![LlmMessage::user("one"), LlmMessage::assistant("two")]
    );
}

#[test]
fn interrupted_calls_in_the_middle_are_answered_before_the_next_question() {
    let dir = tempfile::tempdir().unwrap();
    let two_calls = LlmMessage {
        role: Role::Assistant,
        content: vec![
            ContentBlock::text("Looking."),
            ContentBlock::ToolUse(ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                input: serde_json::json!({"path": "a.md"}),
            }),
            ContentBlock::ToolUse(ToolCall {
                id: "c2".into(),
                name: "read_file".into(),
                input: serde_json::json!({"path": "b.md"}),
            }),
        ],
    };
    let store = store_with(
        dir.path(),
        &[
            LlmMessage::user("go"),
            tool_call("c0"),
            LlmMessage::user("are you there?"),
            two_calls.clone(),
            results(&["c1"]),
            LlmMessage::assistant("half done"),
        ],
    );
    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![
            LlmMessage::user("go"),
            tool_call("c0"),
            LlmMessage {
                role: Role::User,
                content: vec![interrupted("c0")],
            },
            LlmMessage::user("are you there?"),
            two_calls,
            LlmMessage {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult(ToolResult::ok("c1", "ok")),
                    interrupted("c2"),
                ],
            },
            LlmMessage::assistant("half done"),
        ]
    );
}

#[test]
fn results_whose_call_was_lost_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(
        dir.path(),
        &[
            LlmMessage::user("go"),
            results(&["lost"]),
            LlmMessage::assistant("done"),
            LlmMessage {
                role: Role::Assistant,
                content: vec![],
            },
        ],
    );
    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![LlmMessage::user("go"), LlmMessage::assistant("done")]
    );
}

#[test]
fn the_title_is_the_first_line_of_the_first_question() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("{}\nsecond line", "a".repeat(70));
    let store = store_with(
        dir.path(),
        &[LlmMessage::user("   "), LlmMessage::user(long)],
    );
    let other = SessionKey::parse("telegram:42").unwrap();
    store
        .append(&other, &[SessionEntry::now(LlmMessage::user("hi\nthere"))])
        .unwrap();
    let titles: Vec<_> = store
        .list()
        .unwrap()
        .into_iter()
        .map(|s| (s.key.to_string(), s.messages, s.title))
        .collect();
    assert_eq!(
        titles,
        vec![
            ("telegram:42".to_owned(), 1, "hi…".to_owned()),
            ("cli:default".to_owned(), 2, format!("{}…", "a".repeat(60))),
        ]
    );
}

fn user(text: &str) -> SessionEntry {
    SessionEntry::now(LlmMessage::user(text))
}

/// What a store that never saw the session reads from the file.
fn fresh(dir: &std::path::Path) -> nanocrab_sessions::Session {
    SessionStore::new(dir)
        .load(&key())
        .unwrap()
        .as_ref()
        .clone()
}

fn append_raw(store: &SessionStore, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(store.path(&key()))
        .unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
}

#[test]
fn what_others_write_to_a_transcript_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[LlmMessage::user("one")]);
    assert_eq!(store.load(&key()).unwrap().entries.len(), 1);

    // Another process, or another store of this one, appends.
    SessionStore::new(dir.path())
        .append(&key(), &[user("two")])
        .unwrap();
    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![LlmMessage::user("one"), LlmMessage::user("two")]
    );

    // The user edits the file by hand: the last line goes.
    let text = std::fs::read_to_string(store.path(&key())).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    std::fs::write(store.path(&key()), format!("{}\n", kept.join("\n"))).unwrap();
    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![LlmMessage::user("one")]
    );
    assert_eq!(*store.load(&key()).unwrap(), fresh(dir.path()));
}

#[test]
fn an_edit_of_the_same_size_is_noticed_by_its_modification_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[LlmMessage::user("one")]);
    let path = store.path(&key());
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"one\"", "\"two\"")).unwrap();
    // An edit within the clock's granularity would keep the time; this one is a second later.
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(modified + std::time::Duration::from_secs(1))
        .unwrap();
    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![LlmMessage::user("two")]
    );
}

#[test]
fn a_reset_made_elsewhere_empties_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[LlmMessage::user("one")]);
    assert_eq!(store.load(&key()).unwrap().entries.len(), 1);

    // `nanocrab sessions reset` in another process.
    SessionStore::new(dir.path())
        .reset(&key())
        .unwrap()
        .unwrap();
    assert_eq!(store.load(&key()).unwrap().entries, vec![]);

    store.append(&key(), &[user("again")]).unwrap();
    let session = store.load(&key()).unwrap();
    assert_eq!(session.messages(), vec![LlmMessage::user("again")]);
    assert_eq!(*session, fresh(dir.path()));
    assert!(session.metadata.is_some());
}

#[test]
fn an_append_after_someone_elses_keeps_both() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[LlmMessage::user("one")]);
    assert_eq!(store.load(&key()).unwrap().entries.len(), 1);

    let other = serde_json::to_string(&user("from elsewhere")).unwrap();
    append_raw(&store, format!("{other}\n").as_bytes());
    store.append(&key(), &[user("three")]).unwrap();
    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![
            LlmMessage::user("one"),
            LlmMessage::user("from elsewhere"),
            LlmMessage::user("three")
        ]
    );
    assert_eq!(*store.load(&key()).unwrap(), fresh(dir.path()));
}

/// What the store keeps of its own appends (a torn line before them, a compaction, an
/// unsynced append, a shortened result) is what reading the file gives.
#[test]
fn what_the_store_keeps_of_its_appends_is_what_the_file_reads_as() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    store.append(&key(), &[user("one")]).unwrap();
    assert_eq!(*store.load(&key()).unwrap(), fresh(dir.path()));

    append_raw(&store, br#"{"role":"assistant","content":[{"type":"te"#);
    assert_eq!(*store.load(&key()).unwrap(), fresh(dir.path()));
    store
        .append(&key(), &[SessionEntry::now(tool_call("c1"))])
        .unwrap();
    store
        .append_unsynced(
            &key(),
            &[SessionEntry::now(LlmMessage {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult::ok(
                    "c1",
                    "x".repeat(20_000),
                ))],
            })],
        )
        .unwrap();
    // Written, if not yet synced: another reader sees it.
    assert_eq!(fresh(dir.path()).entries.len(), 3);
    assert_eq!(*store.load(&key()).unwrap(), fresh(dir.path()));
    store
        .append_compaction(
            &key(),
            &nanocrab_sessions::Compaction::new(2, "summary".to_owned()),
        )
        .unwrap();
    store.sync(&key()).unwrap();
    store
        .append(
            &key(),
            &[SessionEntry {
                model: Some("mock/echo".to_owned()),
                ..SessionEntry::now(LlmMessage::assistant("done"))
            }],
        )
        .unwrap();
    let session = store.load(&key()).unwrap();
    assert_eq!(*session, fresh(dir.path()));
    assert_eq!(session.entries.len(), 4);
    assert_eq!(session.compaction.as_ref().unwrap().through, 2);
}

#[test]
fn a_reset_archives_what_was_written_unsynced() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[LlmMessage::user("one")]);
    store.append_unsynced(&key(), &[user("two")]).unwrap();
    let archived = store.reset(&key()).unwrap().unwrap();
    assert_eq!(
        std::fs::read_to_string(archived).unwrap().lines().count(),
        3
    );
    store.append_unsynced(&key(), &[user("three")]).unwrap();
    store.sync(&key()).unwrap();
    // Nothing left to sync.
    store.sync(&key()).unwrap();
    assert_eq!(
        store.load(&key()).unwrap().messages(),
        vec![LlmMessage::user("three")]
    );
}

#[test]
fn settings_changed_elsewhere_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    assert_eq!(store.settings(&key()).unwrap().rag_mode, None);
    let mut settings = store.settings(&key()).unwrap();
    settings.rag_mode = Some(true);
    store.save_settings(&key(), &settings).unwrap();
    assert_eq!(store.settings(&key()).unwrap().rag_mode, Some(true));

    let other = SessionStore::new(dir.path());
    settings.rag_mode = Some(false);
    other.save_settings(&key(), &settings).unwrap();
    assert_eq!(store.settings(&key()).unwrap().rag_mode, Some(false));

    let path = dir.path().join("cli:default.settings.json");
    std::fs::write(&path, r#"{"title": "By hand"}"#).unwrap();
    let by_hand = store.settings(&key()).unwrap();
    assert_eq!(
        (by_hand.rag_mode, by_hand.title.as_deref()),
        (None, Some("By hand"))
    );

    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        store.settings(&key()).unwrap(),
        nanocrab_sessions::SessionSettings::default()
    );
    std::fs::write(&path, "{").unwrap();
    assert!(store.settings(&key()).is_err());
}
