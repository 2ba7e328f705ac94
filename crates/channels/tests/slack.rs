//! The Slack adapter against the fake Slack (Web API and Socket Mode), fed with the recorded
//! Socket Mode frames.
#![cfg(feature = "slack")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod running;

use std::sync::Arc;
use std::time::Duration;

use nanocrab_channels::slack::{SlackChannel, SlackSettings};
use nanocrab_channels::{Channel, ChannelError};
use nanocrab_schema::{
    ChatRef, ChatType, InboundMessage, Media, MediaKind, OutboundMessage, Sender,
};
use nanocrab_testkit::slack::{self, FakeSlack, Posted, SlackError, Uploaded};
use pretty_assertions::assert_eq;
use running::{Running, WAIT, until};
use serde_json::{Value, json};

fn settings(fake: &FakeSlack) -> SlackSettings {
    SlackSettings {
        account: "default".to_owned(),
        bot_token: fake.bot_token(),
        app_token: fake.app_token(),
        api_base: fake.api_base(),
        idle_timeout: Duration::from_secs(30),
        retry_pause: Duration::from_millis(10),
        message_limit: slack::MESSAGE_LIMIT,
    }
}

fn chat(chat_id: &str, thread: Option<&str>) -> ChatRef {
    ChatRef {
        channel: "slack".to_owned(),
        account: "default".to_owned(),
        chat_id: chat_id.to_owned(),
        thread_id: thread.map(str::to_owned),
    }
}

fn outbound(chat: ChatRef, text: &str) -> OutboundMessage {
    OutboundMessage {
        chat,
        text: text.to_owned(),
        reply_to_message_id: None,
        file: None,
    }
}

/// The adapter made from `settings`, receiving.
fn receiving(settings: SlackSettings) -> Running<SlackChannel> {
    Running::start(Arc::new(SlackChannel::new(settings).unwrap()))
}

/// The message every recorded `events_api` frame describes, as the adapter delivers it.
fn recorded_channel_message() -> InboundMessage {
    InboundMessage {
        channel: "slack".to_owned(),
        account: "default".to_owned(),
        message_id: "1610241741.000200".to_owned(),
        chat_id: "C111".to_owned(),
        chat_type: ChatType::Group,
        chat_title: None,
        guild_id: None,
        thread_id: None,
        sender: Sender {
            id: "U222".to_owned(),
            ..Sender::default()
        },
        text: "@U111 Hi here!".to_owned(),
        reply_to: None,
        mentions: vec!["U111".to_owned()],
        mentions_bot: false,
        media: Vec::new(),
        timestamp: 1610241741,
        edited: false,
        forwarded_from: None,
        via_bot: None,
        caption: false,
        team_id: Some("T111".to_owned()),
    }
}

#[tokio::test]
async fn a_recorded_event_is_delivered_acknowledged_and_its_redelivery_answered_once() {
    let fake = FakeSlack::start().await;
    let mut running = receiving(settings(&fake));
    let first = fake.push_envelope(slack::recorded("socket-mode-events-api-message"));
    assert_eq!(running.message().await, recorded_channel_message());
    until("the acknowledgement", || fake.unacknowledged().is_empty()).await;
    // Slack's redelivery of the same event (`Ev111`, `retry_attempt: 1`) is acknowledged and
    // not delivered again; the message after it is the next one delivered.
    let retry = fake.push_envelope(slack::recorded("socket-mode-events-api-message-retry"));
    let next = slack::dm_message(&fake, "and now?");
    fake.push_envelope(next);
    let message = running.message().await;
    assert_eq!(
        (message.chat_type, message.text.as_str()),
        (ChatType::Dm, "and now?")
    );
    until("every acknowledgement", || fake.unacknowledged().is_empty()).await;
    let acks = fake.acks();
    assert_eq!(
        acks[..2],
        [json!({"envelope_id": first}), json!({"envelope_id": retry})]
    );
    // One connection, opened with the app token after the bot token was checked.
    let methods: Vec<String> = fake.calls().into_iter().map(|call| call.method).collect();
    assert_eq!(methods, ["auth.test", "apps.connections.open"]);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn an_app_mention_and_a_slash_command_are_delivered_as_addressed_to_the_bot() {
    let fake = FakeSlack::start().await;
    let mut running = receiving(settings(&fake));
    fake.push_envelope(slack::recorded("socket-mode-events-api-app-mention"));
    let mention = running.message().await;
    assert_eq!(
        mention,
        InboundMessage {
            text: "@U111".to_owned(),
            mentions_bot: true,
            ..recorded_channel_message()
        }
    );
    fake.push_envelope(slack::recorded("socket-mode-slash-command"));
    let command = running.message().await;
    assert_eq!(
        command,
        InboundMessage {
            message_id: "111.222.xxx".to_owned(),
            chat_id: "C111".to_owned(),
            sender: Sender {
                id: "U111".to_owned(),
                username: Some("testxyz".to_owned()),
                ..Sender::default()
            },
            text: "/hello-socket-mode".to_owned(),
            mentions: Vec::new(),
            mentions_bot: true,
            timestamp: 0,
            ..recorded_channel_message()
        }
    );
    until("the acknowledgements", || fake.acks().len() == 2).await;
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_disconnect_frame_opens_a_new_connection_and_nothing_is_lost() {
    let fake = FakeSlack::start().await;
    let mut running = receiving(settings(&fake));
    fake.push_envelope(slack::dm_message(&fake, "one"));
    assert_eq!(running.message().await.text, "one");
    until("the acknowledgement", || fake.unacknowledged().is_empty()).await;
    fake.disconnect();
    until("a second connection", || fake.connections() == 2).await;
    fake.push_envelope(slack::dm_message(&fake, "two"));
    assert_eq!(running.message().await.text, "two");
    assert_eq!(fake.calls_of("apps.connections.open").len(), 2);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_socket_dropped_before_the_acknowledgement_neither_loses_nor_doubles_the_message() {
    let fake = FakeSlack::start().await;
    let mut running = receiving(settings(&fake));
    fake.push_envelope(slack::dm_message(&fake, "one"));
    // The gateway has the message but has not journaled it when the connection breaks.
    let delivery = running.delivery().await;
    fake.drop_socket();
    until("the connection to close", || fake.open_connections() == 0).await;
    assert_eq!(delivery.message.text, "one");
    delivery.accept();
    // The acknowledgement went nowhere: Slack sends the event again on the next connection,
    // and the adapter acknowledges it without delivering it twice.
    until("the redelivery's acknowledgement", || {
        fake.connections() == 2 && fake.unacknowledged().is_empty()
    })
    .await;
    fake.push_envelope(slack::dm_message(&fake, "two"));
    assert_eq!(running.message().await.text, "two");
    // Dropped as the event goes out: whether it was read before the cut or not, it comes
    // once.
    fake.push_envelope(slack::dm_message(&fake, "three"));
    fake.drop_socket();
    assert_eq!(running.message().await.text, "three");
    until("a third connection, everything acknowledged", || {
        fake.connections() == 3 && fake.unacknowledged().is_empty()
    })
    .await;
    fake.push_envelope(slack::dm_message(&fake, "four"));
    assert_eq!(running.message().await.text, "four");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_rejected_app_token_stops_the_channel_with_a_clear_error_and_no_busy_loop() {
    let fake = FakeSlack::start().await;
    let running = receiving(SlackSettings {
        app_token: "xapp-1-wrong-secret".to_owned(),
        ..settings(&fake)
    });
    let err = tokio::time::timeout(WAIT, running.task)
        .await
        .expect("run went on with a rejected token")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ChannelError::Unauthorized { .. }), "{err:?}");
    insta::assert_snapshot!(err.to_string(), @"slack: the token was rejected: apps.connections.open: 200 invalid_auth");
    assert!(!err.to_string().contains("secret"));
    assert_eq!(fake.calls_of("apps.connections.open").len(), 1);

    let running = receiving(SlackSettings {
        bot_token: "xoxb-wrong-secret".to_owned(),
        ..settings(&fake)
    });
    let err = tokio::time::timeout(WAIT, running.task)
        .await
        .expect("run went on with a rejected token")
        .unwrap()
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"slack: the token was rejected: auth.test: 200 invalid_auth");
}

#[tokio::test]
async fn an_answer_is_rendered_as_mrkdwn_and_posted_into_its_thread() {
    let fake = FakeSlack::start().await;
    let channel = SlackChannel::new(settings(&fake)).unwrap();
    let sent = channel
        .send(&outbound(
            chat("C111", Some("1610241741.000200")),
            "**Done**: see [the docs](https://example.com/?a=1&b=2) & `x<y`",
        ))
        .await
        .unwrap();
    assert_eq!(sent.message_ids, [fake.posted()[0].ts.clone()]);
    let bodies: Vec<Value> = fake
        .calls_of("chat.postMessage")
        .into_iter()
        .map(|call| call.body)
        .collect();
    insta::assert_json_snapshot!(bodies, @r#"
    [
      {
        "channel": "C111",
        "text": "*Done*: see <https://example.com/?a=1&amp;b=2|the docs> &amp; `x&lt;y`",
        "thread_ts": "1610241741.000200"
      }
    ]
    "#);
    channel
        .edit(&chat("C111", None), &sent.message_ids[0], "_edited_")
        .await
        .unwrap();
    let update = fake.calls_of("chat.update").remove(0).body;
    assert_eq!(
        update,
        json!({"channel": "C111", "ts": sent.message_ids[0], "text": "_edited_"})
    );
}

#[tokio::test]
async fn a_long_answer_is_split_within_the_limit_and_a_429_waits_for_retry_after() {
    let fake = FakeSlack::start().await;
    let channel = SlackChannel::new(settings(&fake)).unwrap();
    let paragraph = "word ".repeat(1_999).trim_end().to_owned();
    let text = vec![paragraph.clone(); 9].join("\n\n");
    assert!(text.chars().count() > 2 * slack::MESSAGE_LIMIT);
    fake.fail_next("chat.postMessage", 1, SlackError::ratelimited(1));
    let sent = channel
        .send(&outbound(chat("D111", None), &text))
        .await
        .unwrap();
    let posted = fake.posted();
    assert_eq!(sent.message_ids.len(), 3);
    assert_eq!(posted.len(), 3);
    assert!(
        posted
            .iter()
            .all(|p| p.text.chars().count() <= slack::MESSAGE_LIMIT)
    );
    // Every word arrives, in order; the cuts fall between paragraphs.
    let joined: Vec<&str> = posted.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(joined.join("\n\n"), text);
    // The 429 was waited out and the same part sent again.
    let calls = fake.calls_of("chat.postMessage");
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0].body, calls[1].body);

    // A 429 asking for more than a minute fails the send instead of holding up the turn.
    fake.fail_next("chat.postMessage", 1, SlackError::ratelimited(3600));
    let err = channel
        .send(&outbound(chat("D111", None), "hi"))
        .await
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"slack: chat.postMessage failed (429): ratelimited");
    // An error that will not pass is not retried.
    fake.fail_next(
        "chat.postMessage",
        1,
        SlackError::error("channel_not_found"),
    );
    let err = channel
        .send(&outbound(chat("C999", None), "hi"))
        .await
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"slack: chat.postMessage failed (200): channel_not_found");
    assert_eq!(fake.calls_of("chat.postMessage").len(), 6);
}

#[tokio::test]
async fn files_come_in_as_media_and_go_out_through_the_external_upload() {
    let fake = FakeSlack::start().await;
    let mut running = receiving(settings(&fake));
    fake.add_file("F111", "notes.txt", "text/plain", b"some notes".to_vec());
    let frame = slack::with_files(
        slack::dm_message(&fake, "read this"),
        json!([{"id": "F111", "name": "notes.txt", "mimetype": "text/plain", "size": 10}]),
    );
    fake.push_envelope(frame);
    let message = running.message().await;
    assert_eq!(
        message.media,
        [Media {
            kind: MediaKind::Document,
            file_id: "F111".to_owned(),
            mime_type: Some("text/plain".to_owned()),
            file_name: Some("notes.txt".to_owned()),
            size: Some(10),
        }]
    );
    let bytes = running.channel.download(&message.media[0]).await.unwrap();
    assert_eq!(bytes, b"some notes");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.md");
    std::fs::write(&path, "# Report\n").unwrap();
    let sent = running
        .channel
        .send(&OutboundMessage {
            file: Some(path),
            ..outbound(chat("D111", Some("1700000001.000200")), "Here it is.")
        })
        .await
        .unwrap();
    assert_eq!(sent.message_ids.len(), 2);
    assert_eq!(
        fake.uploads(),
        [Uploaded {
            channel: "D111".to_owned(),
            thread_ts: Some("1700000001.000200".to_owned()),
            file_name: "report.md".to_owned(),
            bytes: b"# Report\n".to_vec(),
        }]
    );
    let calls: Vec<Value> = fake
        .calls()
        .into_iter()
        .filter(|call| call.method.starts_with("files."))
        .map(|call| json!({"method": call.method, "body": call.body}))
        .collect();
    insta::assert_json_snapshot!(calls, @r#"
    [
      {
        "method": "files.info",
        "body": {
          "file": "F111"
        }
      },
      {
        "method": "files.getUploadURLExternal",
        "body": {
          "filename": "report.md",
          "length": "9"
        }
      },
      {
        "method": "files.completeUploadExternal",
        "body": {
          "files": [
            {
              "id": "F000003",
              "title": "report.md"
            }
          ],
          "channel_id": "D111",
          "thread_ts": "1700000001.000200"
        }
      }
    ]
    "#);

    assert_eq!(
        fake.posted(),
        [Posted {
            channel: "D111".to_owned(),
            text: "Here it is.".to_owned(),
            thread_ts: Some("1700000001.000200".to_owned()),
            ts: sent.message_ids[0].clone(),
        }]
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_thread_reply_carries_its_thread_and_the_bots_own_messages_are_skipped() {
    let fake = FakeSlack::start().await;
    let mut running = receiving(settings(&fake));
    let mut own = slack::channel_message(&fake, "my own answer");
    own["payload"]["event"]["user"] = json!(slack::BOT_USER);
    fake.push_envelope(own);
    let mut joined = slack::channel_message(&fake, "<@U222> has joined the channel");
    joined["payload"]["event"]["subtype"] = json!("channel_join");
    fake.push_envelope(joined);
    let reply = slack::in_thread(
        slack::channel_message(&fake, &format!("<@{}> approve k3f9aa", slack::BOT_USER)),
        "1610241741.000200",
    );
    fake.push_envelope(reply);
    let message = running.message().await;
    assert_eq!(
        (
            message.thread_id.as_deref(),
            message.text.as_str(),
            message.mentions_bot,
            message.chat().thread_id
        ),
        (
            Some("1610241741.000200"),
            "approve k3f9aa",
            true,
            Some("1610241741.000200".to_owned())
        )
    );
    until("every acknowledgement", || fake.acks().len() == 3).await;
    running.stop().await.unwrap();
}
