//! A turn answering chat messages: the input built from them, "typing…" shown while it runs,
//! and the answer (or a short apology when it fails) published for their chat (and thread);
//! the channels' sender marks the messages done once the answer is out. The chat is the
//! `message` tool's "this chat" during the turn; an answer that says `NO_REPLY`, or repeats
//! what the tool sent there, is not sent (the messages are done all the same). What the turn
//! does as it goes is published too, for whoever watches.

use std::sync::Arc;
use std::time::Duration;

use nanocrab_channels::Channel;
use nanocrab_provider::Transcriber;
use nanocrab_schema::{AgentEvent, InstructionsChange, SessionKey, TraceId};

use crate::approvals::Approvals;
use crate::bus::{EventKind, OutboundBus, OutboundEvent, Outgoing};
use crate::chat_input::{ChatInput, user_input};
use crate::gateway_agent::GatewayAgent;
use crate::journal::{Journal, JournalEntry};
use crate::replies::{APOLOGY, answer_to};
use crate::status::{Event, Status};
use crate::turn_messages::{TurnMessages, worth_sending};

/// Platforms show "typing…" for about five seconds; renewed a little sooner.
const TYPING_EVERY: Duration = Duration::from_secs(4);

/// The channels messages come from, the bus answers go out on, the journal that learns when
/// messages are done, and the counters.
pub(crate) struct ChatTurns {
    pub(crate) channels: Vec<Arc<dyn Channel>>,
    pub(crate) bus: OutboundBus,
    pub(crate) journal: Arc<Journal>,
    pub(crate) status: Arc<Status>,
    pub(crate) approvals: Arc<Approvals>,
    /// The `message` tool's chats: this turn's is the one it answers.
    pub(crate) messages: TurnMessages,
    /// Voice messages and audio files into text (`tools.transcription`), when configured.
    pub(crate) transcriber: Option<Arc<Transcriber>>,
}

impl ChatTurns {
    pub(crate) fn channel(&self, name: &str, account: &str) -> Option<&Arc<dyn Channel>> {
        self.channels
            .iter()
            .find(|c| c.name() == name && c.account() == account)
    }

    /// Marks a message done, logging a failure: the worst outcome is that it is answered
    /// again after a restart.
    pub(crate) fn done(&self, entry: &JournalEntry) {
        if let Err(err) = self.journal.done(entry.id) {
            tracing::error!(entry = %entry.id, "{err}");
        }
    }

    /// Runs one turn of `session` answering `batch` (messages of one chat, oldest first).
    pub(crate) async fn run(
        &self,
        agent: &GatewayAgent,
        session: &SessionKey,
        batch: &[JournalEntry],
    ) {
        let Some(last) = batch.last() else {
            return;
        };
        let message = &last.message;
        let chat = message.chat();
        let Some(channel) = self.channel(&message.channel, &message.account) else {
            // The channel was removed from the config since the message was journaled.
            tracing::warn!(
                channel = %message.channel,
                account = %message.account,
                "no such channel any more; its messages are dropped"
            );
            batch.iter().for_each(|entry| self.done(entry));
            return;
        };
        let messages: Vec<_> = batch.iter().map(|entry| entry.message.clone()).collect();
        let typing = channel.capabilities().typing;
        // The turn's approvals are asked in the chat it answers.
        self.approvals.bind(session, chat.clone());
        // The `message` tool's "this chat", known by the run's trace id.
        let trace = TraceId::new();
        let turn_chat = self.messages.begin(trace.clone(), chat.clone());
        // Said in the chat, so the person there sees a standing instruction change as it does.
        let changes = std::sync::Mutex::new(Vec::new());
        let turn = async {
            let ChatInput { mut input, notes } = user_input(
                channel.as_ref(),
                &agent.workspace,
                self.transcriber.as_deref(),
                &messages,
            )
            .await;
            // Said before the answer: what the turn could not hear.
            for note in notes {
                self.bus.publish(OutboundEvent::Message(Outgoing::answer(
                    answer_to(message, note),
                    Vec::new(),
                )));
            }
            input.trace_id = Some(trace);
            let watched = self.bus.wants(EventKind::Turn);
            let mut on_event = |event: AgentEvent| {
                if let AgentEvent::InstructionsChanged(change) = &event {
                    changes
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(change.clone());
                }
                if watched {
                    self.bus.publish(OutboundEvent::Turn {
                        session: session.clone(),
                        event,
                    });
                }
            };
            agent.agent.run_turn(session, input, &mut on_event).await
        };
        tokio::pin!(turn);
        let outcome = loop {
            let show_typing = async {
                if typing {
                    self.bus.publish(OutboundEvent::Typing(chat.clone()));
                }
                tokio::time::sleep(TYPING_EVERY).await;
            };
            tokio::select! {
                outcome = &mut turn => break outcome,
                () = show_typing => {}
            }
        };
        self.approvals.unbind(session);
        let said = turn_chat.said();
        let changes: Vec<InstructionsChange> = changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
            .collect();
        for change in changes {
            let agent = if change.agent == nanocrab_config::DEFAULT_AGENT_ID {
                String::new()
            } else {
                format!(" --agent {}", change.agent)
            };
            let note = format!(
                "✎ {path} changed (version {version}), by {tool}. See the change: `nanocrab \
                 workspace diff{agent} {path} {version}` · undo it: `nanocrab workspace \
                 restore{agent} {path} {version}`",
                path = change.path,
                version = change.version,
                tool = change.tool,
            );
            self.bus.publish(OutboundEvent::Message(Outgoing::answer(
                answer_to(message, note),
                Vec::new(),
            )));
        }
        let text = match outcome {
            Ok(outcome) => {
                self.status.count(Event::TurnFinished);
                outcome.text
            }
            Err(err) => {
                self.status.count(Event::TurnFailed);
                tracing::error!(session = %session, "turn failed: {err}");
                APOLOGY.to_owned()
            }
        };
        if text.trim().is_empty() {
            tracing::info!(session = %session, "the turn ended without an answer to send");
            batch.iter().for_each(|entry| self.done(entry));
        } else if !worth_sending(&text, &said) {
            tracing::info!(session = %session,
                "the final reply is not sent: it says NO_REPLY, or the message tool sent it already");
            batch.iter().for_each(|entry| self.done(entry));
        } else {
            let done = batch.iter().map(|entry| entry.id).collect();
            self.bus.publish(OutboundEvent::Message(Outgoing::answer(
                answer_to(message, text),
                done,
            )));
        }
    }
}
