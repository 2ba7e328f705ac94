//! Autonomous runs: a turn nobody in a chat asked for (a heartbeat tick, a scheduled job) for
//! agent X in session S, its reply delivered to target T.
//!
//! The turn goes through [`Turns::submit`] like an API request, so it waits behind whatever
//! its session has queued and counts against `gateway.maxConcurrentTurns`. What the caller's
//! filter leaves of the reply (a heartbeat takes `HEARTBEAT_OK` off) is published on the
//! [`OutboundBus`] as an answer, so the channels' sender retries it and keeps it in the
//! outbox when the platform cannot take it. The target is the `message` tool's "this chat"
//! during the run, and a reply that says `NO_REPLY`, or repeats what the tool sent there, is
//! not sent.

use std::sync::Arc;

use nanocrab_config::DeliveryTarget;
use nanocrab_core::UserInput;
use nanocrab_schema::{ChatRef, OutboundMessage, SessionKey, TraceId, Usage};
use serde::{Deserialize, Serialize};

use crate::bus::{OutboundBus, OutboundEvent, Outgoing};
use crate::last_chat::LastChats;
use crate::turn_messages::{DEFAULT_ACCOUNT, TurnMessages, worth_sending};
use crate::turns::{SubmitError, TurnError, TurnRequest, Turns};

/// One autonomous turn.
#[derive(Debug, Clone)]
pub struct AutonomousRun {
    pub agent_id: String,
    pub session: SessionKey,
    pub input: UserInput,
    pub target: DeliveryTarget,
}

/// What became of a run's reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "delivery", rename_all = "camelCase")]
pub enum Delivery {
    /// Handed to the channels' sender for this chat.
    Sent { chat: ChatRef, text: String },
    /// The filter left nothing to say.
    Silent,
    /// The target is `none`: the reply is only logged, as the configuration asks.
    Logged { text: String },
    /// Not sent, and why; the text is logged.
    NotSent { text: String, reason: String },
}

#[derive(Debug, thiserror::Error)]
pub enum AutonomousError {
    #[error(transparent)]
    Submit(#[from] SubmitError),
    #[error(transparent)]
    Turn(#[from] TurnError),
}

/// Runs autonomous turns; clones share the scheduler, the bus and the last chats.
#[derive(Clone)]
pub struct Autonomous {
    pub(crate) turns: Turns,
    pub(crate) bus: OutboundBus,
    pub(crate) last_chats: Arc<LastChats>,
    /// `(name, account)` of the channels the gateway runs.
    pub(crate) channels: Vec<(String, String)>,
    /// The `message` tool's chats: a run's is the one its reply goes to.
    pub(crate) messages: TurnMessages,
}

impl Autonomous {
    /// Runs `run` and delivers what `keep` leaves of its reply (`None`: nothing to say).
    pub async fn run(
        &self,
        run: AutonomousRun,
        keep: impl FnOnce(&str) -> Option<String>,
    ) -> Result<Delivery, AutonomousError> {
        self.run_counted(run, keep)
            .await
            .map(|(delivery, _)| delivery)
    }

    /// [`Autonomous::run`], and the tokens the turn took.
    pub async fn run_counted(
        &self,
        run: AutonomousRun,
        keep: impl FnOnce(&str) -> Option<String>,
    ) -> Result<(Delivery, Usage), AutonomousError> {
        let AutonomousRun {
            agent_id,
            session,
            mut input,
            target,
        } = run;
        // The `message` tool's "this chat" is where the reply goes, when there is such a chat.
        let trace = input.trace_id.get_or_insert_with(TraceId::new).clone();
        let turn_chat = self
            .chat_for(&agent_id, &target)
            .ok()
            .map(|chat| self.messages.begin(trace, chat));
        let ticket = self.turns.submit(TurnRequest {
            agent_id: agent_id.clone(),
            session: session.clone(),
            input,
            with_model: None,
            housekeeping: false,
            cancel: Default::default(),
            in_callers_slot: false,
        })?;
        // The turn's events reach observers through the bus; nobody here reads them.
        drop(ticket.events);
        let outcome = ticket.outcome.await?;
        let said = turn_chat.map(|chat| chat.said()).unwrap_or_default();
        let Some(text) = keep(&outcome.text) else {
            tracing::info!(agent = %agent_id, session = %session, "nothing to report");
            return Ok((Delivery::Silent, outcome.usage));
        };
        if !worth_sending(&text, &said) {
            tracing::info!(agent = %agent_id, session = %session,
                "the reply is not sent: it says NO_REPLY, or the message tool sent it already");
            return Ok((Delivery::Silent, outcome.usage));
        }
        Ok((self.say(&agent_id, &target, text), outcome.usage))
    }

    /// Sends `text` to the chat `target` means for agent `agent_id`, with no turn: what an
    /// autonomous run has to report about itself (a scheduled job that failed).
    pub fn say(&self, agent_id: &str, target: &DeliveryTarget, text: String) -> Delivery {
        if *target == DeliveryTarget::None {
            tracing::info!(agent = %agent_id, "reply (its target is none, so only logged): {text}");
            return Delivery::Logged { text };
        }
        match self.chat_for(agent_id, target) {
            Ok(chat) => {
                self.bus.publish(OutboundEvent::Message(Outgoing::answer(
                    OutboundMessage {
                        chat: chat.clone(),
                        text: text.clone(),
                        reply_to_message_id: None,
                        file: None,
                    },
                    Vec::new(),
                )));
                tracing::info!(agent = %agent_id, channel = %chat.channel, chat = %chat.chat_id, "reply sent");
                Delivery::Sent { chat, text }
            }
            Err(reason) => {
                tracing::warn!(agent = %agent_id, "reply not sent: {reason}: {text}");
                Delivery::NotSent { text, reason }
            }
        }
    }

    /// The chat `target` means for agent `agent_id`, or why there is none.
    pub fn chat_for(&self, agent_id: &str, target: &DeliveryTarget) -> Result<ChatRef, String> {
        let chat = match target {
            DeliveryTarget::None => return Err("the target is none".to_owned()),
            DeliveryTarget::Last => self.last_chats.get(agent_id).ok_or_else(|| {
                "the target is the last chat, and nobody has written to this agent directly yet"
                    .to_owned()
            })?,
            DeliveryTarget::Chat { channel, chat_id } => ChatRef {
                channel: channel.clone(),
                account: DEFAULT_ACCOUNT.to_owned(),
                chat_id: chat_id.clone(),
                thread_id: None,
            },
        };
        if !self
            .channels
            .iter()
            .any(|(name, account)| *name == chat.channel && *account == chat.account)
        {
            return Err(format!("the gateway runs no {} channel", chat.channel));
        }
        Ok(chat)
    }
}
