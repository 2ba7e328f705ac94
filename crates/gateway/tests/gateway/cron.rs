//! Scheduled jobs in the gateway: a job added while it runs fires without a restart, a
//! one-shot is deleted once it ran, missed times follow `catchUp`, a failure backs off and is
//! said to the job's chat, and a job never runs twice at once.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use nanocrab_config::CatchUp;
use nanocrab_gateway::{
    Clock, CronControl, CronError, CronRunOutcome, CronStore, Delivery, JobRequest, RunRecord,
    RunStatus, cron_session, job_prompt,
};
use nanocrab_schema::{ChatRef, OutboundMessage};
use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use crate::harness::{Harness, until};

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// A clock that reads `base` now and runs from there at the wall clock's pace.
fn running_from(base: Timestamp) -> Clock {
    let started = std::time::Instant::now();
    Arc::new(move || base + jiff::SignedDuration::try_from(started.elapsed()).unwrap())
}

/// The jobs in `harness`'s state directory, for agents `agents`, on `clock`.
fn control(harness: &Harness, agents: &[&str], clock: Clock) -> CronControl {
    let store = CronStore::open(&harness.state_dir().join("cron.sqlite")).unwrap();
    CronControl::new(
        Arc::new(store),
        agents.iter().map(|a| (*a).to_owned()).collect(),
        clock,
    )
}

fn job(message: &str) -> JobRequest {
    JobRequest {
        agent: "main".to_owned(),
        message: message.to_owned(),
        ..JobRequest::default()
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

/// A run as recorded, its times left out.
fn untimed(run: &RunRecord) -> (RunStatus, Option<String>, u64, u64, Option<String>) {
    (
        run.status,
        run.error.clone(),
        run.input_tokens,
        run.output_tokens,
        run.delivery.clone(),
    )
}

#[tokio::test]
async fn a_one_shot_added_while_the_gateway_runs_fires_once_and_is_gone() {
    let harness = Harness::new().await;
    let jobs = control(&harness, &["main"], Arc::new(Timestamp::now));
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    harness
        .mock
        .push(Reply::text("Take the cake out of the oven."));
    let cake = jobs
        .add(JobRequest {
            name: Some("cake".to_owned()),
            at: Some("+1s".to_owned()),
            deliver: Some("telegram:42".to_owned()),
            ..job("Remind the user to take the cake out.")
        })
        .unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        [OutboundMessage {
            chat: telegram("42"),
            text: "Take the cake out of the oven.".to_owned(),
            reply_to_message_id: None,
            file: None,
        }]
    );
    until(|| matches!(jobs.get(&cake.id), Err(CronError::UnknownJob { .. }))).await;
    let runs = jobs.store().history(&cake.id, 10).unwrap();
    assert_eq!(
        runs.iter().map(untimed).collect::<Vec<_>>(),
        [(
            RunStatus::Ok,
            None,
            12,
            7,
            Some("sent to telegram:42".to_owned())
        )]
    );
    // The agent was told the job, in a session of the job's own.
    let history = harness.history(&cron_session("main", &cake.id));
    assert_eq!(history[0].text(), job_prompt(&cake));
    assert_eq!(harness.mock.requests().len(), 1);
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn missed_times_follow_catch_up_and_a_killed_run_is_marked_interrupted() {
    let harness = Harness::new().await;
    let made = at("2026-11-28T00:00:00Z");
    let before = control(&harness, &["main"], Arc::new(move || made));
    let backups = before
        .add(JobRequest {
            every: Some("1h".to_owned()),
            deliver: Some("telegram:42".to_owned()),
            ..job("Check the backups.")
        })
        .unwrap();
    let plants = before
        .add(JobRequest {
            every: Some("1h".to_owned()),
            catch_up: Some("skip".to_owned()),
            ..job("Water the plants.")
        })
        .unwrap();
    // The gateway was killed in the middle of a run of the backups at 01:00.
    before
        .store()
        .start_run(&backups.id, at("2026-11-28T01:00:00Z"))
        .unwrap();
    drop(before);

    // It starts again at 02:30, without a word about the job's catchUp: the default, once.
    let jobs = control(
        &harness,
        &["main"],
        running_from(at("2026-11-28T02:30:00Z")),
    );
    harness.mock.push(Reply::text("The backups are fine."));
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));
    assert_eq!(
        harness.channel.wait_for_sent(1).await[0].text,
        "The backups are fine."
    );
    let history = |id: &str| jobs.store().history(id, 10).unwrap();
    until(|| history(&backups.id).len() == 2 && history(&plants.id).len() == 1).await;
    let statuses = |id: &str| history(id).iter().map(|run| run.status).collect::<Vec<_>>();
    assert_eq!(
        statuses(&backups.id),
        [RunStatus::Ok, RunStatus::Interrupted]
    );
    assert_eq!(statuses(&plants.id), [RunStatus::Skipped]);
    // Both go on at their next time after now; the skipped one was never asked for.
    until(|| jobs.get(&backups.id).unwrap().next_run == Some(at("2026-11-28T03:00:00Z"))).await;
    assert_eq!(
        jobs.get(&plants.id).unwrap().next_run,
        Some(at("2026-11-28T03:00:00Z"))
    );
    assert_eq!(harness.mock.requests().len(), 1);
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_job_whose_agent_is_gone_fails_backs_off_and_says_so_in_its_chat() {
    let harness = Harness::new().await;
    // Made while the config had an agent `gone`; the gateway now runs only `main`.
    let jobs = control(&harness, &["main", "gone"], Arc::new(Timestamp::now));
    let lost = jobs
        .add(JobRequest {
            name: Some("lost".to_owned()),
            agent: "gone".to_owned(),
            every: Some("1s".to_owned()),
            deliver: Some("telegram:42".to_owned()),
            ..job("Say hello.")
        })
        .unwrap();
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    let sent = harness.channel.wait_for_sent(1).await;
    let error = "no agent `gone`: the config no longer has it (known: main); remove the job or add the agent back";
    assert!(
        sent[0].text.starts_with(&format!(
            "Scheduled job \"lost\" ({}) failed: {error}\nit runs again at ",
            lost.id
        )),
        "{}",
        sent[0].text
    );
    until(|| jobs.get(&lost.id).unwrap().failures == 1).await;
    let failed = jobs.get(&lost.id).unwrap();
    // Not the schedule's next second: the first retry waits 30 s.
    let last_run = failed.last_run.unwrap();
    assert_eq!(
        (
            failed.enabled,
            failed.last_status,
            failed.last_error.as_deref(),
            failed.next_run
        ),
        (
            true,
            Some(RunStatus::Failed),
            Some(error),
            Some(last_run + jiff::SignedDuration::from_secs(30))
        )
    );
    assert_eq!(
        jobs.store()
            .history(&lost.id, 10)
            .unwrap()
            .iter()
            .map(untimed)
            .collect::<Vec<_>>(),
        [(RunStatus::Failed, Some(error.to_owned()), 0, 0, None)]
    );
    assert!(harness.mock.requests().is_empty());
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_job_never_runs_twice_at_once() {
    let harness = Harness::new().await;
    let jobs = control(&harness, &["main"], Arc::new(Timestamp::now));
    let hourly = jobs
        .add(JobRequest {
            every: Some("1h".to_owned()),
            deliver: Some("telegram:42".to_owned()),
            ..job("Look at the news.")
        })
        .unwrap();
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let scheduler = gateway.cron().unwrap().clone();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    harness
        .mock
        .push(Reply::text("Nothing new.").with_delay(Duration::from_millis(500)));
    let first = tokio::spawn({
        let scheduler = scheduler.clone();
        let id = hourly.id.clone();
        async move { scheduler.run_now(&id).await }
    });
    until(|| jobs.store().history(&hourly.id, 10).unwrap().len() == 1).await;
    assert_eq!(
        scheduler.run_now(&hourly.id).await.unwrap(),
        CronRunOutcome::Busy
    );
    assert_eq!(
        first.await.unwrap().unwrap(),
        CronRunOutcome::Ran {
            delivery: Delivery::Sent {
                chat: telegram("42"),
                text: "Nothing new.".to_owned()
            },
            input_tokens: 12,
            output_tokens: 7,
        }
    );
    // Run by hand, it keeps its hour.
    assert_eq!(jobs.get(&hourly.id).unwrap().next_run, hourly.next_run);
    assert_eq!(
        scheduler.run_now("nothing").await.unwrap_err().to_string(),
        "no job `nothing`; `nanocrab cron list` shows the jobs"
    );
    shutdown.cancel();
    task.await.unwrap();
}
