#![allow(clippy::unwrap_used, clippy::expect_used)]

use nanocrab_schema::{
    ContentBlock, LlmMessage, Role, RunSource, SessionKey, ToolCall, ToolResult, Usage,
};
use nanocrab_sessions::{
    ModelCall, SessionEntry, SessionStore, TranscriptUsage, TurnUsage, read_usage,
};
use pretty_assertions::assert_eq;

fn key(key: &str) -> SessionKey {
    SessionKey::parse(key).unwrap()
}

fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
        ..Usage::default()
    }
}

fn at(timestamp: &str, message: LlmMessage) -> SessionEntry {
    SessionEntry {
        timestamp: timestamp.to_owned(),
        ..SessionEntry::now(message)
    }
}

fn answer(timestamp: &str, message: LlmMessage, model: &str, usage: Usage) -> SessionEntry {
    SessionEntry {
        model: Some(model.to_owned()),
        usage: Some(usage),
        ..at(timestamp, message)
    }
}

fn call(timestamp: &str, model: &str, usage: Usage) -> ModelCall {
    ModelCall {
        timestamp: timestamp.to_owned(),
        model: Some(model.to_owned()),
        usage,
    }
}

fn tool_call(id: &str) -> LlmMessage {
    LlmMessage {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse(ToolCall {
            id: id.into(),
            name: "list_dir".into(),
            input: serde_json::json!({"path": "."}),
        })],
    }
}

fn tool_result(id: &str) -> LlmMessage {
    LlmMessage {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResult::ok(id, "a.md"))],
    }
}

#[test]
fn tool_round_trips_stay_in_their_turn_and_archives_count_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    let sonnet = "anthropic/claude-sonnet-4-5";
    store
        .append(
            &key("cli:default"),
            &[
                at("2025-03-01T09:00:00Z", LlmMessage::user("what is here?")),
                answer(
                    "2025-03-01T09:00:02Z",
                    tool_call("c1"),
                    sonnet,
                    usage(100, 10),
                ),
                at("2025-03-01T09:00:03Z", tool_result("c1")),
                answer(
                    "2025-03-01T09:00:05Z",
                    LlmMessage::assistant("a.md"),
                    sonnet,
                    usage(130, 5),
                ),
                at("2025-03-01T09:01:00Z", LlmMessage::user("thanks")),
                answer(
                    "2025-03-01T09:01:01Z",
                    LlmMessage::assistant("welcome"),
                    "claude-sonnet-4-5-20250929",
                    usage(140, 2),
                ),
            ],
        )
        .unwrap();
    let archived = store.reset(&key("cli:default")).unwrap().unwrap();
    store
        .append(
            &key("cli:default"),
            &[
                at("2025-03-02T10:00:00Z", LlmMessage::user("hello again")),
                // A note the agent wrote itself after a failure: no model call, no usage.
                at("2025-03-02T10:00:09Z", LlmMessage::assistant("[error]")),
                at("2025-03-02T10:01:00Z", LlmMessage::user("and now?")),
                answer(
                    "2025-03-02T10:01:01Z",
                    LlmMessage::assistant("now"),
                    sonnet,
                    usage(20, 3),
                ),
            ],
        )
        .unwrap();
    store
        .append(
            &key("a.b"),
            &[
                at("2025-03-03T08:00:00Z", LlmMessage::user("hi")),
                answer(
                    "2025-03-03T08:00:01Z",
                    LlmMessage::assistant("hi"),
                    "ollama/qwen3",
                    usage(7, 1),
                ),
            ],
        )
        .unwrap();
    // A key with dots, archived: the stamp is cut off, not the key.
    let archived_dotted = store.reset(&key("a.b")).unwrap().unwrap();

    assert_eq!(
        read_usage(dir.path(), None).unwrap(),
        vec![
            TranscriptUsage {
                key: key("a.b"),
                path: archived_dotted,
                archived: true,
                turns: vec![TurnUsage {
                    started_at: Some("2025-03-03T08:00:00Z".into()),
                    source: RunSource::Chat,
                    calls: vec![call("2025-03-03T08:00:01Z", "ollama/qwen3", usage(7, 1))],
                }],
            },
            TranscriptUsage {
                key: key("cli:default"),
                path: archived,
                archived: true,
                turns: vec![
                    TurnUsage {
                        started_at: Some("2025-03-01T09:00:00Z".into()),
                        source: RunSource::Chat,
                        calls: vec![
                            call("2025-03-01T09:00:02Z", sonnet, usage(100, 10)),
                            call("2025-03-01T09:00:05Z", sonnet, usage(130, 5)),
                        ],
                    },
                    TurnUsage {
                        started_at: Some("2025-03-01T09:01:00Z".into()),
                        source: RunSource::Chat,
                        calls: vec![call(
                            "2025-03-01T09:01:01Z",
                            "claude-sonnet-4-5-20250929",
                            usage(140, 2)
                        )],
                    },
                ],
            },
            TranscriptUsage {
                key: key("cli:default"),
                path: store.path(&key("cli:default")),
                archived: false,
                turns: vec![
                    TurnUsage {
                        started_at: Some("2025-03-02T10:00:00Z".into()),
                        source: RunSource::Chat,
                        calls: vec![],
                    },
                    TurnUsage {
                        started_at: Some("2025-03-02T10:01:00Z".into()),
                        source: RunSource::Chat,
                        calls: vec![call("2025-03-02T10:01:01Z", sonnet, usage(20, 3))],
                    },
                ],
            },
        ]
    );

    let only: Vec<(SessionKey, bool)> = read_usage(dir.path(), Some(&key("cli:default")))
        .unwrap()
        .into_iter()
        .map(|t| (t.key, t.archived))
        .collect();
    assert_eq!(
        only,
        vec![(key("cli:default"), true), (key("cli:default"), false)]
    );
}

#[test]
fn torn_and_unreadable_lines_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("telegram:42.jsonl");
    // The first question's line is torn, so its answer has no question to belong to; a
    // hand edit broke a line in the middle; the last line was torn by a crash.
    let text = [
        r#"{"_type":"metadata","key":"telegram:42","createdAt":"2025-04-01T00:00:00Z","version":1}"#,
        r#"{"role":"user","content":[{"type":"text","te"#,
        r#"{"role":"assistant","content":[{"type":"text","text":"one"}],"timestamp":"2025-04-01T00:00:02Z","model":"gpt-4o","usage":{"input_tokens":10,"output_tokens":1}}"#,
        r#"{"role":"user","content":[{"type":"text","text":"two"}],"timestamp":"2025-04-01T00:01:00Z"}"#,
        r#"not json at all"#,
        r#"{"role":"assistant","content":[{"type":"text","text":"two"}],"timestamp":"2025-04-01T00:01:02Z","model":"gpt-4o","usage":{"input_tokens":20,"output_tokens":2,"cache_read_tokens":5,"cache_write_tokens":6}}"#,
        r#"{"role":"assistant","content":[{"type":"text","text":"tw"#,
    ]
    .join("\n");
    std::fs::write(&path, text).unwrap();
    // Not transcripts: skipped without complaint.
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    std::fs::write(dir.path().join("bad key!.jsonl"), "").unwrap();

    assert_eq!(
        read_usage(dir.path(), None).unwrap(),
        vec![TranscriptUsage {
            key: key("telegram:42"),
            path,
            archived: false,
            turns: vec![
                TurnUsage {
                    started_at: None,
                    source: RunSource::Chat,
                    calls: vec![call("2025-04-01T00:00:02Z", "gpt-4o", usage(10, 1))],
                },
                TurnUsage {
                    started_at: Some("2025-04-01T00:01:00Z".into()),
                    source: RunSource::Chat,
                    calls: vec![call(
                        "2025-04-01T00:01:02Z",
                        "gpt-4o",
                        Usage {
                            input_tokens: 20,
                            output_tokens: 2,
                            cache_read_tokens: 5,
                            cache_write_tokens: 6,
                        }
                    )],
                },
            ],
        }]
    );
}

#[test]
fn no_sessions_directory_means_no_usage() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        read_usage(&dir.path().join("sessions"), None).unwrap(),
        vec![]
    );
}
