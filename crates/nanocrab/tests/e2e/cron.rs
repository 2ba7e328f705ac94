//! Scheduled jobs end to end: `nanocrab cron` and the agent's `cron` tool against the real
//! gateway, between the fake Telegram Bot API and the mock LLM.

use nanocrab_testkit::Reply;
use nanocrab_testkit::telegram::{self, FakeTelegram};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Run, Wire, message_texts};

const TOKEN: &str = "123456:fake-telegram-5ecret";
/// The sender of the recorded private message (`update-private-text.json`).
const OWNER: &str = "218485655";

/// A home whose Telegram channel polls `fake`, the heartbeat off, and `tools.grants` as given.
fn cron_home(fake: &FakeTelegram, grants: &[&str]) -> Home {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["agents"]["defaults"]["heartbeat"] = json!({ "every": "0" });
    config["tools"] = json!({ "grants": grants });
    config["channels"] = json!({ "telegram": {
        "token": TOKEN,
        "apiBase": fake.api_base(),
        "pollTimeout": 1,
        "allowFrom": [OWNER],
    }});
    config["gateway"] = json!({ "port": 0 });
    home.write_config(config);
    home
}

fn cron(home: &Home, args: &[&str]) -> Run {
    home.run(home.nanocrab().arg("cron").args(args))
}

/// `cron add` with `args`, asserting success; the new job's id.
fn add(home: &Home, args: &[&str]) -> String {
    let run = cron(home, &[&["add"], args].concat());
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    run.stdout
        .strip_prefix("added ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{}", run.stdout))
        .to_owned()
}

fn json_of(home: &Home, args: &[&str]) -> Value {
    let run = cron(home, args);
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

/// The statuses of job `id`'s runs, newest first.
fn statuses(home: &Home, id: &str) -> Vec<String> {
    json_of(home, &["history", id, "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["status"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_every_job_fires_survives_a_restart_and_keeps_its_history() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = cron_home(&fake, &[]);
    home.mock.set_fallback(Reply::text("Ping."));
    // Added with no gateway running: it runs once one does.
    let run = cron(
        &home,
        &[
            "add",
            "--name",
            "ping",
            "--message",
            "Say ping.",
            "--every",
            "2s",
            "--deliver",
            &format!("telegram:{OWNER}"),
        ],
    );
    assert!(run.success, "{}", run.stderr);
    assert!(
        run.stdout
            .ends_with("note: no gateway is running; jobs run while `nanocrab gateway` does\n"),
        "{}",
        run.stdout
    );
    let id = run.stdout.split(' ').nth(1).unwrap().to_owned();

    let mut gateway = home.start_gateway_for_cli();
    gateway.eventually("a first ping", |_| {
        (!fake.texts_sent_to(OWNER).is_empty()).then_some(())
    });
    assert!(gateway.terminate().success());
    let before = fake.texts_sent_to(OWNER).len();
    let runs_before = statuses(&home, &id).len();
    assert!(runs_before >= 1);

    let mut gateway = home.start_gateway_for_cli();
    gateway.eventually("a ping after the restart", |_| {
        (fake.texts_sent_to(OWNER).len() > before).then_some(())
    });
    gateway.eventually("its run recorded", |_| {
        (statuses(&home, &id).iter().filter(|s| *s == "ok").count() > runs_before).then_some(())
    });
    assert!(gateway.terminate().success());
    assert!(fake.texts_sent_to(OWNER).iter().all(|text| text == "Ping."));
    // A stop may cut a run short; none failed or was skipped.
    let statuses = statuses(&home, &id);
    assert!(
        statuses.iter().all(|s| s == "ok" || s == "interrupted"),
        "{statuses:?}"
    );
    let history = json_of(&home, &["history", &id, "--json"]);
    let first = history.as_array().unwrap().last().unwrap();
    assert_eq!(
        (
            &first["status"],
            &first["delivery"],
            first["inputTokens"].as_u64().unwrap() > 0
        ),
        (
            &json!("ok"),
            &json!(format!("sent to telegram:{OWNER}")),
            true
        )
    );
    let jobs = json_of(&home, &["list", "--json"]);
    assert_eq!(
        (
            &jobs[0]["id"],
            &jobs[0]["name"],
            &jobs[0]["schedule"],
            &jobs[0]["enabled"]
        ),
        (
            &json!(id),
            &json!("ping"),
            &json!({"kind": "every", "spec": "2s", "tz": null}),
            &json!(true)
        )
    );
    // Each run starts afresh in the job's own session: a minimal history, the same each time.
    let requests = home.requests();
    assert!(requests.len() >= 2);
    let last = message_texts(&requests[requests.len() - 1].body);
    assert!(last.last().unwrap().1.ends_with("Say ping."), "{last:?}");
    assert!(last.len() <= 3, "{last:?}");
}

#[test]
fn a_one_shot_added_while_the_gateway_runs_fires_once_and_is_gone() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = cron_home(&fake, &[]);
    home.mock
        .push(Reply::text("The cake is ready.").with_usage(900, 12));
    let mut gateway = home.start_gateway_for_cli();
    let id = add(
        &home,
        &[
            "--message",
            "Tell the user the cake is ready.",
            "--at",
            "+1s",
            "--deliver",
            &format!("telegram:{OWNER}"),
        ],
    );
    gateway.eventually("the one-shot's reply", |_| {
        (!fake.texts_sent_to(OWNER).is_empty()).then_some(())
    });
    gateway.eventually("the job gone", |_| {
        (json_of(&home, &["list", "--json"]) == json!([])).then_some(())
    });
    assert_eq!(fake.texts_sent_to(OWNER), ["The cake is ready."]);
    assert_eq!(statuses(&home, &id), ["ok"]);
    assert_eq!(home.requests().len(), 1);
    assert!(gateway.terminate().success());

    // The run is in the audit log under its job, and its tokens under `cron` in usage.
    let runs = home
        .nanocrab()
        .args(["audit", "runs", "--json", "--source", "cron"])
        .output()
        .unwrap();
    assert!(runs.status.success());
    let runs: Vec<Value> = String::from_utf8(runs.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let [run] = runs.as_slice() else {
        panic!("one run expected: {runs:?}")
    };
    assert_eq!(
        (
            &run["source"],
            &run["status"],
            &run["model_calls"],
            &run["usage"]
        ),
        (
            &json!({"kind": "cron", "job": id}),
            &json!("ok"),
            &json!(1),
            &json!({"input_tokens": 900, "output_tokens": 12})
        )
    );
    let usage = home.nanocrab().args(["usage", "--json"]).output().unwrap();
    let usage: Value = serde_json::from_slice(&usage.stdout).unwrap();
    assert_eq!(
        (
            &usage["sources"][0]["source"],
            &usage["sources"][0]["tokens"]
        ),
        (&json!("cron"), &json!(912))
    );
}

#[test]
fn remind_me_from_telegram_makes_a_job_that_delivers_to_that_chat() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = cron_home(&fake, &["schedule"]);
    home.mock.push(Reply::tool_call(
        "call_1",
        "cron",
        json!({"action": "add", "message": "Remind the user to stretch.", "at": "+2s"}),
    ));
    home.mock
        .push(Reply::text("I will remind you in two seconds."));
    home.mock.push(Reply::text("Time to stretch!"));
    fake.push_update(telegram::private_text("remind me in 2 seconds to stretch"));
    let mut gateway = home.start_gateway_for_cli();
    gateway.eventually("the reminder", |_| {
        (fake.texts_sent_to(OWNER).len() == 2).then_some(())
    });
    assert_eq!(
        fake.texts_sent_to(OWNER),
        ["I will remind you in two seconds.", "Time to stretch!"]
    );
    // The tool said what it scheduled, and where its reply goes.
    let requests = home.requests();
    assert_eq!(requests.len(), 3);
    let tool_result = serde_json::to_string(&requests[1].body).unwrap();
    assert!(
        tool_result.contains(&format!("replies to telegram:{OWNER}")),
        "{tool_result}"
    );
    gateway.eventually("the one-shot gone", |_| {
        (json_of(&home, &["list", "--json"]) == json!([])).then_some(())
    });
    assert!(gateway.terminate().success());
}

#[test]
fn bad_input_and_unknown_ids_fail_naming_what_is_wrong() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = cron_home(&fake, &[]);
    let cases: [(&[&str], &str); 7] = [
        (&["--every", "0"], "--every: \"0\" is under 1 second"),
        (
            &["--cron", "0 9 * *"],
            "--cron: \"0 9 * *\" has 4 fields; use 5",
        ),
        (
            &["--cron", "0 9 * * *", "--tz", "Mars/Olympus"],
            "--tz: \"Mars/Olympus\" is not a known time zone",
        ),
        (
            &["--at", "2020-01-01T00:00:00Z"],
            "--at: 2020-01-01T00:00:00Z is in the past",
        ),
        (
            &["--cron", "0 0 30 2 *"],
            "--cron: \"0 0 30 2 *\" never matches a date to come",
        ),
        (
            &["--every", "1h", "--agent", "nobody"],
            "--agent: no agent `nobody`; known: main",
        ),
        (
            &["--every", "1h", "--deliver", "slack:C42"],
            "--deliver: the config has no `slack` channel to send the reply to (enabled: telegram in `channels` of ",
        ),
    ];
    for (args, error) in cases {
        let run = cron(&home, &[&["add", "--message", "m"], args].concat());
        assert!(!run.success, "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains(error), "{args:?}: {}", run.stderr);
    }
    for command in ["remove", "run", "history", "enable", "disable"] {
        let run = cron(&home, &[command, "nope"]);
        assert!(!run.success, "{command}");
        assert_eq!(
            run.stderr, "error: no job `nope`; `nanocrab cron list` shows the jobs\n",
            "{command}"
        );
    }
    assert_eq!(json_of(&home, &["list", "--json"]), json!([]));
    let status_line = || {
        let status = home.run(home.nanocrab().arg("status"));
        assert!(status.success, "{}", status.stderr);
        status
            .stdout
            .lines()
            .find(|line| line.starts_with("cron "))
            .unwrap()
            .to_owned()
    };
    assert_eq!(status_line(), "cron       no jobs");

    // Managed with no gateway running: each change says the jobs wait for one.
    let id = add(
        &home,
        &["--message", "m", "--every", "1h", "--name", "hourly"],
    );
    assert!(
        status_line().starts_with(&format!(
            "cron       1 job (1 enabled), next \"hourly\" ({id}) at "
        )),
        "{}",
        status_line()
    );
    let disabled = cron(&home, &["disable", &id]);
    assert!(disabled.success, "{}", disabled.stderr);
    assert_eq!(
        disabled.stdout,
        format!(
            "{id} \"hourly\" (main) every 1h, disabled, replies to nowhere (logged)\n\
             note: no gateway is running; jobs run while `nanocrab gateway` does\n"
        )
    );
    assert_eq!(status_line(), "cron       1 job (0 enabled)");
    assert!(cron(&home, &["enable", &id]).success);
    assert_eq!(
        json_of(&home, &["list", "--json"])[0]["enabled"],
        json!(true)
    );
    let removed = cron(&home, &["remove", &id]);
    assert!(removed.stdout.starts_with(&format!("removed job {id}\n")));
    assert_eq!(status_line(), "cron       no jobs");
}
