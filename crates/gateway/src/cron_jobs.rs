//! The scheduled jobs as `nanocrab cron` and the agent's `cron` tool change them: a request is
//! checked (an error names the field), stored with its first run, and the scheduler woken.
//!
//! The CLI and the gateway are different processes: the CLI writes the store and then asks
//! the running gateway to look again (`POST /v1/cron/wake`); in the gateway, the tool's
//! changes wake the scheduler directly.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use nanocrab_config::{CatchUp, DeliveryTarget, JobSchedule, job_interval};
use nanocrab_schema::SessionKey;
use nanocrab_tools::{CronJobs, CronRequest};
use tokio::sync::Notify;

use crate::cron_store::{CronJob, CronStore, CronStoreError, NewJob};
use crate::heartbeat::Clock;

/// How often the scheduler looks at the wall clock again while jobs are waiting: its timer
/// runs on a clock that stops while the machine sleeps and does not follow when the wall clock
/// is set, so a job due in hours would run hours late after a suspend.
pub const CLOCK_CHECK: Duration = Duration::from_secs(60);

/// A job's name, when none is given: the start of its message.
const DEFAULT_NAME_CHARS: usize = 40;

/// A job as asked for, every field as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobRequest {
    /// Default: the start of the message.
    pub name: Option<String>,
    pub agent: String,
    pub message: String,
    pub at: Option<String>,
    pub every: Option<String>,
    pub cron: Option<String>,
    pub tz: Option<String>,
    pub session: Option<String>,
    pub deliver: Option<String>,
    pub jitter: Option<String>,
    pub catch_up: Option<String>,
    /// Untrusted text the asking turn had read (see [`CronRequest::untrusted_sources`]).
    pub untrusted_sources: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CronError {
    /// A field of a request that cannot be: `every`, `tz`, `agent`...
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("no job `{id}`; `nanocrab cron list` shows the jobs")]
    UnknownJob { id: String },
    #[error(transparent)]
    Store(#[from] CronStoreError),
    /// The thread a store call ran on failed (it panicked, or the runtime is stopping).
    #[error("a call to the job store failed: {message}")]
    Task { message: String },
}

impl CronError {
    fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            message: message.into(),
        }
    }
}

/// The jobs of one home: its store, the agents jobs may name, the clock, and the scheduler's
/// wake-up. Clones share them.
#[derive(Clone)]
pub struct CronControl {
    store: Arc<CronStore>,
    agents: Arc<Vec<String>>,
    clock: Clock,
    clock_check: Duration,
    /// The IANA zone a cron job is read in when it names none: stored with it at add time,
    /// so that the CLI and the gateway (which may run with different `TZ`s) agree.
    local_zone: Option<String>,
    wake: Arc<Notify>,
}

impl CronControl {
    /// Jobs in `store` may be run by the agents `agents`; times are read from `clock`.
    pub fn new(store: Arc<CronStore>, agents: Vec<String>, clock: Clock) -> Self {
        Self {
            store,
            agents: Arc::new(agents),
            clock,
            clock_check: CLOCK_CHECK,
            local_zone: jiff::tz::TimeZone::system().iana_name().map(str::to_owned),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Cron jobs that name no zone are read in `zone` (an IANA name) instead of this
    /// machine's: for tests.
    pub fn with_local_zone(mut self, zone: &str) -> Self {
        self.local_zone = Some(zone.to_owned());
        self
    }

    /// The scheduler looks at the clock at least this often instead of every
    /// [`CLOCK_CHECK`]: for tests, which move the clock.
    pub fn with_clock_check(mut self, every: Duration) -> Self {
        self.clock_check = every;
        self
    }

    /// The longest the scheduler sleeps while a job is waiting.
    pub fn clock_check(&self) -> Duration {
        self.clock_check
    }

    pub fn store(&self) -> &CronStore {
        &self.store
    }

    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }

    /// Tells the scheduler to read the store again; one that is busy reads it when done.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Checks and stores `request`; the stored job, with its first run.
    pub fn add(&self, request: JobRequest) -> Result<CronJob, CronError> {
        let now = self.now();
        let job = self.check(request, now)?;
        let schedule = job.schedule.clone();
        let jitter = job.jitter;
        let job = self
            .store
            .add(job, now, |id| next_run(&schedule, now, jitter, id, now))?;
        self.wake();
        Ok(job)
    }

    fn check(&self, request: JobRequest, now: Timestamp) -> Result<NewJob, CronError> {
        let JobRequest {
            name,
            agent,
            message,
            at,
            every,
            cron,
            tz,
            session,
            deliver,
            jitter,
            catch_up,
            untrusted_sources,
        } = request;
        let message = message.trim().to_owned();
        if message.is_empty() {
            return Err(CronError::invalid(
                "message",
                "is empty; say what the agent is to do when the job runs",
            ));
        }
        if !self.agents.contains(&agent) {
            return Err(CronError::invalid(
                "agent",
                format!("no agent `{agent}`; known: {}", self.agents.join(", ")),
            ));
        }
        let given = |value: &Option<String>| value.as_deref().is_some_and(|v| !v.trim().is_empty());
        if given(&tz) && !given(&cron) {
            return Err(CronError::invalid(
                "tz",
                "only a cron expression is read in a time zone; `at` takes an offset (+01:00)",
            ));
        }
        let schedule = match (at, every, cron) {
            (Some(at), None, None) => JobSchedule::at(&at, now),
            (None, Some(every), None) => JobSchedule::every(&every),
            (None, None, Some(cron)) => {
                let tz = tz
                    .as_deref()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .or(self.local_zone.as_deref());
                JobSchedule::cron(&cron, tz, now)
            }
            (None, None, None) => {
                return Err(CronError::invalid(
                    "schedule",
                    "give when the job runs: at (once), every (repeating) or cron",
                ));
            }
            (Some(_), Some(_), _) | (Some(_), None, Some(_)) | (None, Some(_), Some(_)) => {
                return Err(CronError::invalid(
                    "schedule",
                    "give only one of at, every and cron",
                ));
            }
        }
        .map_err(|e| CronError::invalid(e.field, e.message))?;
        let session = session
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        if let Some(session) = &session {
            SessionKey::parse(session).map_err(|e| CronError::invalid("session", e.to_string()))?;
        }
        let deliver = match deliver.as_deref().map(str::trim) {
            None | Some("" | "none") => None,
            Some(text) => {
                DeliveryTarget::parse(text).map_err(|e| CronError::invalid("deliver", e))?;
                Some(text.to_owned())
            }
        };
        let jitter = match jitter.as_deref().map(str::trim).filter(|j| !j.is_empty()) {
            Some(_) if schedule.is_once() => {
                return Err(CronError::invalid(
                    "jitter",
                    "a one-shot runs at the time it was given; jitter is for --every and --cron",
                ));
            }
            Some(text) => job_interval(text)
                .map_err(|e| CronError::invalid("jitter", e))?
                .unwrap_or_default(),
            None => Duration::ZERO,
        };
        let catch_up = catch_up
            .as_deref()
            .map(CatchUp::parse)
            .transpose()
            .map_err(|e| CronError::invalid("catch-up", e))?;
        let name = name
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| default_name(&message));
        Ok(NewJob {
            name,
            agent,
            message,
            schedule,
            session,
            deliver,
            jitter,
            catch_up,
            untrusted_sources,
        })
    }

    /// Every job that can be read, oldest first.
    pub fn list(&self) -> Result<Vec<CronJob>, CronError> {
        Ok(self.store.list()?)
    }

    /// Every job, oldest first, each as read or why it cannot be.
    pub fn list_each(&self) -> Result<Vec<Result<CronJob, CronStoreError>>, CronError> {
        Ok(self.store.list_each()?)
    }

    /// Job `id`, or [`CronError::UnknownJob`].
    pub fn get(&self, id: &str) -> Result<CronJob, CronError> {
        self.store
            .get(id)?
            .ok_or_else(|| CronError::UnknownJob { id: id.to_owned() })
    }

    pub fn remove(&self, id: &str) -> Result<(), CronError> {
        if !self.store.remove(id)? {
            return Err(CronError::UnknownJob { id: id.to_owned() });
        }
        self.wake();
        Ok(())
    }

    /// Turns job `id` on (due at its next time from now, failures forgotten; a one-shot whose
    /// time has passed runs now) or off.
    pub fn set_enabled(&self, id: &str, enabled: bool) -> Result<CronJob, CronError> {
        let job = self.get(id)?;
        let now = self.now();
        let next = if job.schedule.is_once() {
            Some(job.next_run.unwrap_or(now).max(now))
        } else {
            next_run(&job.schedule, job.created_at, job.jitter, &job.id, now)
        };
        self.store.set_enabled(id, enabled, next)?;
        self.wake();
        self.get(id)
    }
}

/// The start of `message`, on one line.
fn default_name(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(DEFAULT_NAME_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_owned(),
    }
}

/// How much later than its schedule's times job `id` runs: the same every time, between 0
/// and `jitter`, so that jobs of the same hour spread out and each keeps its own pace.
pub fn jitter_offset(id: &str, jitter: Duration) -> u64 {
    let span = jitter.as_secs();
    if span == 0 {
        return 0;
    }
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    hash % (span + 1)
}

/// Job `id`'s first run strictly after `after`: its schedule's next time (an `every` counted
/// from `anchor`), plus its jitter; a one-shot's moment is never moved.
pub fn next_run(
    schedule: &JobSchedule,
    anchor: Timestamp,
    jitter: Duration,
    id: &str,
    after: Timestamp,
) -> Option<Timestamp> {
    if schedule.is_once() {
        return schedule.next_after(after, anchor);
    }
    let offset = jiff::SignedDuration::from_secs(i64::try_from(jitter_offset(id, jitter)).ok()?);
    let base = schedule.next_after(after.checked_sub(offset).ok()?, anchor)?;
    base.checked_add(offset).ok()
}

/// One job on one line: id, name, schedule, next run, where its reply goes, how it last went.
pub fn job_line(job: &CronJob) -> String {
    let next = match (job.enabled, job.next_run) {
        (false, _) => "disabled".to_owned(),
        (true, Some(next)) => format!("next {}", job.schedule.show_time(next)),
        (true, None) => "no next run".to_owned(),
    };
    let deliver = job.deliver.as_deref().unwrap_or("nowhere (logged)");
    let mut line = format!(
        "{} \"{}\" ({}) {}, {next}, replies to {deliver}",
        job.id, job.name, job.agent, job.schedule
    );
    if let Some(error) = &job.last_error {
        line.push_str(&format!(
            "; last run failed ({} in a row): {error}",
            job.failures
        ));
    } else if let Some(note) = &job.last_note {
        line.push_str(&format!("; last run: {note}"));
    }
    line
}

impl CronJobs for CronControl {
    fn add(&self, request: CronRequest) -> Result<String, String> {
        let CronRequest {
            agent,
            name,
            message,
            at,
            every,
            cron,
            tz,
            deliver,
            untrusted_sources,
        } = request;
        let job = CronControl::add(
            self,
            JobRequest {
                name,
                agent,
                message,
                at,
                every,
                cron,
                tz,
                deliver,
                untrusted_sources,
                ..JobRequest::default()
            },
        )
        .map_err(|e| e.to_string())?;
        Ok(format!("Scheduled: {}", job_line(&job)))
    }

    fn list(&self, agent: &str) -> Result<String, String> {
        let jobs = CronControl::list(self).map_err(|e| e.to_string())?;
        let lines: Vec<String> = jobs
            .iter()
            .filter(|job| job.agent == agent)
            .map(job_line)
            .collect();
        if lines.is_empty() {
            return Ok("No scheduled jobs.".to_owned());
        }
        Ok(lines.join("\n"))
    }

    fn remove(&self, agent: &str, id: &str) -> Result<String, String> {
        // Another agent's job is as good as none to this one.
        match self.get(id) {
            Ok(job) if job.agent == agent => {}
            Ok(_) | Err(CronError::UnknownJob { .. }) => {
                return Err(format!("no job `{id}`; list shows yours"));
            }
            Err(
                err @ (CronError::Invalid { .. } | CronError::Store(_) | CronError::Task { .. }),
            ) => {
                return Err(err.to_string());
            }
        }
        CronControl::remove(self, id).map_err(|e| e.to_string())?;
        Ok(format!("Removed job {id}."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn control(dir: &std::path::Path, now: &'static str) -> CronControl {
        let store = Arc::new(CronStore::open(&dir.join("cron.sqlite")).unwrap());
        let now = at(now);
        CronControl::new(store, vec!["main".to_owned()], Arc::new(move || now))
    }

    fn request(message: &str) -> JobRequest {
        JobRequest {
            agent: "main".to_owned(),
            message: message.to_owned(),
            ..JobRequest::default()
        }
    }

    #[test]
    fn bad_requests_name_their_field() {
        let dir = tempfile::tempdir().unwrap();
        let control = control(dir.path(), "2026-11-28T02:30:00Z");
        let cases = [
            JobRequest {
                every: Some("30m".to_owned()),
                ..request("")
            },
            JobRequest {
                agent: "gone".to_owned(),
                every: Some("30m".to_owned()),
                ..request("m")
            },
            request("m"),
            JobRequest {
                every: Some("30m".to_owned()),
                at: Some("+1m".to_owned()),
                ..request("m")
            },
            JobRequest {
                at: Some("2026-11-28T02:00:00Z".to_owned()),
                ..request("m")
            },
            JobRequest {
                every: Some("0".to_owned()),
                ..request("m")
            },
            JobRequest {
                cron: Some("0 9 * * *".to_owned()),
                tz: Some("Mars/Olympus".to_owned()),
                ..request("m")
            },
            JobRequest {
                cron: Some("0 0 30 2 *".to_owned()),
                ..request("m")
            },
            JobRequest {
                every: Some("1h".to_owned()),
                tz: Some("UTC".to_owned()),
                ..request("m")
            },
            JobRequest {
                every: Some("1h".to_owned()),
                deliver: Some("telegram".to_owned()),
                ..request("m")
            },
            JobRequest {
                every: Some("1h".to_owned()),
                session: Some("a b".to_owned()),
                ..request("m")
            },
            JobRequest {
                every: Some("1h".to_owned()),
                catch_up: Some("always".to_owned()),
                ..request("m")
            },
            JobRequest {
                every: Some("1h".to_owned()),
                jitter: Some("soon".to_owned()),
                ..request("m")
            },
            JobRequest {
                at: Some("+1h".to_owned()),
                jitter: Some("5m".to_owned()),
                ..request("m")
            },
        ];
        let fields: Vec<&str> = cases
            .into_iter()
            .map(|case| match control.add(case) {
                Err(CronError::Invalid { field, .. }) => field,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            fields,
            [
                "message", "agent", "schedule", "schedule", "at", "every", "tz", "cron", "tz",
                "deliver", "session", "catch-up", "jitter", "jitter"
            ]
        );
        assert!(control.list().unwrap().is_empty());
        assert_eq!(
            control.remove("nothing").unwrap_err().to_string(),
            "no job `nothing`; `nanocrab cron list` shows the jobs"
        );
    }

    #[test]
    fn a_job_gets_its_first_run_and_a_name_from_its_message() {
        let dir = tempfile::tempdir().unwrap();
        let control = control(dir.path(), "2026-11-28T02:30:00Z");
        let job = control
            .add(JobRequest {
                at: Some("+20m".to_owned()),
                deliver: Some("telegram:42".to_owned()),
                ..request("Remind the user to take the cake out of the oven, it burns")
            })
            .unwrap();
        assert_eq!(
            (job.name.as_str(), job.next_run),
            (
                "Remind the user to take the cake out of …",
                Some(at("2026-11-28T02:50:00Z"))
            )
        );
        assert_eq!(
            job_line(&job),
            format!(
                "{} \"Remind the user to take the cake out of …\" (main) at 2026-11-28T02:50:00Z, next 2026-11-28T02:50:00Z, replies to telegram:42",
                job.id
            )
        );
        let disabled = control.set_enabled(&job.id, false).unwrap();
        assert!(!disabled.enabled);
        assert_eq!(control.list().unwrap(), [disabled]);
    }

    #[test]
    fn a_cron_job_without_a_zone_keeps_the_one_it_was_added_in() {
        let dir = tempfile::tempdir().unwrap();
        let control = control(dir.path(), "2026-11-28T02:30:00Z").with_local_zone("Europe/Berlin");
        let job = control
            .add(JobRequest {
                cron: Some("0 9 * * *".to_owned()),
                ..request("Good morning")
            })
            .unwrap();
        assert_eq!(job.schedule.tz(), Some("Europe/Berlin"));
        // Read back by a process in another zone, it runs at 09:00 in Berlin all the same.
        let stored = control.get(&job.id).unwrap();
        assert_eq!(stored.next_run, Some(at("2026-11-28T08:00:00Z")));
        assert_eq!(
            job_line(&stored),
            format!(
                "{} \"Good morning\" (main) cron 0 9 * * * (Europe/Berlin), next 2026-11-28T09:00:00+01:00[Europe/Berlin], replies to nowhere (logged)",
                job.id
            )
        );
    }

    #[test]
    fn jitter_is_fixed_per_job_and_within_its_span() {
        let hour = Duration::from_secs(300);
        let offsets: Vec<u64> = ["a1b2c3d4", "a1b2c3d5", "ffffffff"]
            .iter()
            .map(|id| jitter_offset(id, hour))
            .collect();
        assert!(offsets.iter().all(|o| *o <= 300), "{offsets:?}");
        assert_eq!(
            offsets,
            ["a1b2c3d4", "a1b2c3d5", "ffffffff"].map(|id| jitter_offset(id, hour))
        );
        assert_ne!(offsets[0], offsets[1]);
        let hourly =
            JobSchedule::cron("0 * * * *", Some("UTC"), at("2026-11-28T02:30:00Z")).unwrap();
        let now = at("2026-11-28T02:30:00Z");
        let first = next_run(&hourly, now, hour, "a1b2c3d4", now).unwrap();
        let offset = jiff::SignedDuration::from_secs(i64::try_from(offsets[0]).unwrap());
        assert_eq!(first, at("2026-11-28T03:00:00Z") + offset);
        // The run at that time is not next again.
        assert_eq!(
            next_run(&hourly, now, hour, "a1b2c3d4", first),
            Some(at("2026-11-28T04:00:00Z") + offset)
        );
        assert_eq!(jitter_offset("a1b2c3d4", Duration::ZERO), 0);
    }
}
