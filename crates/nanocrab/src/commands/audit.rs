//! `nanocrab audit`: reading the audit log of tool calls.

use anyhow::Context as _;
use nanocrab_policy::{AuditLog, AuditQuery, AuditRecord, Redactor, RunQuery};
use nanocrab_schema::RunSource;

use super::Env;
use crate::cli::AuditCommand;

pub fn run(env: &Env, command: AuditCommand) -> anyhow::Result<()> {
    let path = env.paths.audit_log();
    if !path.exists() {
        let nothing = match &command {
            AuditCommand::Runs { .. } => "no runs",
            AuditCommand::Hooks { .. } => "no hook runs",
            AuditCommand::List { .. } | AuditCommand::Show { .. } => "no tool calls",
        };
        outln!("{nothing} recorded yet ({} does not exist)", path.display())?;
        return Ok(());
    }
    // Reading needs no redactor: what was stored is already redacted.
    let log = AuditLog::open(&path, Redactor::default())?;
    match command {
        AuditCommand::List {
            session,
            source,
            since,
            limit,
            json,
        } => {
            let records = log.list(&AuditQuery {
                session,
                source,
                since_ms: since.map(|t| t.as_millisecond()),
                limit: Some(limit),
            })?;
            if json {
                for record in &records {
                    outln!("{}", serde_json::to_string(record)?)?;
                }
                return Ok(());
            }
            if records.is_empty() {
                outln!("no tool calls match")?;
            }
            for record in &records {
                let approval = match &record.approval {
                    Some(approval) => format!(" · approval {}", approval.result),
                    None => String::new(),
                };
                // A chat's calls are most of them: only the others say who started them.
                let source = match &record.source {
                    RunSource::Chat => String::new(),
                    other @ (RunSource::Heartbeat
                    | RunSource::Cron { .. }
                    | RunSource::Subagent { .. }) => format!(" · {}", source_label(other)),
                };
                outln!(
                    "{:>5}  {}  {:<11} {:<7} {}{approval}{source}  {}  {}",
                    record.id,
                    time(record.started_at_ms),
                    record.tool,
                    record.status.to_string(),
                    record.risk,
                    record.session.as_deref().unwrap_or("-"),
                    one_line(&record.summary, 80),
                )?;
            }
        }
        AuditCommand::Show { id, json } => {
            let record = log
                .get(id)?
                .with_context(|| format!("no tool call {id} in {}", path.display()))?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&record)?)?;
                return Ok(());
            }
            out!("{}", details(&record))?;
        }
        AuditCommand::Runs {
            source,
            since,
            limit,
            json,
        } => {
            let runs = log.runs(&RunQuery {
                source,
                since_ms: since.map(|t| t.as_millisecond()),
                limit: Some(limit),
            })?;
            if json {
                for run in &runs {
                    outln!("{}", serde_json::to_string(run)?)?;
                }
                return Ok(());
            }
            if runs.is_empty() {
                outln!("no runs match (heartbeats, scheduled jobs and subagents are listed here)")?;
            }
            let count = |n: u64, what: &str| match n {
                1 => format!("1 {what}"),
                n => format!("{n} {what}s"),
            };
            for run in &runs {
                let usage = &run.usage;
                let tokens = usage.prompt_tokens() + usage.output_tokens;
                let error = run
                    .error
                    .as_deref()
                    .map(|error| format!("  {}", one_line(error, 80)))
                    .unwrap_or_default();
                outln!(
                    "{:>5}  {}  {:<26} {:<11} {:>6.1} s  {} · {} · {} tokens  {}{error}",
                    run.id,
                    time(run.started_at_ms),
                    one_line(&source_label(&run.source), 26),
                    run.status.to_string(),
                    (run.ended_at_ms - run.started_at_ms) as f64 / 1000.0,
                    count(u64::from(run.model_calls), "model call"),
                    count(run.tool_calls, "tool call"),
                    tokens,
                    run.session,
                )?;
            }
        }
        AuditCommand::Hooks { limit, json } => {
            let runs = log.hook_runs(limit)?;
            if json {
                for run in &runs {
                    outln!("{}", serde_json::to_string(run)?)?;
                }
                return Ok(());
            }
            if runs.is_empty() {
                outln!("no hook runs recorded (hooks in config.json; docs/tools.md, \"Hooks\")")?;
            }
            for run in &runs {
                let exit = match (run.exit_code, run.timed_out) {
                    (_, true) => "timed out".to_owned(),
                    (Some(code), false) => format!("exit {code}"),
                    (None, false) => "no exit".to_owned(),
                };
                let tool = run
                    .tool
                    .as_deref()
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default();
                let reason = run
                    .reason
                    .as_deref()
                    .map(|reason| format!("  {}", one_line(reason, 80)))
                    .unwrap_or_default();
                outln!(
                    "{:>5}  {}  {:<16} {:<7} {:<9} {:>5} ms  {}{tool}  {}{reason}",
                    run.id,
                    time(run.started_at_ms),
                    run.event,
                    run.decision.to_string(),
                    exit,
                    run.duration_ms,
                    run.session.as_deref().unwrap_or("-"),
                    one_line(&run.command, 60),
                )?;
            }
        }
    }
    Ok(())
}

/// A run's source as a person reads it: a subagent by its id and parent run.
fn source_label(source: &RunSource) -> String {
    match source {
        RunSource::Chat | RunSource::Heartbeat | RunSource::Cron { .. } => source.to_string(),
        RunSource::Subagent { id, parent_run, .. } => format!("subagent:{id} of run {parent_run}"),
    }
}

fn details(record: &AuditRecord) -> String {
    let list = |items: &[String]| {
        if items.is_empty() {
            "-".to_owned()
        } else {
            items.join(", ")
        }
    };
    let approval = match &record.approval {
        Some(approval) => format!(
            "{} ({}{})",
            approval.id,
            approval.result,
            approval
                .by
                .as_deref()
                .map(|by| format!(", by {by}"))
                .unwrap_or_default()
        ),
        None => "not needed".to_owned(),
    };
    let mut out = format!(
        "call {id}\n  tool       {tool} (call id {call_id})\n  summary    {summary}\n  \
         status     {status}\n  risk       {risk}\n  requested  {requested}\n  granted    \
         {granted}\n  approval   {approval}\n  agent      {agent}\n  session    {session}\n  \
         source     {source}\n  \
         started    {started}\n  took       {took} ms\n  arguments  sha256 {digest}\n  trace      \
         {trace}\n  task       {task}\n  run        {run}\n  step       {step}\n",
        id = record.id,
        tool = record.tool,
        call_id = record.call_id,
        summary = record.summary,
        status = record.status,
        risk = record.risk,
        requested = list(&record.requested),
        granted = list(&record.granted),
        agent = record.agent,
        session = record.session.as_deref().unwrap_or("-"),
        source = source_label(&record.source),
        started = time(record.started_at_ms),
        took = record.ended_at_ms - record.started_at_ms,
        digest = record.arguments_digest,
        trace = record.trace_id,
        task = record.task_id,
        run = record.run_id,
        step = record.step_id,
    );
    if let Some(error) = &record.error {
        out.push_str(&format!(
            "  error      {}\n",
            error.replace('\n', "\n             ")
        ));
    }
    out
}

/// Local time to the second.
fn time(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(at) => at
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%d %H:%M:%S")
            .to_string(),
        Err(_) => ms.to_string(),
    }
}

fn one_line(text: &str, max: usize) -> String {
    let line = text.replace('\n', " ");
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}
