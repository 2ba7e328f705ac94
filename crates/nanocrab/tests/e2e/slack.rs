//! `nanocrab gateway` with Slack: the real binary between the fake Slack (Web API and Socket
//! Mode), the fake Telegram Bot API and the mock LLM, all in one gateway.

use nanocrab_testkit::Reply;
use nanocrab_testkit::slack::{self, FakeSlack, Posted};
use nanocrab_testkit::telegram::{self, FakeTelegram};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, Wire};
use crate::web_client::WebClient;

const TELEGRAM_TOKEN: &str = "123456:fake-telegram-5ecret";
/// The sender of the recorded Slack message frames, and of the recorded Telegram DM.
const SLACK_USER: &str = "U222";
const TELEGRAM_USER: &str = "218485655";

#[test]
fn a_slack_dm_is_answered_through_chat_post_message_beside_telegram_and_the_web_page() {
    let slack = FakeSlack::spawn();
    let telegram = FakeTelegram::spawn(TELEGRAM_TOKEN);
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["channels"] = json!({
        "slack": {
            "botToken": slack.bot_token(),
            "appToken": slack.app_token(),
            "apiBase": slack.api_base(),
            "allowFrom": [SLACK_USER],
        },
        "telegram": {
            "token": TELEGRAM_TOKEN,
            "apiBase": telegram.api_base(),
            "pollTimeout": 1,
            "allowFrom": [TELEGRAM_USER],
        },
    });
    config["gateway"] = json!({ "port": 0 });
    home.write_config(config);
    home.mock.push(Reply::text("Hello from **Slack**."));

    let mut gateway = home.start_gateway();
    assert!(
        gateway.log().contains("channels: telegram, slack"),
        "{}",
        gateway.log()
    );
    let question = slack::dm_message(&slack, "hello there");
    slack.push_envelope(question);
    gateway.eventually("the Slack answer", |_| {
        (!slack.posted().is_empty()).then_some(())
    });
    let posted = slack.posted();
    assert_eq!(
        posted,
        [Posted {
            channel: "D111".to_owned(),
            text: "Hello from *Slack*.".to_owned(),
            thread_ts: None,
            ts: posted[0].ts.clone(),
        }]
    );
    let session = std::fs::read_to_string(
        home.home()
            .join(format!("sessions/agent:main:slack:dm:{SLACK_USER}.jsonl")),
    )
    .unwrap();
    assert!(session.contains("hello there"), "{session}");
    gateway.eventually("the acknowledgement", |_| {
        slack.unacknowledged().is_empty().then_some(())
    });

    // Telegram answers in the same gateway.
    home.mock.push(Reply::text("Hello from Telegram."));
    telegram.push_update(telegram::private_text("and here?"));
    gateway.eventually("the Telegram answer", |_| {
        (!telegram.sent_messages().is_empty()).then_some(())
    });
    assert_eq!(
        telegram.texts_sent_to(TELEGRAM_USER),
        ["Hello from Telegram."]
    );

    // `GET /status` shows both channels running, with the Slack message counted.
    let web = WebClient::new(&gateway.base);
    let status = web.get("/status");
    assert_eq!(status.status, 200, "{:?}", status.body);
    let channels: Vec<_> = status.body["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            json!({"name": c["name"], "account": c["account"], "state": c["state"],
                "in": c["messagesIn"], "out": c["messagesOut"]})
        })
        .collect();
    assert_eq!(
        channels,
        [
            json!({"name": "telegram", "account": "default", "state": "running", "in": 1, "out": 1}),
            json!({"name": "slack", "account": "default", "state": "running", "in": 1, "out": 1}),
        ]
    );
    assert!(gateway.terminate().success());
    assert!(!slack_token_written_to_disk(&home, &slack));
}

/// Whether any file of the home but the config holds a Slack token.
fn slack_token_written_to_disk(home: &Home, slack: &FakeSlack) -> bool {
    let mut found = false;
    let mut dirs = vec![home.home()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path != home.config_path()
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                found |= text.contains(&slack.bot_token()) || text.contains(&slack.app_token());
            }
        }
    }
    found
}

#[test]
fn a_wrong_kind_of_slack_token_is_a_clear_error_at_start() {
    let slack = FakeSlack::spawn();
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["channels"] = json!({
        "slack": {
            "botToken": slack.app_token(),
            "appToken": slack.bot_token(),
            "apiBase": slack.api_base(),
        },
    });
    home.write_config(config);
    let run = home.run(home.nanocrab().arg("gateway"));
    assert!(!run.success, "{run:?}");
    assert!(
        run.stderr
            .contains("`channels.slack.botToken` is not a bot token (xoxb-…)"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains(&slack.bot_token()));
    assert!(slack.calls().is_empty());
}

#[test]
fn the_audit_flags_open_slack_policies_and_status_says_what_is_missing() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["channels"] = json!({
        "slack": {"botToken": "xoxb-1-fake", "dmPolicy": "open", "groupPolicy": "open"},
    });
    home.write_config(config);
    let run = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(!run.success);
    let slack_lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.contains("channels.slack"))
        .collect();
    insta::assert_snapshot!(slack_lines.join("\n"));
    let status = home.run(home.nanocrab().arg("status"));
    let line = status
        .stdout
        .lines()
        .find(|line| line.starts_with("slack"))
        .unwrap_or_default()
        .to_owned();
    insta::assert_snapshot!(line, @"slack      missing appToken/SLACK_APP_TOKEN; dmPolicy open, allowFrom 0, channels 0");
}
