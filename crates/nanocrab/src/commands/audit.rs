//! `nanocrab audit`: reading the audit log of tool calls.

use anyhow::Context as _;
use nanocrab_policy::{AuditLog, AuditQuery, AuditRecord, Redactor};

use super::Env;
use crate::cli::AuditCommand;

pub fn run(env: &Env, command: AuditCommand) -> anyhow::Result<()> {
    let path = env.paths.audit_log();
    if !path.exists() {
        outln!(
            "no tool calls recorded yet ({} does not exist)",
            path.display()
        )?;
        return Ok(());
    }
    // Reading needs no redactor: what was stored is already redacted.
    let log = AuditLog::open(&path, Redactor::default())?;
    match command {
        AuditCommand::List {
            session,
            since,
            limit,
            json,
        } => {
            let records = log.list(&AuditQuery {
                session,
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
                outln!(
                    "{:>5}  {}  {:<11} {:<7} {}{approval}  {}  {}",
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
    }
    Ok(())
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
