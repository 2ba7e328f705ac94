//! The agent's `message` tool in the gateway: a message sent mid-turn reaches the chat before
//! the turn's reply; a reply that says `NO_REPLY`, or only repeats what the tool sent, is not
//! sent; another chat takes a grant; a workspace file goes along; a heartbeat's message goes to
//! its target and its reply is not sent twice.

use nanocrab_config::HeartbeatConfig;
use nanocrab_gateway::{Delivery, HeartbeatOutcome};
use nanocrab_schema::{ChatRef, OutboundMessage};
use nanocrab_testkit::{RecordedRequest, Reply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Harness, answer, dm, until};

/// A harness whose agent has the `message` tool under `grants`.
async fn harness(grants: &[&str]) -> Harness {
    let mut harness = Harness::new().await;
    harness.message_tool = Some(grants.iter().map(|g| (*g).to_owned()).collect());
    harness
}

fn message(content: &str) -> Reply {
    Reply::tool_call("call_1", "message", json!({ "content": content }))
}

fn said(chat: ChatRef, text: &str) -> OutboundMessage {
    OutboundMessage {
        chat,
        text: text.to_owned(),
        reply_to_message_id: None,
        file: None,
    }
}

fn telegram(chat: &str) -> ChatRef {
    ChatRef {
        channel: "telegram".to_owned(),
        account: "default".to_owned(),
        chat_id: chat.to_owned(),
        thread_id: None,
    }
}

/// The tool results the model was given in `request`, as text.
fn tool_results(request: &RecordedRequest) -> Vec<String> {
    let text = |content: &Value| match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect(),
        _ => String::new(),
    };
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .map(|block| text(&block["content"]))
        .collect()
}

#[tokio::test]
async fn a_message_sent_mid_turn_reaches_the_chat_before_the_reply() {
    let harness = harness(&[]).await;
    let gateway = harness.start();
    harness.mock.push(message("On it: this takes a minute."));
    harness.mock.push(Reply::text("Here is the answer."));
    let hello = dm("7", "70", "find it");
    harness.channel.deliver(hello.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(2).await,
        [
            said(hello.chat(), "On it: this takes a minute."),
            answer(&hello, "Here is the answer."),
        ]
    );
    // The tool had sent the message before the model was asked again.
    assert_eq!(
        tool_results(&harness.mock.requests()[1]),
        ["sent to telegram:7"]
    );
    gateway.stop().await;
    assert_eq!(harness.unfinished_messages(), []);
}

#[tokio::test]
async fn a_reply_saying_no_reply_or_repeating_the_message_is_not_sent() {
    let harness = harness(&[]).await;
    let gateway = harness.start();
    let chat = dm("7", "70", "x").chat();

    harness.mock.push(message("The report is ready."));
    harness.mock.push(Reply::text("The report is ready."));
    harness
        .channel
        .deliver(dm("7", "70", "is the report ready?"))
        .await
        .unwrap();
    until(|| harness.mock.requests().len() == 2).await;

    harness.mock.push(message("Done."));
    harness.mock.push(Reply::text("NO_REPLY"));
    harness
        .channel
        .deliver(dm("7", "71", "now file it"))
        .await
        .unwrap();
    until(|| harness.mock.requests().len() == 4).await;

    // A reply that says something new is still sent.
    harness.mock.push(message("Filed."));
    harness.mock.push(Reply::text("Anything else?"));
    let last = dm("7", "72", "thanks");
    harness.channel.deliver(last.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(4).await,
        [
            said(chat.clone(), "The report is ready."),
            said(chat.clone(), "Done."),
            said(chat, "Filed."),
            answer(&last, "Anything else?"),
        ]
    );
    gateway.stop().await;
    assert_eq!(harness.channel.sent().len(), 4);
    // The turns whose reply was left out are done all the same.
    assert_eq!(harness.unfinished_messages(), []);
}

#[tokio::test]
async fn another_chat_is_refused_without_a_grant_and_reached_with_one() {
    let harness = harness(&["message:telegram:99"]).await;
    let gateway = harness.start();
    harness.mock.push(Reply::tool_calls(vec![
        (
            "call_1".to_owned(),
            "message".to_owned(),
            json!({"content": "Hi Anna", "to": "telegram:98"}),
        ),
        (
            "call_2".to_owned(),
            "message".to_owned(),
            json!({"content": "Hi Ben", "to": "telegram:99"}),
        ),
        (
            "call_3".to_owned(),
            "message".to_owned(),
            json!({"content": "Hi Cleo", "to": "slack:C1"}),
        ),
    ]));
    harness
        .mock
        .push(Reply::text("Ben has it; Anna I may not write to."));
    let hello = dm("7", "70", "tell Anna and Ben");
    harness.channel.deliver(hello.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(2).await,
        [
            said(telegram("99"), "Hi Ben"),
            answer(&hello, "Ben has it; Anna I may not write to."),
        ]
    );
    let results = tool_results(&harness.mock.requests()[1]);
    assert_eq!(results.len(), 3);
    assert!(
        results[0].starts_with("Error: message needs approval (unsafe) for message:telegram:98"),
        "{}",
        results[0]
    );
    assert_eq!(results[1], "sent to telegram:99");
    assert!(
        results[2].starts_with("Error: message needs approval (unsafe) for message:slack:C1"),
        "{}",
        results[2]
    );
    gateway.stop().await;
}

#[tokio::test]
async fn an_unknown_channel_or_chat_is_a_clear_error() {
    let harness = harness(&["message:*"]).await;
    harness
        .channel
        .fail_sends(vec![nanocrab_channels::ChannelError::Api {
            channel: "telegram".into(),
            method: "sendMessage".into(),
            status: Some(400),
            message: "Bad Request: chat not found".into(),
        }]);
    let gateway = harness.start();
    harness.mock.push(Reply::tool_call(
        "call_1",
        "message",
        json!({"content": "Hi", "to": "telegram:404"}),
    ));
    harness.mock.push(Reply::tool_call(
        "call_2",
        "message",
        json!({"content": "Hi", "to": "slack:C1"}),
    ));
    harness.mock.push(Reply::text("Neither worked."));
    let hello = dm("7", "70", "write to them");
    harness.channel.deliver(hello.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        [answer(&hello, "Neither worked.")]
    );
    let requests = harness.mock.requests();
    assert_eq!(
        tool_results(&requests[2]),
        [
            "Error: not sent to telegram:404: telegram: sendMessage failed (400): Bad Request: \
             chat not found",
            "Error: to: no channel `slack` runs in this gateway; it runs: telegram",
        ]
    );
    gateway.stop().await;
}

#[tokio::test]
async fn a_workspace_file_goes_with_the_message() {
    let harness = harness(&[]).await;
    let workspace = harness.workspace("main");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("report.txt"), "Q3: fine").unwrap();
    let gateway = harness.start();
    harness.mock.push(Reply::tool_call(
        "call_1",
        "message",
        json!({"content": "The report", "file": "report.txt"}),
    ));
    harness.mock.push(Reply::text("NO_REPLY"));
    let hello = dm("7", "70", "send me the report");
    harness.channel.deliver(hello.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        [OutboundMessage {
            file: Some(workspace.canonicalize().unwrap().join("report.txt")),
            ..said(hello.chat(), "The report")
        }]
    );
    until(|| harness.mock.requests().len() == 2).await;
    gateway.stop().await;
    assert_eq!(harness.channel.sent().len(), 1);
    assert_eq!(harness.unfinished_messages(), []);
}

#[tokio::test]
async fn a_heartbeat_says_it_with_the_tool_to_its_target_and_only_once() {
    let mut harness = harness(&[]).await;
    harness.config.agents.defaults.heartbeat = HeartbeatConfig {
        every: "0".to_owned(),
        target: "telegram:42".to_owned(),
        active_hours: None,
    };
    let workspace = harness.workspace("main");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("HEARTBEAT.md"), "- water the plants\n").unwrap();
    let gateway = harness.start();
    harness.mock.push(message("Water the plants."));
    harness.mock.push(Reply::text("Water the plants."));
    assert_eq!(
        gateway.heartbeats.run_now("main").await.unwrap(),
        HeartbeatOutcome::Ran(Delivery::Silent)
    );
    assert_eq!(
        harness.channel.sent(),
        [said(telegram("42"), "Water the plants.")]
    );
    gateway.stop().await;
}
