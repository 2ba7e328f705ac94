#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The audit log keeps every call, hides secrets, and cannot be rewritten.

use nanocrab_policy::{
    ApprovalRecord, ApprovalResult, AuditLog, AuditQuery, AuditRecord, CallStatus, Redactor, Risk,
};
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
