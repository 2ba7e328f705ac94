//! `nanocrab hooks list` and `nanocrab hooks test EVENT [--tool NAME] [--input JSON]`: the
//! hooks of config, and what they decide for a sample input, run as an agent runs them.

use anyhow::{Context as _, bail};
use nanocrab_config::{HookEvent, WorkspaceAccess};
use nanocrab_core::hooks::{HookOutcome, HookScope, HookVerdict};
use nanocrab_hooks::{CommandHooks, Exit, HookEntry, HookReport};
use nanocrab_schema::{RunId, SessionKey, TraceId};

use super::Env;
use crate::cli::HooksCommand;

pub fn run(env: &Env, command: HooksCommand) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    config.require("hooks")?;
    match command {
        HooksCommand::List => {
            let entries = build(env, &config, nanocrab_config::DEFAULT_AGENT_ID)?
                .map(|hooks| hooks.entries())
                .unwrap_or_default();
            outln!("{}", list_text(&entries, &env.config_path))?;
        }
        HooksCommand::Test {
            event,
            tool,
            input,
            agent,
        } => {
            let Some(event) = HookEvent::ALL.into_iter().find(|e| e.as_str() == event) else {
                let names: Vec<&str> = HookEvent::ALL.iter().map(|e| e.as_str()).collect();
                let hint = nanocrab_config::did_you_mean(&event, &names)
                    .map(|name| format!("did you mean `{name}`? "))
                    .unwrap_or_default();
                bail!(
                    "no hook event `{event}`; {hint}events: {}",
                    names.join(", ")
                );
            };
            let fields = match &input {
                Some(text) => Some(
                    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                        .context("--input must be a JSON object")?,
                ),
                None => None,
            };
            let Some(hooks) = build(env, &config, &agent)? else {
                outln!("{}", list_text(&[], &env.config_path))?;
                return Ok(());
            };
            let sample = nanocrab_hooks::sample_input(event, Some(&tool), fields.as_ref());
            let key = SessionKey::parse("cli:hooks-test").context("the sample session key")?;
            let scope = HookScope {
                agent: agent.clone(),
                transcript_path: env.paths.sessions_dir().join(format!("{key}.jsonl")),
                session: key,
                cwd: env.agent_workspace(&config, &agent),
                trace_id: TraceId::new().to_string(),
                run_id: RunId::new().to_string(),
            };
            std::fs::create_dir_all(&scope.cwd)
                .with_context(|| format!("cannot create the workspace {}", scope.cwd.display()))?;
            outln!(
                "Input on stdin:\n{}\n",
                serde_json::to_string_pretty(&nanocrab_hooks::hook_payload(&sample, &scope))?
            )?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let reports = runtime.block_on(hooks.run_each(&sample, &scope));
            outln!("{}", reports_text(event, &reports))?;
        }
    }
    Ok(())
}

/// The hooks as agent `agent` runs them (its sandbox, its scratch directory), not audited;
/// `None` when there are none.
fn build(
    env: &Env,
    config: &nanocrab_config::Config,
    agent: &str,
) -> anyhow::Result<Option<CommandHooks>> {
    let tools = config
        .agents
        .entries
        .get(agent)
        .and_then(|entry| entry.tools.as_ref())
        .unwrap_or(&config.tools);
    super::agents::hooks(
        config,
        tools,
        super::agents::sandbox_launcher(env, agent).as_ref(),
        None,
        super::redactor(config),
    )
    .with_context(|| env.config_path.display().to_string())
}

fn list_text(entries: &[HookEntry], config_path: &std::path::Path) -> String {
    if entries.is_empty() {
        return format!(
            "No hooks configured (`hooks` in {}); docs/tools.md, \"Hooks\", says how.",
            config_path.display()
        );
    }
    let mut text = String::new();
    let mut last = None;
    for entry in entries {
        if last != Some(entry.event) {
            text.push_str(&format!("{}\n", entry.event));
            last = Some(entry.event);
        }
        let matcher = if nanocrab_config::matches_everything(&entry.matcher) {
            "*"
        } else {
            &entry.matcher
        };
        let workspace = match entry.workspace_access {
            WorkspaceAccess::None => "no workspace",
            WorkspaceAccess::ReadOnly => "reads the workspace",
            WorkspaceAccess::ReadWrite => "reads and writes the workspace",
        };
        let network = if entry.network {
            "network"
        } else {
            "no network"
        };
        let sandbox = if entry.sandboxed {
            "sandboxed"
        } else {
            "NOT sandboxed (tools.exec.sandbox)"
        };
        text.push_str(&format!(
            "  [{matcher}] {}\n      timeout {} s · {workspace} · {network} · {sandbox}\n",
            entry.command, entry.timeout_secs
        ));
    }
    text.trim_end().to_owned()
}

fn reports_text(event: HookEvent, reports: &[HookReport]) -> String {
    if reports.is_empty() {
        return format!("No {event} hook matches this input.");
    }
    let mut text = String::new();
    for report in reports {
        let exit = match &report.exit {
            Exit::Code(Some(code)) => format!("exit {code}"),
            Exit::Code(None) => "killed by a signal".to_owned(),
            Exit::TimedOut => "timed out".to_owned(),
            Exit::NotStarted(_) => "not started".to_owned(),
        };
        text.push_str(&format!(
            "{} `{}`: {} ({exit})\n",
            report.event, report.command, report.reply.decision
        ));
        let reply = &report.reply;
        for (label, value) in [
            ("reason", &reply.reason),
            ("context", &reply.context),
            ("stops the turn", &reply.halt),
            ("message", &reply.message),
        ] {
            if let Some(value) = value {
                text.push_str(&format!("    {label}: {value}\n"));
            }
        }
    }
    text.push_str(&format!(
        "Together: {}",
        outcome_text(event, &nanocrab_hooks::combine(reports))
    ));
    text
}

/// What the agent would do with `outcome`, in words.
fn outcome_text(event: HookEvent, outcome: &HookOutcome) -> String {
    let mut words = match &outcome.verdict {
        HookVerdict::Proceed => "no objection".to_owned(),
        HookVerdict::Allow { .. } => {
            "the call runs without asking for approval (the policy's refusals still stand)"
                .to_owned()
        }
        HookVerdict::Ask { reason, .. } => format!("a human is asked first ({reason})"),
        HookVerdict::Block { reason, .. } => match event {
            HookEvent::PreToolUse => format!("the call is denied; the model reads: {reason}"),
            HookEvent::UserPromptSubmit => {
                format!("the message is blocked; the user reads: {reason}")
            }
            HookEvent::PostToolUse => format!("the model gets this with the result: {reason}"),
            HookEvent::Stop => format!("the agent continues, told: {reason}"),
            HookEvent::SessionStart | HookEvent::PreCompact | HookEvent::SessionEnd => {
                "nothing to block at this event".to_owned()
            }
        },
    };
    if !outcome.context.is_empty() {
        words.push_str(&format!(
            "; the model gets {} characters of context",
            outcome
                .context
                .iter()
                .map(|c| c.chars().count())
                .sum::<usize>()
        ));
    }
    if let Some(halt) = &outcome.halt {
        words.push_str(&format!("; the turn ends, the user reads: {halt}"));
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use nanocrab_hooks::Reply;
    use nanocrab_policy::HookDecision;

    fn report(decision: HookDecision, reason: Option<&str>, exit: Exit) -> HookReport {
        HookReport {
            event: HookEvent::PreToolUse,
            matcher: "Bash".into(),
            command: "./guard.sh".into(),
            exit,
            reply: Reply {
                decision,
                reason: reason.map(str::to_owned),
                context: None,
                halt: None,
                message: None,
            },
            duration: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn the_list_shows_each_hook_with_what_it_may_do() {
        let entries = [
            HookEntry {
                event: HookEvent::PreToolUse,
                matcher: "Bash|write_file".into(),
                command: "./guard.sh".into(),
                timeout_secs: 10,
                workspace_access: WorkspaceAccess::ReadOnly,
                network: false,
                sandboxed: true,
            },
            HookEntry {
                event: HookEvent::PreToolUse,
                matcher: String::new(),
                command: "./log.sh".into(),
                timeout_secs: 60,
                workspace_access: WorkspaceAccess::ReadWrite,
                network: false,
                sandboxed: true,
            },
            HookEntry {
                event: HookEvent::Stop,
                matcher: String::new(),
                command: "notify-send done".into(),
                timeout_secs: 60,
                workspace_access: WorkspaceAccess::None,
                network: true,
                sandboxed: false,
            },
        ];
        insta::assert_snapshot!(list_text(&entries, std::path::Path::new("/h/config.json")));
        insta::assert_snapshot!(
            "no_hooks",
            list_text(&[], std::path::Path::new("/h/config.json"))
        );
    }

    #[test]
    fn a_test_run_says_what_each_hook_decided_and_what_follows() {
        let reports = [
            report(HookDecision::Allow, None, Exit::Code(Some(0))),
            report(
                HookDecision::Deny,
                Some("rm is not allowed"),
                Exit::Code(Some(2)),
            ),
            report(
                HookDecision::Error,
                Some("timed out after 10 s (its `timeout`) and was killed"),
                Exit::TimedOut,
            ),
        ];
        insta::assert_snapshot!(reports_text(HookEvent::PreToolUse, &reports));
        insta::assert_snapshot!("nothing_matches", reports_text(HookEvent::PreToolUse, &[]));
    }
}
