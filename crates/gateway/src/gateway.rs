//! The gateway: channels in through the [`Intake`](crate::intake) pipeline to the per-session
//! [`Turns`], answers out through the [`OutboundBus`] and the channels' sender.
//!
//! On start, answers kept unsent by the last run go out first, and the journal's unfinished
//! messages are queued again, before the channels start.
//!
//! On shutdown the gateway stops taking messages (those not yet accepted are delivered again
//! by their platform on the next start), lets running turns finish for up to
//! `gateway.shutdownGrace` seconds, leaves queued messages in the journal, and sends what the
//! turns answered within the same grace; an answer still unsent then is kept for the next
//! start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nanocrab_channels::{Channel, inbound_queue};
use nanocrab_config::{CatchUp, Config, DEFAULT_AGENT_ID};
use nanocrab_provider::Transcriber;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::access::Access;
use crate::approvals::Approvals;
use crate::autonomous::Autonomous;
use crate::bus::{EventKind, OutboundBus, Subscription};
use crate::channel_supervisor::supervise;
use crate::chat_turn::ChatTurns;
use crate::cron::CronScheduler;
use crate::cron_jobs::CronControl;
use crate::gateway_agent::GatewayAgent;
use crate::heartbeat::{AgentHeartbeat, Clock, Heartbeats};
use crate::intake::Intake;
use crate::journal::{Journal, JournalEntry, JournalError};
use crate::last_chat::{LAST_CHATS_FILE, LastChats};
use crate::outbox::{Kept, Outbox, OutboxError};
use crate::router::Router;
use crate::sender::ChannelSender;
use crate::status::Status;
use crate::subagents::SubagentControl;
use crate::turn_messages::TurnMessages;
use crate::turns::Turns;

/// The journal's file in the state directory.
pub const INBOX_FILE: &str = "gateway-inbox.jsonl";
/// The outbox's file in the state directory.
pub const OUTBOX_FILE: &str = "gateway-outbox.jsonl";
/// Held by the running gateway, in the state directory.
const LOCK_FILE: &str = "gateway.lock";
/// Finished messages remembered to recognise a redelivery; platforms redeliver only the last
/// few unconfirmed ones after a crash.
const REMEMBERED_MESSAGES: usize = 1000;
/// Messages handed over by the channels and not yet taken; a full queue slows the channels.
const INBOUND_QUEUE: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// Two gateways on one home would answer every message twice and tear the journal.
    #[error("another nanocrab gateway is running with this home (it holds {path}); stop it first")]
    AlreadyRunning { path: PathBuf },
    #[error("cannot lock {path}: {source}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no agent `{agent_id}` for {needed_by}: the gateway was not given it")]
    MissingAgent { agent_id: String, needed_by: String },
    #[error("the channel {channel} (account {account}) is given twice")]
    DuplicateChannel { channel: String, account: String },
    #[error("`{key}`: {message}")]
    Heartbeat { key: String, message: String },
    #[error(transparent)]
    Subagents(#[from] crate::subagents::SubagentError),
}

pub struct Gateway {
    /// Held while the gateway exists: one gateway per state directory.
    _lock: std::fs::File,
    intake: Intake,
    channels: Vec<Arc<dyn Channel>>,
    replay: Vec<JournalEntry>,
    sender: ChannelSender,
    /// The sender's subscription, taken before anything could be published.
    outgoing: Subscription,
    kept: Vec<Kept>,
    grace: Duration,
    heartbeats: Heartbeats,
    /// What the scheduled jobs need: the runner of autonomous turns and the agents.
    autonomous: Autonomous,
    agents: BTreeMap<String, Arc<nanocrab_core::Agent>>,
    /// The scheduled jobs, once [`Gateway::with_cron`] gave them.
    cron: Option<CronScheduler>,
    approvals: Arc<Approvals>,
    /// The subagents, once [`Gateway::with_subagents`] gave them: stopped with the gateway.
    subagents: Option<SubagentControl>,
}

impl Gateway {
    /// Opens the journal and the outbox in `state_dir` and checks that every agent
    /// `config.bindings` names, and the default one, is among `agents`. `approvals` is the
    /// approver the agents were built with, on the same `bus`: the gateway asks its questions
    /// in the chats and takes the answers. `messages` is what the agents' `message` tool was
    /// given, on the same `bus`: the gateway tells it each turn's chat and leaves out a final
    /// reply the tool already sent. `transcriber` turns the channels' voice messages and audio
    /// files into text (`tools.transcription`); without one, the chat is told it is missing.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: &Config,
        agents: BTreeMap<String, GatewayAgent>,
        channels: Vec<Arc<dyn Channel>>,
        state_dir: &Path,
        access: Access,
        approvals: Arc<Approvals>,
        messages: TurnMessages,
        bus: OutboundBus,
        transcriber: Option<Transcriber>,
    ) -> Result<Self, GatewayError> {
        let needed = std::iter::once((DEFAULT_AGENT_ID, "the default route".to_owned())).chain(
            config
                .bindings
                .iter()
                .enumerate()
                .map(|(i, b)| (b.agent_id.as_str(), format!("bindings.{i}"))),
        );
        for (agent_id, needed_by) in needed {
            if !agents.contains_key(agent_id) {
                return Err(GatewayError::MissingAgent {
                    agent_id: agent_id.to_owned(),
                    needed_by,
                });
            }
        }
        for (i, channel) in channels.iter().enumerate() {
            if channels[..i]
                .iter()
                .any(|c| c.name() == channel.name() && c.account() == channel.account())
            {
                return Err(GatewayError::DuplicateChannel {
                    channel: channel.name().to_owned(),
                    account: channel.account().to_owned(),
                });
            }
        }
        let lock_path = state_dir.join(LOCK_FILE);
        let lock_error = |source| GatewayError::Lock {
            path: lock_path.clone(),
            source,
        };
        std::fs::create_dir_all(state_dir).map_err(lock_error)?;
        let lock = std::fs::File::create(&lock_path).map_err(lock_error)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(GatewayError::AlreadyRunning { path: lock_path });
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(lock_error(source)),
        }
        let (journal, replay) = Journal::open(&state_dir.join(INBOX_FILE), REMEMBERED_MESSAGES)?;
        let (outbox, kept) = Outbox::open(
            &state_dir.join(OUTBOX_FILE),
            jiff::Timestamp::now().as_second(),
        )?;
        let journal = Arc::new(journal);
        let status = Arc::new(Status::new(
            channels.iter().map(|c| (c.name(), c.account())),
        ));
        let outgoing = bus.subscribe_lossless(&[EventKind::Message, EventKind::Typing]);
        let sender = ChannelSender {
            channels: channels.clone(),
            journal: Arc::clone(&journal),
            outbox: Arc::new(outbox),
            status: Arc::clone(&status),
        };
        let chats = ChatTurns {
            channels: channels.clone(),
            bus: bus.clone(),
            journal: Arc::clone(&journal),
            status: Arc::clone(&status),
            approvals: Arc::clone(&approvals),
            messages: messages.clone(),
            transcriber: transcriber.map(Arc::new),
        };
        let mut beats = BTreeMap::new();
        for (id, agent) in &agents {
            // An agent the config does not list (one built in code) follows the defaults.
            let (key, settings) = match config.agents.entries.get(id) {
                Some(entry) if entry.heartbeat.is_some() => (
                    format!("agents.entries.{id}.heartbeat"),
                    config.agents.settings(id),
                ),
                Some(_) | None => (
                    "agents.defaults.heartbeat".to_owned(),
                    Some(config.agents.defaults.clone()),
                ),
            };
            let heartbeat = settings.map(|s| s.heartbeat).unwrap_or_default();
            let plan = heartbeat
                .plan()
                .map_err(|(field, message)| GatewayError::Heartbeat {
                    key: format!("{key}.{field}"),
                    message,
                })?;
            beats.insert(
                id.clone(),
                AgentHeartbeat {
                    plan,
                    workspace: agent.workspace.clone(),
                    agent: Arc::clone(&agent.agent),
                },
            );
        }
        let last_chats = Arc::new(LastChats::open(&state_dir.join(LAST_CHATS_FILE)));
        let agent_handles = agents
            .iter()
            .map(|(id, agent)| (id.clone(), Arc::clone(&agent.agent)))
            .collect();
        let turns = Turns::new(&config.gateway, agents, chats);
        let autonomous = Autonomous {
            turns: turns.clone(),
            bus: bus.clone(),
            last_chats: Arc::clone(&last_chats),
            channels: channels
                .iter()
                .map(|c| (c.name().to_owned(), c.account().to_owned()))
                .collect(),
            messages,
        };
        let heartbeats = Heartbeats::new(beats, autonomous.clone(), Arc::new(jiff::Timestamp::now));
        let intake = Intake {
            access,
            approvals: Arc::clone(&approvals),
            journal,
            router: Router::new(&config.bindings, &config.session),
            turns,
            bus,
            status,
            last_chats,
        };
        Ok(Self {
            _lock: lock,
            intake,
            channels,
            replay,
            sender,
            outgoing,
            kept,
            grace: Duration::from_secs(config.gateway.shutdown_grace),
            heartbeats,
            autonomous,
            agents: agent_handles,
            cron: None,
            approvals,
            subagents: None,
        })
    }

    /// Runs the jobs `control` holds (`cron.enabled`), those that missed their time and say
    /// nothing of it following `catch_up` (`cron.catchUp`).
    pub fn with_cron(mut self, control: CronControl, catch_up: CatchUp) -> Self {
        self.cron = Some(CronScheduler::new(
            control,
            self.autonomous.clone(),
            self.agents.clone(),
            catch_up,
        ));
        self
    }

    /// Runs the subagents the agents' `spawn` tool (and agents offered as tools) start in
    /// `control`, which those tools were given.
    /// Opens their file (`state/subagents.jsonl`): an error says why it cannot be.
    pub fn with_subagents(mut self, control: SubagentControl) -> Result<Self, GatewayError> {
        control.attach(
            self.autonomous.clone(),
            Arc::clone(&self.approvals),
            self.agents.clone(),
        )?;
        self.subagents = Some(control);
        Ok(self)
    }

    /// The scheduled jobs, when [`Gateway::with_cron`] gave them: runs now, for the API.
    pub fn cron(&self) -> Option<&CronScheduler> {
        self.cron.as_ref()
    }

    /// The heartbeats read `clock` instead of the system's: for tests, which then need not
    /// wait for the wall clock's ticks. Call before [`Gateway::heartbeats`] is cloned.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.heartbeats = self.heartbeats.with_clock(clock);
        self
    }

    /// Every agent's heartbeat: next ticks, and a run now.
    pub fn heartbeats(&self) -> &Heartbeats {
        &self.heartbeats
    }

    /// The scheduler, for the HTTP API's turns.
    pub fn turns(&self) -> &Turns {
        &self.intake.turns
    }

    pub fn status(&self) -> &Arc<Status> {
        &self.intake.status
    }

    /// Runs until `shutdown` is cancelled, then shuts down as the module documentation says.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            _lock,
            intake,
            channels,
            replay,
            sender,
            outgoing,
            kept,
            grace,
            heartbeats,
            autonomous: _,
            agents: _,
            cron,
            approvals: _,
            subagents,
        } = self;
        let (sender_stop, stopped) = oneshot::channel();
        let sending = tokio::spawn(sender.run(outgoing, kept, stopped));
        // Stopped with the shutdown: no tick starts a run after it.
        let beating = tokio::spawn(heartbeats.run(shutdown.clone()));
        let scheduling = tokio::spawn({
            let stop = shutdown.clone();
            async move {
                if let Some(cron) = cron {
                    cron.run(stop).await;
                }
            }
        });
        let last_chats = Arc::clone(&intake.last_chats);
        let last_chats_stop = CancellationToken::new();
        let writing = tokio::spawn({
            let stop = last_chats_stop.clone();
            async move { last_chats.keep_written(stop).await }
        });
        if !replay.is_empty() {
            tracing::info!(
                "{} messages from before the last stop are answered first",
                replay.len()
            );
        }
        for entry in replay {
            intake.enqueue(entry);
        }
        let (sink, mut inbox) = inbound_queue(INBOUND_QUEUE);
        let mut supervisors = JoinSet::new();
        for channel in &channels {
            supervisors.spawn(supervise(
                Arc::clone(channel),
                sink.clone(),
                shutdown.clone(),
                Arc::clone(&intake.status),
            ));
        }
        drop(sink);
        let mut deliveries = Vec::with_capacity(INBOUND_QUEUE);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                // Whatever has arrived is taken together, for one journal commit; what
                // arrives while it commits is taken next, together again.
                taken = inbox.recv_many(&mut deliveries, INBOUND_QUEUE) => {
                    if taken == 0 {
                        // Every channel has stopped for good; the HTTP API still runs.
                        shutdown.cancelled().await;
                        break;
                    }
                    intake.take(std::mem::take(&mut deliveries)).await;
                }
            }
        }
        let deadline = tokio::time::Instant::now() + grace;
        // A subagent may run for many minutes: it is stopped, not waited for, and recorded
        // as failed because of the stop.
        if let Some(subagents) = &subagents {
            subagents.stop_all();
        }
        // Messages handed over but not taken are refused, so their platform keeps them.
        drop(inbox);
        let channels_stopped = async {
            if tokio::time::timeout(grace, supervisors.join_all())
                .await
                .is_err()
            {
                tracing::warn!("channels still running after the grace period are stopped");
            }
        };
        tokio::join!(channels_stopped, intake.turns.shutdown(grace));
        // The turns have published all they will: the sender finishes within the grace left.
        let _ = sender_stop.send(deadline);
        if let Err(err) = sending.await {
            tracing::error!("the channels' sender failed: {err}");
        }
        if let Err(err) = intake.journal.sync() {
            tracing::error!("{err}");
        }
        last_chats_stop.cancel();
        for (what, task) in [
            ("heartbeat", beating),
            ("cron", scheduling),
            ("last-chat writer", writing),
        ] {
            if let Err(err) = task.await {
                tracing::error!("the {what} task failed: {err}");
            }
        }
    }
}
