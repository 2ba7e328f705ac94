//! The channels' sender: the bus's subscriber that puts messages and "typing…" on their
//! platforms.
//!
//! Each chat's messages go out in the order they were published, one at a time; chats go
//! side by side, so a slow platform or chat holds up only itself. Retrying a failed send is
//! the channel's business (it knows its platform's limits: Telegram tries four times and
//! waits out a 429). A send that still fails for a reason that may pass (the platform
//! unreachable, busy, or erring on its side) keeps an answer in the [`Outbox`] for the next
//! start, and the messages it answers are marked done in the journal; a question that cannot
//! be asked is reported to whoever waits for it. A send the platform refuses for good (a
//! blocked bot, a chat that is gone) is logged and given up, as retrying it would not help.
//!
//! On shutdown the sender finishes what was published before it, for up to the grace period;
//! the answers still unsent then are kept.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use nanocrab_channels::{Channel, ChannelError};
use nanocrab_schema::{ChatRef, OutboundMessage};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::bus::{OutboundEvent, Outgoing, Sent, Subscription};
use crate::journal::Journal;
use crate::outbox::{Kept, KeptId, Outbox};
use crate::status::{Event, Status};

/// Where the sender sends, and what it settles.
pub(crate) struct ChannelSender {
    pub(crate) channels: Vec<Arc<dyn Channel>>,
    pub(crate) journal: Arc<Journal>,
    pub(crate) outbox: Arc<Outbox>,
    pub(crate) status: Arc<Status>,
}

/// One item of a chat's queue.
enum Item {
    Event(Arc<OutboundEvent>),
    /// An answer kept by an earlier run, sent again.
    Redelivery(Kept),
}

struct Shared {
    sender: ChannelSender,
    queues: Mutex<HashMap<ChatRef, VecDeque<Item>>>,
    workers: TaskTracker,
    /// The grace period is over: what is unsent is kept.
    abort: CancellationToken,
}

impl ChannelSender {
    /// Sends `kept` first, then what `events` brings until `stop` gives a deadline; then
    /// finishes what was published before the stop until that deadline, and keeps what is
    /// left.
    pub(crate) async fn run(
        self,
        mut events: Subscription,
        kept: Vec<Kept>,
        mut stop: oneshot::Receiver<Instant>,
    ) {
        let shared = Arc::new(Shared {
            sender: self,
            queues: Mutex::new(HashMap::new()),
            workers: TaskTracker::new(),
            abort: CancellationToken::new(),
        });
        for kept in kept {
            let chat = kept.message.chat.clone();
            shared.push(chat, Item::Redelivery(kept));
        }
        let deadline = loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(event) => shared.take(event),
                    None => break (&mut stop).await.unwrap_or_else(|_| Instant::now()),
                },
                // A gateway gone without a word leaves no time.
                deadline = &mut stop => break deadline.unwrap_or_else(|_| Instant::now()),
            }
        };
        // Whatever was published before the stop is still sent.
        while let Some(event) = events.try_recv() {
            shared.take(event);
        }
        shared.workers.close();
        if tokio::time::timeout_at(deadline, shared.workers.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "answers still unsent after the grace period are kept for the next start"
            );
            shared.abort.cancel();
            shared.workers.wait().await;
        }
    }
}

impl Shared {
    fn take(self: &Arc<Self>, event: Arc<OutboundEvent>) {
        let chat = match &*event {
            OutboundEvent::Message(outgoing) => outgoing.message.chat.clone(),
            OutboundEvent::Typing(chat) => chat.clone(),
            // Not asked for: see `Gateway::run`.
            OutboundEvent::Turn { .. } | OutboundEvent::ApprovalRequested { .. } => return,
        };
        self.push(chat, Item::Event(event));
    }

    fn push(self: &Arc<Self>, chat: ChatRef, item: Item) {
        let mut queues = self.lock();
        let start_worker = !queues.contains_key(&chat);
        queues.entry(chat.clone()).or_default().push_back(item);
        drop(queues);
        if start_worker {
            let shared = Arc::clone(self);
            self.workers.spawn(async move { shared.work(chat).await });
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ChatRef, VecDeque<Item>>> {
        // Every change to the map is complete before anything that can panic.
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Works through `chat`'s queue until it is empty.
    async fn work(&self, chat: ChatRef) {
        loop {
            let (item, more) = {
                let mut queues = self.lock();
                let Some(queue) = queues.get_mut(&chat) else {
                    return;
                };
                let Some(item) = queue.pop_front() else {
                    queues.remove(&chat);
                    return;
                };
                (item, !queue.is_empty())
            };
            if self.abort.is_cancelled() {
                self.give_up(item);
                continue;
            }
            match item {
                Item::Event(event) => match &*event {
                    OutboundEvent::Message(outgoing) => self.send_outgoing(outgoing).await,
                    // Shown only while nothing else waits: a message about to go out says
                    // more than "typing…".
                    OutboundEvent::Typing(chat) if !more => self.typing(chat).await,
                    OutboundEvent::Typing(_)
                    | OutboundEvent::Turn { .. }
                    | OutboundEvent::ApprovalRequested { .. } => {}
                },
                Item::Redelivery(kept) => self.redeliver(kept).await,
            }
        }
    }

    fn channel(&self, chat: &ChatRef) -> Option<&Arc<dyn Channel>> {
        self.sender
            .channels
            .iter()
            .find(|c| c.name() == chat.channel && c.account() == chat.account)
    }

    async fn typing(&self, chat: &ChatRef) {
        let Some(channel) = self.channel(chat) else {
            return;
        };
        if channel.capabilities().typing
            && let Err(err) = channel.typing(chat).await
        {
            tracing::debug!(channel = %chat.channel, chat = %chat.chat_id, "typing: {err}");
        }
    }

    async fn send_outgoing(&self, outgoing: &Outgoing) {
        let attempt = self.send(&outgoing.message).await;
        self.settle(outgoing, attempt);
    }

    async fn redeliver(&self, kept: Kept) {
        match self.send(&kept.message).await {
            Attempt::Sent => self.sent_again(kept.id),
            // Still in the outbox, for the start after this one.
            Attempt::Transient(why) => tracing::warn!(
                channel = %kept.message.chat.channel,
                chat = %kept.message.chat.chat_id,
                "a kept answer still cannot be sent, and stays kept: {why}"
            ),
            Attempt::Failed(why) => {
                tracing::warn!(
                    channel = %kept.message.chat.channel,
                    chat = %kept.message.chat.chat_id,
                    "a kept answer is given up: {why}"
                );
                self.sent_again(kept.id);
            }
        }
    }

    fn sent_again(&self, id: KeptId) {
        if let Err(err) = self.sender.outbox.sent(id) {
            tracing::error!("{err}; the answer may be sent again after the next start");
        }
    }

    /// Sends `message` once (the channel retries what is worth retrying).
    async fn send(&self, message: &OutboundMessage) -> Attempt {
        let chat = &message.chat;
        let Some(channel) = self.channel(chat) else {
            let why = format!(
                "no channel {} (account {}) to send on",
                chat.channel, chat.account
            );
            tracing::error!("{why}");
            return Attempt::Failed(why);
        };
        let sent = tokio::select! {
            biased;
            () = self.abort.cancelled() => {
                return Attempt::Transient("the gateway stopped before it was sent".into());
            }
            sent = channel.send(message) => sent,
        };
        let err = match sent {
            Ok(_) => {
                self.sender.status.sent(&chat.channel, &chat.account);
                return Attempt::Sent;
            }
            Err(err) => err,
        };
        tracing::warn!(channel = %chat.channel, chat = %chat.chat_id, "cannot send an answer: {err}");
        match &err {
            ChannelError::Transport { .. } | ChannelError::Unauthorized { .. } => {
                Attempt::Transient(err.to_string())
            }
            ChannelError::Api { status, .. }
                if status.is_none_or(|status| status == 429 || status >= 500) =>
            {
                Attempt::Transient(err.to_string())
            }
            ChannelError::Api { .. }
            | ChannelError::Unsupported { .. }
            | ChannelError::File { .. }
            | ChannelError::Rejected { .. }
            | ChannelError::TooLarge { .. } => Attempt::Failed(err.to_string()),
        }
    }

    /// Settles `outgoing` after `attempt`: an answer that may still go out later is kept, and
    /// the messages it answers are marked done unless it could be neither sent nor kept (then
    /// they are answered again after a restart rather than lost).
    fn settle(&self, outgoing: &Outgoing, attempt: Attempt) {
        let Some(settle) = outgoing.take_settle() else {
            return;
        };
        let (sent, finished) = match attempt {
            Attempt::Sent => (Sent::Delivered, true),
            // Given up for good, as retrying would not help.
            Attempt::Failed(why) => (Sent::Failed(why), true),
            Attempt::Transient(why) if outgoing.keep => {
                let message = &outgoing.message;
                match self
                    .sender
                    .outbox
                    .keep(message, jiff::Timestamp::now().as_second())
                {
                    Ok(_) => {
                        tracing::info!(channel = %message.chat.channel, chat = %message.chat.chat_id, "the answer is kept and sent again on the next start");
                        self.sender.status.count(Event::Kept);
                        (Sent::Kept, true)
                    }
                    Err(err) => {
                        tracing::error!("{err}");
                        (Sent::Failed(why), false)
                    }
                }
            }
            Attempt::Transient(why) => (Sent::Failed(why), true),
        };
        if finished {
            for id in settle.done {
                if let Err(err) = self.sender.journal.done(id) {
                    tracing::error!(entry = %id, "{err}");
                }
            }
        }
        if let Some(receipt) = settle.receipt {
            // The waiter may have gone; nobody else needs to know.
            let _ = receipt.send(sent);
        }
    }

    /// What is left when the grace period is over.
    fn give_up(&self, item: Item) {
        match item {
            Item::Event(event) => match &*event {
                OutboundEvent::Message(outgoing) => self.settle(
                    outgoing,
                    Attempt::Transient("the gateway stopped before it was sent".into()),
                ),
                OutboundEvent::Typing(_)
                | OutboundEvent::Turn { .. }
                | OutboundEvent::ApprovalRequested { .. } => {}
            },
            // Still in the outbox.
            Item::Redelivery(_) => {}
        }
    }
}

/// How one send went.
enum Attempt {
    Sent,
    /// Failed for a reason that may pass.
    Transient(String),
    /// Failed for good.
    Failed(String),
}
