#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The audit log keeps every call, hides secrets, and cannot be rewritten.

use nanocrab_policy::{
    ApprovalRecord, ApprovalResult, AuditLog, AuditQuery, AuditRecord, CallStatus, Redactor, Risk,
    RunQuery, RunRecord, RunStatus,
};
use nanocrab_schema::{RunId, RunSource, Usage};
use pretty_assertions::assert_eq;

fn record(session: &str, started_at_ms: i64) -> AuditRecord {
    AuditRecord {
        id: 0,
        trace_id: "t1".into(),
        task_id: "k1".into(),
        run_id: "r1".into(),
        step_id: format!("s{started_at_ms}"),
        agent: "main".into(),
        session: Some(session.into()),
        source: RunSource::Chat,
        tool: "exec".into(),
        call_id: "call_1".into(),
        arguments_digest: "ab".repeat(32),
        summary: "run `curl -H 'Authorization: sk-live-1234567890'`".into(),
        risk: Risk::Guarded,
        requested: vec!["exec:sh".into()],
        granted: vec!["exec:sh (approval x1 by cli (once))".into()],
        approval: Some(ApprovalRecord {
            id: "x1".into(),
            result: ApprovalResult::AllowedOnce,
            by: Some("cli".into()),
        }),
        started_at_ms,
        ended_at_ms: started_at_ms + 5,
        status: CallStatus::Error,
        error: Some("exit 1: bad key sk-live-1234567890".into()),
    }
}

fn open(dir: &tempfile::TempDir) -> AuditLog {
    AuditLog::open(
        &dir.path().join("state/audit.sqlite"),
        Redactor::new([("OPENAI_API_KEY".to_owned(), "sk-live-1234567890".to_owned())]),
    )
    .unwrap()
}

#[test]
fn records_come_back_newest_first_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    let first = log.append(&record("cli:a", 1_000)).unwrap();
    let second = log.append(&record("cli:b", 2_000)).unwrap();
    log.append(&record("cli:a", 3_000)).unwrap();

    let mut expected = record("cli:a", 1_000);
    expected.id = first;
    expected.summary = "run `curl -H 'Authorization: [redacted: OPENAI_API_KEY]'`".into();
    expected.error = Some("exit 1: bad key [redacted: OPENAI_API_KEY]".into());
    assert_eq!(log.get(first).unwrap(), Some(expected));
    assert_eq!(log.get(999).unwrap(), None);

    let ids = |query: AuditQuery| -> Vec<i64> {
        log.list(&query).unwrap().iter().map(|r| r.id).collect()
    };
    assert_eq!(ids(AuditQuery::default()), [3, 2, 1]);
    assert_eq!(
        ids(AuditQuery {
            session: Some("cli:a".into()),
            ..AuditQuery::default()
        }),
        [3, 1]
    );
    assert_eq!(
        ids(AuditQuery {
            since_ms: Some(2_000),
            limit: Some(1),
            ..AuditQuery::default()
        }),
        [3]
    );
    assert_eq!(second, 2);
}

#[test]
fn the_log_survives_reopening_and_refuses_updates_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    open(&dir).append(&record("cli:a", 1_000)).unwrap();
    let log = open(&dir);
    assert_eq!(log.list(&AuditQuery::default()).unwrap().len(), 1);

    let raw = rusqlite::Connection::open(dir.path().join("state/audit.sqlite")).unwrap();
    let update = raw.execute("UPDATE tool_calls SET status = 'ok'", []);
    let delete = raw.execute("DELETE FROM tool_calls", []);
    for outcome in [update, delete] {
        assert_eq!(
            outcome.unwrap_err().to_string(),
            "the audit log is append-only"
        );
    }
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(dir.path().join("state"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn calls_are_found_by_the_source_of_their_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    let sources = [
        RunSource::Chat,
        RunSource::Heartbeat,
        RunSource::Cron { job: "j1".into() },
        RunSource::Cron { job: "j12".into() },
        RunSource::Subagent {
            id: "sa-1".into(),
            parent_run: RunId::from("r0".to_owned()),
            depth: 1,
        },
    ];
    for (i, source) in sources.iter().enumerate() {
        log.append(&AuditRecord {
            source: source.clone(),
            ..record("cli:a", 1_000 + i as i64)
        })
        .unwrap();
    }
    let ids = |source: &str| -> Vec<i64> {
        log.list(&AuditQuery {
            source: Some(source.into()),
            ..AuditQuery::default()
        })
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect()
    };
    assert_eq!(ids("chat"), [1]);
    assert_eq!(ids("heartbeat"), [2]);
    assert_eq!(ids("cron"), [4, 3]);
    assert_eq!(ids("cron:j1"), [3]);
    assert_eq!(ids("subagent"), [5]);
    assert_eq!(ids("mail"), Vec::<i64>::new());
    assert_eq!(log.get(5).unwrap().unwrap().source, sources[4]);
}

#[test]
fn a_log_from_before_sources_gains_the_column_and_its_calls_read_as_a_chats() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/audit.sqlite");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // The table as nanocrab made it before the source column.
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch(
        "CREATE TABLE tool_calls (id INTEGER PRIMARY KEY AUTOINCREMENT, trace_id TEXT NOT NULL, \
         task_id TEXT NOT NULL, run_id TEXT NOT NULL, step_id TEXT NOT NULL, agent TEXT NOT NULL, \
         session TEXT, tool TEXT NOT NULL, call_id TEXT NOT NULL, arguments_digest TEXT NOT NULL, \
         summary TEXT NOT NULL, risk TEXT NOT NULL, requested TEXT NOT NULL, granted TEXT NOT NULL, \
         approval_id TEXT, approval_result TEXT, approved_by TEXT, started_at_ms INTEGER NOT NULL, \
         ended_at_ms INTEGER NOT NULL, status TEXT NOT NULL, error TEXT);
         INSERT INTO tool_calls VALUES (NULL, 't', 'k', 'r', 's', 'main', 'cli:a', 'exec', 'c', \
         'ab', 'run ls', 'safe', '[]', '[]', NULL, NULL, NULL, 5, 6, 'ok', NULL);",
    )
    .unwrap();
    drop(raw);
    let log = open(&dir);
    let old = log.get(1).unwrap().unwrap();
    assert_eq!(
        (old.summary.as_str(), old.source),
        ("run ls", RunSource::Chat)
    );
    let new = log
        .append(&AuditRecord {
            source: RunSource::Heartbeat,
            ..record("cli:a", 9)
        })
        .unwrap();
    assert_eq!(log.get(new).unwrap().unwrap().source, RunSource::Heartbeat);
}

fn run(source: RunSource, run_id: &str, started_at_ms: i64) -> RunRecord {
    RunRecord {
        id: 0,
        source,
        agent: "main".into(),
        session: "agent:main:heartbeat".into(),
        trace_id: "t1".into(),
        run_id: run_id.into(),
        started_at_ms,
        ended_at_ms: started_at_ms + 40,
        status: RunStatus::Error,
        error: Some("provider said: bad key sk-live-1234567890".into()),
        model_calls: 2,
        usage: Usage {
            input_tokens: 1_200,
            output_tokens: 30,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        },
        tool_calls: 0,
    }
}

#[test]
fn autonomous_runs_come_back_newest_first_with_their_tool_calls_counted() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&dir);
    log.append_run(&run(RunSource::Heartbeat, "r1", 1_000))
        .unwrap();
    let cron = RunSource::Cron { job: "j1".into() };
    let second = log.append_run(&run(cron.clone(), "r2", 2_000)).unwrap();
    // Two calls of run r2, one of another run.
    log.append(&AuditRecord {
        run_id: "r2".into(),
        ..record("cli:a", 2_001)
    })
    .unwrap();
    log.append(&AuditRecord {
        run_id: "r2".into(),
        ..record("cli:a", 2_002)
    })
    .unwrap();
    log.append(&record("cli:a", 2_003)).unwrap();

    let mut expected = run(cron, "r2", 2_000);
    expected.id = second;
    expected.tool_calls = 2;
    expected.error = Some("provider said: bad key [redacted: OPENAI_API_KEY]".into());
    let runs = log.runs(&RunQuery::default()).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0], expected);
    assert_eq!(runs[1].source, RunSource::Heartbeat);
    let sources = |query: RunQuery| -> Vec<String> {
        log.runs(&query)
            .unwrap()
            .iter()
            .map(|r| r.source.to_string())
            .collect()
    };
    assert_eq!(
        sources(RunQuery {
            source: Some("heartbeat".into()),
            ..RunQuery::default()
        }),
        ["heartbeat"]
    );
    assert_eq!(
        sources(RunQuery {
            since_ms: Some(1_500),
            ..RunQuery::default()
        }),
        ["cron:j1"]
    );
    assert_eq!(
        sources(RunQuery {
            limit: Some(1),
            ..RunQuery::default()
        }),
        ["cron:j1"]
    );

    let raw = rusqlite::Connection::open(dir.path().join("state/audit.sqlite")).unwrap();
    assert!(raw.execute("UPDATE runs SET status = 'ok'", []).is_err());
    assert!(raw.execute("DELETE FROM runs", []).is_err());
}
