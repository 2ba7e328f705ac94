//! The turn scheduler: one turn at a time per session, sessions side by side, at most
//! `gateway.maxConcurrentTurns` turns running in all.
//!
//! Work for a session waits in that session's queue, at most `gateway.queue.cap` items (a
//! turn waiting for a free slot counts too); beyond it a submission is refused, and whoever
//! sent it is told. A session with work has one task working through its queue; the task ends
//! when the queue is empty, so an idle session costs nothing.
//!
//! Chat messages that arrived while their session was busy are answered, with
//! `gateway.queue.mode: collect`, together in the next turn (consecutive ones from the same
//! chat; a slash command always alone), or with `followup` each in a turn of its own, in order.
//!
//! **Turns for the HTTP API.** [`Turns::submit`] queues one [`TurnRequest`] — an agent, a
//! session and the input — and returns a [`TurnTicket`] at once, or [`SubmitError`]
//! (`QueueFull` maps to HTTP 429). A request is a turn of its own, never merged with chat
//! messages or other requests, and runs after whatever its session already had queued. The
//! ticket's `started` fires when the turn begins, its `events` receive the run's
//! [`AgentEvent`]s as they happen (text tokens for streaming, tool calls, usage) and close
//! when the turn ends; awaiting its `outcome` gives the [`TurnOutcome`] or the error. Dropping
//! the ticket before the turn starts takes the request out of the queue; once started, the
//! turn runs to its end either way, so the session's history stays whole, unless the
//! request's `cancel` token stops it as a user's `/stop` would (what was said is kept).
//!
//! ```no_run
//! # async fn demo(
//! #     turns: nanocrab_gateway::Turns,
//! #     session: nanocrab_schema::SessionKey,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! use nanocrab_gateway::TurnRequest;
//! use nanocrab_schema::AgentEvent;
//!
//! let request = TurnRequest {
//!     agent_id: "main".into(),
//!     session,
//!     input: "hi".into(),
//!     with_model: None,
//!     housekeeping: true,
//!     cancel: Default::default(),
//!     in_callers_slot: false,
//! };
//! let mut ticket = turns.submit(request)?; // SubmitError::QueueFull → 429
//! while let Some(event) = ticket.events.recv().await {
//!     if let AgentEvent::Token { text } = event {
//!         // one SSE chunk
//!     }
//! }
//! let outcome = ticket.outcome.await?; // TurnOutcome { text, usage, .. }
//! # Ok(())
//! # }
//! ```
//!
//! **Shutdown.** [`Turns::shutdown`] starts no more turns, lets the running ones finish for
//! up to the grace period and then drops them. Chat messages still queued stay in the journal
//! and are answered after the next start; queued API requests end with
//! [`TurnError::Abandoned`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use nanocrab_config::{GatewayConfig, QueueMode};
use nanocrab_core::{Agent, AgentError, TurnOutcome, UserInput};
use nanocrab_schema::{AgentEvent, SessionKey};
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::bus::{EventKind, OutboundEvent};
use crate::chat_input::is_command;
use crate::chat_turn::ChatTurns;
use crate::gateway_agent::GatewayAgent;
use crate::journal::JournalEntry;
use crate::router::Route;
use crate::status::Event;

/// One turn asked for by the HTTP API.
#[derive(Clone)]
pub struct TurnRequest {
    /// `main` or an id of `agents.entries`.
    pub agent_id: String,
    pub session: SessionKey,
    pub input: UserInput,
    /// The agent built with another model (an API request naming `provider/model`), run in
    /// `agent_id`'s place for this turn; the session and its queue stay the same.
    pub with_model: Option<Arc<Agent>>,
    /// After the turn, consolidate the session into memory when due and title it, as a chat's
    /// turn does. Off for autonomous runs: their transcript is no conversation with the user,
    /// and would cost a model call every few runs.
    pub housekeeping: bool,
    /// Stops the turn, once started, as a user's `/stop` does; never cancelled, it runs to
    /// its end.
    pub cancel: CancellationToken,
    /// The turn runs in a slot of `maxConcurrentTurns` its caller holds, without taking one
    /// of its own: a turn that waits for this one (an agent called as a tool) would
    /// otherwise wait forever when every slot is taken by such callers.
    pub in_callers_slot: bool,
}

/// A submitted [`TurnRequest`]: its events as they happen, and its outcome.
#[derive(Debug)]
pub struct TurnTicket {
    /// Fires when the turn begins; dropped unfired when it never does.
    pub started: oneshot::Receiver<()>,
    /// Unbounded because the agent reports events from a synchronous callback that cannot
    /// wait; one turn's events are bounded by the turn itself.
    pub events: mpsc::UnboundedReceiver<AgentEvent>,
    pub outcome: TurnResult,
    /// Fires with the session's new title when the housekeeping after the turn gave it one
    /// (its first answered question); dropped unfired otherwise.
    pub titled: oneshot::Receiver<String>,
}

/// The end of a submitted turn; a future.
#[derive(Debug)]
pub struct TurnResult(oneshot::Receiver<Result<TurnOutcome, AgentError>>);

impl Future for TurnResult {
    type Output = Result<TurnOutcome, TurnError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|received| match received {
                Ok(Ok(outcome)) => Ok(outcome),
                Ok(Err(err)) => Err(TurnError::Agent(err)),
                Err(_) => Err(TurnError::Abandoned),
            })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The gateway shut down before the turn could run or finish.
    #[error("the gateway shut down before the turn finished")]
    Abandoned,
}

/// Why a submission was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("{waiting} messages are already waiting in this conversation")]
    QueueFull { waiting: usize },
    #[error("no agent `{0}`")]
    UnknownAgent(String),
    #[error("the gateway is shutting down")]
    ShuttingDown,
}

/// A session's activity, for `/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionActivity {
    pub session: SessionKey,
    /// A turn of it runs now.
    pub running: bool,
    /// Items waiting in its queue.
    pub waiting: usize,
}

/// The scheduler; clones share it.
#[derive(Clone)]
pub struct Turns {
    shared: Arc<Shared>,
}

struct Shared {
    agents: BTreeMap<String, GatewayAgent>,
    chats: ChatTurns,
    mode: QueueMode,
    cap: usize,
    permits: Arc<Semaphore>,
    sessions: Mutex<HashMap<SessionKey, Queue>>,
    running: AtomicUsize,
    workers: TaskTracker,
    /// No more turns start.
    stop: CancellationToken,
    /// The grace period is over: running turns are dropped.
    abort: CancellationToken,
}

/// The queue of a session that has work; removed once empty and idle.
#[derive(Default)]
struct Queue {
    waiting: VecDeque<Job>,
    running: bool,
}

enum Job {
    Message {
        agent_id: String,
        entry: Box<JournalEntry>,
    },
    /// Boxed: a request's input is far larger than a message's handle.
    Request(Box<ApiJob>),
}

/// A submitted [`TurnRequest`] with the ends of its ticket, waiting and then running alone.
struct ApiJob {
    agent_id: String,
    with_model: Option<Arc<Agent>>,
    input: UserInput,
    housekeeping: bool,
    cancel: CancellationToken,
    in_callers_slot: bool,
    started: oneshot::Sender<()>,
    events: mpsc::UnboundedSender<AgentEvent>,
    outcome: oneshot::Sender<Result<TurnOutcome, AgentError>>,
    titled: oneshot::Sender<String>,
}

/// What one turn works on.
enum Batch {
    Messages {
        agent_id: String,
        entries: Vec<JournalEntry>,
    },
    Request(Box<ApiJob>),
}

impl Turns {
    pub(crate) fn new(
        config: &GatewayConfig,
        agents: BTreeMap<String, GatewayAgent>,
        chats: ChatTurns,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                agents,
                chats,
                mode: config.queue.mode,
                // A cap of 0 would refuse everything, even in an idle session.
                cap: (config.queue.cap as usize).max(1),
                permits: Arc::new(Semaphore::new(
                    (config.max_concurrent_turns as usize).max(1),
                )),
                sessions: Mutex::new(HashMap::new()),
                running: AtomicUsize::new(0),
                workers: TaskTracker::new(),
                stop: CancellationToken::new(),
                abort: CancellationToken::new(),
            }),
        }
    }

    /// Queues one turn for the HTTP API; see the module documentation.
    pub fn submit(&self, request: TurnRequest) -> Result<TurnTicket, SubmitError> {
        let (events, events_out) = mpsc::unbounded_channel();
        let (outcome, outcome_out) = oneshot::channel();
        let (started, started_out) = oneshot::channel();
        let (titled, titled_out) = oneshot::channel();
        let job = ApiJob {
            agent_id: request.agent_id.clone(),
            with_model: request.with_model,
            input: request.input,
            housekeeping: request.housekeeping,
            cancel: request.cancel,
            in_callers_slot: request.in_callers_slot,
            started,
            events,
            outcome,
            titled,
        };
        self.enqueue(request.session, &request.agent_id, job, |job| {
            Job::Request(Box::new(job))
        })
        .map_err(|(error, _)| error)?;
        Ok(TurnTicket {
            started: started_out,
            events: events_out,
            outcome: TurnResult(outcome_out),
            titled: titled_out,
        })
    }

    /// Queues a journaled chat message on `route`; a refused one comes back with the reason.
    pub(crate) fn submit_message(
        &self,
        route: Route,
        entry: Box<JournalEntry>,
    ) -> Result<(), (SubmitError, Box<JournalEntry>)> {
        let Route { agent_id, session } = route;
        self.enqueue(session, &agent_id.clone(), entry, |entry| Job::Message {
            agent_id,
            entry,
        })
    }

    /// The agent ids turns can be submitted to.
    pub fn agent_ids(&self) -> impl Iterator<Item = &str> {
        self.shared.agents.keys().map(String::as_str)
    }

    pub(crate) fn agent(&self, id: &str) -> Option<&Arc<Agent>> {
        self.shared.agents.get(id).map(|a| &a.agent)
    }

    /// Turns running now.
    pub fn running(&self) -> usize {
        self.shared.running.load(Ordering::Relaxed)
    }

    /// Whether a shutdown has begun: no more turns start.
    pub fn is_stopping(&self) -> bool {
        self.shared.stop.is_cancelled()
    }

    /// The sessions that have a turn running or waiting, by key.
    pub fn activity(&self) -> Vec<SessionActivity> {
        let sessions = self.shared.lock();
        let mut activity: Vec<_> = sessions
            .iter()
            .map(|(session, queue)| SessionActivity {
                session: session.clone(),
                running: queue.running,
                waiting: queue.waiting.len(),
            })
            .collect();
        activity.sort_by(|a, b| a.session.cmp(&b.session));
        activity
    }

    /// Starts no more turns, waits up to `grace` for the running ones, then drops those left.
    pub async fn shutdown(&self, grace: Duration) {
        let shared = &self.shared;
        shared.stop.cancel();
        shared.workers.close();
        if tokio::time::timeout(grace, shared.workers.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "{} turns still running after {}s; they are stopped and their messages answered after the next start",
                shared.running.load(Ordering::Relaxed),
                grace.as_secs()
            );
            shared.abort.cancel();
            shared.workers.wait().await;
        }
    }

    /// Queues `item` (made into a job by `job`) on `session`, or hands it back with why not.
    fn enqueue<T>(
        &self,
        session: SessionKey,
        agent_id: &str,
        item: T,
        job: impl FnOnce(T) -> Job,
    ) -> Result<(), (SubmitError, T)> {
        let shared = &self.shared;
        if shared.stop.is_cancelled() {
            return Err((SubmitError::ShuttingDown, item));
        }
        if !shared.agents.contains_key(agent_id) {
            return Err((SubmitError::UnknownAgent(agent_id.to_owned()), item));
        }
        let mut sessions = shared.lock();
        let start_worker = !sessions.contains_key(&session);
        let queue = sessions.entry(session.clone()).or_default();
        if queue.waiting.len() >= shared.cap {
            let waiting = queue.waiting.len();
            return Err((SubmitError::QueueFull { waiting }, item));
        }
        queue.waiting.push_back(job(item));
        drop(sessions);
        if start_worker {
            let shared = Arc::clone(shared);
            self.shared.workers.spawn(work(shared, session));
        }
        Ok(())
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, HashMap<SessionKey, Queue>> {
        // Every change to the map is complete before anything that can panic.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next batch of `session`, or `None` (and the session forgotten) when its queue is
    /// empty.
    fn next_batch(&self, session: &SessionKey) -> Option<Batch> {
        let mut sessions = self.lock();
        let queue = sessions.get_mut(session)?;
        // A request whose caller went away before its turn is not worth a turn.
        queue.waiting.retain(|job| match job {
            Job::Request(job) => !job.outcome.is_closed(),
            Job::Message { .. } => true,
        });
        let Some(first) = queue.waiting.pop_front() else {
            sessions.remove(session);
            return None;
        };
        queue.running = true;
        Some(match first {
            Job::Request(job) => Batch::Request(job),
            Job::Message { agent_id, entry } => {
                let mut entries = vec![*entry];
                let collect = match self.mode {
                    QueueMode::Collect => !is_command(&entries[0].message),
                    QueueMode::Followup => false,
                };
                while collect
                    && let Some(Job::Message {
                        agent_id: next_agent,
                        entry: next,
                    }) = queue.waiting.front()
                    && *next_agent == agent_id
                    // Answered in the same place.
                    && next.message.chat() == entries[0].message.chat()
                    && !is_command(&next.message)
                    // The front was just seen to be such a message.
                    && let Some(Job::Message { entry, .. }) = queue.waiting.pop_front()
                {
                    entries.push(*entry);
                }
                Batch::Messages { agent_id, entries }
            }
        })
    }
}

/// Works through `session`'s queue, one turn at a time, until it is empty or the gateway
/// stops.
async fn work(shared: Arc<Shared>, session: SessionKey) {
    loop {
        // Checked before waiting for a permit, so an idle session's task ends at once and
        // does not queue for a slot it does not need.
        let in_callers_slot = {
            let mut sessions = shared.lock();
            let Some(next) = sessions
                .get(&session)
                .and_then(|queue| queue.waiting.front())
            else {
                sessions.remove(&session);
                return;
            };
            match next {
                Job::Request(job) => job.in_callers_slot,
                Job::Message { .. } => false,
            }
        };
        let permit = if in_callers_slot {
            if shared.stop.is_cancelled() {
                break;
            }
            None
        } else {
            tokio::select! {
                biased;
                () = shared.stop.cancelled() => break,
                permit = Arc::clone(&shared.permits).acquire_owned() => match permit {
                    Ok(permit) => Some(permit),
                    Err(_closed) => break,
                },
            }
        };
        // Taken only now, so that what arrived while waiting for the permit joins the batch.
        let Some(batch) = shared.next_batch(&session) else {
            return;
        };
        shared.running.fetch_add(1, Ordering::Relaxed);
        tokio::select! {
            biased;
            () = run(&shared, &session, batch) => {}
            () = shared.abort.cancelled() => {
                tracing::warn!(session = %session, "turn stopped by the shutdown");
            }
        }
        shared.running.fetch_sub(1, Ordering::Relaxed);
        drop(permit);
        if let Some(queue) = shared.lock().get_mut(&session) {
            queue.running = false;
        }
    }
    // Stopped: what is still queued stays in the journal (messages) or is told so (requests,
    // through their dropped outcome senders).
    shared.lock().remove(&session);
}

async fn run(shared: &Shared, session: &SessionKey, batch: Batch) {
    let agent_id = match &batch {
        Batch::Messages { agent_id, .. } => agent_id,
        Batch::Request(job) => &job.agent_id,
    };
    // Checked when queued; the map never changes.
    let Some(configured) = shared.agents.get(agent_id) else {
        return;
    };
    let (agent, titled) = match batch {
        Batch::Messages { entries, .. } => {
            shared.chats.run(configured, session, &entries).await;
            (Arc::clone(&configured.agent), None)
        }
        Batch::Request(job) => {
            let ApiJob {
                with_model,
                input,
                housekeeping,
                cancel,
                started,
                events,
                outcome,
                titled,
                ..
            } = *job;
            let agent = with_model.unwrap_or_else(|| Arc::clone(&configured.agent));
            let bus = &shared.chats.bus;
            let watched = bus.wants(EventKind::Turn);
            // Whoever waits for the start may have gone; the turn goes on regardless.
            let _ = started.send(());
            let result = agent
                .run_turn_until(
                    session,
                    input,
                    &mut |event| {
                        if watched {
                            bus.publish(OutboundEvent::Turn {
                                session: session.clone(),
                                event: event.clone(),
                            });
                        }
                        // The caller may have stopped listening; the turn goes on regardless.
                        let _ = events.send(event);
                    },
                    &cancel,
                )
                .await;
            let event = match &result {
                Ok(_) => Event::TurnFinished,
                Err(_) => Event::TurnFailed,
            };
            shared.chats.status.count(event);
            drop(events);
            let _ = outcome.send(result);
            if !housekeeping {
                return;
            }
            (agent, Some(titled))
        }
    };
    match agent.consolidate_if_due(session).await {
        Ok(Some(report)) => tracing::info!(
            session = %session,
            "{} messages consolidated into memory",
            report.entries
        ),
        Ok(None) => {}
        Err(err) => tracing::warn!(session = %session, "memory consolidation failed: {err}"),
    }
    match agent.title_if_missing(session).await {
        Ok(Some(title)) => {
            if let Some(titled) = titled {
                // Whoever asked may have gone; the title is saved regardless.
                let _ = titled.send(title);
            }
        }
        Ok(None) => {}
        Err(err) => tracing::warn!(session = %session, "{err}"),
    }
}
