//! Subagents in the gateway: one runs in its own session, within its caps, and its end is
//! announced in its parent's conversation, whose answer goes to the parent's chat; what
//! cannot be started is refused with the reason; a conversation sees and cancels only its own.

use std::sync::Arc;

use nanocrab_config::SubagentsConfig;
use nanocrab_gateway::{SubagentControl, SubagentState, read_subagents};
use nanocrab_schema::{RunId, RunSource, SessionKey, TraceId};
use nanocrab_testkit::Reply;
use nanocrab_tools::{ParentRun, SpawnRequest, Subagents};
use pretty_assertions::assert_eq;

use crate::harness::{Harness, until};

const PARENT_SESSION: &str = "agent:main:telegram:dm:7";

fn request(task: &str, tools: Option<&[&str]>, source: RunSource) -> SpawnRequest {
    SpawnRequest {
        task: task.to_owned(),
        agent: "main".to_owned(),
        tools: tools.map(|tools| tools.iter().map(|t| (*t).to_owned()).collect()),
        parent: ParentRun {
            agent: "main".to_owned(),
            session: Some(SessionKey::parse(PARENT_SESSION).unwrap()),
            run_id: RunId::new(),
            trace_id: TraceId::new(),
            chat: Some(("telegram".to_owned(), "7".to_owned())),
            source,
        },
    }
}

/// A harness whose agent has the `message` tool, and subagents run as `config` says.
async fn subagent_harness(config: SubagentsConfig) -> (Harness, SubagentControl) {
    let mut harness = Harness::new().await;
    harness.message_tool = Some(Vec::new());
    let control = SubagentControl::new(
        &harness.state_dir().join("subagents.jsonl"),
        config,
        Arc::new(jiff::Timestamp::now),
    );
    (harness, control)
}

#[tokio::test]
async fn a_subagent_runs_in_its_own_session_and_its_end_is_announced_to_the_parent_chat() {
    let (harness, control) = subagent_harness(SubagentsConfig::default()).await;
    let gateway = harness.start_gateway(harness.gateway().with_subagents(control.clone()).unwrap());
    harness.mock.push(Reply::text("Opens at 9."));
    harness.mock.push(Reply::text("The library opens at 9."));
    let started = control
        .spawn(request(
            "Find the library's opening hours.",
            Some(&["message"]),
            RunSource::Chat,
        ))
        .unwrap();
    let id = started
        .strip_prefix("Started subagent ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_owned();
    let sent = harness.channel.wait_for_sent(1).await;
    assert_eq!(
        (sent[0].chat.chat_id.as_str(), sent[0].text.as_str()),
        ("7", "The library opens at 9.")
    );
    until(|| control.get(&id).is_some_and(|r| r.state.is_over())).await;
    let record = control.get(&id).unwrap();
    assert_eq!(
        (
            record.state,
            record.session.to_string(),
            record.result.as_deref(),
            record.model_calls,
            record.parent.chat.as_deref(),
        ),
        (
            SubagentState::Done,
            format!("agent:main:subagent:{id}"),
            Some("Opens at 9."),
            1,
            Some("telegram:7"),
        )
    );
    // The subagent had its own conversation; the announcement went into the parent's.
    let requests = harness.mock.requests();
    assert_eq!(requests.len(), 2);
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["message"]);
    assert_eq!(
        harness.history(&format!("agent:main:subagent:{id}")).len(),
        2
    );
    assert_eq!(harness.history(PARENT_SESSION).len(), 2);
    gateway.stop().await;

    // Each step was appended; the file reads back as the last one.
    let text = std::fs::read_to_string(harness.state_dir().join("subagents.jsonl")).unwrap();
    let states: Vec<String> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["state"].to_string())
        .collect();
    assert_eq!(states, ["\"queued\"", "\"running\"", "\"done\""]);
    assert_eq!(
        read_subagents(&harness.state_dir().join("subagents.jsonl")).unwrap(),
        [record]
    );
}

#[tokio::test]
async fn what_cannot_be_started_is_refused_with_the_reason() {
    let (harness, control) = subagent_harness(SubagentsConfig::default()).await;
    let chat = || request("t", None, RunSource::Chat);
    assert_eq!(
        control.spawn(chat()),
        Err("subagents run only in `nanocrab gateway`".to_owned())
    );
    let gateway = harness.start_gateway(harness.gateway().with_subagents(control.clone()).unwrap());
    let deep = request(
        "t",
        None,
        RunSource::Subagent {
            id: "sa-1".to_owned(),
            parent_run: RunId::new(),
            depth: 1,
        },
    );
    let mut unknown = chat();
    unknown.agent = "research".to_owned();
    let refusals = [
        control.spawn(deep),
        control.spawn(unknown),
        control.spawn(request("t", Some(&["message", "exec"]), RunSource::Chat)),
    ];
    assert_eq!(
        refusals,
        [
            Err(
                "cannot start a subagent from here: this run is a subagent 1 deep, and \
                 agents.defaults.subagents.maxSpawnDepth is 1; do the task yourself"
                    .to_owned()
            ),
            Err("agent: no agent `research`; the agents are: main".to_owned()),
            Err("tools: `exec` is not one of agent main's tools: message".to_owned()),
        ]
    );
    assert!(control.all().is_empty());
    gateway.stop().await;

    let (harness, control) = subagent_harness(SubagentsConfig {
        max_spawn_depth: 0,
        ..SubagentsConfig::default()
    })
    .await;
    let gateway = harness.start_gateway(harness.gateway().with_subagents(control.clone()).unwrap());
    assert_eq!(
        control.spawn(chat()),
        Err("subagents are off (agents.defaults.subagents.maxSpawnDepth is 0)".to_owned())
    );
    gateway.stop().await;
}

#[tokio::test]
async fn a_conversation_sees_and_cancels_only_its_own_subagents() {
    let (harness, control) = subagent_harness(SubagentsConfig::default()).await;
    let gate = nanocrab_testkit::Gate::new();
    let gateway = harness.start_gateway(harness.gateway().with_subagents(control.clone()).unwrap());
    harness.mock.push(Reply::text("It boiled.").held_by(&gate));
    harness.mock.push(Reply::text("I stopped watching."));
    control
        .spawn(request("Watch the kettle.", None, RunSource::Chat))
        .unwrap();
    // Its request has reached the mock, which holds the answer: cancelled before that, its
    // held answer would be the announcement's.
    until(|| harness.mock.requests().len() == 1).await;
    let id = control.all()[0].id.clone();
    let own = SessionKey::parse(PARENT_SESSION).unwrap();
    let other = SessionKey::parse("agent:main:telegram:dm:8").unwrap();
    assert_eq!(
        control.list(Some(&other)),
        Ok("No subagents in this conversation.".to_owned())
    );
    assert_eq!(
        control.cancel(Some(&other), &id),
        Err(format!("no subagent {id} in this conversation"))
    );
    assert_eq!(
        control.list(Some(&own)),
        Ok(format!("{id} running (agent main): Watch the kettle."))
    );
    assert_eq!(
        control.cancel(Some(&own), &id),
        Ok(format!("cancelled {id}; its end will be announced here"))
    );
    let sent = harness.channel.wait_for_sent(1).await;
    assert_eq!(sent[0].text, "I stopped watching.");
    assert_eq!(control.get(&id).unwrap().state, SubagentState::Cancelled);
    assert_eq!(
        control.cancel(Some(&own), &id),
        Ok(format!("{id} has already ended (cancelled)"))
    );
    gate.open();
    gateway.stop().await;
}
