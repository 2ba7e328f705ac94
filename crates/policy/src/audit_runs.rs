//! The runs nobody asked for, in the audit log: one append-only row per heartbeat, scheduled
//! job or subagent run, with who started it, how it ended and the tokens it took. Their tool
//! calls are in the same log under the run's id.

use nanocrab_schema::{RunSource, Usage};
use rusqlite::params;
use serde::{Deserialize, Serialize};

use crate::audit::{AuditError, AuditLog, source_filter};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// It answered (a run stopped at its iteration cap answered too, saying so).
    Ok,
    /// The model or the transcript failed; `error` says how.
    Error,
    /// Cancelled before it answered (a timeout, `subagents cancel`, a shutdown).
    Interrupted,
}

impl RunStatus {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Interrupted => "interrupted",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Ok, Self::Error, Self::Interrupted]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One autonomous run, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Assigned by the log; 0 before the record is appended.
    pub id: i64,
    pub source: RunSource,
    pub agent: String,
    pub session: String,
    pub trace_id: String,
    pub run_id: String,
    /// Milliseconds since the Unix epoch.
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    pub status: RunStatus,
    pub error: Option<String>,
    pub model_calls: u32,
    /// What the model calls took, as the providers reported it.
    pub usage: Usage,
    /// The run's tool calls in the log; counted when read, ignored when appended.
    pub tool_calls: u64,
}

/// Which runs `runs` returns, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunQuery {
    /// A kind (`heartbeat`, `cron`, `subagent`) or one source in full (`cron:<job id>`).
    pub source: Option<String>,
    /// Only runs that started at or after this many milliseconds since the epoch.
    pub since_ms: Option<i64>,
    pub limit: Option<usize>,
}

pub(crate) const RUNS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    agent TEXT NOT NULL,
    session TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    model_calls INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_time ON runs (started_at_ms);
CREATE TRIGGER IF NOT EXISTS runs_no_update BEFORE UPDATE ON runs
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS runs_no_delete BEFORE DELETE ON runs
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
";

const RUN_COLUMNS: &str = "id, source, agent, session, trace_id, run_id, started_at_ms, \
    ended_at_ms, status, error, model_calls, input_tokens, output_tokens, cache_read_tokens, \
    cache_write_tokens, (SELECT COUNT(*) FROM tool_calls WHERE tool_calls.run_id = runs.run_id)";

/// Token counts are far below `i64::MAX`; a count that is not is stored as the largest one.
fn stored(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl AuditLog {
    /// Appends `record` (its `id` and `tool_calls` are ignored) and returns the id it got.
    pub fn append_run(&self, record: &RunRecord) -> Result<i64, AuditError> {
        let connection = self.lock();
        connection
            .execute(
                "INSERT INTO runs (source, agent, session, trace_id, run_id, started_at_ms, \
                 ended_at_ms, status, error, model_calls, input_tokens, output_tokens, \
                 cache_read_tokens, cache_write_tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, \
                 ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                params![
                    record.source.to_string(),
                    record.agent,
                    record.session,
                    record.trace_id,
                    record.run_id,
                    record.started_at_ms,
                    record.ended_at_ms,
                    record.status.as_str(),
                    record
                        .error
                        .as_deref()
                        .map(|error| self.redactor().redact(error).into_owned()),
                    record.model_calls,
                    stored(record.usage.input_tokens),
                    stored(record.usage.output_tokens),
                    stored(record.usage.cache_read_tokens),
                    stored(record.usage.cache_write_tokens),
                ],
            )
            .map_err(self.query_error())?;
        Ok(connection.last_insert_rowid())
    }

    pub fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, AuditError> {
        let connection = self.lock();
        let mut statement = connection
            .prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE (?1 IS NULL OR started_at_ms >= ?1) AND \
                 {} ORDER BY started_at_ms DESC, id DESC LIMIT ?2",
                source_filter("?3")
            ))
            .map_err(self.query_error())?;
        let limit = query
            .limit
            .and_then(|limit| i64::try_from(limit).ok())
            .unwrap_or(-1);
        let rows = statement
            .query_map(params![query.since_ms, limit, query.source], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(8)?,
                    RunRecord {
                        id: row.get(0)?,
                        source: RunSource::Chat,
                        agent: row.get(2)?,
                        session: row.get(3)?,
                        trace_id: row.get(4)?,
                        run_id: row.get(5)?,
                        started_at_ms: row.get(6)?,
                        ended_at_ms: row.get(7)?,
                        status: RunStatus::Ok,
                        error: row.get(9)?,
                        model_calls: row.get(10)?,
                        usage: Usage {
                            input_tokens: row.get(11)?,
                            output_tokens: row.get(12)?,
                            cache_read_tokens: row.get(13)?,
                            cache_write_tokens: row.get(14)?,
                        },
                        tool_calls: row.get(15)?,
                    },
                ))
            })
            .map_err(self.query_error())?;
        let mut records = Vec::new();
        for row in rows {
            let (id, source, status, mut record) = row.map_err(self.query_error())?;
            let corrupt = |reason: String| AuditError::Corrupt {
                path: self.path().to_path_buf(),
                reason: format!("run {id}: {reason}"),
            };
            record.source = source.parse().map_err(|err| corrupt(format!("{err}")))?;
            record.status = RunStatus::parse(&status)
                .ok_or_else(|| corrupt(format!("unknown status `{status}`")))?;
            records.push(record);
        }
        Ok(records)
    }
}
