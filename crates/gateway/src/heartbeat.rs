//! The heartbeat: each agent with `heartbeat.every` set looks at its `HEARTBEAT.md` on every
//! tick of its [`Schedule`] and tells its user what needs attention.
//!
//! Each agent has one task that sleeps until its next tick: nothing wakes in between. A tick
//! runs, in order, until one step says there is nothing to do:
//! 1. the previous run of the agent still going: skipped (logged);
//! 2. `HEARTBEAT.md` holds no task ([`heartbeat_tasks`]): skipped, no model asked;
//! 3. with a housekeeping model, it is asked whether anything is due; a clear "no" skips;
//! 4. an [`AutonomousRun`] in `agent:<id>:heartbeat` with a short prompt carrying the tasks
//!    and a minimal system prompt; a reply of `HEARTBEAT_OK` stays silent, anything else goes
//!    to the target.
//!
//! [`Heartbeats::run_now`] fires one at once (`nanocrab heartbeat run`, `POST
//! /v1/heartbeat`), through the same steps, the first one included.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use nanocrab_config::{HeartbeatPlan, Schedule};
use nanocrab_core::heartbeat::{
    TRIAGE_PROMPT, heartbeat_prompt, heartbeat_reply, heartbeat_session, heartbeat_tasks,
    triage_question, triage_says_due,
};
use nanocrab_core::{Agent, PromptMode, UserInput};
use nanocrab_schema::{RunSource, SessionKey};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::autonomous::{Autonomous, AutonomousRun, Delivery};

/// The wall clock, injected so that tests run a day of ticks without waiting for it.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Tokens the triage answer may take: one word.
const TRIAGE_MAX_TOKENS: u32 = 8;

/// What one heartbeat run came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum HeartbeatOutcome {
    /// The previous run of this agent is still going.
    Busy,
    /// `HEARTBEAT.md` holds no task; no model was asked.
    NoTask,
    /// The housekeeping model found nothing due.
    NothingDue,
    /// The agent ran; what became of its reply.
    Ran(Delivery),
    /// The run failed: why.
    Failed { error: String },
}

/// One agent's heartbeat as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatReport {
    pub agent: String,
    /// `heartbeat.every` in seconds; `None`: off.
    pub every_seconds: Option<u64>,
    /// The next tick (RFC 3339); `None`: off, or no tick falls inside `activeHours`.
    pub next: Option<String>,
    /// A run is going now.
    pub running: bool,
}

/// An agent's heartbeat: what it reads and runs, and its state.
pub struct AgentHeartbeat {
    pub plan: HeartbeatPlan,
    /// Where its `HEARTBEAT.md` is.
    pub workspace: PathBuf,
    pub agent: Arc<Agent>,
}

struct Beat {
    id: String,
    plan: HeartbeatPlan,
    workspace: PathBuf,
    agent: Arc<Agent>,
    /// Held by the run going on; a tick that cannot take it is skipped.
    running: Arc<tokio::sync::Mutex<()>>,
    next: Mutex<Option<Timestamp>>,
}

/// Every agent's heartbeat; clones share them.
#[derive(Clone)]
pub struct Heartbeats {
    shared: Arc<Shared>,
}

struct Shared {
    beats: BTreeMap<String, Beat>,
    autonomous: Autonomous,
    clock: Clock,
}

/// A heartbeat asked for an agent the gateway does not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no agent `{agent}`; known: {}", known.join(", "))]
pub struct UnknownAgent {
    pub agent: String,
    pub known: Vec<String>,
}

impl Heartbeats {
    pub fn new(
        agents: BTreeMap<String, AgentHeartbeat>,
        autonomous: Autonomous,
        clock: Clock,
    ) -> Self {
        let beats = agents
            .into_iter()
            .map(|(id, a)| {
                let beat = Beat {
                    id: id.clone(),
                    plan: a.plan,
                    workspace: a.workspace,
                    agent: a.agent,
                    running: Arc::default(),
                    next: Mutex::new(None),
                };
                (id, beat)
            })
            .collect();
        Self {
            shared: Arc::new(Shared {
                beats,
                autonomous,
                clock,
            }),
        }
    }

    /// The same heartbeats reading `clock`; before they are cloned or run, else unchanged.
    pub(crate) fn with_clock(mut self, clock: Clock) -> Self {
        match Arc::get_mut(&mut self.shared) {
            Some(shared) => shared.clock = clock,
            None => tracing::error!("the heartbeats' clock was set after they were shared"),
        }
        self
    }

    /// Each agent's schedule and next tick.
    pub fn reports(&self) -> Vec<HeartbeatReport> {
        self.shared
            .beats
            .values()
            .map(|beat| {
                let next = *beat.next.lock().unwrap_or_else(PoisonError::into_inner);
                HeartbeatReport {
                    agent: beat.id.clone(),
                    every_seconds: beat.plan.schedule.as_ref().map(|s| s.every.as_secs()),
                    next: next.map(|t| t.to_string()),
                    running: beat.running.try_lock().is_err(),
                }
            })
            .collect()
    }

    /// Fires agent `agent_id`'s heartbeat now, whatever its schedule, and waits for it.
    pub async fn run_now(&self, agent_id: &str) -> Result<HeartbeatOutcome, UnknownAgent> {
        let Some(beat) = self.shared.beats.get(agent_id) else {
            return Err(UnknownAgent {
                agent: agent_id.to_owned(),
                known: self.shared.beats.keys().cloned().collect(),
            });
        };
        let Ok(guard) = Arc::clone(&beat.running).try_lock_owned() else {
            tracing::info!(agent = %agent_id, "heartbeat: the previous run is still going");
            return Ok(HeartbeatOutcome::Busy);
        };
        let outcome = self.shared.beat(beat).await;
        drop(guard);
        Ok(outcome)
    }

    /// Ticks every agent's heartbeat until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let mut loops = JoinSet::new();
        for (id, beat) in &self.shared.beats {
            if let Some(schedule) = beat.plan.schedule.clone() {
                loops.spawn(tick(
                    Arc::clone(&self.shared),
                    id.clone(),
                    schedule,
                    stop.clone(),
                ));
            }
        }
        loops.join_all().await;
    }
}

/// Leaves the earlier runs of the heartbeat `session` out of the next one's history, but for
/// the last reply: otherwise the session would grow by a turn every tick, and each tick's
/// prompt with it. The reply stays, as the model's own message, so that it does not say the
/// same thing again.
fn fresh_start(agent: &Agent, session: &SessionKey) -> Result<(), nanocrab_sessions::SessionError> {
    let store = agent.store();
    if !store.exists(session) {
        return Ok(());
    }
    let transcript = store.load(session)?;
    let entries = transcript.entries.len();
    let replied = transcript.entries.last().is_some_and(|entry| {
        let message = entry.message();
        message.role == nanocrab_schema::Role::Assistant
            && message.tool_calls().next().is_none()
            && !message.text().trim().is_empty()
    });
    let (through, summary) = if replied {
        (
            entries - 1,
            "Earlier heartbeat checks are left out; your reply to the last one follows.",
        )
    } else {
        (entries, "Earlier heartbeat checks are left out.")
    };
    if transcript
        .compaction
        .as_ref()
        .is_some_and(|c| c.through >= through)
    {
        return Ok(());
    }
    store.append_compaction(
        session,
        &nanocrab_sessions::Compaction::new(through, summary.to_owned()),
    )
}

/// Sleeps until each tick of agent `id`'s `schedule` and fires it, until `stop`.
async fn tick(shared: Arc<Shared>, id: String, schedule: Schedule, stop: CancellationToken) {
    let Some(beat) = shared.beats.get(&id) else {
        return;
    };
    let mut runs = JoinSet::new();
    // The tick fired last: a timer that wakes a little before the wall clock reaches a tick
    // must not find the same tick next again.
    let mut fired: Option<Timestamp> = None;
    loop {
        let now = (shared.clock)();
        let next = schedule.next_after(fired.map_or(now, |fired| fired.max(now)));
        *beat.next.lock().unwrap_or_else(PoisonError::into_inner) = next;
        let Some(next) = next else {
            tracing::warn!(agent = %id, "heartbeat: no tick of every {}s falls inside activeHours; it never runs", schedule.every.as_secs());
            return;
        };
        let wait = Duration::try_from(next.duration_since(now)).unwrap_or_default();
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
        }
        fired = Some(next);
        // A run takes as long as its turn; the next tick is not held up by it.
        match Arc::clone(&beat.running).try_lock_owned() {
            Ok(guard) => {
                let shared = Arc::clone(&shared);
                let id = id.clone();
                runs.spawn(async move {
                    if let Some(beat) = shared.beats.get(&id) {
                        shared.beat(beat).await;
                    }
                    drop(guard);
                });
            }
            Err(_) => {
                tracing::info!(agent = %id, "heartbeat: tick skipped, the previous run is still going")
            }
        }
        // Finished runs are let go of as the loop goes.
        while runs.try_join_next().is_some() {}
    }
    // Runs still going end with the gateway's turns.
    runs.detach_all();
}

impl Shared {
    /// One heartbeat of `beat`, its lock held by the caller.
    async fn beat(&self, beat: &Beat) -> HeartbeatOutcome {
        let outcome = self.steps(beat).await;
        let id = &beat.id;
        match &outcome {
            HeartbeatOutcome::Busy => {}
            HeartbeatOutcome::NoTask => {
                tracing::info!(agent = %id, "heartbeat: HEARTBEAT.md holds no task; no model asked");
            }
            HeartbeatOutcome::NothingDue => {
                tracing::info!(agent = %id, "heartbeat: the housekeeping model found nothing due");
            }
            HeartbeatOutcome::Ran(Delivery::Silent) => {
                tracing::info!(agent = %id, "heartbeat: nothing needs attention");
            }
            HeartbeatOutcome::Ran(Delivery::Sent { chat, .. }) => {
                tracing::info!(agent = %id, channel = %chat.channel, chat = %chat.chat_id, "heartbeat: reply sent");
            }
            HeartbeatOutcome::Ran(Delivery::Logged { .. }) => {
                tracing::info!(agent = %id, "heartbeat: reply logged (heartbeat.target is none)");
            }
            HeartbeatOutcome::Ran(Delivery::NotSent { reason, .. }) => {
                tracing::warn!(agent = %id, "heartbeat: reply not sent: {reason}");
            }
            HeartbeatOutcome::Failed { error } => {
                tracing::error!(agent = %id, "heartbeat failed: {error}");
            }
        }
        outcome
    }

    async fn steps(&self, beat: &Beat) -> HeartbeatOutcome {
        let path = beat.workspace.join("HEARTBEAT.md");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(err) => {
                return HeartbeatOutcome::Failed {
                    error: format!("cannot read {}: {err}", path.display()),
                };
            }
        };
        let Some(tasks) = heartbeat_tasks(&text) else {
            return HeartbeatOutcome::NoTask;
        };
        let now = (self.clock)().to_zoned(jiff::tz::TimeZone::system());
        let question = triage_question(&now, &tasks);
        match beat
            .agent
            .ask_housekeeper(TRIAGE_PROMPT, question, TRIAGE_MAX_TOKENS)
            .await
        {
            Some(Ok(answer)) if !triage_says_due(&answer) => return HeartbeatOutcome::NothingDue,
            Some(Ok(_)) | None => {}
            // The agent's own model decides then: a task is not lost to a broken triage.
            Some(Err(err)) => {
                tracing::warn!(agent = %beat.id, "heartbeat: triage failed ({err}); the agent's model decides");
            }
        }
        let session = match SessionKey::parse(&heartbeat_session(&beat.id)) {
            Ok(session) => session,
            Err(err) => {
                return HeartbeatOutcome::Failed {
                    error: err.to_string(),
                };
            }
        };
        if let Err(err) = fresh_start(&beat.agent, &session) {
            tracing::warn!(agent = %beat.id, "heartbeat: earlier runs stay in view: {err}");
        }
        let run = AutonomousRun {
            agent_id: beat.id.clone(),
            session,
            input: UserInput {
                text: heartbeat_prompt(&tasks),
                images: Vec::new(),
                channel: None,
                trace_id: None,
                prompt_mode: PromptMode::Minimal,
                source: RunSource::Heartbeat,
                max_iterations: None,
                tools: None,
            },
            target: beat.plan.target.clone(),
        };
        match self.autonomous.run(run, heartbeat_reply).await {
            Ok(delivery) => HeartbeatOutcome::Ran(delivery),
            Err(err) => HeartbeatOutcome::Failed {
                error: err.to_string(),
            },
        }
    }
}
