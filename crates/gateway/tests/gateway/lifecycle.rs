//! Starting, crashing, restarting and stopping: no message is lost, none answered twice,
//! and channels are kept running.

use std::sync::Arc;

use nanocrab_channels::ChannelError;
use nanocrab_config::QueueMode;
use nanocrab_gateway::{ChannelReport, ChannelState, INBOX_FILE, Journal, MessageCounts, Recorded};
use nanocrab_schema::LlmMessage;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use crate::fake_channel::FakeChannel;
use crate::harness::{HELD_NOTE, Harness, answer, dm, held, until};

#[tokio::test]
async fn a_start_answers_unfinished_messages_and_drops_redeliveries() {
    let mut harness = Harness::new().await;
    harness.config.gateway.queue.mode = QueueMode::Followup;
    let (one, two, three) = (
        dm("1", "10", "one"),
        dm("1", "11", "two"),
        dm("1", "12", "three"),
    );
    {
        let (journal, _) = Journal::open(&harness.state_dir().join(INBOX_FILE), 1000).unwrap();
        let ids: Vec<_> = [&one, &two, &three]
            .map(|message| match journal.record(message).unwrap() {
                Recorded::New(id) => id,
                Recorded::Duplicate => panic!("{message:?} is new"),
            })
            .to_vec();
        // The second was answered before the stop.
        journal.done(ids[1]).unwrap();
    }
    let gateway = harness.start();
    assert_eq!(
        harness.channel.wait_for_sent(2).await,
        vec![answer(&one, "echo: one"), answer(&three, "echo: three")]
    );
    // The platform delivers the first two again (it never learnt they were taken).
    harness.channel.deliver(one.clone()).await.unwrap();
    harness.channel.deliver(two.clone()).await.unwrap();
    let four = dm("1", "13", "four");
    harness.channel.deliver(four.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(3).await,
        vec![
            answer(&one, "echo: one"),
            answer(&three, "echo: three"),
            answer(&four, "echo: four")
        ]
    );
    assert_eq!(
        gateway.status.messages(),
        MessageCounts {
            received: 3,
            duplicates: 2,
            ..MessageCounts::default()
        }
    );
    gateway.stop().await;
    assert_eq!(harness.unfinished_messages(), vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_in_the_middle_of_a_turn_loses_no_message() {
    let mut harness = Harness::new().await;
    // The gateway runs on a runtime of its own, which is then dropped with everything on it,
    // as a killed process would be.
    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    doomed.spawn(harness.gateway().run(CancellationToken::new()));
    let one = held(dm("1", "10", "one"));
    let two = dm("1", "11", "two");
    harness.channel.deliver(one.clone()).await.unwrap();
    harness.channel.wait_for_held(1).await;
    harness.channel.deliver(two.clone()).await.unwrap();
    doomed.shutdown_background();

    assert_eq!(
        harness.unfinished_messages(),
        vec![one.clone(), two.clone()]
    );
    harness.channel = Arc::new(FakeChannel::new("telegram", "default"));
    let gateway = harness.start();
    harness.channel.release(1);
    // Both were waiting when the gateway started again, so they are collected into one turn.
    let said = format!("one\n{HELD_NOTE}\n\ntwo");
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![answer(&two, &format!("echo: {said}"))]
    );
    gateway.stop().await;
    assert_eq!(
        harness.history("agent:main:telegram:dm:1"),
        vec![
            LlmMessage::user(said.clone()),
            LlmMessage::assistant(format!("echo: {said}"))
        ]
    );
    assert_eq!(harness.unfinished_messages(), vec![]);
}

#[tokio::test]
async fn a_shutdown_finishes_the_running_turn_and_leaves_the_queued_ones_for_the_next_start() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    let one = held(dm("1", "10", "one"));
    let two = dm("1", "11", "two");
    harness.channel.deliver(one.clone()).await.unwrap();
    harness.channel.wait_for_held(1).await;
    harness.channel.deliver(two.clone()).await.unwrap();

    gateway.shutdown.cancel();
    let turns = gateway.turns.clone();
    until(|| turns.is_stopping()).await;
    harness.channel.release(1);
    gateway.stopped().await;

    assert_eq!(
        harness.channel.sent(),
        vec![answer(&one, &format!("echo: one\n{HELD_NOTE}"))]
    );
    assert_eq!(harness.unfinished_messages(), vec![two.clone()]);

    let gateway = harness.start();
    assert_eq!(
        harness.channel.wait_for_sent(2).await,
        vec![
            answer(&one, &format!("echo: one\n{HELD_NOTE}")),
            answer(&two, "echo: two")
        ]
    );
    gateway.stop().await;
    assert_eq!(harness.unfinished_messages(), vec![]);
}

#[tokio::test]
async fn a_turn_still_running_after_the_grace_period_is_stopped_and_its_message_kept() {
    let mut harness = Harness::new().await;
    harness.config.gateway.shutdown_grace = 1;
    let gateway = harness.start();
    let one = held(dm("1", "10", "one"));
    harness.channel.deliver(one.clone()).await.unwrap();
    harness.channel.wait_for_held(1).await;
    gateway.stop().await;

    assert_eq!(harness.channel.sent(), vec![]);
    assert_eq!(harness.unfinished_messages(), vec![one]);
}

#[tokio::test]
async fn a_failed_channel_is_started_again_and_a_rejected_one_stays_stopped() {
    let mut harness = Harness::new().await;
    harness.channel.fail_runs(vec![ChannelError::Transport {
        channel: "telegram".to_owned(),
        method: "getUpdates".to_owned(),
        message: "connection reset".to_owned(),
    }]);
    let rejected = Arc::new(FakeChannel::new("telegram", "work"));
    rejected.fail_runs(vec![ChannelError::Unauthorized {
        channel: "telegram".to_owned(),
        message: "401 Unauthorized".to_owned(),
    }]);
    harness.more_channels.push(Arc::clone(&rejected) as _);
    let gateway = harness.start();
    let message = dm("1", "10", "still there?");
    harness.channel.deliver(message.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![answer(&message, "echo: still there?")]
    );
    let status = Arc::clone(&gateway.status);
    until(|| status.channels()[1].state != ChannelState::Starting).await;

    assert_eq!(
        gateway.status.channels(),
        vec![
            ChannelReport {
                name: "telegram".to_owned(),
                account: "default".to_owned(),
                state: ChannelState::Running,
                messages_in: 1,
                messages_out: 1,
            },
            ChannelReport {
                name: "telegram".to_owned(),
                account: "work".to_owned(),
                state: ChannelState::Unauthorized {
                    error: "telegram: the token was rejected: 401 Unauthorized".to_owned()
                },
                messages_in: 0,
                messages_out: 0,
            },
        ]
    );
    assert_eq!((harness.channel.runs(), rejected.runs()), (2, 1));
    gateway.stop().await;
}
