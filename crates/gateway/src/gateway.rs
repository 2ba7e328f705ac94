//! The gateway's run loop: channels in, each message checked, journaled, routed and queued for
//! its session's turn, and the channels kept running.
//!
//! Every inbound message is first checked by [`Access`]; one that is not let in is logged by
//! channel, chat, sender and reason (never by what it says) and accepted, so the platform
//! forgets it; a stranger under `dmPolicy: pairing` gets their pairing code. One let in is
//! journaled, routed and queued, and only then accepted: from there a crash cannot lose it.
//! The journal's unfinished messages are queued again on start, before the channels start.
//!
//! A channel whose receive loop fails is started again after a pause that doubles up to a
//! minute, unless the platform rejected its credentials: that channel stays stopped (an error
//! in the log names it) and the others go on.
//!
//! On shutdown the gateway stops taking messages (those not yet accepted are delivered again
//! by their platform on the next start), lets running turns finish for up to
//! `gateway.shutdownGrace` seconds, and leaves queued messages in the journal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanocrab_channels::{Channel, ChannelError, Delivery, InboundSink, inbound_queue};
use nanocrab_config::{Config, DEFAULT_AGENT_ID};
use nanocrab_core::Agent;
use nanocrab_schema::OutboundMessage;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::access::{Access, AccessDecision};
use crate::approvals::Approvals;
use crate::chat_turn::{APOLOGY, ChatTurns, answer_to};
use crate::journal::{Journal, JournalEntry, JournalError, Recorded};
use crate::router::Router;
use crate::status::{ChannelState, Event, Status};
use crate::turns::{SubmitError, Turns};

/// The journal's file in the state directory.
pub const INBOX_FILE: &str = "gateway-inbox.jsonl";
/// Held by the running gateway, in the state directory.
const LOCK_FILE: &str = "gateway.lock";
/// Finished messages remembered to recognise a redelivery; platforms redeliver only the last
/// few unconfirmed ones after a crash.
const REMEMBERED_MESSAGES: usize = 1000;
/// Messages handed over by the channels and not yet taken; a full queue slows the channels.
const INBOUND_QUEUE: usize = 64;
const FIRST_RESTART: Duration = Duration::from_secs(1);
const MAX_RESTART: Duration = Duration::from_secs(60);

/// What a sender is told when their conversation already has `gateway.queue.cap` messages
/// waiting.
pub(crate) const BUSY: &str = "I'm still working on your earlier messages and can't take more right now. Please send this again in a moment.";
/// What a sender is told when their message could not be stored.
const NOT_STORED: &str =
    "Sorry, I can't take messages right now. Please send this again in a moment.";

/// An agent as the gateway runs it: the agent, and the workspace attachments are saved into.
#[derive(Clone)]
pub struct GatewayAgent {
    pub agent: Arc<Agent>,
    pub workspace: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Journal(#[from] JournalError),
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
}

pub struct Gateway {
    /// Held while the gateway exists: one gateway per state directory.
    _lock: std::fs::File,
    router: Router,
    access: Access,
    channels: Vec<Arc<dyn Channel>>,
    journal: Arc<Journal>,
    replay: Vec<JournalEntry>,
    turns: Turns,
    status: Arc<Status>,
    approvals: Arc<Approvals>,
    grace: Duration,
}

impl Gateway {
    /// Opens the journal in `state_dir` and checks that every agent `config.bindings` names,
    /// and the default one, is among `agents`. `approvals` is the approver the agents were
    /// built with: the gateway asks its questions in the chats and takes the answers.
    pub fn new(
        config: &Config,
        agents: BTreeMap<String, GatewayAgent>,
        channels: Vec<Arc<dyn Channel>>,
        state_dir: &Path,
        access: Access,
        approvals: Arc<Approvals>,
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
        let journal = Arc::new(journal);
        let status = Arc::new(Status::new(
            channels.iter().map(|c| (c.name(), c.account())),
        ));
        approvals.attach(channels.clone());
        let chats = ChatTurns {
            channels: channels.clone(),
            journal: Arc::clone(&journal),
            status: Arc::clone(&status),
            approvals: Arc::clone(&approvals),
        };
        Ok(Self {
            _lock: lock,
            router: Router::new(&config.bindings, &config.session),
            access,
            channels,
            journal,
            replay,
            turns: Turns::new(&config.gateway, agents, chats),
            status,
            approvals,
            grace: Duration::from_secs(config.gateway.shutdown_grace),
        })
    }

    /// The scheduler, for the HTTP API's turns.
    pub fn turns(&self) -> &Turns {
        &self.turns
    }

    pub fn status(&self) -> &Arc<Status> {
        &self.status
    }

    /// Runs until `shutdown` is cancelled, then shuts down as the module documentation says.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let replies = TaskTracker::new();
        let replay = std::mem::take(&mut self.replay);
        if !replay.is_empty() {
            tracing::info!(
                "{} messages from before the last stop are answered first",
                replay.len()
            );
        }
        for entry in replay {
            self.enqueue(entry, &replies);
        }
        let (sink, mut inbox) = inbound_queue(INBOUND_QUEUE);
        let mut supervisors = JoinSet::new();
        for channel in &self.channels {
            supervisors.spawn(supervise(
                Arc::clone(channel),
                sink.clone(),
                shutdown.clone(),
                Arc::clone(&self.status),
            ));
        }
        drop(sink);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                delivery = inbox.recv() => match delivery {
                    Some(delivery) => self.dispatch(delivery, &replies),
                    // Every channel has stopped for good; the HTTP API still runs.
                    None => {
                        shutdown.cancelled().await;
                        break;
                    }
                },
            }
        }
        // Messages handed over but not taken are refused, so their platform keeps them.
        drop(inbox);
        replies.close();
        let channels_stopped = async {
            if tokio::time::timeout(self.grace, supervisors.join_all())
                .await
                .is_err()
            {
                tracing::warn!("channels still running after the grace period are stopped");
            }
        };
        let replies_sent = async {
            if tokio::time::timeout(self.grace, replies.wait())
                .await
                .is_err()
            {
                tracing::warn!("replies still being sent after the grace period are dropped");
            }
        };
        tokio::join!(
            channels_stopped,
            replies_sent,
            self.turns.shutdown(self.grace)
        );
    }

    /// Takes one delivered message: access, journal, route, queue, accept.
    fn dispatch(&self, delivery: Delivery, replies: &TaskTracker) {
        let message = &delivery.message;
        self.status.received(&message.channel, &message.account);
        let (channel, chat, sender) = (&message.channel, &message.chat_id, &message.sender.id);
        match self.access.check(message) {
            Ok(AccessDecision::Allow) => {}
            Ok(AccessDecision::Ignore(why)) => {
                tracing::debug!(%channel, %chat, %sender, "message ignored: {why}");
                self.status.count(Event::Ignored);
                delivery.accept();
                return;
            }
            Ok(AccessDecision::Deny(why)) => {
                tracing::info!(%channel, %chat, %sender, "message denied: {why}");
                self.status.count(Event::Denied);
                delivery.accept();
                return;
            }
            Ok(AccessDecision::Pair { reply }) => {
                tracing::info!(%channel, %chat, %sender, "unknown sender: pairing code sent");
                self.status.count(Event::Denied);
                self.reply(replies, answer_to(message, reply), None);
                delivery.accept();
                return;
            }
            // Deny by default: a message whose sender cannot be checked does not get in.
            Err(err) => {
                tracing::error!(%channel, %chat, %sender, "message denied: access cannot be checked: {err}");
                self.status.count(Event::Denied);
                delivery.accept();
                return;
            }
        }
        // An answer to an approval goes to the run waiting for it, not into the session's
        // queue, where it would wait behind that very run.
        if let Some(confirmation) = self.approvals.answer_from_chat(message) {
            tracing::info!(%channel, %chat, %sender, "approval answered");
            self.reply(replies, answer_to(message, confirmation), None);
            delivery.accept();
            return;
        }
        match self.journal.record(message) {
            Ok(Recorded::New(id)) => {
                tracing::debug!(%channel, %chat, %sender, entry = %id, "message journaled");
                self.enqueue(
                    JournalEntry {
                        id,
                        message: message.clone(),
                    },
                    replies,
                );
            }
            Ok(Recorded::Duplicate) => {
                tracing::info!(%channel, %chat, %sender, message = %message.message_id, "redelivered message dropped");
                self.status.count(Event::Duplicate);
            }
            Err(err) => {
                tracing::error!(%channel, %chat, %sender, "message refused: {err}");
                self.status.count(Event::Refused);
                self.reply(replies, answer_to(message, NOT_STORED.to_owned()), None);
            }
        }
        delivery.accept();
    }

    /// Routes a journaled message and queues it for its session's turn; a refusal is answered
    /// with its reason and the message marked done.
    fn enqueue(&self, entry: JournalEntry, replies: &TaskTracker) {
        let message = entry.message.clone();
        let id = entry.id;
        let refusal = match self.router.route(&message) {
            Ok(route) => match self.turns.submit_message(route, entry) {
                Ok(()) => return,
                Err(SubmitError::QueueFull { waiting }) => {
                    tracing::info!(channel = %message.channel, chat = %message.chat_id, "message refused: {waiting} already waiting in its session");
                    BUSY
                }
                // Only while shutting down: it stays in the journal for the next start.
                Err(SubmitError::ShuttingDown) => return,
                Err(err @ SubmitError::UnknownAgent(_)) => {
                    tracing::error!(channel = %message.channel, chat = %message.chat_id, "message refused: {err}");
                    APOLOGY
                }
            },
            Err(err) => {
                tracing::error!(channel = %message.channel, chat = %message.chat_id, "message refused: no session key: {err}");
                APOLOGY
            }
        };
        self.status.count(Event::Refused);
        self.reply(
            replies,
            answer_to(&message, refusal.to_owned()),
            Some(JournalEntry { id, message }),
        );
    }

    /// Sends `answer` in the background (a slow platform must not hold up other chats), then
    /// marks `done` done.
    fn reply(&self, replies: &TaskTracker, answer: OutboundMessage, done: Option<JournalEntry>) {
        let turns = self.turns.clone();
        replies.spawn(async move {
            turns.chats().send(&answer).await;
            if let Some(entry) = done {
                turns.chats().done(&entry);
            }
        });
    }
}

/// Runs `channel` until `shutdown`, starting it again when it fails.
async fn supervise(
    channel: Arc<dyn Channel>,
    sink: InboundSink,
    shutdown: CancellationToken,
    status: Arc<Status>,
) {
    let (name, account) = (channel.name().to_owned(), channel.account().to_owned());
    let set_state = |state| {
        if let Some(channel) = status.channel(&name, &account) {
            channel.set_state(state);
        }
    };
    let mut pause = FIRST_RESTART;
    loop {
        set_state(ChannelState::Running);
        let started = Instant::now();
        let result = channel.run(sink.clone(), shutdown.clone()).await;
        if shutdown.is_cancelled() {
            set_state(ChannelState::Stopped);
            return;
        }
        let error = match result {
            Ok(()) => "stopped receiving on its own".to_owned(),
            Err(err @ ChannelError::Unauthorized { .. }) => {
                tracing::error!(channel = %name, %account, "{err}; the channel stays stopped until the gateway restarts");
                set_state(ChannelState::Unauthorized {
                    error: err.to_string(),
                });
                return;
            }
            Err(
                err @ (ChannelError::Unsupported { .. }
                | ChannelError::Api { .. }
                | ChannelError::Transport { .. }
                | ChannelError::TooLarge { .. }),
            ) => err.to_string(),
        };
        // A channel that ran for a while before failing starts over with a short pause.
        if started.elapsed() > MAX_RESTART {
            pause = FIRST_RESTART;
        }
        tracing::warn!(channel = %name, %account, "{error}; starting it again in {}s", pause.as_secs());
        set_state(ChannelState::Restarting { error });
        tokio::select! {
            () = shutdown.cancelled() => {
                set_state(ChannelState::Stopped);
                return;
            }
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(MAX_RESTART);
    }
}
