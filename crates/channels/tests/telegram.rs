//! The Telegram adapter against the fake Bot API, fed with the recorded payloads.
#![cfg(feature = "telegram")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod running;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanocrab_channels::telegram::{TelegramChannel, TelegramSettings};
use nanocrab_channels::{Channel, ChannelError, inbound_queue};
use nanocrab_config::EditedMessages;
use nanocrab_schema::{
    ChatRef, ChatType, InboundMessage, Media, MediaKind, OutboundMessage, ReplyTo, Sender,
};
use nanocrab_testkit::fixture_bytes;
use nanocrab_testkit::telegram::{self as tg, FakeTelegram, SentDocument, SentText, TelegramError};
use pretty_assertions::assert_eq;
use running::{Running, WAIT, until};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "123456:TEST-secret-token_abc";
/// The recorded bot, which `getMe` describes.
const BOT: &str = "el_mon_test_bot";
const BOT_ID: i64 = 1276618370;

fn settings(fake: &FakeTelegram, state_dir: &Path) -> TelegramSettings {
    TelegramSettings {
        account: "default".to_owned(),
        token: TOKEN.to_owned(),
        api_base: fake.api_base(),
        proxy: None,
        poll_timeout: Duration::from_secs(1),
        stall_grace: Duration::from_millis(500),
        retry_pause: Duration::from_millis(10),
        edited_messages: EditedMessages::Ignore,
        state_dir: state_dir.to_path_buf(),
    }
}

/// A chat of the default Telegram account, in `thread` when given.
fn chat_ref(chat_id: &str, thread: Option<&str>) -> ChatRef {
    ChatRef {
        channel: "telegram".to_owned(),
        account: "default".to_owned(),
        chat_id: chat_id.to_owned(),
        thread_id: thread.map(str::to_owned),
    }
}

fn channel(settings: TelegramSettings) -> Arc<TelegramChannel> {
    Arc::new(TelegramChannel::new(settings).unwrap())
}

/// A channel polling in the background into a real inbound queue.
/// The adapter made from `settings`, receiving.
fn receiving(settings: TelegramSettings) -> Running<TelegramChannel> {
    Running::start(channel(settings))
}

fn recorded(name: &str) -> Value {
    serde_json::from_slice(&fixture_bytes(&format!("channels/telegram/{name}"))).unwrap()
}

/// A recorded update without its `update_id`, so the fake numbers it in push order.
fn recorded_update(name: &str) -> Value {
    let mut update = recorded(name);
    update.as_object_mut().unwrap().remove("update_id");
    update
}

fn group_message(text: &str) -> InboundMessage {
    InboundMessage {
        channel: "telegram".to_owned(),
        account: "default".to_owned(),
        message_id: "134546".to_owned(),
        chat_id: "-1001293752024".to_owned(),
        chat_type: ChatType::Group,
        chat_title: Some("CryptoInside Chat".to_owned()),
        guild_id: None,
        thread_id: None,
        sender: Sender {
            id: "5964236329".to_owned(),
            username: Some("spacewhaleblues".to_owned()),
            display_name: Some("the Cable Guy".to_owned()),
            is_bot: false,
        },
        text: text.to_owned(),
        reply_to: None,
        mentions: Vec::new(),
        mentions_bot: false,
        media: Vec::new(),
        timestamp: 1721592580,
        edited: false,
        forwarded_from: None,
        via_bot: None,
        caption: false,
        team_id: None,
    }
}

fn outbound(chat: ChatRef, text: &str, reply_to: Option<&str>) -> OutboundMessage {
    OutboundMessage {
        chat,
        text: text.to_owned(),
        reply_to_message_id: reply_to.map(str::to_owned),
        file: None,
    }
}

#[tokio::test]
async fn a_direct_message_goes_in_and_the_answer_comes_back() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.push_update(recorded_update("update-private-text.json"));
    let mut running = receiving(settings(&fake, dir.path()));

    let message = running.message().await;
    assert_eq!(
        message,
        InboundMessage {
            channel: "telegram".to_owned(),
            account: "default".to_owned(),
            message_id: "6557".to_owned(),
            chat_id: "218485655".to_owned(),
            chat_type: ChatType::Dm,
            chat_title: None,
            guild_id: None,
            thread_id: None,
            sender: Sender {
                id: "218485655".to_owned(),
                username: Some("WaffleLapkin".to_owned()),
                display_name: Some("Waffle".to_owned()),
                is_bot: false,
            },
            text: "hello there".to_owned(),
            reply_to: None,
            mentions: Vec::new(),
            mentions_bot: false,
            media: Vec::new(),
            timestamp: 1569518342,
            edited: false,
            forwarded_from: None,
            via_bot: None,
            caption: false,
            team_id: None,
        }
    );

    let sent = running
        .channel
        .send(&outbound(
            message.chat(),
            "**Hello** _Waffle_ & welcome <3",
            Some(&message.message_id),
        ))
        .await
        .unwrap();
    assert_eq!(sent.message_ids, ["2746"]);
    assert_eq!(
        fake.sent_messages(),
        [SentText {
            message_id: 2746,
            chat_id: "218485655".to_owned(),
            message_thread_id: None,
            text: "<b>Hello</b> <i>Waffle</i> &amp; welcome &lt;3".to_owned(),
            parse_mode: Some("HTML".to_owned()),
            reply_to_message_id: Some(6557),
        }]
    );
    insta::assert_json_snapshot!("send_message_body", fake.calls_of("sendMessage")[0].body);

    running.stop().await.unwrap();
    let methods: Vec<String> = fake.calls().into_iter().map(|call| call.method).collect();
    assert_eq!(
        methods[..4],
        ["getMe", "deleteWebhook", "setMyCommands", "getUpdates"]
    );
    insta::assert_json_snapshot!("commands", fake.commands());
    let poll = &fake.calls_of("getUpdates")[0].body;
    assert_eq!(
        poll,
        &json!({
            "timeout": 1,
            "allowed_updates": ["message", "edited_message", "channel_post", "edited_channel_post"],
        })
    );
}

/// A gateway that stops after taking part of a batch: what it took is confirmed, the rest
/// comes again after the restart.
#[tokio::test]
async fn a_batch_taken_in_part_confirms_only_that_part() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let first = fake.push_update(tg::private_text("one"));
    fake.push_update(tg::private_text("two"));
    let mut running = receiving(settings(&fake, dir.path()));
    let one = running.delivery().await;
    let two = running.delivery().await;
    one.accept();
    drop(two);
    // The channel stops polling on its own once it has saved what was taken.
    until("the channel to stop", || running.task.is_finished()).await;
    running.stop().await.unwrap();

    let polls = fake.calls_of("getUpdates").len();
    let mut again = receiving(settings(&fake, dir.path()));
    assert_eq!(again.message().await.text, "two");
    assert_eq!(
        fake.calls_of("getUpdates")[polls].body["offset"],
        json!(first + 1)
    );
    again.stop().await.unwrap();
}

#[tokio::test]
async fn updates_are_confirmed_only_once_delivered_and_the_offset_survives_a_restart() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let first = fake.push_update(tg::private_text("one"));
    let second = fake.push_update(tg::private_text("two"));
    let mut running = receiving(settings(&fake, dir.path()));

    // A batch is handed over whole, in order, for one journal commit.
    let one = running.delivery().await;
    let two = running.delivery().await;
    assert_eq!(
        (one.message.text.as_str(), two.message.text.as_str()),
        ("one", "two")
    );
    // Until the gateway accepts all of it, nothing is confirmed and nothing more is polled.
    one.accept();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.pending_update_ids(), [first, second]);
    assert_eq!(fake.calls_of("getUpdates").len(), 1);
    // The poll after this batch would confirm both to Telegram: it never answers, so only
    // the saved offset can keep a restart from seeing them again.
    fake.stall_next("getUpdates", 1);
    two.accept();
    until("the confirming poll", || {
        fake.calls_of("getUpdates").len() == 2
    })
    .await;
    running.stop().await.unwrap();
    assert_eq!(fake.pending_update_ids(), [first, second]);

    let third = fake.push_update(tg::private_text("three"));
    let mut restarted = receiving(settings(&fake, dir.path()));
    assert_eq!(restarted.message().await.text, "three");
    assert_eq!(
        fake.calls_of("getUpdates")[2].body["offset"],
        json!(second + 1)
    );
    // Handed over but never accepted before the shutdown: it must come again.
    let four = fake.push_update(tg::private_text("four"));
    let unaccepted = restarted.delivery().await;
    assert_eq!(unaccepted.message.text, "four");
    restarted.stop().await.unwrap();
    drop(unaccepted);

    let mut again = receiving(settings(&fake, dir.path()));
    let delivery = again.delivery().await;
    assert_eq!(delivery.message.text, "four");
    assert!(!fake.pending_update_ids().contains(&third));
    fake.stall_next("getUpdates", 1);
    let polls = fake.calls_of("getUpdates").len();
    delivery.accept();
    until("the confirming poll", || {
        fake.calls_of("getUpdates").len() == polls + 1
    })
    .await;
    again.stop().await.unwrap();
    assert_eq!(fake.pending_update_ids(), [four]);

    // Without the saved offset, what Telegram still holds would come again.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut fresh = receiving(settings(&fake, elsewhere.path()));
    assert_eq!(fresh.message().await.text, "four");
    fresh.stop().await.unwrap();
}

#[tokio::test]
async fn group_messages_with_and_without_a_mention_and_replies_to_the_bot() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.push_update(tg::group_text("hello all"));
    fake.push_update(tg::group_text("@EL_MON_TEST_BOT what's up? cc @alice"));
    let mut reply = tg::group_text("and you?");
    let mut bot_message = recorded("sendMessage-response.json")["result"].clone();
    bot_message["chat"] = reply["message"]["chat"].clone();
    reply["message"]["reply_to_message"] = bot_message;
    fake.push_update(reply);
    let mut running = receiving(settings(&fake, dir.path()));

    assert_eq!(running.message().await, group_message("hello all"));
    assert_eq!(
        running.message().await,
        InboundMessage {
            mentions: vec!["EL_MON_TEST_BOT".to_owned(), "alice".to_owned()],
            mentions_bot: true,
            ..group_message("@EL_MON_TEST_BOT what's up? cc @alice")
        }
    );
    assert_eq!(
        running.message().await,
        InboundMessage {
            reply_to: Some(ReplyTo {
                message_id: "2746".to_owned(),
                sender_id: Some(BOT_ID.to_string()),
                to_bot: true,
                text: Some("Hello!".to_owned()),
                quoted: false,
            }),
            ..group_message("and you?")
        }
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn commands_addressed_to_the_bot_and_to_others() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.push_update(tg::group_text(&format!("/new@{BOT}")));
    fake.push_update(tg::group_text("/new@other_bot"));
    fake.push_update(tg::private_text("/start"));
    // Recorded: a command in a reply thread of a non-forum supergroup.
    fake.push_update(recorded_update("update-supergroup-command-reply.json"));
    let mut running = receiving(settings(&fake, dir.path()));

    assert_eq!(
        running.message().await,
        InboundMessage {
            mentions_bot: true,
            ..group_message("/new")
        }
    );
    assert_eq!(running.message().await, group_message("/new@other_bot"));
    let start = running.message().await;
    assert_eq!(
        (start.text.as_str(), start.chat_type),
        ("/help", ChatType::Dm)
    );
    // Its message_thread_id is a reply thread, not a topic: it is a plain reply.
    assert_eq!(
        running.message().await,
        InboundMessage {
            reply_to: Some(ReplyTo {
                message_id: "134545".to_owned(),
                sender_id: Some("6962620676".to_owned()),
                to_bot: false,
                text: None,
                quoted: false,
            }),
            ..group_message("/report")
        }
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_forum_topic_message_has_its_thread_and_no_bogus_reply() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.push_update(json!({"message": recorded("message-forum-topic-created.json")}));
    fake.push_update(json!({"message": recorded("message-forum-topic.json")}));
    let mut running = receiving(settings(&fake, dir.path()));

    let message = running.message().await;
    assert_eq!(
        message,
        InboundMessage {
            channel: "telegram".to_owned(),
            account: "default".to_owned(),
            message_id: "5".to_owned(),
            chat_id: "-1001847508954".to_owned(),
            chat_type: ChatType::Group,
            chat_title: Some("twest".to_owned()),
            guild_id: None,
            thread_id: Some("4".to_owned()),
            sender: Sender {
                id: "1253681278".to_owned(),
                username: Some("wafflelapkin".to_owned()),
                display_name: Some("вафель'".to_owned()),
                is_bot: false,
            },
            text: "blah".to_owned(),
            reply_to: None,
            mentions: Vec::new(),
            mentions_bot: false,
            media: Vec::new(),
            timestamp: 1675229140,
            edited: false,
            forwarded_from: None,
            via_bot: None,
            caption: false,
            team_id: None,
        }
    );
    running
        .channel
        .send(&outbound(message.chat(), "in the topic", Some("5")))
        .await
        .unwrap();
    running.channel.typing(&message.chat()).await.unwrap();
    let sent = fake.sent_messages();
    assert_eq!(
        (sent[0].chat_id.as_str(), sent[0].message_thread_id),
        ("-1001847508954", Some(4))
    );
    assert_eq!(
        fake.calls_of("sendChatAction")[0].body,
        json!({"chat_id": -1001847508954i64, "action": "typing", "message_thread_id": 4})
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn an_anonymous_admin_speaks_as_the_group_and_a_channel_as_itself() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.push_update(tg::anonymous_admin_text("pinned rules, read them"));
    let mut post = tg::anonymous_admin_text("news");
    let channel = json!({"id": -1001000000001i64, "title": "Crab News", "username": "crabnews", "type": "channel"});
    post["message"]["chat"] = channel.clone();
    post["message"]["sender_chat"] = channel;
    post["message"].as_object_mut().unwrap().remove("from");
    fake.push_update(json!({"channel_post": post["message"]}));
    let mut running = receiving(settings(&fake, dir.path()));

    assert_eq!(
        running.message().await,
        InboundMessage {
            channel: "telegram".to_owned(),
            account: "default".to_owned(),
            message_id: "198295".to_owned(),
            chat_id: "-1001331354980".to_owned(),
            chat_type: ChatType::Group,
            chat_title: Some("C++ Together 2.0".to_owned()),
            guild_id: None,
            thread_id: None,
            sender: Sender {
                id: "-1001331354980".to_owned(),
                username: Some("cpptogether".to_owned()),
                display_name: Some("C++ Together 2.0".to_owned()),
                is_bot: false,
            },
            text: "pinned rules, read them".to_owned(),
            reply_to: None,
            mentions: Vec::new(),
            mentions_bot: false,
            media: Vec::new(),
            timestamp: 1638236631,
            edited: false,
            forwarded_from: None,
            via_bot: None,
            caption: false,
            team_id: None,
        }
    );
    let post = running.message().await;
    assert_eq!(
        (post.chat_type, post.chat_id.as_str(), &post.sender),
        (
            ChatType::Channel,
            "-1001000000001",
            &Sender {
                id: "-1001000000001".to_owned(),
                username: Some("crabnews".to_owned()),
                display_name: Some("Crab News".to_owned()),
                is_bot: false,
            }
        )
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_photo_with_a_caption_and_its_download() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.push_update(tg::photo_with_caption());
    let mut running = receiving(settings(&fake, dir.path()));

    let message = running.message().await;
    let largest =
        "AgACAgQAAxkBAAINhGKvijUVSn2i3980bQIIc1fqWGNCAAJpvDEbEmaBUfuA43fR-BnlAQADAgADeQADJAQ";
    assert_eq!(
        (message.text.as_str(), message.chat_type, &message.media),
        (
            "www.example.com",
            ChatType::Dm,
            &vec![Media {
                kind: MediaKind::Photo,
                file_id: largest.to_owned(),
                mime_type: Some("image/jpeg".to_owned()),
                file_name: None,
                size: Some(162061),
            }]
        )
    );

    let bytes: Vec<u8> = (0..=255).cycle().take(162061).collect();
    fake.add_file(largest, "photos/file_7.jpg", bytes.clone());
    assert_eq!(
        running.channel.download(&message.media[0]).await.unwrap(),
        bytes
    );
    assert_eq!(
        fake.calls_of("getFile")[0].body,
        json!({"file_id": largest})
    );
    assert_eq!(fake.calls_of("file/photos/file_7.jpg").len(), 1);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn files_over_twenty_megabytes_are_refused_before_downloading() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = channel(settings(&fake, dir.path()));
    let big = 25 * 1024 * 1024;
    let video = Media {
        kind: MediaKind::Video,
        file_id: "BAACAgQ".to_owned(),
        mime_type: Some("video/mp4".to_owned()),
        file_name: Some("talk.mp4".to_owned()),
        size: Some(big),
    };
    let err = channel.download(&video).await.unwrap_err();
    assert!(
        matches!(&err, ChannelError::TooLarge { file, size, limit, .. }
            if file == "talk.mp4" && *size == big && *limit == 20 * 1024 * 1024),
        "{err:?}"
    );
    assert!(fake.calls().is_empty());

    // The size is known only from getFile (a local Bot API server serves such files).
    fake.add_large_file("BAACAgQ", "videos/file_9.mp4", big);
    let unsized_video = Media {
        size: None,
        ..video
    };
    let err = channel.download(&unsized_video).await.unwrap_err();
    assert!(matches!(err, ChannelError::TooLarge { .. }), "{err:?}");
    let methods: Vec<String> = fake.calls().into_iter().map(|call| call.method).collect();
    assert_eq!(methods, ["getFile"]);
}

#[tokio::test]
async fn edited_messages_are_ignored_or_answered_as_configured() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let edit = fake.push_update(tg::edited(tg::private_text("fixed typo")));
    fake.push_update(tg::private_text("next"));
    let mut running = receiving(settings(&fake, dir.path()));
    assert_eq!(running.message().await.text, "next");
    until("the edit to be confirmed", || {
        !fake.pending_update_ids().contains(&edit)
    })
    .await;
    running.stop().await.unwrap();

    fake.push_update(tg::edited(tg::private_text("fixed typo")));
    let mut responding = receiving(TelegramSettings {
        edited_messages: EditedMessages::Respond,
        ..settings(&fake, dir.path())
    });
    let message = responding.message().await;
    assert_eq!(
        (
            message.text.as_str(),
            message.edited,
            message.message_id.as_str()
        ),
        ("fixed typo", true, "6557")
    );
    responding.stop().await.unwrap();
}

#[tokio::test]
async fn other_updates_and_service_messages_are_skipped_and_confirmed() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let skipped = [
        fake.push_update(recorded_update("update-my-chat-member-kicked.json")),
        fake.push_update(recorded_update("update-message-reaction.json")),
        fake.push_update(recorded_update("update-pinned-message.json")),
        fake.push_update(json!({"message": recorded("message-anonymous-admin.json")})),
        fake.push_update(json!({"some_future_update": {"id": 1}})),
        fake.push_update(json!({"message": {"message_id": "not a number"}})),
    ];
    let text = fake.push_update(tg::private_text("after all that"));
    let mut running = receiving(settings(&fake, dir.path()));
    assert_eq!(running.message().await.text, "after all that");
    until("everything to be confirmed", || {
        fake.pending_update_ids().is_empty()
    })
    .await;
    running.stop().await.unwrap();
    assert_eq!(skipped.iter().max().map(|id| id + 1), Some(text));
}

#[tokio::test]
async fn a_long_answer_is_split_in_order_into_the_right_chat_and_thread() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = channel(settings(&fake, dir.path()));
    let paragraphs: Vec<String> = (0..6)
        .map(|n| format!("**Part {n}.** {}", format!("word{n} & more ").repeat(110)))
        .collect();
    let code: String = (0..150).map(|n| format!("line {n} <x>\n")).collect();
    let answer = format!("{}\n\n```text\n{code}```", paragraphs.join("\n\n"));
    let chat = chat_ref("-1001847508954", Some("4"));

    let sent = channel
        .send(&outbound(chat, &answer, Some("5")))
        .await
        .unwrap();
    let messages = fake.sent_messages();
    assert!(messages.len() >= 3, "{} parts", messages.len());
    assert_eq!(
        sent.message_ids,
        messages
            .iter()
            .map(|m| m.message_id.to_string())
            .collect::<Vec<_>>()
    );
    for (index, message) in messages.iter().enumerate() {
        assert!(message.text.encode_utf16().count() <= 4096);
        assert_eq!(message.chat_id, "-1001847508954");
        assert_eq!(message.message_thread_id, Some(4));
        assert_eq!(message.parse_mode.as_deref(), Some("HTML"));
        assert_eq!(message.reply_to_message_id, (index == 0).then_some(5));
    }
    // Every word arrives, in order.
    let all: String = messages
        .iter()
        .map(|m| m.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let mut at = 0;
    for n in 0..6 {
        at += all[at..].find(&format!("<b>Part {n}.</b>")).unwrap();
    }
    let last = messages.last().unwrap();
    assert!(
        last.text.ends_with("line 149 &lt;x&gt;</code></pre>"),
        "{}",
        last.text
    );
}

#[tokio::test]
async fn html_telegram_cannot_parse_is_sent_again_as_plain_text() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = channel(settings(&fake, dir.path()));
    fake.fail_next("sendMessage", 1, TelegramError::cant_parse_entities());
    let chat = chat_ref("42", None);
    channel
        .send(&outbound(chat, "**bold** & <x>", None))
        .await
        .unwrap();
    let bodies: Vec<Value> = fake
        .calls_of("sendMessage")
        .into_iter()
        .map(|call| call.body)
        .collect();
    assert_eq!(
        bodies,
        [
            json!({"chat_id": 42, "text": "<b>bold</b> &amp; &lt;x&gt;", "parse_mode": "HTML"}),
            json!({"chat_id": 42, "text": "bold & <x>"}),
        ]
    );
}

#[tokio::test]
async fn too_many_requests_waits_as_long_as_telegram_asks() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = channel(settings(&fake, dir.path()));
    fake.fail_next("sendMessage", 1, TelegramError::too_many_requests(1));
    let chat = chat_ref("42", None);
    let start = Instant::now();
    let sent = channel
        .send(&outbound(chat.clone(), "hi", None))
        .await
        .unwrap();
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert_eq!(sent.message_ids.len(), 1);
    assert_eq!(fake.calls_of("sendMessage").len(), 2);

    // A pause longer than a turn should wait fails instead, with Telegram's words.
    fake.fail_next("sendMessage", 1, TelegramError::too_many_requests(3600));
    let err = channel.send(&outbound(chat, "hi", None)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "telegram: sendMessage failed (429): Too Many Requests: retry after 3600"
    );
}

#[tokio::test]
async fn an_answer_survives_telegram_failing_on_its_side_for_a_moment() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = channel(settings(&fake, dir.path()));
    let bad_gateway = TelegramError {
        status: 502,
        body: json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
    };
    fake.fail_next("sendMessage", 2, bad_gateway.clone());
    let chat = chat_ref("42", None);
    let sent = channel
        .send(&outbound(chat.clone(), "hi", None))
        .await
        .unwrap();
    assert_eq!(sent.message_ids.len(), 1);
    assert_eq!(fake.calls_of("sendMessage").len(), 3);

    // A client error is not tried again: it would fail the same way.
    fake.fail_next("sendMessage", 1, TelegramError::chat_not_found());
    let before = fake.calls_of("sendMessage").len();
    assert!(channel.send(&outbound(chat, "hi", None)).await.is_err());
    assert_eq!(fake.calls_of("sendMessage").len(), before + 1);
}

#[tokio::test]
async fn polling_recovers_from_a_stall_a_conflict_and_a_rate_limit() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    fake.stall_next("getUpdates", 1);
    fake.push_update(tg::private_text("after a stall"));
    let start = Instant::now();
    let mut running = receiving(settings(&fake, dir.path()));
    assert_eq!(running.message().await.text, "after a stall");
    // Poll timeout 1 s + grace 0.5 s before the stalled poll is abandoned.
    assert!(start.elapsed() >= Duration::from_millis(1500));
    assert!(fake.calls_of("getUpdates").len() >= 2);

    // A poll may be under way already; the next two fail, whenever they come.
    let polls = fake.calls_of("getUpdates").len();
    let start = Instant::now();
    fake.fail_next("getUpdates", 1, TelegramError::conflict());
    fake.fail_next("getUpdates", 1, TelegramError::too_many_requests(1));
    until("both failures", || {
        fake.calls_of("getUpdates").len() >= polls + 2
    })
    .await;
    fake.push_update(tg::private_text("after a conflict"));
    assert_eq!(running.message().await.text, "after a conflict");
    // 1 s of backoff after the conflict, then the 1 s Telegram asked for.
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_rejected_token_ends_run_with_unauthorized() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = settings(&fake, dir.path());
    wrong.token = "999:wrong-token".to_owned();
    let (sink, _queue) = inbound_queue(1);
    let err = channel(wrong)
        .run(sink, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "telegram: the token was rejected: Unauthorized"
    );
    assert!(matches!(err, ChannelError::Unauthorized { .. }));

    // A token revoked while polling ends it too.
    fake.push_update(tg::private_text("hi"));
    let mut running = receiving(settings(&fake, dir.path()));
    running.message().await;
    fake.fail_next("getUpdates", 1, TelegramError::unauthorized());
    let result = tokio::time::timeout(WAIT, running.task)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(result, Err(ChannelError::Unauthorized { .. })));
}

#[tokio::test]
async fn the_token_is_in_no_error_message() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let chat = chat_ref("42", None);
    let mut errors = Vec::new();

    let channel = channel(settings(&fake, dir.path()));
    fake.fail_next("sendMessage", 1, TelegramError::chat_not_found());
    errors.push(
        channel
            .send(&outbound(chat.clone(), "hi", None))
            .await
            .unwrap_err(),
    );
    fake.fail_next("sendChatAction", 1, TelegramError::unauthorized());
    errors.push(channel.typing(&chat).await.unwrap_err());
    let missing = Media {
        kind: MediaKind::Document,
        file_id: "nope".to_owned(),
        mime_type: None,
        file_name: None,
        size: None,
    };
    errors.push(channel.download(&missing).await.unwrap_err());
    fake.add_large_file("gone", "documents/gone.pdf", 10);
    errors.push(
        channel
            .download(&Media {
                file_id: "gone".to_owned(),
                ..missing.clone()
            })
            .await
            .unwrap_err(),
    );

    // Nothing listens there: reqwest's own error would name the URL, token and all.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let unreachable = self::channel(TelegramSettings {
        api_base: format!("http://{closed}"),
        ..settings(&fake, dir.path())
    });
    errors.push(
        unreachable
            .send(&outbound(chat.clone(), "hi", None))
            .await
            .unwrap_err(),
    );
    errors.push(unreachable.download(&missing).await.unwrap_err());
    errors.push(
        TelegramChannel::new(TelegramSettings {
            proxy: Some(format!("http://user:{TOKEN}@[::1")),
            ..settings(&fake, dir.path())
        })
        .unwrap_err(),
    );

    let shown: Vec<String> = errors
        .iter()
        .flat_map(|err| [err.to_string(), format!("{err:?}")])
        .chain([
            format!("{:?}", settings(&fake, dir.path())),
            format!("{channel:?}"),
        ])
        .collect();
    for text in &shown {
        assert!(!text.contains("secret-token"), "the token leaked: {text}");
    }
    insta::assert_snapshot!(
        "error_messages",
        errors
            .iter()
            .map(|err| err
                .to_string()
                .replace(&closed.to_string(), "127.0.0.1:PORT"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[tokio::test]
async fn shutdown_cancels_a_poll_in_flight() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    // The poll would last far longer than `stop` waits (WAIT): it ends in time only if
    // cancelled. No duration is measured, so a loaded machine cannot fail it.
    fake.stall_next("getUpdates", 1);
    let running = receiving(TelegramSettings {
        poll_timeout: Duration::from_secs(3600),
        ..settings(&fake, dir.path())
    });
    until("a poll", || !fake.calls_of("getUpdates").is_empty()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.stop().await.unwrap();
}

#[tokio::test]
async fn typing_edit_and_react_reach_the_bot_api() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = channel(settings(&fake, dir.path()));
    let chat = chat_ref("42", None);
    assert!(channel.capabilities().edit && channel.capabilities().media);
    assert_eq!((channel.name(), channel.account()), ("telegram", "default"));
    channel.typing(&chat).await.unwrap();
    channel.edit(&chat, "2746", "now *done*").await.unwrap();
    fake.fail_next(
        "editMessageText",
        1,
        TelegramError::bad_request(
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        ),
    );
    channel.edit(&chat, "2746", "now *done*").await.unwrap();
    channel
        .edit(&chat, "2746", &"long ".repeat(1000))
        .await
        .unwrap();
    channel.react(&chat, "2746", "👍").await.unwrap();
    let calls: Vec<(String, Value)> = fake
        .calls()
        .into_iter()
        .map(|call| {
            let mut body = call.body;
            if let Some(text) = body["text"].as_str().filter(|text| text.len() > 100) {
                body["text"] = json!(format!(
                    "{} UTF-16 units ending {:?}",
                    text.encode_utf16().count(),
                    &text[text.len() - 8..]
                ));
            }
            (call.method, body)
        })
        .collect();
    insta::assert_json_snapshot!("typing_edit_react", calls);
}

#[tokio::test]
async fn a_file_goes_out_as_a_document_after_the_text() {
    let fake = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let channel = channel(settings(&fake, dir.path()));
    let file = dir.path().join("report \"q3\".pdf");
    // Bytes that hold CRLFs and what looks like a boundary arrive as they were.
    let bytes = b"%PDF-1.7\r\n--nanocrab-form-boundary-6b1f0d2c\r\n\x00\xff end".to_vec();
    std::fs::write(&file, &bytes).unwrap();
    let message = OutboundMessage {
        file: Some(file.clone()),
        ..outbound(chat_ref("-100123", Some("7")), "The report", None)
    };
    let sent = channel.send(&message).await.unwrap();
    assert_eq!(sent.message_ids, ["2746", "2747"]);
    assert_eq!(
        fake.sent_documents(),
        [SentDocument {
            message_id: 2747,
            chat_id: "-100123".to_owned(),
            message_thread_id: Some(7),
            file_name: "report \"q3\".pdf".to_owned(),
            bytes,
            caption: None,
        }]
    );
    assert_eq!(fake.sent_messages()[0].text, "The report");

    // A file alone sends no empty text; a file that is gone is an error naming it.
    let alone = OutboundMessage {
        file: Some(file.clone()),
        ..outbound(chat_ref("42", None), "", None)
    };
    assert_eq!(channel.send(&alone).await.unwrap().message_ids, ["2748"]);
    assert_eq!(fake.sent_messages().len(), 1);
    std::fs::remove_file(&file).unwrap();
    let err = channel.send(&alone).await.unwrap_err();
    assert!(
        matches!(&err, ChannelError::File { path, .. } if *path == file),
        "{err:?}"
    );
}
