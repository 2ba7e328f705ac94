//! The audit log: one append-only SQLite row per tool call, with who asked, what it needed,
//! what was granted and by whom, and how it ended.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nanocrab_schema::RunSource;
use rusqlite::{Connection, OptionalExtension as _, params};
use serde::{Deserialize, Serialize};

use crate::approval::ApprovalResult;
use crate::audit_runs::RUNS_SCHEMA;
use crate::capability::Risk;
use crate::redact::Redactor;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Ok,
    /// The tool ran, or tried to, and failed.
    Error,
    /// The policy or a human refused it; it never ran.
    Denied,
}

impl CallStatus {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Denied => "denied",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Ok, Self::Error, Self::Denied]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

impl std::fmt::Display for CallStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The approval a call went through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub id: String,
    pub result: ApprovalResult,
    /// Who answered; `None` when nobody did (timed out, nobody to ask).
    pub by: Option<String>,
}

/// One tool call, as the log keeps it. Arguments are kept only as a digest and the redacted
/// one-line summary: the log must not become a second copy of every file written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Assigned by the log; 0 before the record is appended.
    pub id: i64,
    pub trace_id: String,
    pub task_id: String,
    pub run_id: String,
    pub step_id: String,
    pub agent: String,
    pub session: Option<String>,
    /// Who started the run that made the call: a chat, a heartbeat, a scheduled job, a
    /// parent run. Calls logged before nanocrab recorded it read as `chat`.
    pub source: RunSource,
    pub tool: String,
    pub call_id: String,
    /// SHA-256 of the arguments' JSON.
    pub arguments_digest: String,
    pub summary: String,
    pub risk: Risk,
    pub requested: Vec<String>,
    pub granted: Vec<String>,
    pub approval: Option<ApprovalRecord>,
    /// Milliseconds since the Unix epoch.
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    pub status: CallStatus,
    pub error: Option<String>,
}

/// Which records `list` returns, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub session: Option<String>,
    /// Only calls of runs this source started: a kind (`chat`, `heartbeat`, `cron`,
    /// `subagent`) or one source in full (`cron:<job id>`).
    pub source: Option<String>,
    /// Only calls that started at or after this many milliseconds since the epoch.
    pub since_ms: Option<i64>,
    pub limit: Option<usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot open the audit log {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the audit log {}: {source}", path.display())]
    Query {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("the audit log {} has a record it cannot read: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tool_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trace_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    session TEXT,
    tool TEXT NOT NULL,
    call_id TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    summary TEXT NOT NULL,
    risk TEXT NOT NULL,
    requested TEXT NOT NULL,
    granted TEXT NOT NULL,
    approval_id TEXT,
    approval_result TEXT,
    approved_by TEXT,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS tool_calls_by_session ON tool_calls (session, started_at_ms);
CREATE INDEX IF NOT EXISTS tool_calls_by_run ON tool_calls (run_id);
CREATE INDEX IF NOT EXISTS tool_calls_by_time ON tool_calls (started_at_ms);
CREATE TRIGGER IF NOT EXISTS tool_calls_no_update BEFORE UPDATE ON tool_calls
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS tool_calls_no_delete BEFORE DELETE ON tool_calls
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
";

const COLUMNS: &str = "id, trace_id, task_id, run_id, step_id, agent, session, tool, call_id, \
    arguments_digest, summary, risk, requested, granted, approval_id, approval_result, \
    approved_by, started_at_ms, ended_at_ms, status, error, source";

/// The log at `state/audit.sqlite`. Unlike the memory index it cannot be rebuilt, so it lives
/// in its own file that no reindex ever deletes.
pub struct AuditLog {
    path: PathBuf,
    connection: Mutex<Connection>,
    redactor: Redactor,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .finish()
    }
}

impl AuditLog {
    /// Opens (creating if needed, with the directory private to the user) the log at `path`;
    /// every text appended goes through `redactor` first.
    pub fn open(path: &Path, redactor: Redactor) -> Result<Self, AuditError> {
        if let Some(dir) = path.parent()
            && !dir.exists()
        {
            std::fs::create_dir_all(dir).map_err(|source| AuditError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
                |source| AuditError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                },
            )?;
        }
        let open_error = |source| AuditError::Open {
            path: path.to_path_buf(),
            source,
        };
        let connection = Connection::open(path).map_err(open_error)?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(open_error)?;
        // With WAL, NORMAL syncs at checkpoints instead of at every call: a crash of nanocrab
        // loses nothing, a power cut may lose the last calls but never corrupts the log, and a
        // tool call does not wait for the disk (milliseconds each, measured by the tool_call
        // bench).
        connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_error)?;
        connection
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_error)?;
        connection.execute_batch(SCHEMA).map_err(open_error)?;
        // Logs made before the run's source was recorded gain the column; their calls read
        // as a chat's. Adding a column changes no row, so the append-only triggers allow it.
        let has_source: bool = connection
            .query_row(
                "SELECT COUNT(*) > 0 FROM pragma_table_info('tool_calls') WHERE name = 'source'",
                [],
                |row| row.get(0),
            )
            .map_err(open_error)?;
        if !has_source {
            connection
                .execute_batch("ALTER TABLE tool_calls ADD COLUMN source TEXT")
                .map_err(open_error)?;
        }
        connection.execute_batch(RUNS_SCHEMA).map_err(open_error)?;
        connection
            .execute_batch(crate::audit_hooks::HOOKS_SCHEMA)
            .map_err(open_error)?;
        Ok(Self {
            path: path.to_path_buf(),
            connection: Mutex::new(connection),
            redactor,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What every text appended goes through.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    pub(crate) fn query_error(&self) -> impl Fn(rusqlite::Error) -> AuditError + '_ {
        |source| AuditError::Query {
            path: self.path.clone(),
            source,
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half-written row: SQLite's own
        // transaction guards that, so the connection is still good to use.
        self.connection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `record` (its `id` is ignored) and returns the id it got.
    pub fn append(&self, record: &AuditRecord) -> Result<i64, AuditError> {
        let redact = |text: &str| self.redactor.redact(text).into_owned();
        let connection = self.lock();
        connection
            .execute(
                &format!(
                    "INSERT INTO tool_calls ({}) VALUES (NULL, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
                     ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
                    COLUMNS
                ),
                params![
                    record.trace_id,
                    record.task_id,
                    record.run_id,
                    record.step_id,
                    record.agent,
                    record.session,
                    record.tool,
                    record.call_id,
                    record.arguments_digest,
                    redact(&record.summary),
                    record.risk.to_string(),
                    redact(&json_list(&record.requested)),
                    redact(&json_list(&record.granted)),
                    record.approval.as_ref().map(|a| a.id.clone()),
                    record.approval.as_ref().map(|a| a.result.to_string()),
                    record.approval.as_ref().and_then(|a| a.by.clone()),
                    record.started_at_ms,
                    record.ended_at_ms,
                    record.status.as_str(),
                    record.error.as_deref().map(redact),
                    record.source.to_string(),
                ],
            )
            .map_err(self.query_error())?;
        Ok(connection.last_insert_rowid())
    }

    pub fn list(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, AuditError> {
        let connection = self.lock();
        let mut statement = connection
            .prepare(&format!(
                "SELECT {COLUMNS} FROM tool_calls WHERE (?1 IS NULL OR session = ?1) AND \
                 (?2 IS NULL OR started_at_ms >= ?2) AND {} \
                 ORDER BY started_at_ms DESC, id DESC LIMIT ?3",
                source_filter("?4")
            ))
            .map_err(self.query_error())?;
        let limit = query
            .limit
            .and_then(|limit| i64::try_from(limit).ok())
            .unwrap_or(-1);
        let rows = statement
            .query_map(
                params![query.session, query.since_ms, limit, query.source],
                Row::read,
            )
            .map_err(self.query_error())?;
        let mut records = Vec::new();
        for row in rows {
            records.push(self.decode(row.map_err(self.query_error())?)?);
        }
        Ok(records)
    }

    pub fn get(&self, id: i64) -> Result<Option<AuditRecord>, AuditError> {
        let row = self
            .lock()
            .query_row(
                &format!("SELECT {COLUMNS} FROM tool_calls WHERE id = ?1"),
                params![id],
                Row::read,
            )
            .optional()
            .map_err(self.query_error())?;
        row.map(|row| self.decode(row)).transpose()
    }

    fn decode(&self, row: Row) -> Result<AuditRecord, AuditError> {
        let corrupt = |reason: String| AuditError::Corrupt {
            path: self.path.clone(),
            reason: format!("record {}: {reason}", row.id),
        };
        let list = |text: &str| {
            serde_json::from_str::<Vec<String>>(text).map_err(|err| corrupt(err.to_string()))
        };
        let risk = serde_json::from_value(serde_json::Value::String(row.risk.clone()))
            .map_err(|_| corrupt(format!("unknown risk `{}`", row.risk)))?;
        let status = CallStatus::parse(&row.status)
            .ok_or_else(|| corrupt(format!("unknown status `{}`", row.status)))?;
        let source = match &row.source {
            Some(text) => text.parse().map_err(|err| corrupt(format!("{err}")))?,
            None => RunSource::Chat,
        };
        let approval = match (&row.approval_id, &row.approval_result) {
            (Some(id), Some(result)) => Some(ApprovalRecord {
                id: id.clone(),
                result: serde_json::from_value(serde_json::Value::String(result.clone()))
                    .map_err(|_| corrupt(format!("unknown approval result `{result}`")))?,
                by: row.approved_by.clone(),
            }),
            (Some(_), None) | (None, Some(_)) | (None, None) => None,
        };
        Ok(AuditRecord {
            id: row.id,
            requested: list(&row.requested)?,
            granted: list(&row.granted)?,
            trace_id: row.trace_id,
            task_id: row.task_id,
            run_id: row.run_id,
            step_id: row.step_id,
            agent: row.agent,
            session: row.session,
            source,
            tool: row.tool,
            call_id: row.call_id,
            arguments_digest: row.arguments_digest,
            summary: row.summary,
            risk,
            approval,
            started_at_ms: row.started_at_ms,
            ended_at_ms: row.ended_at_ms,
            status,
            error: row.error,
        })
    }
}

/// A WHERE condition on the `source` column for the parameter `param`, which holds a source
/// (`cron:<id>`) or a kind (`cron`): a row matches the source in full, or the kind by its
/// prefix. A NULL source is a chat's, logged before sources were recorded; NULL as the
/// parameter matches every row.
pub(crate) fn source_filter(param: &str) -> String {
    format!(
        "({param} IS NULL OR source = {param} OR \
         substr(source, 1, length({param}) + 1) = {param} || ':' OR \
         ({param} = 'chat' AND source IS NULL))"
    )
}

fn json_list(items: &[String]) -> String {
    serde_json::Value::from(items.to_vec()).to_string()
}

/// A row as stored, before its JSON and enum columns are checked.
struct Row {
    id: i64,
    trace_id: String,
    task_id: String,
    run_id: String,
    step_id: String,
    agent: String,
    session: Option<String>,
    tool: String,
    call_id: String,
    arguments_digest: String,
    summary: String,
    risk: String,
    requested: String,
    granted: String,
    approval_id: Option<String>,
    approval_result: Option<String>,
    approved_by: Option<String>,
    started_at_ms: i64,
    ended_at_ms: i64,
    status: String,
    error: Option<String>,
    source: Option<String>,
}

impl Row {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            trace_id: row.get(1)?,
            task_id: row.get(2)?,
            run_id: row.get(3)?,
            step_id: row.get(4)?,
            agent: row.get(5)?,
            session: row.get(6)?,
            tool: row.get(7)?,
            call_id: row.get(8)?,
            arguments_digest: row.get(9)?,
            summary: row.get(10)?,
            risk: row.get(11)?,
            requested: row.get(12)?,
            granted: row.get(13)?,
            approval_id: row.get(14)?,
            approval_result: row.get(15)?,
            approved_by: row.get(16)?,
            started_at_ms: row.get(17)?,
            ended_at_ms: row.get(18)?,
            status: row.get(19)?,
            error: row.get(20)?,
            source: row.get(21)?,
        })
    }
}
