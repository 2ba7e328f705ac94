//! The inbound pipeline: a message handed over by a channel is checked ([`Access`]), taken as
//! an approval's answer if it is one, journaled, routed to its session and queued for its
//! turn; only then is it accepted, so from there a crash cannot lose it.
//!
//! A message not let in is logged by channel, chat, sender and reason (never by what it says)
//! and accepted, so the platform forgets it; a stranger under `dmPolicy: pairing` gets their
//! pairing code. Messages that arrive together are journaled with one sync (a group commit):
//! under load the journal costs one sync per batch, not per message.

use std::sync::Arc;

use nanocrab_channels::Delivery;
use nanocrab_schema::{ChatType, InboundMessage, OutboundMessage};

use crate::access::{Access, AccessDecision};
use crate::approvals::Approvals;
use crate::bus::{OutboundBus, OutboundEvent, Outgoing};
use crate::journal::{EntryId, Journal, JournalEntry, Recorded};
use crate::last_chat::LastChats;
use crate::replies::{APOLOGY, BUSY, NOT_STORED, answer_to};
use crate::router::Router;
use crate::status::{Event, Status};
use crate::turns::{SubmitError, Turns};

/// The stages a message goes through on its way to a turn.
pub(crate) struct Intake {
    pub(crate) access: Access,
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) journal: Arc<Journal>,
    pub(crate) router: Router,
    pub(crate) turns: Turns,
    pub(crate) bus: OutboundBus,
    pub(crate) status: Arc<Status>,
    /// Where each agent's user last wrote directly, for autonomous replies.
    pub(crate) last_chats: Arc<LastChats>,
}

impl Intake {
    /// Takes messages delivered together, in order: each checked, those let in journaled,
    /// routed and queued, and every one accepted once the journal's commit has it on disk. The
    /// turns start meanwhile: the commit their answers wait for covers the journal too, so under
    /// load the journal and the transcripts share their flushes.
    pub(crate) async fn take(&self, deliveries: Vec<Delivery>) {
        let mut admitted = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            self.status
                .received(&delivery.message.channel, &delivery.message.account);
            if self.admit(&delivery.message) {
                admitted.push(delivery);
            } else {
                delivery.accept();
            }
        }
        if admitted.is_empty() {
            return;
        }
        let messages: Vec<&InboundMessage> = admitted.iter().map(|d| &d.message).collect();
        match self.journal.record_all(&messages) {
            Ok(recorded) => {
                for (delivery, recorded) in admitted.iter().zip(recorded) {
                    let message = &delivery.message;
                    let (channel, chat, sender) =
                        (&message.channel, &message.chat_id, &message.sender.id);
                    match recorded {
                        Recorded::New(id) => {
                            tracing::debug!(%channel, %chat, %sender, entry = %id, "message journaled");
                            self.enqueue(JournalEntry {
                                id,
                                message: message.clone(),
                            });
                        }
                        Recorded::Duplicate => {
                            tracing::info!(%channel, %chat, %sender, message = %message.message_id, "redelivered message dropped");
                            self.status.count(Event::Duplicate);
                        }
                    }
                }
                // A failed commit leaves the messages with their turns, which fail to commit
                // their answers too and say so in the chat; accepted either way, since the
                // platform could only hand them back to a journal that cannot keep them.
                if let Err(err) = self.journal.commit().await {
                    tracing::error!("{err}");
                }
                admitted.into_iter().for_each(Delivery::accept);
            }
            Err(err) => {
                for delivery in admitted {
                    let message = &delivery.message;
                    let (channel, chat, sender) =
                        (&message.channel, &message.chat_id, &message.sender.id);
                    tracing::error!(%channel, %chat, %sender, "message refused: {err}");
                    self.status.count(Event::Refused);
                    self.reply(answer_to(message, NOT_STORED.to_owned()), Vec::new());
                    delivery.accept();
                }
            }
        }
    }

    /// Whether `message` goes on to the journal: access lets it in, and it is not an answer
    /// to an approval (which goes to the run waiting for it, not into the session's queue,
    /// where it would wait behind that very run).
    fn admit(&self, message: &InboundMessage) -> bool {
        let (channel, chat, sender) = (&message.channel, &message.chat_id, &message.sender.id);
        match self.access.check(message) {
            Ok(AccessDecision::Allow) => {}
            Ok(AccessDecision::Ignore(why)) => {
                tracing::debug!(%channel, %chat, %sender, "message ignored: {why}");
                self.status.count(Event::Ignored);
                return false;
            }
            Ok(AccessDecision::Deny(why)) => {
                tracing::info!(%channel, %chat, %sender, "message denied: {why}");
                self.status.count(Event::Denied);
                return false;
            }
            Ok(AccessDecision::Pair { reply }) => {
                tracing::info!(%channel, %chat, %sender, "unknown sender: pairing code sent");
                self.status.count(Event::Denied);
                self.reply(answer_to(message, reply), Vec::new());
                return false;
            }
            // Deny by default: a message whose sender cannot be checked does not get in.
            Err(err) => {
                tracing::error!(%channel, %chat, %sender, "message denied: access cannot be checked: {err}");
                self.status.count(Event::Denied);
                return false;
            }
        }
        if let Some(confirmation) = self.approvals.answer_from_chat(message) {
            tracing::info!(%channel, %chat, %sender, "approval answered");
            self.reply(answer_to(message, confirmation), Vec::new());
            return false;
        }
        true
    }

    /// Routes a journaled message and queues it for its session's turn; a refusal is answered
    /// with its reason, and the message is done once that is sent.
    pub(crate) fn enqueue(&self, entry: JournalEntry) {
        let route = match self.router.route(&entry.message) {
            Ok(route) => route,
            Err(err) => {
                let message = &entry.message;
                tracing::error!(channel = %message.channel, chat = %message.chat_id, "message refused: no session key: {err}");
                return self.refuse(&entry, APOLOGY);
            }
        };
        if entry.message.chat_type == ChatType::Dm {
            self.last_chats.note(&route.agent_id, entry.message.chat());
        }
        let (err, entry) = match self.turns.submit_message(route, Box::new(entry)) {
            Ok(()) => return,
            Err(refused) => refused,
        };
        let message = &entry.message;
        let (channel, chat) = (&message.channel, &message.chat_id);
        match err {
            SubmitError::QueueFull { waiting } => {
                tracing::info!(%channel, %chat, "message refused: {waiting} already waiting in its session");
                self.refuse(&entry, BUSY);
            }
            // Only while shutting down: it stays in the journal for the next start.
            SubmitError::ShuttingDown => {}
            SubmitError::UnknownAgent(_) => {
                tracing::error!(%channel, %chat, "message refused: {err}");
                self.refuse(&entry, APOLOGY);
            }
        }
    }

    fn refuse(&self, entry: &JournalEntry, why: &str) {
        self.status.count(Event::Refused);
        self.reply(answer_to(&entry.message, why.to_owned()), vec![entry.id]);
    }

    /// Publishes `answer` for the channels' sender, which marks `done` done once it is out.
    fn reply(&self, answer: OutboundMessage, done: Vec<EntryId>) {
        self.bus
            .publish(OutboundEvent::Message(Outgoing::answer(answer, done)));
    }
}
