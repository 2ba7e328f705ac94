//! The hooks' runs in the audit log: one append-only row per hook run, with the event, the
//! command (redacted), what it decided and why, how it exited and how long it took.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use crate::audit::{AuditError, AuditLog};

/// What one hook run decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    /// No objection: exit 0 without a decision (context it added is counted apart).
    Proceed,
    /// `PreToolUse`: the call may run without a human's approval.
    Allow,
    /// `PreToolUse`: a human is asked.
    Ask,
    /// `PreToolUse`: the call is refused, and the model told why.
    Deny,
    /// `decision: block` or exit 2: the prompt refused, feedback to the model, or (`Stop`)
    /// the agent asked to continue.
    Block,
    /// `continue: false`: the turn ends, with `stopReason` shown to the user.
    Halt,
    /// A non-zero exit other than 2, a timeout, unreadable output, or a hook that could not
    /// start.
    Error,
}

impl HookDecision {
    pub const ALL: [Self; 7] = [
        Self::Proceed,
        Self::Allow,
        Self::Ask,
        Self::Deny,
        Self::Block,
        Self::Halt,
        Self::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Proceed => "proceed",
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
            Self::Block => "block",
            Self::Halt => "halt",
            Self::Error => "error",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == text)
    }
}

impl std::fmt::Display for HookDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One hook run, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRecord {
    /// Assigned by the log; 0 before the record is appended.
    pub id: i64,
    pub trace_id: String,
    pub run_id: String,
    pub agent: String,
    pub session: Option<String>,
    /// `PreToolUse`, ...
    pub event: String,
    pub matcher: String,
    pub command: String,
    /// The tool call's tool, for the tool events.
    pub tool: Option<String>,
    pub decision: HookDecision,
    pub reason: Option<String>,
    /// Characters of context the hook added for the model.
    pub context_chars: u64,
    /// `None` when it was killed (a timeout) or never started.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Milliseconds since the Unix epoch.
    pub started_at_ms: i64,
    pub duration_ms: i64,
}

pub(crate) const HOOKS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS hook_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trace_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    session TEXT,
    event TEXT NOT NULL,
    matcher TEXT NOT NULL,
    command TEXT NOT NULL,
    tool TEXT,
    decision TEXT NOT NULL,
    reason TEXT,
    context_chars INTEGER NOT NULL,
    exit_code INTEGER,
    timed_out INTEGER NOT NULL,
    started_at_ms INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS hook_runs_by_time ON hook_runs (started_at_ms);
CREATE TRIGGER IF NOT EXISTS hook_runs_no_update BEFORE UPDATE ON hook_runs
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS hook_runs_no_delete BEFORE DELETE ON hook_runs
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
";

impl AuditLog {
    /// Appends `record` (its `id` is ignored; its texts are redacted) and returns the id it
    /// got.
    pub fn append_hook(&self, record: &HookRecord) -> Result<i64, AuditError> {
        let redact = |text: &str| self.redactor().redact(text).into_owned();
        let connection = self.lock();
        connection
            .execute(
                "INSERT INTO hook_runs (trace_id, run_id, agent, session, event, matcher, \
                 command, tool, decision, reason, context_chars, exit_code, timed_out, \
                 started_at_ms, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
                 ?11, ?12, ?13, ?14, ?15)",
                params![
                    record.trace_id,
                    record.run_id,
                    record.agent,
                    record.session,
                    record.event,
                    record.matcher,
                    redact(&record.command),
                    record.tool,
                    record.decision.as_str(),
                    record.reason.as_deref().map(redact),
                    i64::try_from(record.context_chars).unwrap_or(i64::MAX),
                    record.exit_code,
                    record.timed_out,
                    record.started_at_ms,
                    record.duration_ms,
                ],
            )
            .map_err(self.query_error())?;
        Ok(connection.last_insert_rowid())
    }

    /// The newest `limit` hook runs, newest first.
    pub fn hook_runs(&self, limit: usize) -> Result<Vec<HookRecord>, AuditError> {
        let connection = self.lock();
        let mut statement = connection
            .prepare(
                "SELECT id, trace_id, run_id, agent, session, event, matcher, command, tool, \
                 decision, reason, context_chars, exit_code, timed_out, started_at_ms, \
                 duration_ms FROM hook_runs ORDER BY started_at_ms DESC, id DESC LIMIT ?1",
            )
            .map_err(self.query_error())?;
        let rows = statement
            .query_map(params![i64::try_from(limit).unwrap_or(-1)], |row| {
                Ok((
                    row.get::<_, String>(9)?,
                    HookRecord {
                        id: row.get(0)?,
                        trace_id: row.get(1)?,
                        run_id: row.get(2)?,
                        agent: row.get(3)?,
                        session: row.get(4)?,
                        event: row.get(5)?,
                        matcher: row.get(6)?,
                        command: row.get(7)?,
                        tool: row.get(8)?,
                        decision: HookDecision::Proceed,
                        reason: row.get(10)?,
                        context_chars: row.get(11)?,
                        exit_code: row.get(12)?,
                        timed_out: row.get(13)?,
                        started_at_ms: row.get(14)?,
                        duration_ms: row.get(15)?,
                    },
                ))
            })
            .map_err(self.query_error())?;
        let mut records = Vec::new();
        for row in rows {
            let (decision, mut record) = row.map_err(self.query_error())?;
            record.decision =
                HookDecision::parse(&decision).ok_or_else(|| AuditError::Corrupt {
                    path: self.path().to_path_buf(),
                    reason: format!("hook run {}: unknown decision `{decision}`", record.id),
                })?;
            records.push(record);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Redactor;

    #[test]
    fn hook_runs_are_kept_redacted_and_never_changed() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(
            &dir.path().join("audit.sqlite"),
            Redactor::new([(
                "OPENAI_API_KEY".to_owned(),
                "sk-secret-value-123456".to_owned(),
            )]),
        )
        .unwrap();
        let record = HookRecord {
            id: 0,
            trace_id: "t".into(),
            run_id: "r".into(),
            agent: "main".into(),
            session: Some("cli:default".into()),
            event: "PreToolUse".into(),
            matcher: "exec".into(),
            command: "guard --key sk-secret-value-123456".into(),
            tool: Some("exec".into()),
            decision: HookDecision::Deny,
            reason: Some("no rm".into()),
            context_chars: 0,
            exit_code: Some(2),
            timed_out: false,
            started_at_ms: 5,
            duration_ms: 3,
        };
        let id = log.append_hook(&record).unwrap();
        pretty_assertions::assert_eq!(
            log.hook_runs(10).unwrap(),
            [HookRecord {
                id,
                command: "guard --key [redacted: OPENAI_API_KEY]".into(),
                ..record
            }]
        );
        let connection = log.lock();
        assert!(
            connection
                .execute("DELETE FROM hook_runs", [])
                .unwrap_err()
                .to_string()
                .contains("append-only")
        );
    }
}
