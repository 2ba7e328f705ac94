//! The heartbeat end to end: the real gateway between the fake Telegram Bot API and the mock
//! LLM, ticking every second or fired by `nanocrab heartbeat run`.

use nanocrab_testkit::Reply;
use nanocrab_testkit::telegram::{self, FakeTelegram};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, message_texts, system_prompt};

const TOKEN: &str = "123456:fake-telegram-5ecret";
/// The sender of the recorded private message (`update-private-text.json`).
const OWNER: &str = "218485655";
/// What `nanocrab onboard` writes.
const TEMPLATE: &str = include_str!("../../../core/templates/HEARTBEAT.md");

/// A home whose Telegram channel polls `fake`, with `heartbeat` as the default agent's
/// heartbeat settings and `tasks` as its HEARTBEAT.md.
fn heartbeat_home(fake: &FakeTelegram, heartbeat: Value, tasks: &str) -> Home {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["agents"]["defaults"]["heartbeat"] = heartbeat;
    config["channels"] = json!({ "telegram": {
        "token": TOKEN,
        "apiBase": fake.api_base(),
        "pollTimeout": 1,
        "allowFrom": [OWNER],
    }});
    config["gateway"] = json!({ "port": 0 });
    home.write_config(config);
    std::fs::write(home.workspace().join("HEARTBEAT.md"), tasks).unwrap();
    home
}

fn heartbeat_run(home: &Home, args: &[&str]) -> crate::harness::Run {
    home.run(home.nanocrab().args(["heartbeat", "run"]).args(args))
}

#[test]
fn a_heartbeat_md_without_tasks_asks_no_model_on_a_tick_or_when_run() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = heartbeat_home(&fake, json!({ "every": "1s" }), TEMPLATE);
    let mut gateway = home.start_gateway_for_cli();
    gateway.eventually("a tick", |g| {
        g.log()
            .contains("heartbeat: HEARTBEAT.md holds no task; no model asked")
            .then_some(())
    });
    let run = heartbeat_run(&home, &[]);
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout,
        "main: HEARTBEAT.md holds no task; no model asked\n"
    );
    assert_eq!(home.requests().len(), 0, "no model was asked");
    assert!(fake.sent_messages().is_empty());
    assert!(gateway.terminate().success());
}

#[test]
fn a_task_goes_to_the_chat_the_user_last_wrote_from_even_after_a_restart() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = heartbeat_home(
        &fake,
        json!({ "every": "0" }),
        "# Heartbeat\n<!-- mine -->\n- remind me to water the plants\n",
    );
    std::fs::write(
        home.workspace().join("USER.md"),
        "The user is called Waffle.",
    )
    .unwrap();
    home.mock.push(Reply::text("Hello!"));
    home.mock.push(Reply::text("Time to water the plants."));
    fake.push_update(telegram::private_text("hello there"));
    let mut gateway = home.start_gateway_for_cli();
    gateway.eventually("the answer", |_| {
        (!fake.sent_messages().is_empty()).then_some(())
    });
    assert!(gateway.terminate().success());

    let gateway = home.start_gateway_for_cli();
    let run = heartbeat_run(&home, &[]);
    assert!(
        run.success,
        "{}{}\n{}",
        run.stdout,
        run.stderr,
        gateway.log()
    );
    assert_eq!(
        run.stdout,
        format!("main: sent to telegram chat {OWNER}:\nTime to water the plants.\n")
    );
    let mut gateway = gateway;
    gateway.eventually("the reply sent", |_| {
        (fake.texts_sent_to(OWNER).len() == 2).then_some(())
    });
    assert_eq!(
        fake.texts_sent_to(OWNER),
        ["Hello!", "Time to water the plants."]
    );
    // The model got the tasks (not the comment) and how to say there is nothing, in a
    // session of its own.
    let requests = home.requests();
    assert_eq!(requests.len(), 2);
    let (role, asked) = message_texts(&requests[1].body).pop().unwrap();
    assert_eq!(role, "user");
    assert!(asked.contains("- remind me to water the plants"), "{asked}");
    assert!(!asked.contains("mine"), "{asked}");
    assert!(asked.contains("reply exactly HEARTBEAT_OK"), "{asked}");
    assert_eq!(message_texts(&requests[1].body).len(), 1, "no chat history");
    // A minimal system prompt: the chat's has the workspace files, the heartbeat's not.
    assert!(system_prompt(&requests[0].body).contains("Waffle"));
    assert!(!system_prompt(&requests[1].body).contains("Waffle"));
    assert!(
        home.home()
            .join("sessions/agent:main:heartbeat.jsonl")
            .is_file()
    );
    assert!(gateway.terminate().success());
}

#[test]
fn a_tick_delivers_to_the_configured_chat_and_heartbeat_ok_stays_silent() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = heartbeat_home(
        &fake,
        json!({ "every": "1s", "target": format!("telegram:{OWNER}") }),
        "- check the backups\n",
    );
    home.mock.push(Reply::text("HEARTBEAT_OK"));
    home.mock.set_fallback(Reply::text(
        "**HEARTBEAT_OK** The backup failed last night.",
    ));
    let mut gateway = home.start_gateway_for_cli();
    gateway.eventually("a silent tick", |g| {
        g.log()
            .contains("heartbeat: nothing needs attention")
            .then_some(())
    });
    gateway.eventually("a reply sent", |_| {
        (!fake.texts_sent_to(OWNER).is_empty()).then_some(())
    });
    // The silent tick sent nothing: the first message is the second tick's.
    assert_eq!(
        fake.texts_sent_to(OWNER)[0],
        "The backup failed last night."
    );
    assert!(gateway.terminate().success());
}

#[test]
fn heartbeat_run_names_what_is_wrong() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = heartbeat_home(&fake, json!({}), TEMPLATE);
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.config_path()).unwrap()).unwrap();
    // A port nothing listens on: the listener is closed before the command runs.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    config["gateway"]["port"] = json!(closed.local_addr().unwrap().port());
    drop(closed);
    home.write_config(config);

    let unknown = heartbeat_run(&home, &["--agent", "nobody"]);
    assert!(!unknown.success);
    assert!(
        unknown.stderr.contains("no agent `nobody`") && unknown.stderr.contains("known: main"),
        "{}",
        unknown.stderr
    );
    let no_gateway = heartbeat_run(&home, &[]);
    assert!(!no_gateway.success);
    assert!(
        no_gateway.stderr.contains("no gateway answers")
            && no_gateway.stderr.contains("nanocrab gateway"),
        "{}",
        no_gateway.stderr
    );
    let status = home.run(home.nanocrab().arg("status"));
    assert!(status.success, "{}", status.stderr);
    let line = status
        .stdout
        .lines()
        .find(|l| l.starts_with("heartbeat"))
        .unwrap()
        .to_owned();
    assert!(
        line.starts_with("heartbeat  main: every 30m, next ")
            && line.ends_with(
                "(while the gateway runs), replies to the chat you last wrote from; HEARTBEAT.md holds no task, so a tick asks no model"
            ),
        "{line}"
    );
}

#[test]
fn a_bad_time_zone_is_a_config_error_naming_the_key() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = heartbeat_home(
        &fake,
        json!({ "activeHours": { "start": "08:00", "end": "22:00", "timezone": "Mars/Olympus" } }),
        TEMPLATE,
    );
    let run = home.run(home.nanocrab().arg("gateway"));
    assert!(!run.success);
    assert!(
        run.stderr.contains(&home.config_path().display().to_string())
            && run
                .stderr
                .contains("`agents.defaults.heartbeat.activeHours.timezone`: \"Mars/Olympus\" is not a known time zone"),
        "{}",
        run.stderr
    );
}
