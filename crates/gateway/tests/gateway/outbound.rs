//! The way out: everything is published once on the bus, watchers see it without holding
//! anything up, and an answer a platform does not take is kept for the next start.

use nanocrab_channels::ChannelError;
use nanocrab_gateway::{EventKind, MessageCounts, OUTBOX_FILE, OutboundEvent, Outbox};
use nanocrab_schema::{AgentEvent, SessionKey};
use pretty_assertions::assert_eq;

use crate::harness::{Harness, answer, dm, until};

fn unreachable() -> ChannelError {
    ChannelError::Transport {
        channel: "telegram".into(),
        method: "sendMessage".into(),
        message: "connection refused".into(),
    }
}

#[tokio::test]
async fn an_answer_the_platform_does_not_take_is_kept_and_sent_at_the_next_start() {
    let harness = Harness::new().await;
    harness.channel.fail_sends(vec![unreachable()]);
    let gateway = harness.start();
    let one = dm("1", "10", "one");
    harness.channel.deliver(one.clone()).await.unwrap();
    until(|| gateway.status.messages().kept == 1).await;
    assert_eq!(
        gateway.status.messages(),
        MessageCounts {
            received: 1,
            kept: 1,
            ..MessageCounts::default()
        }
    );
    gateway.stop().await;
    assert_eq!(harness.channel.sent(), vec![]);
    // Answered: the message is done, and its answer waits in the outbox instead.
    assert_eq!(harness.unfinished_messages(), vec![]);

    let gateway = harness.start();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![answer(&one, "echo: one")]
    );
    gateway.stop().await;
    let (_, kept) = Outbox::open(&harness.state_dir().join(OUTBOX_FILE), 0).unwrap();
    assert_eq!(kept, vec![]);
    // One model request: the answer was sent again, not the question asked again.
    assert_eq!(harness.mock.requests().len(), 1);
}

#[tokio::test]
async fn an_answer_the_platform_refuses_for_good_is_given_up() {
    let harness = Harness::new().await;
    harness.channel.fail_sends(vec![ChannelError::Api {
        channel: "telegram".into(),
        method: "sendMessage".into(),
        status: Some(403),
        message: "Forbidden: bot was blocked by the user".into(),
    }]);
    let gateway = harness.start();
    let (one, two) = (dm("1", "10", "one"), dm("1", "11", "two"));
    harness.channel.deliver(one).await.unwrap();
    until(|| gateway.status.turns_done().0 == 1).await;
    harness.channel.deliver(two.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![answer(&two, "echo: two")]
    );
    gateway.stop().await;
    assert_eq!(harness.unfinished_messages(), vec![]);
    let (_, kept) = Outbox::open(&harness.state_dir().join(OUTBOX_FILE), 0).unwrap();
    assert_eq!(kept, vec![]);
}

#[tokio::test]
async fn a_watcher_sees_the_turn_and_the_answer_and_a_stuck_one_holds_nothing_up() {
    let harness = Harness::new().await;
    let mut watcher = harness
        .bus
        .subscribe(&[EventKind::Message, EventKind::Turn], 1024);
    // Never read: it fills at once and misses the rest.
    let stuck = harness
        .bus
        .subscribe(&[EventKind::Message, EventKind::Turn, EventKind::Typing], 1);
    let gateway = harness.start();
    let one = dm("1", "10", "one");
    harness.channel.deliver(one.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![answer(&one, "echo: one")]
    );
    let session = SessionKey::parse(&harness.session_keys()[0]).unwrap();
    let mut streamed = String::new();
    let answered = loop {
        let event = watcher.recv().await.unwrap();
        match &*event {
            OutboundEvent::Turn { session: of, event } => {
                assert_eq!(of, &session);
                if let AgentEvent::Token { text } = event {
                    streamed.push_str(text);
                }
            }
            OutboundEvent::Message(outgoing) => break outgoing.message.clone(),
            OutboundEvent::Typing(_) | OutboundEvent::ApprovalRequested { .. } => {
                panic!("not asked for: {event:?}")
            }
        }
    };
    assert_eq!(answered, answer(&one, "echo: one"));
    assert_eq!(streamed, "echo: one");
    assert!(stuck.lagged() > 0, "the stuck watcher missed nothing");
    gateway.stop().await;
}
