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
use nanocrab_testkit::{Gate, Reply};
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
    // The reply is sent before the run's end is recorded.
    until(|| {
        let backups = history(&backups.id);
        backups.len() == 2
            && backups[0].status != RunStatus::Running
            && history(&plants.id).len() == 1
    })
    .await;
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

    let gate = Gate::new();
    harness
        .mock
        .push(Reply::text("Nothing new.").held_by(&gate));
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
    gate.open();
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

/// `future`, or a panic if it has not ended after a long while: what a test waits for that
/// never comes fails it instead of hanging.
async fn eventually<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), future)
        .await
        .expect("waited a minute for it")
}

#[tokio::test]
async fn a_run_whose_caller_hung_up_still_finishes_and_the_job_runs_again() {
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

    let gate = Gate::new();
    harness
        .mock
        .push(Reply::text("Nothing new.").held_by(&gate));
    // The client of `POST /v1/cron/run` hangs up in the middle of the turn: the server drops
    // the request's future.
    let request = tokio::spawn({
        let scheduler = scheduler.clone();
        let id = hourly.id.clone();
        async move { scheduler.run_now(&id).await }
    });
    let history = || jobs.store().history(&hourly.id, 10).unwrap();
    eventually(until(|| history().len() == 1)).await;
    request.abort();
    assert!(request.await.unwrap_err().is_cancelled());
    gate.open();

    // The run goes on, is recorded and its reply sent.
    eventually(until(|| history()[0].status != RunStatus::Running)).await;
    assert_eq!(
        history().iter().map(untimed).collect::<Vec<_>>(),
        [(
            RunStatus::Ok,
            None,
            12,
            7,
            Some("sent to telegram:42".to_owned())
        )]
    );
    assert_eq!(
        harness.channel.wait_for_sent(1).await[0].text,
        "Nothing new."
    );
    // ... and the job is not left marked running (it is let go of just after its end is
    // recorded).
    harness.mock.push(Reply::text("Still nothing."));
    let again = eventually(async {
        loop {
            match scheduler.run_now(&hourly.id).await.unwrap() {
                CronRunOutcome::Busy => tokio::time::sleep(Duration::from_millis(5)).await,
                other => break other,
            }
        }
    })
    .await;
    assert!(matches!(again, CronRunOutcome::Ran { .. }), "{again:?}");
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_run_that_could_not_be_recorded_lets_go_of_its_job() {
    let harness = Harness::new().await;
    let jobs = control(&harness, &["main"], Arc::new(Timestamp::now));
    let hourly = jobs
        .add(JobRequest {
            every: Some("1h".to_owned()),
            ..job("Look at the news.")
        })
        .unwrap();
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let scheduler = gateway.cron().unwrap().clone();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    // Another process holds the store for too long: the run cannot be recorded as started.
    let other = rusqlite::Connection::open(jobs.store().path()).unwrap();
    other
        .execute_batch(
            "CREATE TRIGGER busy BEFORE INSERT ON runs \
             BEGIN SELECT RAISE(ABORT, 'database is locked'); END;",
        )
        .unwrap();
    let CronRunOutcome::Failed { error, retry_at } =
        eventually(scheduler.run_now(&hourly.id)).await.unwrap()
    else {
        panic!("the run started");
    };
    assert!(error.starts_with("the run could not start: "), "{error}");
    assert!(retry_at.is_some());
    assert!(harness.mock.requests().is_empty());

    // Once the store can be written again, the job runs: it was not left claimed.
    other.execute_batch("DROP TRIGGER busy;").unwrap();
    harness.mock.push(Reply::text("Nothing new."));
    assert!(matches!(
        eventually(scheduler.run_now(&hourly.id)).await.unwrap(),
        CronRunOutcome::Ran { .. }
    ));
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_job_runs_on_time_after_the_wall_clock_jumped() {
    let harness = Harness::new().await;
    let made = at("2026-11-28T00:00:00Z");
    let now = Arc::new(std::sync::Mutex::new(made));
    let clock: Clock = {
        let now = Arc::clone(&now);
        Arc::new(move || *now.lock().unwrap())
    };
    let jobs = control(&harness, &["main"], clock).with_clock_check(Duration::from_millis(20));
    let hourly = jobs
        .add(JobRequest {
            every: Some("1h".to_owned()),
            ..job("Look at the news.")
        })
        .unwrap();
    harness.mock.push(Reply::text("Nothing new."));
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    // The laptop slept for an hour: the wall clock moved on, the timer's clock did not.
    *now.lock().unwrap() = at("2026-11-28T01:00:01Z");
    eventually(until(|| {
        jobs.store()
            .history(&hourly.id, 10)
            .unwrap()
            .first()
            .is_some_and(|run| run.status == RunStatus::Ok)
    }))
    .await;
    assert_eq!(
        jobs.get(&hourly.id).unwrap().next_run,
        Some(at("2026-11-28T02:00:00Z"))
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_reply_that_found_no_chat_is_kept_in_view() {
    let harness = Harness::new().await;
    let jobs = control(&harness, &["main"], Arc::new(Timestamp::now));
    let hourly = jobs
        .add(JobRequest {
            every: Some("1h".to_owned()),
            deliver: Some("slack:C42".to_owned()),
            ..job("Look at the news.")
        })
        .unwrap();
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let scheduler = gateway.cron().unwrap().clone();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    harness.mock.push(Reply::text("Nothing new."));
    let reason = "the gateway runs no slack channel";
    assert_eq!(
        eventually(scheduler.run_now(&hourly.id)).await.unwrap(),
        CronRunOutcome::Ran {
            delivery: Delivery::NotSent {
                text: "Nothing new.".to_owned(),
                reason: reason.to_owned(),
            },
            input_tokens: 12,
            output_tokens: 7,
        }
    );
    // The agent did its work: the run is ok, but the job says its reply went nowhere.
    let note = format!("not delivered: {reason}");
    let ran = jobs.get(&hourly.id).unwrap();
    assert_eq!(
        (
            ran.last_status,
            ran.last_error.as_deref(),
            ran.last_note.as_deref()
        ),
        (Some(RunStatus::Ok), None, Some(note.as_str()))
    );
    assert!(
        nanocrab_gateway::job_line(&ran).ends_with(&format!("; last run: {note}")),
        "{}",
        nanocrab_gateway::job_line(&ran)
    );
    assert_eq!(
        jobs.store()
            .history(&hourly.id, 10)
            .unwrap()
            .iter()
            .map(untimed)
            .collect::<Vec<_>>(),
        [(RunStatus::Ok, None, 12, 7, Some(note.clone()))]
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_job_without_a_chat_logs_its_reply_and_notes_nothing() {
    let harness = Harness::new().await;
    let jobs = control(&harness, &["main"], Arc::new(Timestamp::now));
    let hourly = jobs
        .add(JobRequest {
            every: Some("1h".to_owned()),
            ..job("Look at the news.")
        })
        .unwrap();
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let scheduler = gateway.cron().unwrap().clone();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    harness.mock.push(Reply::text("Nothing new."));
    assert_eq!(
        eventually(scheduler.run_now(&hourly.id)).await.unwrap(),
        CronRunOutcome::Ran {
            delivery: Delivery::Logged {
                text: "Nothing new.".to_owned(),
            },
            input_tokens: 12,
            output_tokens: 7,
        }
    );
    // Asked for no chat, it got none: nothing to point out on the job.
    let ran = jobs.get(&hourly.id).unwrap();
    assert_eq!(
        (
            ran.last_status,
            ran.last_error.as_deref(),
            ran.last_note.as_deref()
        ),
        (Some(RunStatus::Ok), None, None)
    );
    assert_eq!(
        jobs.store()
            .history(&hourly.id, 10)
            .unwrap()
            .iter()
            .map(untimed)
            .collect::<Vec<_>>(),
        [(
            RunStatus::Ok,
            None,
            12,
            7,
            Some("logged (no --deliver)".to_owned())
        )]
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_long_run_is_not_taken_for_a_missed_time() {
    let harness = Harness::new().await;
    let made = at("2026-11-28T00:00:00Z");
    let now = Arc::new(std::sync::Mutex::new(made));
    let clock: Clock = {
        let now = Arc::clone(&now);
        Arc::new(move || *now.lock().unwrap())
    };
    let jobs = control(&harness, &["main"], clock).with_clock_check(Duration::from_millis(10));
    let hourly = jobs
        .add(JobRequest {
            every: Some("1h".to_owned()),
            catch_up: Some("skip".to_owned()),
            ..job("Look at the news.")
        })
        .unwrap();
    // Another job keeps the scheduler looking at the clock while the first one runs.
    jobs.add(JobRequest {
        every: Some("3h".to_owned()),
        ..job("Water the plants.")
    })
    .unwrap();
    harness
        .mock
        .push(Reply::text("Nothing new.").with_delay(Duration::from_millis(400)));
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    // Its time comes, and its run takes long.
    *now.lock().unwrap() = at("2026-11-28T01:00:00Z");
    let history = || jobs.store().history(&hourly.id, 10).unwrap();
    eventually(until(|| history().len() == 1)).await;
    *now.lock().unwrap() = at("2026-11-28T01:05:00Z");
    eventually(until(|| history()[0].status != RunStatus::Running)).await;
    assert_eq!(
        history().iter().map(|run| run.status).collect::<Vec<_>>(),
        [RunStatus::Ok]
    );
    assert_eq!(
        jobs.get(&hourly.id).unwrap().next_run,
        Some(at("2026-11-28T02:00:00Z"))
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_job_that_cannot_be_read_stops_no_other() {
    let harness = Harness::new().await;
    let jobs = control(&harness, &["main"], Arc::new(Timestamp::now));
    let odd = jobs
        .add(JobRequest {
            every: Some("1s".to_owned()),
            ..job("From a later nanocrab.")
        })
        .unwrap();
    rusqlite::Connection::open(jobs.store().path())
        .unwrap()
        .execute("UPDATE jobs SET kind = 'lunar' WHERE id = ?1", [&odd.id])
        .unwrap();
    harness.mock.push(Reply::text("Take the cake out."));
    let cake = jobs
        .add(JobRequest {
            at: Some("+1s".to_owned()),
            deliver: Some("telegram:42".to_owned()),
            ..job("Remind the user to take the cake out.")
        })
        .unwrap();
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));

    assert_eq!(
        eventually(harness.channel.wait_for_sent(1)).await[0].text,
        "Take the cake out."
    );
    eventually(until(|| {
        matches!(jobs.get(&cake.id), Err(CronError::UnknownJob { .. }))
    }))
    .await;
    let listed: Vec<Result<String, String>> = jobs
        .list_each()
        .unwrap()
        .into_iter()
        .map(|job| job.map(|j| j.id).map_err(|e| e.to_string()))
        .collect();
    assert_eq!(listed.len(), 1);
    let broken = listed[0].clone().unwrap_err();
    assert!(
        broken.contains(&format!(
            "job {} cannot be read: kind: \"lunar\" is not a schedule",
            odd.id
        )),
        "{broken}"
    );
    assert!(jobs.store().history(&odd.id, 10).unwrap().is_empty());
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_run_refused_because_the_gateway_is_stopping_is_interrupted_not_failed() {
    let harness = Harness::new().await;
    let jobs = control(&harness, &["main"], Arc::new(Timestamp::now));
    let hourly = jobs
        .add(JobRequest {
            every: Some("1h".to_owned()),
            ..job("Look at the news.")
        })
        .unwrap();
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    let scheduler = gateway.cron().unwrap().clone();
    gateway.turns().shutdown(Duration::ZERO).await;

    assert_eq!(
        eventually(scheduler.run_now(&hourly.id)).await.unwrap(),
        CronRunOutcome::Interrupted
    );
    let stored = jobs.get(&hourly.id).unwrap();
    // Not a failure: no backoff, and its time stays for the next start's catchUp.
    assert_eq!(
        (stored.failures, stored.last_status, stored.next_run),
        (0, Some(RunStatus::Interrupted), hourly.next_run)
    );
    assert_eq!(
        jobs.store()
            .history(&hourly.id, 10)
            .unwrap()
            .iter()
            .map(|run| run.status)
            .collect::<Vec<_>>(),
        [RunStatus::Interrupted]
    );
}

#[tokio::test]
async fn runs_left_running_are_marked_interrupted_only_when_the_gateway_starts() {
    let harness = Harness::new().await;
    let jobs = control(&harness, &["main"], Arc::new(Timestamp::now));
    let hourly = jobs
        .add(JobRequest {
            every: Some("1h".to_owned()),
            ..job("Look at the news.")
        })
        .unwrap();
    // The gateway that ran it was killed mid-run.
    jobs.store()
        .start_run(&hourly.id, Timestamp::now())
        .unwrap();
    let statuses = || {
        jobs.store()
            .history(&hourly.id, 10)
            .unwrap()
            .iter()
            .map(|run| run.status)
            .collect::<Vec<_>>()
    };
    // Made, but not started (its port might be taken): the run may still be going elsewhere.
    let gateway = harness.gateway().with_cron(jobs.clone(), CatchUp::Once);
    assert_eq!(statuses(), [RunStatus::Running]);

    let shutdown = CancellationToken::new();
    let task = tokio::spawn(gateway.run(shutdown.clone()));
    eventually(until(|| statuses() == [RunStatus::Interrupted])).await;
    shutdown.cancel();
    task.await.unwrap();
}
