//! Turns of chat messages: concurrency across sessions, order and merging within one, the
//! caps, attachments and failures.

use base64::Engine as _;
use nanocrab_config::QueueMode;
use nanocrab_gateway::MessageCounts;
use nanocrab_schema::{ContentBlock, Image, LlmMessage, Media, MediaKind, Role};
use nanocrab_testkit::{ApiError, Reply};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{HELD_NOTE, Harness, answer, by_chat, dm, group, held, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sessions_each_get_their_own_answer_in_their_own_chat_and_thread() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    let messages: Vec<_> = (0..100)
        .map(|i| match i % 2 {
            0 => dm(&format!("{i}"), "1", &format!("hello from {i}")),
            _ => group(
                &format!("-100{i}"),
                Some(&format!("{}", i % 7)),
                &format!("{i}"),
                "1",
                &format!("hello from {i}"),
            ),
        })
        .collect();
    for message in &messages {
        harness.channel.deliver(message.clone()).await.unwrap();
    }
    let sent = harness.channel.wait_for_sent(100).await;

    let expected: Vec<_> = messages
        .iter()
        .enumerate()
        .map(|(i, message)| match i % 2 {
            0 => answer(message, &format!("echo: hello from {i}")),
            _ => answer(message, &format!("echo: [User {i}] hello from {i}")),
        })
        .collect();
    assert_eq!(by_chat(sent), by_chat(expected));
    for i in 0..100 {
        let (key, said) = match i % 2 {
            0 => (
                format!("agent:main:telegram:dm:{i}"),
                format!("hello from {i}"),
            ),
            _ => (
                format!("agent:main:telegram:group:-100{i}:topic:{}", i % 7),
                format!("[User {i}] hello from {i}"),
            ),
        };
        assert_eq!(
            harness.history(&key),
            vec![
                LlmMessage::user(said.clone()),
                LlmMessage::assistant(format!("echo: {said}"))
            ],
            "{key}"
        );
    }
    assert_eq!(harness.session_keys().len(), 100);
    // Idle sessions keep no task and no queue.
    let turns = gateway.turns.clone();
    until(|| turns.activity().is_empty()).await;
    gateway.stop().await;
    assert_eq!(harness.unfinished_messages(), vec![]);
}

#[tokio::test]
async fn collect_mode_answers_what_arrived_during_a_turn_in_one_next_turn() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    let first = held(group("-100", None, "1", "10", "who is here?"));
    harness.channel.deliver(first.clone()).await.unwrap();
    harness.channel.wait_for_held(1).await;
    let second = group("-100", None, "2", "11", "me");
    let third = group("-100", None, "3", "12", "me too");
    harness.channel.deliver(second).await.unwrap();
    harness.channel.deliver(third.clone()).await.unwrap();
    harness.channel.release(1);

    let sent = harness.channel.wait_for_sent(2).await;
    assert_eq!(
        sent,
        vec![
            answer(&first, &format!("echo: [User 1] who is here?\n{HELD_NOTE}")),
            // The collected turn answers the newest message.
            answer(&third, "echo: [User 2] me\n\n[User 3] me too"),
        ]
    );
    assert_eq!(harness.mock.requests().len(), 2);
    gateway.stop().await;
}

#[tokio::test]
async fn collect_mode_keeps_commands_and_other_chats_apart() {
    let mut harness = Harness::new().await;
    // Every direct message shares one session, so messages of two chats meet in one queue.
    harness.config.session.dm_scope = nanocrab_config::DmScope::Main;
    let gateway = harness.start();
    let first = held(dm("1", "10", "hi"));
    harness.channel.deliver(first.clone()).await.unwrap();
    harness.channel.wait_for_held(1).await;
    let from_two = dm("2", "20", "hello");
    let command = dm("1", "11", "/help");
    let after = dm("1", "12", "thanks");
    for message in [&from_two, &command, &after] {
        harness.channel.deliver(message.clone()).await.unwrap();
    }
    harness.channel.release(1);

    let sent = harness.channel.wait_for_sent(4).await;
    assert_eq!(
        sent,
        vec![
            answer(&first, &format!("echo: hi\n{HELD_NOTE}")),
            answer(&from_two, "echo: hello"),
            answer(&command, nanocrab_core::HELP_TEXT),
            answer(&after, "echo: thanks"),
        ]
    );
    gateway.stop().await;
}

#[tokio::test]
async fn followup_mode_answers_each_waiting_message_in_order() {
    let mut harness = Harness::new().await;
    harness.config.gateway.queue.mode = QueueMode::Followup;
    let gateway = harness.start();
    let first = held(dm("1", "10", "one"));
    harness.channel.deliver(first.clone()).await.unwrap();
    harness.channel.wait_for_held(1).await;
    let second = dm("1", "11", "two");
    let third = dm("1", "12", "three");
    harness.channel.deliver(second.clone()).await.unwrap();
    harness.channel.deliver(third.clone()).await.unwrap();
    harness.channel.release(1);

    let sent = harness.channel.wait_for_sent(3).await;
    assert_eq!(
        sent,
        vec![
            answer(&first, &format!("echo: one\n{HELD_NOTE}")),
            answer(&second, "echo: two"),
            answer(&third, "echo: three"),
        ]
    );
    gateway.stop().await;
}

#[tokio::test]
async fn a_message_beyond_the_queue_cap_is_refused_with_a_reply() {
    let mut harness = Harness::new().await;
    harness.config.gateway.queue.cap = 1;
    let gateway = harness.start();
    let first = held(dm("1", "10", "one"));
    harness.channel.deliver(first.clone()).await.unwrap();
    harness.channel.wait_for_held(1).await;
    let second = dm("1", "11", "two");
    let third = dm("1", "12", "three");
    harness.channel.deliver(second.clone()).await.unwrap();
    harness.channel.deliver(third.clone()).await.unwrap();

    let refusal = answer(
        &third,
        "I'm still working on your earlier messages and can't take more right now. Please send this again in a moment.",
    );
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![refusal.clone()]
    );
    harness.channel.release(1);
    assert_eq!(
        harness.channel.wait_for_sent(3).await,
        vec![
            refusal,
            answer(&first, &format!("echo: one\n{HELD_NOTE}")),
            answer(&second, "echo: two"),
        ]
    );
    assert_eq!(
        gateway.status.messages(),
        MessageCounts {
            received: 3,
            refused: 1,
            ..MessageCounts::default()
        }
    );
    gateway.stop().await;
    // The refused message was answered (with the refusal): nothing is left for a restart.
    assert_eq!(harness.unfinished_messages(), vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_than_max_concurrent_turns_run_at_once() {
    let mut harness = Harness::new().await;
    harness.config.gateway.max_concurrent_turns = 3;
    harness
        .mock
        .set_fallback(Reply::echo().with_delay(std::time::Duration::from_millis(50)));
    let gateway = harness.start();
    let messages: Vec<_> = (0..12)
        .map(|i| held(dm(&i.to_string(), "1", "hi")))
        .collect();
    for message in &messages {
        harness.channel.deliver(message.clone()).await.unwrap();
    }
    // Three turns hold their slots in a download; the other nine cannot start.
    harness.channel.wait_for_held(3).await;
    assert_eq!(gateway.turns.running(), 3);
    harness.channel.release(12);
    harness.channel.wait_for_sent(12).await;

    assert_eq!(harness.channel.peak_held(), 3);
    assert!(harness.mock.peak_concurrency() <= 3);
    assert_eq!(harness.mock.requests().len(), 12);
    gateway.stop().await;
}

#[tokio::test]
async fn a_photo_is_shown_to_the_model_and_a_document_saved_into_the_inbox() {
    let harness = Harness::new().await;
    let jpeg = [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3];
    harness.channel.add_file("photo-1", &jpeg);
    harness.channel.add_file("doc-1", b"%PDF-1.7 report");
    let gateway = harness.start();
    let mut message = dm("1", "10", "what is this?");
    message.media = vec![
        Media {
            kind: MediaKind::Photo,
            file_id: "photo-1".to_owned(),
            mime_type: None,
            file_name: None,
            size: None,
        },
        Media {
            kind: MediaKind::Document,
            file_id: "doc-1".to_owned(),
            mime_type: Some("application/pdf".to_owned()),
            file_name: Some("report.pdf".to_owned()),
            size: Some(15),
        },
    ];
    harness.channel.deliver(message.clone()).await.unwrap();
    let text = "what is this?\n[a document was attached and saved as inbox/1-10-report.pdf (application/pdf, 15 bytes)]";
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![answer(&message, &format!("echo: {text}"))]
    );

    assert_eq!(
        std::fs::read(harness.workspace("main").join("inbox/1-10-report.pdf")).unwrap(),
        b"%PDF-1.7 report"
    );
    let data = base64::engine::general_purpose::STANDARD.encode(jpeg);
    let request = &harness.mock.requests()[0].body;
    assert_eq!(
        request["messages"][0]["content"],
        json!([
            {"type": "text", "text": text},
            // The newest block is marked for Anthropic's prompt cache.
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": data},
             "cache_control": {"type": "ephemeral"}}
        ])
    );
    let history = harness.history("agent:main:telegram:dm:1");
    assert_eq!(history[0].role, Role::User);
    assert_eq!(
        history[0].content,
        vec![
            ContentBlock::text(text),
            ContentBlock::Image(Image {
                media_type: "image/jpeg".to_owned(),
                data,
                file: None,
            })
        ]
    );
    gateway.stop().await;
}

#[tokio::test]
async fn a_failed_turn_gets_an_apology_and_counts_as_done() {
    let harness = Harness::new().await;
    harness.mock.push(Reply::error(ApiError::BadRequest));
    let gateway = harness.start();
    let message = group("-100", Some("5"), "1", "10", "hi");
    harness.channel.deliver(message.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![answer(
            &message,
            "Sorry, something went wrong while answering that. Please try again in a moment."
        )]
    );
    assert_eq!(gateway.status.turns_done(), (0, 1));
    gateway.stop().await;
    assert_eq!(harness.unfinished_messages(), vec![]);
}

#[tokio::test]
async fn typing_shows_while_a_turn_runs() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    harness
        .channel
        .deliver(held(dm("1", "10", "hi")))
        .await
        .unwrap();
    harness.channel.wait_for_held(1).await;
    assert_eq!(harness.channel.typing_calls(), 1);
    harness.channel.release(1);
    harness.channel.wait_for_sent(1).await;
    gateway.stop().await;
}
