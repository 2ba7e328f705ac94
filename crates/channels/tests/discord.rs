//! The Discord adapter against the fake Discord (gateway WebSocket and REST), fed with the
//! recorded payloads.
#![cfg(feature = "discord")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod running;

use std::path::Path;
use std::sync::Arc;

use nanocrab_channels::discord::{DiscordChannel, DiscordSettings};
use nanocrab_channels::{Channel, ChannelError};
use nanocrab_config::EditedMessages;
use nanocrab_schema::{ChatRef, ChatType, MediaKind, OutboundMessage};
use nanocrab_testkit::discord::{self as dc, DiscordError, FakeDiscord, SentMessage};
use pretty_assertions::assert_eq;
use running::{Running, WAIT, until};
use serde_json::json;

const TOKEN: &str = "MTAxOTg.fake-discord-token";
/// Long enough for a loaded 2-core machine, short enough to fail fast.
/// The channel of the recorded MESSAGE_CREATE.
const DM_CHANNEL: &str = "244567637332328449";

fn settings(fake: &FakeDiscord, state_dir: &Path) -> DiscordSettings {
    DiscordSettings {
        account: "default".to_owned(),
        token: TOKEN.to_owned(),
        api_base: fake.api_base(),
        gateway_url: fake.gateway_url(),
        edited_messages: EditedMessages::Ignore,
        state_dir: state_dir.to_path_buf(),
    }
}

fn chat_ref(chat_id: &str, thread: Option<&str>) -> ChatRef {
    ChatRef {
        channel: "discord".to_owned(),
        account: "default".to_owned(),
        chat_id: chat_id.to_owned(),
        thread_id: thread.map(str::to_owned),
    }
}

/// The adapter made from `settings`, receiving.
fn receiving(settings: DiscordSettings) -> Running<DiscordChannel> {
    Running::start(Arc::new(DiscordChannel::new(settings).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_dm_arrives_after_hello_identify_and_ready() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.push_message_create(dc::dm("hello there"));
    let mut running = receiving(settings(&fake, dir.path()));
    let message = running.message().await;
    assert_eq!(message.text, "hello there");
    assert_eq!(message.chat_type, ChatType::Dm);
    assert_eq!(message.chat_id, DM_CHANNEL);
    assert_eq!(message.sender.id, "114941315417899012");
    running.stop().await.unwrap();
    // Identify: the intents (guild messages, DMs, message content) and no compression.
    let identify = fake
        .gateway_frames()
        .into_iter()
        .find(|frame| frame["op"] == 2)
        .unwrap();
    assert_eq!(identify["d"]["token"], "[token]");
    assert_eq!(
        identify["d"]["intents"],
        json!((1 << 9) | (1 << 12) | (1 << 15))
    );
    assert_eq!(identify["d"]["compress"], json!(false));
    assert_eq!(fake.calls()[0].route, "GET /users/@me");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_are_sent_and_acknowledged() {
    let fake = FakeDiscord::start(TOKEN).await;
    fake.set_heartbeat_interval(50);
    let dir = tempfile::tempdir().unwrap();
    let running = receiving(settings(&fake, dir.path()));
    until("three heartbeats", || {
        fake.gateway_frames()
            .iter()
            .filter(|frame| frame["op"] == 1)
            .count()
            >= 3
    })
    .await;
    // An unacknowledged heartbeat would make the shard reconnect; one connection means each
    // was acknowledged.
    assert_eq!(fake.connections(), 1);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_is_resumed_and_nothing_is_lost_or_doubled() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = receiving(settings(&fake, dir.path()));
    fake.push_message_create(dc::with_id(dc::dm("one"), 1001));
    assert_eq!(running.message().await.text, "one");
    fake.drop_connection();
    // Sent while the connection is down: Discord replays them to the resumed session.
    fake.push_message_create(dc::with_id(dc::dm("two"), 1002));
    fake.push_message_create(dc::with_id(dc::dm("three"), 1003));
    assert_eq!(running.message().await.text, "two");
    assert_eq!(running.message().await.text, "three");
    fake.push_message_create(dc::with_id(dc::dm("four"), 1004));
    assert_eq!(running.message().await.text, "four");
    // Identify once, then resume from the last event seen.
    assert_eq!(fake.gateway_ops(), vec![2, 6]);
    let resume = fake
        .gateway_frames()
        .into_iter()
        .find(|frame| frame["op"] == 6)
        .unwrap();
    assert_eq!(
        resume["d"]["session_id"],
        "f97bdc3210d0da33a3c61d8363e68579"
    );
    // READY was 1, "one" 2.
    assert_eq!(resume["d"]["seq"], 2);
    // Nothing more, in particular not "two" or "three" again.
    assert!(running.queue.try_recv().is_err());
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_and_invalid_session_start_over_without_losing_the_channel() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = receiving(settings(&fake, dir.path()));
    fake.push_message_create(dc::with_id(dc::dm("one"), 1001));
    assert_eq!(running.message().await.text, "one");
    // The session is gone: the resume is refused (op 9) and the shard identifies anew.
    fake.invalidate_session();
    fake.close_with(4000, "Unknown error");
    until("a new session", || fake.gateway_ops() == vec![2, 6, 2]).await;
    until("the new session listening", || fake.is_listening()).await;
    fake.push_message_create(dc::with_id(dc::dm("two"), 1002));
    assert_eq!(running.message().await.text, "two");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_the_saved_session_and_gets_what_was_sent_meanwhile() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = receiving(settings(&fake, dir.path()));
    fake.push_message_create(dc::with_id(dc::dm("before"), 1001));
    assert_eq!(running.message().await.text, "before");
    running.stop().await.unwrap();
    fake.drop_connection();
    fake.push_message_create(dc::with_id(dc::dm("while down"), 1002));
    let mut running = receiving(settings(&fake, dir.path()));
    assert_eq!(running.message().await.text, "while down");
    assert_eq!(fake.gateway_ops(), vec![2, 6]);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_token_is_a_clear_error_at_once() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let running = receiving(DiscordSettings {
        token: "wrong".to_owned(),
        ..settings(&fake, dir.path())
    });
    let result = tokio::time::timeout(WAIT, running.task)
        .await
        .unwrap()
        .unwrap();
    let err = result.unwrap_err();
    assert!(matches!(err, ChannelError::Unauthorized { .. }), "{err:?}");
    insta::assert_snapshot!(err.to_string(), @"discord: the token was rejected: Error code 0: 401: Unauthorized");
    assert!(!err.to_string().contains("wrong"));
    // One call, no retrying in a loop, and the gateway never tried.
    assert_eq!(fake.calls().len(), 1);
    assert_eq!(fake.connections(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_refuses_the_token_stops_the_channel() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let running = receiving(settings(&fake, dir.path()));
    until("listening", || fake.is_listening()).await;
    fake.close_with(4004, "Authentication failed.");
    let err = tokio::time::timeout(WAIT, running.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ChannelError::Unauthorized { .. }), "{err:?}");
    assert_eq!(fake.connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guild_messages_carry_the_guild_and_threads_their_parent() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.add_thread(
        "1017189520441458748",
        "290926798999357250",
        "81384788765712384",
    );
    let bot = fake.bot();
    fake.push_message_create(dc::mentioning(
        dc::guild_message("81384788765712384", "290926798999357250", "in the channel"),
        &bot,
    ));
    fake.push_message_create(dc::with_id(
        dc::guild_message("81384788765712384", "1017189520441458748", "in the thread"),
        2002,
    ));
    let mut running = receiving(settings(&fake, dir.path()));
    let channel = running.message().await;
    assert_eq!(
        (
            channel.chat_type,
            channel.guild_id.as_deref(),
            channel.chat_id.as_str(),
            channel.thread_id.as_deref(),
            channel.mentions_bot,
            channel.text.as_str(),
        ),
        (
            ChatType::Group,
            Some("81384788765712384"),
            "290926798999357250",
            None,
            true,
            "in the channel"
        )
    );
    let thread = running.message().await;
    assert_eq!(
        (
            thread.chat_id.as_str(),
            thread.thread_id.as_deref(),
            thread.mentions_bot
        ),
        ("290926798999357250", Some("1017189520441458748"), false)
    );
    // An answer in the thread goes to the thread's channel.
    running
        .channel
        .send(&OutboundMessage {
            chat: thread.chat(),
            text: "answer".to_owned(),
            reply_to_message_id: None,
            file: None,
        })
        .await
        .unwrap();
    assert_eq!(fake.sent_messages()[0].channel_id, "1017189520441458748");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_goes_out_whole_with_no_pings_allowed() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = DiscordChannel::new(settings(&fake, dir.path())).unwrap();
    let sent = channel
        .send(&OutboundMessage {
            chat: chat_ref(DM_CHANNEL, None),
            text: "**Done.** @everyone\n\n#### Next\n- [ ] tidy".to_owned(),
            reply_to_message_id: Some("302917639565475840".to_owned()),
            file: None,
        })
        .await
        .unwrap();
    assert_eq!(sent.message_ids.len(), 1);
    let call = fake.calls().pop().unwrap();
    assert_eq!(call.route, format!("POST /channels/{DM_CHANNEL}/messages"));
    insta::assert_json_snapshot!("create_message_body", call.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_split_within_2000_characters_without_breaking_code() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = DiscordChannel::new(settings(&fake, dir.path())).unwrap();
    let code: Vec<String> = (0..150).map(|i| format!("let x{i} = {i};")).collect();
    let text = format!(
        "{}\n\n```rust\n{}\n```\nThat is all.",
        "Intro words. ".repeat(100),
        code.join("\n")
    );
    let sent = channel
        .send(&OutboundMessage {
            chat: chat_ref(DM_CHANNEL, None),
            text,
            reply_to_message_id: Some("302917639565475840".to_owned()),
            file: None,
        })
        .await
        .unwrap();
    let messages = fake.sent_messages();
    assert!(messages.len() >= 2, "{}", messages.len());
    assert_eq!(sent.message_ids.len(), messages.len());
    for message in &messages {
        assert!(message.content.chars().count() <= 2000);
        assert_eq!(message.content.matches("```").count() % 2, 0);
    }
    // Only the first part answers the message.
    assert_eq!(messages[0].reply_to.as_deref(), Some("302917639565475840"));
    assert!(
        messages[1..]
            .iter()
            .all(|message| message.reply_to.is_none())
    );
    let all: String = messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(all.matches("let x").count(), 150);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_as_retry_after_says_and_sent_once() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.fail_next("createMessage", DiscordError::rate_limited(0.2));
    let channel = DiscordChannel::new(settings(&fake, dir.path())).unwrap();
    channel
        .send(&OutboundMessage {
            chat: chat_ref(DM_CHANNEL, None),
            text: "after the pause".to_owned(),
            reply_to_message_id: None,
            file: None,
        })
        .await
        .unwrap();
    let routes: Vec<String> = fake.calls().into_iter().map(|call| call.route).collect();
    assert_eq!(
        routes,
        vec![
            format!("POST /channels/{DM_CHANNEL}/messages"),
            format!("POST /channels/{DM_CHANNEL}/messages"),
        ]
    );
    assert_eq!(fake.sent_messages().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_edit_react_and_a_file_use_their_routes() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = DiscordChannel::new(settings(&fake, dir.path())).unwrap();
    let chat = chat_ref(DM_CHANNEL, None);
    channel.typing(&chat).await.unwrap();
    channel
        .edit(&chat, "334385199974967043", "edited")
        .await
        .unwrap();
    channel
        .react(&chat, "334385199974967043", "👍")
        .await
        .unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "file body").unwrap();
    channel
        .send(&OutboundMessage {
            chat: chat.clone(),
            text: String::new(),
            reply_to_message_id: None,
            file: Some(file),
        })
        .await
        .unwrap();
    insta::assert_json_snapshot!("typing_edit_react_file", fake.calls());
    assert_eq!(
        fake.sent_messages(),
        vec![SentMessage {
            id: fake.sent_messages()[0].id.clone(),
            channel_id: DM_CHANNEL.to_owned(),
            content: String::new(),
            reply_to: None,
            files: vec![("notes.txt".to_owned(), b"file body".to_vec())],
        }]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_attachment_is_downloaded_for_a_vision_model() {
    let fake = FakeDiscord::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let url = fake.add_attachment("crab.png", b"\x89PNG fake");
    let mut message = dc::dm("look");
    message["attachments"] = json!([{
        "id": "1", "filename": "crab.png", "size": 9, "content_type": "image/png",
        "url": url, "proxy_url": url,
    }]);
    fake.push_message_create(message);
    let mut running = receiving(settings(&fake, dir.path()));
    let inbound = running.message().await;
    assert_eq!(inbound.media.len(), 1);
    assert_eq!(inbound.media[0].kind, MediaKind::Photo);
    let bytes = running.channel.download(&inbound.media[0]).await.unwrap();
    assert_eq!(bytes, b"\x89PNG fake");
    // An address elsewhere is not fetched.
    let mut elsewhere = inbound.media[0].clone();
    elsewhere.file_id = "http://127.0.0.2:1/secret".to_owned();
    assert!(running.channel.download(&elsewhere).await.is_err());
    running.stop().await.unwrap();
}
