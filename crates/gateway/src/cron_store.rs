//! The scheduled jobs and their runs, in `state/cron.sqlite`: written by `nanocrab cron`, by
//! the agent's `cron` tool and by the gateway's scheduler (which may be different processes,
//! hence SQLite with a busy timeout), and read by all of them. Every change is one statement
//! or one transaction, so a crash leaves the store as it was before or after it.
//!
//! A job holds its next run. The scheduler moves it on only when a run has ended, so a run cut
//! short by a killed gateway stays due: on the next start the run is marked `interrupted` and
//! the job's `catchUp` decides whether it runs again.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use nanocrab_config::{CatchUp, JobSchedule};
use rusqlite::{Connection, OptionalExtension as _, Row, params};
use serde::{Deserialize, Serialize};

/// Runs of a job kept in its history; older ones are deleted as new ones end.
pub const KEPT_RUNS: usize = 200;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    agent TEXT NOT NULL,
    message TEXT NOT NULL,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    tz TEXT,
    session TEXT,
    deliver TEXT,
    jitter INTEGER NOT NULL DEFAULT 0,
    catch_up TEXT,
    enabled INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    next_run INTEGER,
    failures INTEGER NOT NULL DEFAULT 0,
    last_run INTEGER,
    last_status TEXT,
    last_error TEXT,
    last_note TEXT,
    untrusted TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    status TEXT NOT NULL,
    error TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    delivery TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_job ON runs (job_id, id);
";

#[derive(Debug, thiserror::Error)]
pub enum CronStoreError {
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the job store {}: {source}", path.display())]
    Sql {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("the job store {}: job {id} cannot be read: {message}", path.display())]
    BadJob {
        path: PathBuf,
        id: String,
        message: String,
    },
}

/// A job as it is asked for, before the store gives it an id.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub name: String,
    /// The agent that runs it.
    pub agent: String,
    /// What the agent is told when the job runs.
    pub message: String,
    pub schedule: JobSchedule,
    /// The session it runs in; `None`: one of its own, `agent:<agent>:cron:<id>`.
    pub session: Option<String>,
    /// Where the reply goes: `<channel>:<chatId>` or `last`; `None`: nowhere (logged).
    pub deliver: Option<String>,
    /// Each run starts up to this much later than its time, by an amount fixed per job.
    pub jitter: Duration,
    /// `None`: `cron.catchUp`.
    pub catch_up: Option<CatchUp>,
    /// Where the untrusted text came from that the turn adding it had read; empty: the user's
    /// own words. A job with any has its message fenced as data when it runs.
    pub untrusted_sources: Vec<String>,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct CronJob {
    pub id: String,
    pub name: String,
    pub agent: String,
    pub message: String,
    pub schedule: JobSchedule,
    pub session: Option<String>,
    pub deliver: Option<String>,
    pub jitter: Duration,
    pub catch_up: Option<CatchUp>,
    pub untrusted_sources: Vec<String>,
    pub enabled: bool,
    pub created_at: Timestamp,
    /// When it runs next; `None`: never again (a one-shot that gave up).
    pub next_run: Option<Timestamp>,
    /// Runs that failed in a row, which set how long the next one waits.
    pub failures: u32,
    pub last_run: Option<Timestamp>,
    pub last_status: Option<RunStatus>,
    pub last_error: Option<String>,
    /// What the last run that went well still left to wish: `not delivered: <reason>`.
    pub last_note: Option<String>,
}

/// How a run went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RunStatus {
    Running,
    Ok,
    Failed,
    /// The gateway stopped (or was killed) while it ran.
    Interrupted,
    /// Its time passed while the gateway was down, and `catchUp` is `skip`.
    Skipped,
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
            Self::Skipped => "skipped",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            Self::Running,
            Self::Ok,
            Self::Failed,
            Self::Interrupted,
            Self::Skipped,
        ]
        .into_iter()
        .find(|status| status.name() == text)
    }
}

/// One run of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub id: i64,
    pub job_id: String,
    #[serde(serialize_with = "rfc3339")]
    pub started_at: Timestamp,
    #[serde(serialize_with = "rfc3339_opt")]
    pub ended_at: Option<Timestamp>,
    pub status: RunStatus,
    pub error: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Where the reply went, or why it did not.
    pub delivery: Option<String>,
}

fn rfc3339<S: serde::Serializer>(at: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(at)
}

fn rfc3339_opt<S: serde::Serializer>(at: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => s.collect_str(at),
        None => s.serialize_none(),
    }
}

/// How a run ended, as the store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    pub status: RunStatus,
    pub error: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub delivery: Option<String>,
    /// Kept with the job until its next run: what went wrong in a run that went well.
    pub note: Option<String>,
}

/// What becomes of a job once a run has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterRun {
    /// It runs again then (`None`: never, and it is disabled).
    Next {
        next_run: Option<Timestamp>,
        failures: u32,
    },
    /// A one-shot that did its work: deleted.
    Done,
}

pub struct CronStore {
    path: PathBuf,
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for CronStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronStore")
            .field("path", &self.path)
            .finish()
    }
}

const JOB_COLUMNS: &str = "id, name, agent, message, kind, spec, tz, session, deliver, jitter, \
    catch_up, enabled, created_at, next_run, failures, last_run, last_status, last_error, last_note, untrusted";

impl CronStore {
    /// Opens the store at `path`, creating it (and its folder) if missing.
    pub fn open(path: &Path) -> Result<Self, CronStoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| CronStoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let sql = |source| CronStoreError::Sql {
            path: path.to_path_buf(),
            source,
        };
        let connection = Connection::open(path).map_err(sql)?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        // The CLI and the gateway write it; each write is short.
        connection
            .busy_timeout(Duration::from_secs(5))
            .map_err(sql)?;
        connection.execute_batch(SCHEMA).map_err(sql)?;
        migrate(&connection).map_err(sql)?;
        Ok(Self {
            path: path.to_path_buf(),
            connection: Mutex::new(connection),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // SQLite's own transactions keep a row whole if a holder panicked.
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> CronStoreError + '_ {
        |source| CronStoreError::Sql {
            path: self.path.clone(),
            source,
        }
    }

    /// Stores `job`, made `now`, first due when `next_run` says for its new id, and returns
    /// it.
    pub fn add(
        &self,
        job: NewJob,
        now: Timestamp,
        next_run: impl FnOnce(&str) -> Option<Timestamp>,
    ) -> Result<CronJob, CronStoreError> {
        let connection = self.lock();
        // Eight hex digits: short to type, and a clash (one in four billion) is drawn again.
        let mut id = new_id();
        while connection
            .query_row("SELECT 1 FROM jobs WHERE id = ?1", [&id], |_| Ok(()))
            .optional()
            .map_err(self.sql())?
            .is_some()
        {
            id = new_id();
        }
        let next_run = next_run(&id);
        connection
            .execute(
                "INSERT INTO jobs (id, name, agent, message, kind, spec, tz, session, deliver, \
                 jitter, catch_up, enabled, created_at, next_run, untrusted) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1, ?12, ?13, ?14)",
                params![
                    id,
                    job.name,
                    job.agent,
                    job.message,
                    job.schedule.kind(),
                    job.schedule.spec(),
                    job.schedule.tz(),
                    job.session,
                    job.deliver,
                    seconds(job.jitter),
                    job.catch_up.map(CatchUp::name),
                    now.as_second(),
                    next_run.map(|t| t.as_second()),
                    sources_text(&job.untrusted_sources),
                ],
            )
            .map_err(self.sql())?;
        // Read back, so the caller gets the job as `get` and `list` will give it.
        let stored = connection
            .query_row(
                &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"),
                [&id],
                StoredJob::from_row,
            )
            .map_err(self.sql())?;
        drop(connection);
        self.job(stored)
    }

    /// Every job that can be read, oldest first; see [`CronStore::list_each`] for the others.
    pub fn list(&self) -> Result<Vec<CronJob>, CronStoreError> {
        Ok(self
            .list_each()?
            .into_iter()
            .filter_map(Result::ok)
            .collect())
    }

    /// Every job, oldest first, each as read or why it cannot be ([`CronStoreError::BadJob`],
    /// naming it): one row that this nanocrab cannot read does not hide the others.
    pub fn list_each(&self) -> Result<Vec<Result<CronJob, CronStoreError>>, CronStoreError> {
        let connection = self.lock();
        let mut statement = connection
            .prepare(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs ORDER BY created_at, id"
            ))
            .map_err(self.sql())?;
        let rows = statement
            .query_map([], |row| {
                Ok((row.get::<_, String>(0).ok(), StoredJob::from_row(row)))
            })
            .map_err(self.sql())?;
        let mut jobs = Vec::new();
        for row in rows {
            let (id, stored) = row.map_err(self.sql())?;
            jobs.push(match stored {
                Ok(stored) => self.job(stored),
                Err(err) => Err(CronStoreError::BadJob {
                    path: self.path.clone(),
                    id: id.unwrap_or_else(|| "?".to_owned()),
                    message: err.to_string(),
                }),
            });
        }
        Ok(jobs)
    }

    pub fn get(&self, id: &str) -> Result<Option<CronJob>, CronStoreError> {
        let stored = self
            .lock()
            .query_row(
                &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"),
                [id],
                StoredJob::from_row,
            )
            .optional()
            .map_err(self.sql())?;
        stored.map(|s| self.job(s)).transpose()
    }

    /// Deletes job `id` (its runs stay in the history); `false`: there is none.
    pub fn remove(&self, id: &str) -> Result<bool, CronStoreError> {
        let deleted = self
            .lock()
            .execute("DELETE FROM jobs WHERE id = ?1", [id])
            .map_err(self.sql())?;
        Ok(deleted > 0)
    }

    /// Turns job `id` on (due at `next_run`, its failures forgotten) or off; `false`: there is
    /// no such job.
    pub fn set_enabled(
        &self,
        id: &str,
        enabled: bool,
        next_run: Option<Timestamp>,
    ) -> Result<bool, CronStoreError> {
        let changed = if enabled {
            self.lock().execute(
                "UPDATE jobs SET enabled = 1, next_run = ?2, failures = 0 WHERE id = ?1",
                params![id, next_run.map(|t| t.as_second())],
            )
        } else {
            self.lock()
                .execute("UPDATE jobs SET enabled = 0 WHERE id = ?1", [id])
        }
        .map_err(self.sql())?;
        Ok(changed > 0)
    }

    /// Records that a run of `job_id` started `at`; its id.
    pub fn start_run(&self, job_id: &str, at: Timestamp) -> Result<i64, CronStoreError> {
        let connection = self.lock();
        connection
            .execute(
                "INSERT INTO runs (job_id, started_at, status) VALUES (?1, ?2, 'running')",
                params![job_id, at.as_second()],
            )
            .map_err(self.sql())?;
        Ok(connection.last_insert_rowid())
    }

    /// Records how run `run_id` of `job_id` ended `at`, and what becomes of the job, together.
    pub fn finish_run(
        &self,
        job_id: &str,
        run_id: i64,
        at: Timestamp,
        end: &RunEnd,
        after: &AfterRun,
    ) -> Result<(), CronStoreError> {
        let mut connection = self.lock();
        let transaction = connection.transaction().map_err(self.sql())?;
        transaction
            .execute(
                "UPDATE runs SET ended_at = ?2, status = ?3, error = ?4, input_tokens = ?5, \
                 output_tokens = ?6, delivery = ?7 WHERE id = ?1",
                params![
                    run_id,
                    at.as_second(),
                    end.status.name(),
                    end.error,
                    i64::try_from(end.input_tokens).unwrap_or(i64::MAX),
                    i64::try_from(end.output_tokens).unwrap_or(i64::MAX),
                    end.delivery,
                ],
            )
            .map_err(self.sql())?;
        match after {
            AfterRun::Done => {
                transaction
                    .execute("DELETE FROM jobs WHERE id = ?1", [job_id])
                    .map_err(self.sql())?;
            }
            AfterRun::Next { next_run, failures } => {
                transaction
                    .execute(
                        "UPDATE jobs SET next_run = ?2, failures = ?3, last_run = ?4, \
                         last_status = ?5, last_error = ?6, last_note = ?7, \
                         enabled = CASE WHEN ?2 IS NULL THEN 0 ELSE enabled END WHERE id = ?1",
                        params![
                            job_id,
                            next_run.map(|t| t.as_second()),
                            failures,
                            at.as_second(),
                            end.status.name(),
                            end.error,
                            end.note,
                        ],
                    )
                    .map_err(self.sql())?;
            }
        }
        prune_runs(&transaction, job_id).map_err(self.sql())?;
        transaction.commit().map_err(self.sql())
    }

    /// Records that job `job_id`'s time passed unrun (`catchUp: skip`) and moves it on to
    /// `next_run`, together: a crash leaves neither a half-made run nor a job not moved on.
    pub fn skip(
        &self,
        job_id: &str,
        at: Timestamp,
        next_run: Option<Timestamp>,
    ) -> Result<(), CronStoreError> {
        let mut connection = self.lock();
        let transaction = connection.transaction().map_err(self.sql())?;
        transaction
            .execute(
                "INSERT INTO runs (job_id, started_at, ended_at, status) VALUES (?1, ?2, ?2, ?3)",
                params![job_id, at.as_second(), RunStatus::Skipped.name()],
            )
            .map_err(self.sql())?;
        transaction
            .execute(
                "UPDATE jobs SET next_run = ?2, last_run = ?3, last_status = ?4, \
                 last_error = NULL, last_note = NULL, \
                 enabled = CASE WHEN ?2 IS NULL THEN 0 ELSE enabled END WHERE id = ?1",
                params![
                    job_id,
                    next_run.map(|t| t.as_second()),
                    at.as_second(),
                    RunStatus::Skipped.name(),
                ],
            )
            .map_err(self.sql())?;
        prune_runs(&transaction, job_id).map_err(self.sql())?;
        transaction.commit().map_err(self.sql())
    }

    /// Marks the runs still `running` (their gateway was killed) as interrupted `at`; how many.
    pub fn interrupt_running(&self, at: Timestamp) -> Result<usize, CronStoreError> {
        self.lock()
            .execute(
                "UPDATE runs SET status = 'interrupted', ended_at = ?1, \
                 error = 'the gateway stopped while it ran' WHERE status = 'running'",
                [at.as_second()],
            )
            .map_err(self.sql())
    }

    /// Job `job_id`'s runs, newest first, at most `limit`.
    pub fn history(&self, job_id: &str, limit: usize) -> Result<Vec<RunRecord>, CronStoreError> {
        let connection = self.lock();
        let mut statement = connection
            .prepare(
                "SELECT id, job_id, started_at, ended_at, status, error, input_tokens, \
                 output_tokens, delivery FROM runs WHERE job_id = ?1 ORDER BY id DESC LIMIT ?2",
            )
            .map_err(self.sql())?;
        let rows = statement
            .query_map(
                params![job_id, i64::try_from(limit).unwrap_or(i64::MAX)],
                |row| {
                    Ok(RunRecord {
                        id: row.get(0)?,
                        job_id: row.get(1)?,
                        started_at: timestamp(row.get(2)?),
                        ended_at: row.get::<_, Option<i64>>(3)?.map(timestamp),
                        status: RunStatus::parse(&row.get::<_, String>(4)?)
                            .unwrap_or(RunStatus::Interrupted),
                        error: row.get(5)?,
                        input_tokens: u64::try_from(row.get::<_, i64>(6)?).unwrap_or(0),
                        output_tokens: u64::try_from(row.get::<_, i64>(7)?).unwrap_or(0),
                        delivery: row.get(8)?,
                    })
                },
            )
            .map_err(self.sql())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.sql())
    }

    fn job(&self, stored: StoredJob) -> Result<CronJob, CronStoreError> {
        let schedule = JobSchedule::from_stored(&stored.kind, &stored.spec, stored.tz.as_deref())
            .map_err(|e| CronStoreError::BadJob {
            path: self.path.clone(),
            id: stored.id.clone(),
            message: e.to_string(),
        })?;
        Ok(CronJob {
            id: stored.id,
            name: stored.name,
            agent: stored.agent,
            message: stored.message,
            schedule,
            session: stored.session,
            deliver: stored.deliver,
            jitter: Duration::from_secs(u64::try_from(stored.jitter).unwrap_or(0)),
            catch_up: stored.catch_up.and_then(|c| CatchUp::parse(&c).ok()),
            untrusted_sources: stored
                .untrusted
                .as_deref()
                .map(sources_of)
                .unwrap_or_default(),
            enabled: stored.enabled,
            created_at: timestamp(stored.created_at),
            next_run: stored.next_run.map(timestamp),
            failures: u32::try_from(stored.failures).unwrap_or(u32::MAX),
            last_run: stored.last_run.map(timestamp),
            last_status: stored.last_status.as_deref().and_then(RunStatus::parse),
            last_error: stored.last_error,
            last_note: stored.last_note,
        })
    }
}

/// A row of `jobs` as read, before its schedule is parsed.
struct StoredJob {
    id: String,
    name: String,
    agent: String,
    message: String,
    kind: String,
    spec: String,
    tz: Option<String>,
    session: Option<String>,
    deliver: Option<String>,
    jitter: i64,
    catch_up: Option<String>,
    enabled: bool,
    created_at: i64,
    next_run: Option<i64>,
    failures: i64,
    last_run: Option<i64>,
    last_status: Option<String>,
    last_error: Option<String>,
    last_note: Option<String>,
    untrusted: Option<String>,
}

impl StoredJob {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            name: row.get(1)?,
            agent: row.get(2)?,
            message: row.get(3)?,
            kind: row.get(4)?,
            spec: row.get(5)?,
            tz: row.get(6)?,
            session: row.get(7)?,
            deliver: row.get(8)?,
            jitter: row.get(9)?,
            catch_up: row.get(10)?,
            enabled: row.get(11)?,
            created_at: row.get(12)?,
            next_run: row.get(13)?,
            failures: row.get(14)?,
            last_run: row.get(15)?,
            last_status: row.get(16)?,
            last_error: row.get(17)?,
            last_note: row.get(18)?,
            untrusted: row.get(19)?,
        })
    }
}

/// Deletes job `job_id`'s runs but the newest [`KEPT_RUNS`].
fn prune_runs(transaction: &rusqlite::Transaction<'_>, job_id: &str) -> rusqlite::Result<()> {
    transaction.execute(
        "DELETE FROM runs WHERE job_id = ?1 AND id NOT IN \
         (SELECT id FROM runs WHERE job_id = ?1 ORDER BY id DESC LIMIT ?2)",
        params![job_id, i64::try_from(KEPT_RUNS).unwrap_or(i64::MAX)],
    )?;
    Ok(())
}

/// The store's layout version, in `PRAGMA user_version`.
const VERSION: i64 = 1;

/// Brings a store made by an earlier nanocrab to [`VERSION`]: 0 had no `jobs.last_note` and
/// no `jobs.untrusted`.
fn migrate(connection: &Connection) -> rusqlite::Result<()> {
    let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version >= VERSION {
        return Ok(());
    }
    for column in ["last_note", "untrusted"] {
        let present = connection
            .prepare(&format!("SELECT {column} FROM jobs LIMIT 0"))
            .is_ok();
        if !present {
            connection.execute_batch(&format!("ALTER TABLE jobs ADD COLUMN {column} TEXT;"))?;
        }
    }
    connection.pragma_update(None, "user_version", VERSION)
}

/// Untrusted sources as stored: one a line (a source is on one line), `NULL` for none.
fn sources_text(sources: &[String]) -> Option<String> {
    (!sources.is_empty()).then(|| {
        sources
            .iter()
            .map(|s| s.replace('\n', " "))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn sources_of(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}

fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

fn timestamp(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn every(name: &str) -> NewJob {
        NewJob {
            name: name.to_owned(),
            agent: "main".to_owned(),
            message: "water the plants".to_owned(),
            schedule: JobSchedule::every("2s").unwrap(),
            session: None,
            deliver: Some("telegram:42".to_owned()),
            jitter: Duration::ZERO,
            catch_up: Some(CatchUp::Skip),
            untrusted_sources: Vec::new(),
        }
    }

    #[test]
    fn jobs_and_their_runs_outlive_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/cron.sqlite");
        let now = at("2026-11-28T02:30:00Z");
        let store = CronStore::open(&path).unwrap();
        let job = store
            .add(every("plants"), now, |_| Some(at("2026-11-28T02:30:02Z")))
            .unwrap();
        let run = store
            .start_run(&job.id, at("2026-11-28T02:30:02Z"))
            .unwrap();
        let end = RunEnd {
            status: RunStatus::Ok,
            error: None,
            input_tokens: 120,
            output_tokens: 8,
            delivery: Some("telegram:42".to_owned()),
            note: None,
        };
        let next = AfterRun::Next {
            next_run: Some(at("2026-11-28T02:30:04Z")),
            failures: 0,
        };
        store
            .finish_run(&job.id, run, at("2026-11-28T02:30:03Z"), &end, &next)
            .unwrap();
        // Killed in the middle of the next run.
        store
            .start_run(&job.id, at("2026-11-28T02:30:04Z"))
            .unwrap();
        drop(store);

        let store = CronStore::open(&path).unwrap();
        assert_eq!(
            store.interrupt_running(at("2026-11-28T02:31:00Z")).unwrap(),
            1
        );
        let stored = store.get(&job.id).unwrap().unwrap();
        assert_eq!(
            stored,
            CronJob {
                next_run: Some(at("2026-11-28T02:30:04Z")),
                last_run: Some(at("2026-11-28T02:30:03Z")),
                last_status: Some(RunStatus::Ok),
                ..job.clone()
            }
        );
        assert_eq!(
            store.history(&job.id, 10).unwrap(),
            [
                RunRecord {
                    id: 2,
                    job_id: job.id.clone(),
                    started_at: at("2026-11-28T02:30:04Z"),
                    ended_at: Some(at("2026-11-28T02:31:00Z")),
                    status: RunStatus::Interrupted,
                    error: Some("the gateway stopped while it ran".to_owned()),
                    input_tokens: 0,
                    output_tokens: 0,
                    delivery: None,
                },
                RunRecord {
                    id: 1,
                    job_id: job.id.clone(),
                    started_at: at("2026-11-28T02:30:02Z"),
                    ended_at: Some(at("2026-11-28T02:30:03Z")),
                    status: RunStatus::Ok,
                    error: None,
                    input_tokens: 120,
                    output_tokens: 8,
                    delivery: Some("telegram:42".to_owned()),
                },
            ]
        );
    }

    #[test]
    fn a_finished_one_shot_is_deleted_and_its_history_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = CronStore::open(&dir.path().join("cron.sqlite")).unwrap();
        let now = at("2026-11-28T02:30:00Z");
        let mut once = every("once");
        once.schedule = JobSchedule::at("+20m", now).unwrap();
        let job = store
            .add(once, now, |_| Some(at("2026-11-28T02:50:00Z")))
            .unwrap();
        let other = store.add(every("other"), now, |_| None).unwrap();
        let run = store
            .start_run(&job.id, at("2026-11-28T02:50:00Z"))
            .unwrap();
        let end = RunEnd {
            status: RunStatus::Ok,
            error: None,
            input_tokens: 1,
            output_tokens: 1,
            delivery: None,
            note: None,
        };
        store
            .finish_run(
                &job.id,
                run,
                at("2026-11-28T02:50:01Z"),
                &end,
                &AfterRun::Done,
            )
            .unwrap();
        assert_eq!(store.get(&job.id).unwrap(), None);
        assert_eq!(store.history(&job.id, 10).unwrap().len(), 1);
        assert_eq!(store.list().unwrap(), std::slice::from_ref(&other));
        assert!(store.remove(&other.id).unwrap());
        assert!(!store.remove(&other.id).unwrap());
        assert!(!store.set_enabled("nothing", true, None).unwrap());
    }

    #[test]
    fn a_job_with_no_next_run_is_disabled_and_enabling_forgets_its_failures() {
        let dir = tempfile::tempdir().unwrap();
        let store = CronStore::open(&dir.path().join("cron.sqlite")).unwrap();
        let now = at("2026-11-28T02:30:00Z");
        let job = store.add(every("flaky"), now, |_| Some(now)).unwrap();
        let run = store.start_run(&job.id, now).unwrap();
        let end = RunEnd {
            status: RunStatus::Failed,
            error: Some("no agent `gone`".to_owned()),
            input_tokens: 0,
            output_tokens: 0,
            delivery: None,
            note: None,
        };
        let gave_up = AfterRun::Next {
            next_run: None,
            failures: 3,
        };
        store.finish_run(&job.id, run, now, &end, &gave_up).unwrap();
        let stored = store.get(&job.id).unwrap().unwrap();
        assert_eq!(
            (
                stored.enabled,
                stored.failures,
                stored.last_error.as_deref()
            ),
            (false, 3, Some("no agent `gone`"))
        );
        assert!(store.set_enabled(&job.id, true, Some(now)).unwrap());
        let stored = store.get(&job.id).unwrap().unwrap();
        assert_eq!(
            (stored.enabled, stored.failures, stored.next_run),
            (true, 0, Some(now))
        );
    }

    #[test]
    fn a_store_of_the_first_layout_gains_the_new_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cron.sqlite");
        let first = Connection::open(&path).unwrap();
        first
            .execute_batch(
                &SCHEMA
                    .replace(",\n    last_note TEXT", "")
                    .replace(",\n    untrusted TEXT", ""),
            )
            .unwrap();
        drop(first);
        let store = CronStore::open(&path).unwrap();
        let now = at("2026-11-28T02:30:00Z");
        let read = vec![
            "web_fetch https://example.com".to_owned(),
            "mail".to_owned(),
        ];
        let job = store
            .add(
                NewJob {
                    untrusted_sources: read.clone(),
                    ..every("plants")
                },
                now,
                |_| Some(now),
            )
            .unwrap();
        assert_eq!(store.get(&job.id).unwrap().unwrap().untrusted_sources, read);
        let run = store.start_run(&job.id, now).unwrap();
        let end = RunEnd {
            status: RunStatus::Ok,
            error: None,
            input_tokens: 1,
            output_tokens: 1,
            delivery: Some("not delivered: no chat".to_owned()),
            note: Some("not delivered: no chat".to_owned()),
        };
        let next = AfterRun::Next {
            next_run: Some(now),
            failures: 0,
        };
        store.finish_run(&job.id, run, now, &end, &next).unwrap();
        assert_eq!(
            store.get(&job.id).unwrap().unwrap().last_note.as_deref(),
            Some("not delivered: no chat")
        );
        let version: i64 = store
            .lock()
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, VERSION);
    }

    #[test]
    fn a_row_that_cannot_be_read_does_not_hide_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = CronStore::open(&dir.path().join("cron.sqlite")).unwrap();
        let now = at("2026-11-28T02:30:00Z");
        let good = store.add(every("good"), now, |_| Some(now)).unwrap();
        let odd = store.add(every("odd"), now, |_| Some(now)).unwrap();
        let bent = store.add(every("bent"), now, |_| Some(now)).unwrap();
        // Written by a later nanocrab, or by hand.
        store
            .lock()
            .execute_batch(&format!(
                "UPDATE jobs SET kind = 'lunar' WHERE id = '{}'; \
                 UPDATE jobs SET jitter = 'soon' WHERE id = '{}';",
                odd.id, bent.id
            ))
            .unwrap();
        let each: Vec<Result<String, String>> = store
            .list_each()
            .unwrap()
            .into_iter()
            .map(|job| {
                job.map(|j| j.id).map_err(|e| match e {
                    CronStoreError::BadJob { id, .. } => id,
                    other => other.to_string(),
                })
            })
            .collect();
        let mut expected = vec![
            Ok(good.id.clone()),
            Err(odd.id.clone()),
            Err(bent.id.clone()),
        ];
        let mut each_sorted = each.clone();
        expected.sort();
        each_sorted.sort();
        assert_eq!(each_sorted, expected);
        assert_eq!(store.list().unwrap(), [good]);
    }

    #[test]
    fn a_skip_that_cannot_move_its_job_on_leaves_no_run_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = CronStore::open(&dir.path().join("cron.sqlite")).unwrap();
        let now = at("2026-11-28T02:30:00Z");
        let job = store.add(every("plants"), now, |_| Some(now)).unwrap();
        store
            .lock()
            .execute_batch(
                "CREATE TRIGGER stuck BEFORE UPDATE ON jobs \
                 BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
            )
            .unwrap();
        let later = at("2026-11-28T03:30:00Z");
        assert!(store.skip(&job.id, later, Some(later)).is_err());
        assert_eq!(store.history(&job.id, 10).unwrap(), []);
        store.lock().execute_batch("DROP TRIGGER stuck;").unwrap();
        store.skip(&job.id, later, Some(later)).unwrap();
        let runs = store.history(&job.id, 10).unwrap();
        assert_eq!(
            runs.iter()
                .map(|r| (r.status, r.started_at, r.ended_at))
                .collect::<Vec<_>>(),
            [(RunStatus::Skipped, later, Some(later))]
        );
        assert_eq!(
            store.get(&job.id).unwrap().unwrap(),
            CronJob {
                next_run: Some(later),
                last_run: Some(later),
                last_status: Some(RunStatus::Skipped),
                ..job
            }
        );
    }
}
