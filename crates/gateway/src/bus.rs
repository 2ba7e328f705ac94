//! The outbound bus: everything the gateway says or shows is published here once, and whoever
//! needs it subscribes — the channels' sender (which puts messages and "typing…" on the
//! platforms), and observers such as a web page or a log.
//!
//! Publishing never waits, so a turn is never held up by a subscriber. Each subscription has
//! its own queue:
//! - an observer's ([`OutboundBus::subscribe`]) is bounded; when it is full the event is
//!   dropped for that subscriber alone and counted ([`Subscription::lagged`]), so a slow page
//!   misses events (and can read the transcript again) while every other subscriber and the
//!   turn go on;
//! - the channels' sender's ([`OutboundBus::subscribe_lossless`]) is not bounded, because an
//!   answer must never be dropped; its loop only sorts events into per-chat queues, so what
//!   waits in it is what was published in the last moments. Only the gateway subscribes so.
//!
//! An event goes only to subscriptions that asked for its [`EventKind`]; when nobody asked,
//! publishing it costs a load of one atomic.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use nanocrab_policy::ApprovalRequest;
use nanocrab_schema::{AgentEvent, ChatRef, OutboundMessage, SessionKey};
use tokio::sync::{mpsc, oneshot};

use crate::journal::EntryId;

/// One thing the gateway says or shows.
#[derive(Debug)]
pub enum OutboundEvent {
    /// A message for a chat: an answer, a note, a refusal or an approval's question.
    Message(Outgoing),
    /// "typing…" in a chat while a turn answering it runs.
    Typing(ChatRef),
    /// What a running turn reports as it goes: text deltas, tool calls and results, usage.
    Turn {
        session: SessionKey,
        event: AgentEvent,
    },
    /// A guarded call waits for a person's answer; `chat` is where it was asked (`None`: at
    /// `GET /v1/approvals`).
    ApprovalRequested {
        request: ApprovalRequest,
        chat: Option<ChatRef>,
    },
}

/// The kinds of [`OutboundEvent`] a subscription can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Message,
    Typing,
    Turn,
    ApprovalRequested,
}

impl EventKind {
    fn bit(self) -> u8 {
        match self {
            Self::Message => 1,
            Self::Typing => 2,
            Self::Turn => 4,
            Self::ApprovalRequested => 8,
        }
    }
}

impl OutboundEvent {
    pub fn kind(&self) -> EventKind {
        match self {
            Self::Message(_) => EventKind::Message,
            Self::Typing(_) => EventKind::Typing,
            Self::Turn { .. } => EventKind::Turn,
            Self::ApprovalRequested { .. } => EventKind::ApprovalRequested,
        }
    }
}

/// A message for a chat, with what the channels' sender must do once it is sent.
#[derive(Debug)]
pub struct Outgoing {
    pub message: OutboundMessage,
    /// Kept for redelivery after a restart when it cannot be sent now: answers are; an
    /// approval's question is not, since its run has stopped waiting by then.
    pub keep: bool,
    /// Taken by the sender: nobody else settles a message.
    settle: Mutex<Option<Settle>>,
}

/// What becomes of a message once it is sent, kept or given up.
#[derive(Debug)]
pub(crate) struct Settle {
    /// Journal entries the message finishes, marked done then: an answer is sent (or kept
    /// for redelivery) before the messages it answers are forgotten.
    pub(crate) done: Vec<EntryId>,
    /// Told how it went, for a caller that waits (an approval's question).
    pub(crate) receipt: Option<oneshot::Sender<Sent>>,
}

/// How a message fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    Delivered,
    /// Not sent now; kept in the outbox for the next start.
    Kept,
    /// Not sent, and not kept: why.
    Failed(String),
}

impl Outgoing {
    /// An answer: kept for redelivery if it cannot be sent, and finishing `done` once sent.
    pub(crate) fn answer(message: OutboundMessage, done: Vec<EntryId>) -> Self {
        Self {
            message,
            keep: true,
            settle: Mutex::new(Some(Settle {
                done,
                receipt: None,
            })),
        }
    }

    /// A message the agent sends mid-turn (its `message` tool): kept for redelivery like an
    /// answer, and its sender waits to learn whether it went out or was kept.
    pub(crate) fn said(message: OutboundMessage) -> (Self, oneshot::Receiver<Sent>) {
        let (receipt, sent) = oneshot::channel();
        let outgoing = Self {
            message,
            keep: true,
            settle: Mutex::new(Some(Settle {
                done: Vec::new(),
                receipt: Some(receipt),
            })),
        };
        (outgoing, sent)
    }

    /// A message whose sender waits to learn whether it went out; never kept.
    pub(crate) fn with_receipt(message: OutboundMessage) -> (Self, oneshot::Receiver<Sent>) {
        let (receipt, sent) = oneshot::channel();
        let outgoing = Self {
            message,
            keep: false,
            settle: Mutex::new(Some(Settle {
                done: Vec::new(),
                receipt: Some(receipt),
            })),
        };
        (outgoing, sent)
    }

    /// What to do once it is sent; `None` after the first call.
    pub(crate) fn take_settle(&self) -> Option<Settle> {
        self.settle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// The bus; clones share it.
#[derive(Clone, Default)]
pub struct OutboundBus {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    subscribers: RwLock<Vec<Subscriber>>,
    /// The union of the subscribers' kinds, for the fast path of an event nobody wants.
    wanted: AtomicU8,
}

struct Subscriber {
    kinds: u8,
    queue: Queue,
    lagged: Arc<AtomicU64>,
}

enum Queue {
    Bounded(mpsc::Sender<Arc<OutboundEvent>>),
    Lossless(mpsc::UnboundedSender<Arc<OutboundEvent>>),
}

impl Queue {
    fn is_closed(&self) -> bool {
        match self {
            Self::Bounded(queue) => queue.is_closed(),
            Self::Lossless(queue) => queue.is_closed(),
        }
    }
}

/// A subscriber's end of the bus; dropping it unsubscribes.
pub struct Subscription {
    queue: Receiver,
    lagged: Arc<AtomicU64>,
}

enum Receiver {
    Bounded(mpsc::Receiver<Arc<OutboundEvent>>),
    Lossless(mpsc::UnboundedReceiver<Arc<OutboundEvent>>),
}

impl Subscription {
    /// The next event; `None` once the bus and every clone of it are gone.
    pub async fn recv(&mut self) -> Option<Arc<OutboundEvent>> {
        match &mut self.queue {
            Receiver::Bounded(queue) => queue.recv().await,
            Receiver::Lossless(queue) => queue.recv().await,
        }
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<Arc<OutboundEvent>> {
        match &mut self.queue {
            Receiver::Bounded(queue) => queue.try_recv().ok(),
            Receiver::Lossless(queue) => queue.try_recv().ok(),
        }
    }

    /// Events dropped for this subscriber because its queue was full.
    pub fn lagged(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
    }
}

impl OutboundBus {
    pub fn new() -> Self {
        Self::default()
    }

    /// Subscribes to `kinds` with a queue of `capacity` events (at least 1); what does not
    /// fit is dropped for this subscriber and counted.
    pub fn subscribe(&self, kinds: &[EventKind], capacity: usize) -> Subscription {
        let (queue, receiver) = mpsc::channel(capacity.max(1));
        self.add(kinds, Queue::Bounded(queue), Receiver::Bounded(receiver))
    }

    /// Subscribes to `kinds` with a queue that never drops: for the channels' sender only,
    /// whose loop never waits on anything but this queue.
    pub(crate) fn subscribe_lossless(&self, kinds: &[EventKind]) -> Subscription {
        let (queue, receiver) = mpsc::unbounded_channel();
        self.add(kinds, Queue::Lossless(queue), Receiver::Lossless(receiver))
    }

    fn add(&self, kinds: &[EventKind], queue: Queue, receiver: Receiver) -> Subscription {
        let kinds = kinds.iter().fold(0, |mask, kind| mask | kind.bit());
        let lagged = Arc::new(AtomicU64::new(0));
        let mut subscribers = self.write();
        subscribers.push(Subscriber {
            kinds,
            queue,
            lagged: Arc::clone(&lagged),
        });
        self.shared.wanted.fetch_or(kinds, Ordering::Relaxed);
        Subscription {
            queue: receiver,
            lagged,
        }
    }

    /// Whether anyone subscribes to `kind`: an event nobody wants need not be built.
    pub fn wants(&self, kind: EventKind) -> bool {
        self.shared.wanted.load(Ordering::Relaxed) & kind.bit() != 0
    }

    /// Hands `event` to every subscription that asked for its kind, and returns how many
    /// took it. Never waits.
    pub fn publish(&self, event: OutboundEvent) -> usize {
        let bit = event.kind().bit();
        if self.shared.wanted.load(Ordering::Relaxed) & bit == 0 {
            return 0;
        }
        let event = Arc::new(event);
        let mut taken = 0;
        let mut closed = false;
        for subscriber in self
            .read()
            .iter()
            .filter(|subscriber| subscriber.kinds & bit != 0)
        {
            let sent = match &subscriber.queue {
                Queue::Bounded(queue) => match queue.try_send(Arc::clone(&event)) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        subscriber.lagged.fetch_add(1, Ordering::Relaxed);
                        false
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        closed = true;
                        false
                    }
                },
                Queue::Lossless(queue) => match queue.send(Arc::clone(&event)) {
                    Ok(()) => true,
                    Err(_) => {
                        closed = true;
                        false
                    }
                },
            };
            taken += usize::from(sent);
        }
        if closed {
            let mut subscribers = self.write();
            subscribers.retain(|subscriber| !subscriber.queue.is_closed());
            let wanted = subscribers.iter().fold(0, |mask, s| mask | s.kinds);
            self.shared.wanted.store(wanted, Ordering::Relaxed);
        }
        taken
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Subscriber>> {
        // Every change to the list is complete before anything that can panic.
        self.shared
            .subscribers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Subscriber>> {
        self.shared
            .subscribers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typing(chat: &str) -> OutboundEvent {
        OutboundEvent::Typing(ChatRef {
            channel: "fake".into(),
            account: "default".into(),
            chat_id: chat.into(),
            thread_id: None,
        })
    }

    fn chat_of(event: &OutboundEvent) -> &str {
        match event {
            OutboundEvent::Typing(chat) => &chat.chat_id,
            OutboundEvent::Message(_)
            | OutboundEvent::Turn { .. }
            | OutboundEvent::ApprovalRequested { .. } => panic!("not typing: {event:?}"),
        }
    }

    #[tokio::test]
    async fn a_full_subscriber_misses_events_without_holding_up_the_others() {
        let bus = OutboundBus::new();
        let mut slow = bus.subscribe(&[EventKind::Typing], 2);
        let mut fast = bus.subscribe_lossless(&[EventKind::Typing]);
        for chat in ["1", "2", "3", "4"] {
            bus.publish(typing(chat));
        }
        let mut seen_fast = Vec::new();
        for _ in 0..4 {
            seen_fast.push(chat_of(&fast.recv().await.unwrap()).to_owned());
        }
        assert_eq!(seen_fast, ["1", "2", "3", "4"]);
        let first = slow.recv().await.unwrap();
        let second = slow.recv().await.unwrap();
        assert_eq!([chat_of(&first), chat_of(&second)], ["1", "2"]);
        assert_eq!(slow.lagged(), 2);
        // Room again: the next event gets through.
        bus.publish(typing("5"));
        assert_eq!(chat_of(&slow.recv().await.unwrap()), "5");
    }

    #[tokio::test]
    async fn events_go_only_to_who_asked_for_their_kind() {
        let bus = OutboundBus::new();
        assert!(!bus.wants(EventKind::Turn));
        assert_eq!(
            bus.publish(OutboundEvent::Turn {
                session: SessionKey::parse("agent:main:main").unwrap(),
                event: AgentEvent::Token { text: "hi".into() },
            }),
            0
        );
        let mut typing_only = bus.subscribe(&[EventKind::Typing], 8);
        assert!(bus.wants(EventKind::Typing));
        assert!(!bus.wants(EventKind::Turn));
        assert_eq!(bus.publish(typing("1")), 1);
        assert_eq!(chat_of(&typing_only.recv().await.unwrap()), "1");
    }

    #[tokio::test]
    async fn a_dropped_subscription_is_forgotten() {
        let bus = OutboundBus::new();
        let subscription = bus.subscribe(&[EventKind::Typing], 8);
        drop(subscription);
        assert_eq!(bus.publish(typing("1")), 0);
        assert!(!bus.wants(EventKind::Typing));
    }
}
