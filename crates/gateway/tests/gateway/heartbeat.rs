//! The heartbeat in the gateway: one run per agent at a time, replies to the last direct chat
//! or a fixed one, and ticks that wait for the active hours.

use std::sync::Arc;

use nanocrab_config::{ActiveHours, AgentEntry, HeartbeatConfig};
use nanocrab_gateway::{Delivery, HeartbeatOutcome, HeartbeatReport};
use nanocrab_schema::{ChatRef, OutboundMessage};
use nanocrab_testkit::{Gate, Reply};
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use crate::harness::{Harness, dm, until};

fn heartbeat(every: &str, target: &str) -> HeartbeatConfig {
    HeartbeatConfig {
        every: every.to_owned(),
        target: target.to_owned(),
        active_hours: None,
    }
}

fn tasks(harness: &Harness, agent: &str, text: &str) {
    let workspace = harness.workspace(agent);
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("HEARTBEAT.md"), text).unwrap();
}

#[tokio::test]
async fn one_run_at_a_time_and_its_reply_goes_to_the_last_direct_chat() {
    let mut harness = Harness::new().await;
    harness.config.agents.defaults.heartbeat = heartbeat("0", "last");
    tasks(&harness, "main", "- water the plants\n");
    let gateway = harness.gateway();
    let heartbeats = gateway.heartbeats().clone();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    harness.mock.push(Reply::text("Water the plants."));
    assert_eq!(
        heartbeats.run_now("main").await.unwrap(),
        HeartbeatOutcome::Ran(Delivery::NotSent {
            text: "Water the plants.".to_owned(),
            reason:
                "the target is the last chat, and nobody has written to this agent directly yet"
                    .to_owned(),
        })
    );

    let hello = dm("7", "70", "hello");
    harness.channel.deliver(hello.clone()).await.unwrap();
    harness.channel.wait_for_sent(1).await;
    // Held until a second run has been asked for while it goes on.
    let gate = Gate::new();
    harness
        .mock
        .push(Reply::text("Still the plants.").held_by(&gate));
    let first = tokio::spawn({
        let heartbeats = heartbeats.clone();
        async move { heartbeats.run_now("main").await }
    });
    until(|| heartbeats.reports()[0].running).await;
    assert_eq!(
        heartbeats.run_now("main").await.unwrap(),
        HeartbeatOutcome::Busy
    );
    gate.open();
    let chat = hello.chat();
    assert_eq!(
        first.await.unwrap().unwrap(),
        HeartbeatOutcome::Ran(Delivery::Sent {
            chat: chat.clone(),
            text: "Still the plants.".to_owned(),
        })
    );
    assert_eq!(
        harness.channel.wait_for_sent(2).await[1],
        OutboundMessage {
            chat,
            text: "Still the plants.".to_owned(),
            reply_to_message_id: None,
            file: None,
        }
    );
    assert_eq!(
        heartbeats.run_now("nobody").await.unwrap_err().to_string(),
        "no agent `nobody`; known: main"
    );
    // Three model requests: two heartbeats and the chat; the busy one asked nothing.
    let requests = harness.mock.requests();
    assert_eq!(requests.len(), 3);
    // The second heartbeat sees the first one's reply, not the whole run.
    let texts: Vec<(String, String)> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            let text = message["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|block| block["text"].as_str())
                .collect();
            (message["role"].as_str().unwrap().to_owned(), text)
        })
        .collect();
    let prompt = nanocrab_core::heartbeat::heartbeat_prompt("- water the plants");
    assert_eq!(
        texts,
        [
            (
                "user".to_owned(),
                "[Summary of the earlier conversation; the whole of it is in the transcript]\n\
                 Earlier heartbeat checks are left out; your reply to the last one follows.\n\n"
                    .to_owned()
            ),
            ("assistant".to_owned(), "Water the plants.".to_owned()),
            ("user".to_owned(), prompt),
        ]
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_tick_outside_the_active_hours_waits_for_the_window() {
    let mut harness = Harness::new().await;
    harness.agent_ids = vec!["main".to_owned(), "quiet".to_owned()];
    let mut office = heartbeat("10s", "telegram:42");
    office.active_hours = Some(ActiveHours {
        start: "08:00".to_owned(),
        end: "22:00".to_owned(),
        timezone: Some("Europe/Berlin".to_owned()),
    });
    harness.config.agents.defaults.heartbeat = office;
    harness.config.agents.entries.insert(
        "quiet".to_owned(),
        AgentEntry {
            heartbeat: Some(heartbeat("0", "last")),
            ..AgentEntry::default()
        },
    );
    tasks(&harness, "main", "- look at the backups\n");
    harness.mock.set_fallback(Reply::text("A backup failed."));
    // Eleven seconds before 22:00 in Berlin: one tick inside the window (21:59:50), then none
    // until 08:00.
    let base: jiff::Timestamp = "2026-11-22T20:59:49Z".parse().unwrap();
    let started = std::time::Instant::now();
    let clock: nanocrab_gateway::Clock =
        Arc::new(move || base + jiff::SignedDuration::try_from(started.elapsed()).unwrap());
    let gateway = harness.gateway().with_clock(clock);
    let heartbeats = gateway.heartbeats().clone();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    let sent = harness.channel.wait_for_sent(1).await;
    assert_eq!(
        sent,
        [OutboundMessage {
            chat: ChatRef {
                channel: "telegram".to_owned(),
                account: "default".to_owned(),
                chat_id: "42".to_owned(),
                thread_id: None,
            },
            text: "A backup failed.".to_owned(),
            reply_to_message_id: None,
            file: None,
        }]
    );
    let morning = Some("2026-11-23T07:00:00Z".to_owned());
    until(|| heartbeats.reports()[0].next == morning && !heartbeats.reports()[0].running).await;
    assert_eq!(
        heartbeats.reports(),
        [
            HeartbeatReport {
                agent: "main".to_owned(),
                every_seconds: Some(10),
                next: morning,
                running: false,
            },
            HeartbeatReport {
                agent: "quiet".to_owned(),
                every_seconds: None,
                next: None,
                running: false,
            },
        ]
    );
    assert_eq!(harness.mock.requests().len(), 1);
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn the_housekeeping_model_triages_first_and_a_clear_no_asks_the_agent_nothing() {
    let mut harness = Harness::new().await;
    harness.housekeeping = true;
    harness.config.agents.defaults.heartbeat = heartbeat("0", "telegram:42");
    tasks(&harness, "main", "- renew the passport in March\n");
    let gateway = harness.start();

    harness.mock.push(Reply::text("NO"));
    assert_eq!(
        gateway.heartbeats.run_now("main").await.unwrap(),
        HeartbeatOutcome::NothingDue
    );
    harness.mock.push(Reply::text("YES"));
    harness
        .mock
        .push(Reply::text("Renew the passport this month."));
    assert_eq!(
        gateway.heartbeats.run_now("main").await.unwrap(),
        HeartbeatOutcome::Ran(Delivery::Sent {
            chat: ChatRef {
                channel: "telegram".to_owned(),
                account: "default".to_owned(),
                chat_id: "42".to_owned(),
                thread_id: None,
            },
            text: "Renew the passport this month.".to_owned(),
        })
    );
    // Stopped first: whatever follows the turn in its worker has happened then.
    gateway.stop().await;
    let systems: Vec<String> = harness
        .mock
        .requests()
        .iter()
        .map(|r| {
            r.body["system"].as_str().map_or_else(
                || {
                    r.body["system"][0]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                },
                str::to_owned,
            )
        })
        .collect();
    let triage = nanocrab_core::heartbeat::TRIAGE_PROMPT;
    // No fourth: a heartbeat's session is neither titled nor consolidated into memory.
    assert_eq!(systems.len(), 3, "{systems:?}");
    assert_eq!((systems[0].as_str(), systems[1].as_str()), (triage, triage));
    assert!(systems[2].starts_with("You are nanocrab"), "{}", systems[2]);
}
