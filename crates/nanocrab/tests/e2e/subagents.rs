//! Subagents end to end: the `spawn` tool, agents offered as tools and `nanocrab subagents`,
//! in the real gateway between the fake Telegram Bot API and the mock LLM.
//!
//! The mock answers requests in the order they come; `gateway.maxConcurrentTurns: 1` makes
//! that order the same on every run (a subagent starts once its parent's turn is over).

use nanocrab_testkit::telegram::{self, FakeTelegram};
use nanocrab_testkit::{Gate, Reply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, message_texts, tool_names, tool_results};

const TOKEN: &str = "123456:fake-telegram-5ecret";
/// The sender of the recorded private message (`update-private-text.json`).
const OWNER: &str = "218485655";

/// A home whose Telegram channel polls `fake`, one turn at a time, `spawn` granted, and
/// `subagents` as `agents.defaults.subagents`.
fn subagent_home(fake: &FakeTelegram, subagents: Value) -> Home {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["agents"]["defaults"]["heartbeat"] = json!({ "every": "0" });
    config["agents"]["defaults"]["subagents"] = subagents;
    config["tools"] = json!({ "grants": ["spawn"] });
    config["channels"] = json!({ "telegram": {
        "token": TOKEN,
        "apiBase": fake.api_base(),
        "pollTimeout": 1,
        "allowFrom": [OWNER],
    }});
    config["gateway"] = json!({ "port": 0, "maxConcurrentTurns": 1 });
    home.write_config(config);
    home
}

/// The last user message of a request.
fn last_user_text(body: &Value) -> String {
    message_texts(body)
        .into_iter()
        .rev()
        .find(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .unwrap_or_default()
}

/// `text` with each subagent id as `sa-ID`, and the seconds and tokens of stats lines as `N`,
/// which differ from run to run.
fn steady(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("sa-") {
        out.push_str(&rest[..at]);
        out.push_str("sa-ID");
        rest = &rest[(at + 11).min(rest.len())..];
    }
    out.push_str(rest);
    out.lines()
        .map(|line| {
            let Some(stats) = line.strip_prefix("[subagent ") else {
                return line.to_owned();
            };
            let parts: Vec<String> = stats
                .split(" · ")
                .map(|part| {
                    if part.ends_with(" s") {
                        "N s".to_owned()
                    } else if let Some(tokens) = part.strip_suffix(" tokens]") {
                        assert!(
                            tokens.chars().all(|c| c.is_ascii_digit() || c == ','),
                            "{line}"
                        );
                        "N tokens]".to_owned()
                    } else {
                        part.to_owned()
                    }
                })
                .collect();
            format!("[subagent {}", parts.join(" · "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_subagent_s_result_is_announced_to_its_parent_whose_answer_reaches_the_chat() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = subagent_home(&fake, json!({}));
    home.mock.push(Reply::tool_call(
        "call_1",
        "spawn",
        json!({"task": "Find the library's opening hours.", "tools": ["read_file"]}),
    ));
    home.mock
        .push(Reply::text("I've asked a helper; I'll tell you."));
    home.mock.push(Reply::text("The library opens at 9."));
    home.mock
        .push(Reply::text("The helper says: the library opens at 9."));
    fake.push_update(telegram::private_text("when does the library open?"));
    let mut gateway = home.start_gateway();
    gateway.eventually("the announced answer", |_| {
        (fake.texts_sent_to(OWNER).len() == 2).then_some(())
    });
    assert!(gateway.terminate().success());

    assert_eq!(
        fake.texts_sent_to(OWNER),
        [
            "I've asked a helper; I'll tell you.",
            "The helper says: the library opens at 9."
        ]
    );
    let requests = home.requests();
    assert_eq!(requests.len(), 4);
    let started = tool_results(&requests[1].body);
    assert_eq!(
        steady(&started[0].1),
        "Started subagent sa-ID (agent main): it works on its own and its result will come to \
         this conversation when it ends; don't wait for it."
    );
    // The subagent: its own conversation, the task, and only the tool it was given.
    let subagent = &requests[2].body;
    assert_eq!(
        message_texts(subagent)
            .into_iter()
            .map(|(role, text)| (role, steady(&text)))
            .collect::<Vec<_>>(),
        [(
            "user".to_owned(),
            "Find the library's opening hours.\n\n[You are subagent sa-ID: no user reads you. \
             Your final answer goes to the run that gave you this task.]"
                .to_owned()
        )]
    );
    assert_eq!(tool_names(subagent), ["read_file"]);
    // The announcement: a turn of the parent's conversation, with the stats and the result.
    insta::assert_snapshot!(steady(&last_user_text(&requests[3].body)), @r#"
    [subagent sa-ID done · N s · 1 model call · 0 tool calls · N tokens]
    Task: Find the library's opening hours.
    Result:
    <untrusted-data source="subagent sa-ID">
    The library opens at 9.
    </untrusted-data>
    Tell the user what came of it.
    "#);
    assert!(
        message_texts(&requests[3].body)
            .iter()
            .any(|(_, text)| text == "when does the library open?")
    );

    let list = home.run(home.nanocrab().args(["subagents", "list"]));
    assert!(list.success, "{}", list.stderr);
    assert_eq!(
        steady(&list.stdout),
        "sa-ID done (agent main): Find the library's opening hours."
    );
}

#[test]
fn a_subagent_cannot_spawn_beyond_max_spawn_depth() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = subagent_home(&fake, json!({ "maxSpawnDepth": 1 }));
    home.mock.push(Reply::tool_call(
        "call_1",
        "spawn",
        json!({"task": "Sum up the news."}),
    ));
    home.mock.push(Reply::text("On it."));
    home.mock.push(Reply::tool_call(
        "call_2",
        "spawn",
        json!({"task": "Read the news for me."}),
    ));
    home.mock.push(Reply::text("Nothing new today."));
    home.mock
        .push(Reply::text("Nothing new today, says the helper."));
    fake.push_update(telegram::private_text("what's new?"));
    let mut gateway = home.start_gateway();
    gateway.eventually("the announced answer", |_| {
        (fake.texts_sent_to(OWNER).len() == 2).then_some(())
    });
    assert!(gateway.terminate().success());

    let requests = home.requests();
    assert_eq!(
        tool_results(&requests[3].body),
        [(
            "call_2".to_owned(),
            "Error: cannot start a subagent from here: this run is a subagent 1 deep, and \
             agents.defaults.subagents.maxSpawnDepth is 1; do the task yourself"
                .to_owned(),
            true
        )]
    );
    assert_eq!(
        steady(&last_user_text(&requests[4].body))
            .lines()
            .next()
            .unwrap(),
        "[subagent sa-ID done · N s · 2 model calls · 1 tool call · N tokens]"
    );
}

#[test]
fn a_subagent_that_runs_too_long_is_stopped_and_its_timeout_announced() {
    let fake = FakeTelegram::spawn(TOKEN);
    // The timer runs from the start of the subagent's turn; its request must reach the mock
    // before it fires (else the held reply would go to the announcement), so the limit leaves
    // a slow, loaded machine seconds for that, not milliseconds.
    let home = subagent_home(&fake, json!({ "timeout": 5 }));
    let gate = Gate::new();
    home.mock.push(Reply::tool_call(
        "call_1",
        "spawn",
        json!({"task": "Count the stars."}),
    ));
    home.mock.push(Reply::text("Counting."));
    home.mock
        .push(Reply::text("There are very many.").held_by(&gate));
    home.mock
        .push(Reply::text("The helper ran out of time counting stars."));
    fake.push_update(telegram::private_text("how many stars are there?"));
    let mut gateway = home.start_gateway();
    gateway.eventually("the announced timeout", |_| {
        (fake.texts_sent_to(OWNER).len() == 2).then_some(())
    });
    gate.open();
    assert!(gateway.terminate().success());

    assert_eq!(
        fake.texts_sent_to(OWNER)[1],
        "The helper ran out of time counting stars."
    );
    let announcement = steady(&last_user_text(&home.requests()[3].body));
    assert_eq!(
        announcement,
        "[subagent sa-ID timed out · N s · 0 model calls · 0 tool calls · N tokens]\n\
         Task: Count the stars.\n\
         It ran longer than its 5 s (agents.defaults.subagents.timeout) and was stopped.\n\
         Tell the user what came of it."
    );
    let show = home.run(home.nanocrab().args(["subagents", "list", "--json"]));
    let records: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(records[0]["state"], "timedOut");
}

#[test]
fn subagents_are_listed_shown_and_cancelled_from_the_command_line() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = subagent_home(&fake, json!({}));
    let gate = Gate::new();
    home.mock.push(Reply::tool_call(
        "call_1",
        "spawn",
        json!({"task": "Watch the kettle."}),
    ));
    home.mock.push(Reply::text("Watching."));
    home.mock.push(Reply::text("It boiled.").held_by(&gate));
    home.mock
        .push(Reply::text("I stopped watching the kettle."));
    fake.push_update(telegram::private_text("watch the kettle"));
    let mut gateway = home.start_gateway_for_cli();
    let subagents = |args: &[&str]| home.run(home.nanocrab().arg("subagents").args(args));
    // Its request has reached the mock, which holds the answer: cancelled before that, its
    // held answer would be the announcement's.
    let id = gateway.eventually("the subagent running", |_| {
        if home.requests().len() < 3 {
            return None;
        }
        let list = subagents(&["list", "--json"]);
        let records: Value = serde_json::from_str(&list.stdout).ok()?;
        let record = records.as_array()?.first()?;
        (record["state"] == "running").then(|| record["id"].as_str().unwrap().to_owned())
    });
    let show = subagents(&["show", &id]);
    assert!(show.success, "{}", show.stderr);
    assert!(
        show.stdout.contains("task: Watch the kettle."),
        "{}",
        show.stdout
    );

    let unknown = subagents(&["cancel", "sa-nope"]);
    assert!(!unknown.success);
    assert!(
        unknown
            .stderr
            .contains("no subagent `sa-nope`; `nanocrab subagents list` shows them"),
        "{}",
        unknown.stderr
    );
    let cancel = subagents(&["cancel", &id]);
    assert!(cancel.success, "{}", cancel.stderr);
    assert_eq!(
        cancel.stdout.trim(),
        format!("cancelled {id}; its end is announced to its parent")
    );
    gateway.eventually("the announced cancellation", |_| {
        (fake.texts_sent_to(OWNER).len() == 2).then_some(())
    });
    gate.open();
    assert!(gateway.terminate().success());

    let shown: Value = serde_json::from_str(&subagents(&["show", &id, "--json"]).stdout).unwrap();
    assert_eq!(
        (
            shown["state"].as_str(),
            shown["task"].as_str(),
            shown["parent"]["chat"].as_str()
        ),
        (
            Some("cancelled"),
            Some("Watch the kettle."),
            Some(format!("telegram:{OWNER}").as_str())
        )
    );
    assert_eq!(
        steady(&last_user_text(&home.requests()[3].body))
            .lines()
            .nth(2),
        Some("It was cancelled.")
    );

    // A subagent the file says is running, with no gateway to stop it.
    let mut running = shown.clone();
    running["id"] = json!("sa-0badc0de");
    running["state"] = json!("running");
    let path = home.home().join("state/subagents.jsonl");
    let mut file = std::fs::read_to_string(&path).unwrap();
    file.push_str(&format!("{running}\n"));
    std::fs::write(&path, file).unwrap();
    let stopped = subagents(&["cancel", "sa-0badc0de"]);
    assert!(!stopped.success);
    assert!(
        stopped.stderr.contains("no gateway answers at"),
        "{}",
        stopped.stderr
    );
}

#[test]
fn an_agent_offered_as_a_tool_answers_its_caller_with_one_turn_at_a_time() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = subagent_home(&fake, json!({}));
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.config_path()).unwrap()).unwrap();
    config["agents"]["entries"] = json!({
        "research": { "asTool": { "description": "Looks things up." } }
    });
    home.write_config(config);
    home.mock.push(Reply::tool_call(
        "call_1",
        "agent_research",
        json!({"task": "Which planet is largest?"}),
    ));
    home.mock.push(Reply::text("Jupiter."));
    home.mock
        .push(Reply::text("Jupiter is the largest planet."));
    fake.push_update(telegram::private_text("which planet is largest?"));
    let mut gateway = home.start_gateway();
    gateway.eventually("the answer", |_| {
        (!fake.texts_sent_to(OWNER).is_empty()).then_some(())
    });
    assert!(gateway.terminate().success());

    assert_eq!(
        fake.texts_sent_to(OWNER),
        ["Jupiter is the largest planet."]
    );
    let requests = home.requests();
    assert!(tool_names(&requests[0].body).contains(&"agent_research".to_owned()));
    // The research agent is not offered itself.
    assert!(!tool_names(&requests[1].body).contains(&"agent_research".to_owned()));
    let results = tool_results(&requests[2].body);
    assert_eq!(
        steady(&results[0].1),
        "[subagent sa-ID done · N s · 1 model call · 0 tool calls · N tokens]\n\
         <untrusted-data source=\"agent research (sa-ID)\">\nJupiter.\n</untrusted-data>"
    );
}

/// A heartbeat's run names no channel in its input, but its reply has a chat: a subagent it
/// starts reports back there, and its questions would be asked there.
#[test]
fn a_subagent_a_heartbeat_starts_is_announced_to_the_heartbeat_s_chat() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = subagent_home(&fake, json!({}));
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.config_path()).unwrap()).unwrap();
    config["agents"]["defaults"]["heartbeat"] =
        json!({ "every": "0", "target": format!("telegram:{OWNER}") });
    home.write_config(config);
    std::fs::write(
        home.workspace().join("HEARTBEAT.md"),
        "- check whether the backup finished\n",
    )
    .unwrap();
    home.mock.push(Reply::tool_call(
        "call_1",
        "spawn",
        json!({"task": "Check the backup log."}),
    ));
    home.mock.push(Reply::text("HEARTBEAT_OK"));
    home.mock.push(Reply::text("The backup failed at 03:12."));
    home.mock
        .push(Reply::text("Your backup failed last night at 03:12."));
    let mut gateway = home.start_gateway_for_cli();
    let run = home.nanocrab().args(["heartbeat", "run"]).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    gateway.eventually("the announcement's answer in the heartbeat's chat", |_| {
        (!fake.texts_sent_to(OWNER).is_empty()).then_some(())
    });
    assert_eq!(
        fake.texts_sent_to(OWNER),
        ["Your backup failed last night at 03:12."]
    );
    let list = home
        .nanocrab()
        .args(["subagents", "list", "--json"])
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        list[0]["parent"]["chat"],
        json!(format!("telegram:{OWNER}")),
        "{list}"
    );
    assert!(gateway.terminate().success());
}

/// A turn that announces a subagent's end may start another, but a chain of them stops after
/// three without a word from the user: nothing runs on its own forever.
#[test]
fn subagents_following_one_another_s_results_stop_after_three() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = subagent_home(&fake, json!({}));
    let spawn = |step: u32| {
        Reply::tool_call(
            format!("call_{step}"),
            "spawn",
            json!({"task": format!("Step {step}.")}),
        )
    };
    // The user's turn, then each subagent and the turn announcing it, in the order
    // `maxConcurrentTurns: 1` gives them.
    home.mock.push(spawn(1));
    home.mock.push(Reply::text("Started step 1."));
    for step in 1..=3 {
        home.mock.push(Reply::text(format!("Step {step} done.")));
        home.mock.push(spawn(step + 1));
        home.mock.push(Reply::text(format!("Step {step} is done.")));
    }
    fake.push_update(telegram::private_text("do the four steps"));
    let mut gateway = home.start_gateway();
    gateway.eventually("three announcements answered", |_| {
        (fake.texts_sent_to(OWNER).len() == 4).then_some(())
    });
    assert!(gateway.terminate().success());
    assert_eq!(
        fake.texts_sent_to(OWNER),
        [
            "Started step 1.",
            "Step 1 is done.",
            "Step 2 is done.",
            "Step 3 is done."
        ]
    );
    // The third announcement's spawn was refused, saying why; three subagents ran.
    let requests = home.requests();
    let refused = tool_results(&requests.last().unwrap().body);
    assert!(
        refused
            .iter()
            .any(|(_, text, _)| text.contains("cannot start another subagent: 3 have followed")),
        "{refused:?}"
    );
    let list = home.run(home.nanocrab().args(["subagents", "list", "--json"]));
    let records: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(records.as_array().unwrap().len(), 3, "{records}");
}
