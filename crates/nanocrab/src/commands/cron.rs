//! `nanocrab cron add|list|remove|run|history|enable|disable`: the jobs live in
//! `state/cron.sqlite`, which these commands change directly (so they work with no gateway
//! running); after a change the running gateway is asked to look again (`POST
//! /v1/cron/wake`), so the change takes effect at once. `cron run` asks the gateway to run the
//! job (`POST /v1/cron/run`): only the gateway has the chats a reply goes to.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use nanocrab_config::{Config, DeliveryTarget};
use nanocrab_gateway::{
    CronControl, CronError, CronJob, CronRunOutcome, CronStore, CronStoreError, Delivery,
    JobRequest, RunRecord, job_line,
};
use serde::{Deserialize, Serialize};

use super::Env;
use super::gateway_api::{ApiError, GatewayApi};
use crate::cli::{CronAddArgs, CronCommand};

pub fn run(env: &Env, command: CronCommand) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    let control = control(env, &config)?;
    match command {
        CronCommand::Add(args) => add(env, &config, &control, *args),
        CronCommand::List { json } => list(&config, &control, json),
        CronCommand::Remove { id } => {
            control.remove(&id)?;
            outln!("removed job {id}")?;
            wake(&config)
        }
        CronCommand::Enable { id } => {
            let job = control.set_enabled(&id, true)?;
            outln!("{}", job_line(&job))?;
            wake(&config)
        }
        CronCommand::Disable { id } => {
            let job = control.set_enabled(&id, false)?;
            outln!("{}", job_line(&job))?;
            wake(&config)
        }
        CronCommand::History { id, limit, json } => history(&control, &id, limit, json),
        CronCommand::Run { id } => run_now(&config, &control, &id),
    }
}

/// The jobs of this home, which the config's agents may run.
fn control(env: &Env, config: &Config) -> anyhow::Result<CronControl> {
    let store = CronStore::open(&env.paths.cron_store())?;
    Ok(CronControl::new(
        Arc::new(store),
        config.agents.ids().map(str::to_owned).collect(),
        Arc::new(jiff::Timestamp::now),
    ))
}

fn add(env: &Env, config: &Config, control: &CronControl, args: CronAddArgs) -> anyhow::Result<()> {
    let CronAddArgs {
        name,
        message,
        every,
        cron,
        tz,
        at,
        agent,
        deliver,
        session,
        jitter,
        catch_up,
    } = args;
    if let Some(deliver) = &deliver {
        check_channel(env, config, deliver)?;
    }
    let job = control
        .add(JobRequest {
            name,
            agent,
            message,
            at,
            every,
            cron,
            tz,
            session,
            deliver,
            jitter,
            catch_up,
            // Typed by the user.
            untrusted_sources: Vec::new(),
        })
        .map_err(flagged)?;
    outln!("added {}", job_line(&job))?;
    wake(config)
}

/// A `--deliver` that names a channel the config does not run is refused now, not found out
/// when the job runs.
fn check_channel(env: &Env, config: &Config, deliver: &str) -> anyhow::Result<()> {
    let Ok(DeliveryTarget::Chat { channel, .. }) = DeliveryTarget::parse(deliver.trim()) else {
        // `last`, `none`, or an error `add` names.
        return Ok(());
    };
    let telegram = config.channels.telegram.as_ref().filter(|t| t.enabled);
    let discord = config
        .channels
        .discord
        .as_ref()
        .filter(|d| d.enabled && cfg!(feature = "discord"));
    let slack = config
        .channels
        .slack
        .as_ref()
        .filter(|s| s.enabled && cfg!(feature = "slack"));
    let email = config
        .channels
        .email
        .as_ref()
        .filter(|e| e.enabled && cfg!(feature = "email"));
    let running: Vec<&str> = [
        telegram.map(|_| "telegram"),
        discord.map(|_| "discord"),
        slack.map(|_| "slack"),
        email.map(|_| "email"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !running.contains(&channel.as_str()) {
        let running = if running.is_empty() {
            "none is enabled".to_owned()
        } else {
            format!("enabled: {}", running.join(", "))
        };
        bail!(
            "--deliver: the config has no `{channel}` channel to send the reply to ({running} in `channels` of {})",
            env.config_path.display()
        );
    }
    Ok(())
}

/// An invalid field named as the flag that gave it.
fn flagged(err: CronError) -> anyhow::Error {
    match err {
        CronError::Invalid {
            field: "schedule",
            message,
        } => {
            anyhow::anyhow!("{message} (--at, --every or --cron)")
        }
        CronError::Invalid { field, message } => anyhow::anyhow!("--{field}: {message}"),
        CronError::UnknownJob { .. } | CronError::Store(_) | CronError::Task { .. } => err.into(),
    }
}

/// Asks the running gateway to read the jobs again; says so when none runs.
fn wake(config: &Config) -> anyhow::Result<()> {
    if !config.cron.enabled {
        outln!("note: cron.enabled is false, so the gateway runs no job")?;
        return Ok(());
    }
    match GatewayApi::new(&config.gateway)?.post("/v1/cron/wake", &serde_json::json!({})) {
        Ok(_) => Ok(()),
        Err(ApiError::NotRunning { .. }) => {
            outln!("note: no gateway is running; jobs run while `nanocrab gateway` does")?;
            Ok(())
        }
        Err(err @ (ApiError::Request { .. } | ApiError::Refused { .. })) => {
            tracing::warn!(
                "the gateway did not take the change yet: {err}; it will on its next start"
            );
            Ok(())
        }
    }
}

/// A job as `cron list --json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct JobView {
    id: String,
    name: String,
    agent: String,
    message: String,
    schedule: ScheduleView,
    session: Option<String>,
    deliver: Option<String>,
    jitter_seconds: u64,
    catch_up: Option<&'static str>,
    /// Untrusted text the agent had read when it added the job.
    untrusted_sources: Vec<String>,
    enabled: bool,
    created_at: String,
    next_run: Option<String>,
    failures: u32,
    last_run: Option<String>,
    last_status: Option<&'static str>,
    last_error: Option<String>,
    last_note: Option<String>,
}

#[derive(Debug, Serialize)]
struct ScheduleView {
    kind: &'static str,
    spec: String,
    tz: Option<String>,
}

impl From<&CronJob> for JobView {
    fn from(job: &CronJob) -> Self {
        Self {
            id: job.id.clone(),
            name: job.name.clone(),
            agent: job.agent.clone(),
            message: job.message.clone(),
            schedule: ScheduleView {
                kind: job.schedule.kind(),
                spec: job.schedule.spec(),
                tz: job.schedule.tz().map(str::to_owned),
            },
            session: job.session.clone(),
            deliver: job.deliver.clone(),
            jitter_seconds: job.jitter.as_secs(),
            catch_up: job.catch_up.map(|c| c.name()),
            untrusted_sources: job.untrusted_sources.clone(),
            enabled: job.enabled,
            created_at: job.created_at.to_string(),
            next_run: job.next_run.map(|t| t.to_string()),
            failures: job.failures,
            last_run: job.last_run.map(|t| t.to_string()),
            last_status: job.last_status.map(|s| s.name()),
            last_error: job.last_error.clone(),
            last_note: job.last_note.clone(),
        }
    }
}

/// A job `cron list --json` could not read: its id and why.
#[derive(Debug, Serialize)]
struct BrokenView {
    id: String,
    broken: String,
}

/// An entry of `cron list --json`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ListEntry<'a> {
    Job(Box<JobView>),
    Broken(&'a BrokenView),
}

/// `cron list --json`, for the web page's `/api/status`.
pub fn list_json(control: &CronControl) -> anyhow::Result<serde_json::Value> {
    entries_json(&read_jobs(control)?)
}

fn entries_json(jobs: &[Result<CronJob, BrokenView>]) -> anyhow::Result<serde_json::Value> {
    let entries: Vec<ListEntry<'_>> = jobs
        .iter()
        .map(|job| match job {
            Ok(job) => ListEntry::Job(Box::new(JobView::from(job))),
            Err(broken) => ListEntry::Broken(broken),
        })
        .collect();
    Ok(serde_json::to_value(&entries)?)
}

fn list(config: &Config, control: &CronControl, json: bool) -> anyhow::Result<()> {
    let jobs = read_jobs(control)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&entries_json(&jobs)?)?)?;
        return Ok(());
    }
    if jobs.is_empty() {
        outln!("no jobs; add one with `nanocrab cron add`")?;
    }
    for job in &jobs {
        match job {
            Ok(job) => outln!("{}", job_line(job))?,
            Err(BrokenView { id, broken }) => {
                outln!("{id} broken, never runs: {broken}; `nanocrab cron remove {id}` deletes it")?
            }
        }
    }
    if !config.cron.enabled && !jobs.is_empty() {
        outln!("note: cron.enabled is false, so the gateway runs none of them")?;
    }
    Ok(())
}

fn history(control: &CronControl, id: &str, limit: usize, json: bool) -> anyhow::Result<()> {
    let runs: Vec<RunRecord> = control.store().history(id, limit)?;
    if runs.is_empty() {
        // A job removed keeps its history; one that never was has none.
        control.get(id)?;
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&runs)?)?;
        return Ok(());
    }
    if runs.is_empty() {
        outln!("{id}: no runs yet")?;
    }
    for run in &runs {
        let ended = run
            .ended_at
            .map_or_else(|| "-".to_owned(), |t| t.to_string());
        let mut line = format!(
            "{} {} → {ended} {} tokens {}/{}",
            run.id,
            run.started_at,
            run.status.name(),
            run.input_tokens,
            run.output_tokens
        );
        if let Some(delivery) = &run.delivery {
            line.push_str(&format!(", {delivery}"));
        }
        if let Some(error) = &run.error {
            line.push_str(&format!(": {error}"));
        }
        outln!("{line}")?;
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
struct RunAnswer {
    result: CronRunOutcome,
}

fn run_now(config: &Config, control: &CronControl, id: &str) -> anyhow::Result<()> {
    control.get(id)?;
    if !config.cron.enabled {
        bail!(
            "cron.enabled is false: the gateway runs no job; set it to true and restart the gateway"
        );
    }
    let api = GatewayApi::new(&config.gateway)?;
    let body = match api.post("/v1/cron/run", &serde_json::json!({ "id": id })) {
        Ok(body) => body,
        Err(ApiError::NotRunning { base }) => bail!(
            "no gateway answers at {base}: start `nanocrab gateway` first (jobs run in the gateway, which has the chats their replies go to)"
        ),
        Err(err @ (ApiError::Request { .. } | ApiError::Refused { .. })) => return Err(err.into()),
    };
    let answer: RunAnswer = serde_json::from_slice(&body).with_context(|| {
        format!(
            "the gateway at {} gave an answer this nanocrab does not read",
            api.base()
        )
    })?;
    match answer.result {
        CronRunOutcome::Busy => {
            outln!("{id}: the previous run is still going; nothing started")?;
        }
        CronRunOutcome::Ran { delivery, .. } => match delivery {
            Delivery::Sent { chat, text } => {
                outln!(
                    "{id}: sent to {} chat {}:\n{text}",
                    chat.channel,
                    chat.chat_id
                )?;
            }
            Delivery::Silent => outln!("{id}: the agent had nothing to say")?,
            Delivery::Logged { text } => {
                outln!("{id}: the job has no --deliver, so nothing was sent; the reply:\n{text}")?;
            }
            Delivery::NotSent { text, reason } => {
                outln!("{id}: not sent ({reason}):\n{text}")?;
            }
        },
        CronRunOutcome::Failed { error, retry_at } => match retry_at {
            Some(at) => bail!("{id}: the run failed: {error} (it runs again at {at})"),
            None => bail!("{id}: the run failed: {error}"),
        },
        CronRunOutcome::Interrupted => {
            bail!("{id}: the gateway stopped before the run finished")
        }
    }
    Ok(())
}

/// The jobs of the store, each read or why it could not be.
fn read_jobs(control: &CronControl) -> anyhow::Result<Vec<Result<CronJob, BrokenView>>> {
    Ok(control
        .list_each()?
        .into_iter()
        .map(|job| {
            job.map_err(|err| {
                let id = match &err {
                    CronStoreError::BadJob { id, .. } => id.clone(),
                    CronStoreError::CreateDir { .. } | CronStoreError::Sql { .. } => "?".to_owned(),
                };
                BrokenView {
                    id,
                    broken: err.to_string(),
                }
            })
        })
        .collect())
}
