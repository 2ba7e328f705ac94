//! The user's hooks (`hooks` in config): programs run at points of an agent's life, speaking
//! Claude Code's hook JSON, each in the exec sandbox with its own grant, every run audited.
//! [`CommandHooks`] fills the agent loop's [`Hooks`] seam.

mod payload;
mod process;
mod reply;

use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nanocrab_config::{HookCommand, HookEvent, HooksConfig, SandboxConfig, SandboxScope};
use nanocrab_core::hooks::{HookInput, HookOutcome, HookScope, HookVerdict, Hooks};
use nanocrab_policy::{AuditLog, HookDecision, HookRecord, Redactor};
use nanocrab_tools::{ExecSandbox, SandboxLauncher, command_env};

pub use payload::{CLAUDE_CODE_TOOLS, hook_payload, sample_input};
pub use process::{Exit, MAX_HOOK_OUTPUT};
pub use reply::Reply;

/// What the hooks run with besides their config.
pub struct HookSetup<'a> {
    /// `tools.exec.sandbox`: the sandbox's mode and limits; each hook brings its own
    /// workspace access and network.
    pub sandbox: &'a SandboxConfig,
    /// The sandbox launcher; `None` runs hooks unsandboxed under `auto`.
    pub launcher: Option<&'a SandboxLauncher>,
    /// The environment the hooks' is taken from (the process's own): only `exec`'s passed
    /// variables are kept.
    pub base_env: Vec<(OsString, OsString)>,
    pub audit: Option<Arc<AuditLog>>,
    /// Keeps secrets out of what hooks say to the model and to the log.
    pub redactor: Redactor,
}

/// The configured hooks of one agent, ready to run.
pub struct CommandHooks {
    groups: Vec<Group>,
    base_env: Vec<(OsString, OsString)>,
    audit: Option<Arc<AuditLog>>,
    redactor: Redactor,
}

/// One matcher's hooks.
struct Group {
    event: HookEvent,
    matcher: String,
    /// `None`: it matches everything.
    regex: Option<regex::Regex>,
    hooks: Vec<Prepared>,
}

struct Prepared {
    config: HookCommand,
    sandbox: ExecSandbox,
}

/// A configured hook, as `nanocrab hooks list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEntry {
    pub event: HookEvent,
    pub matcher: String,
    pub command: String,
    pub timeout_secs: u64,
    pub workspace_access: nanocrab_config::WorkspaceAccess,
    pub network: bool,
    /// `landlock`, `bwrap`, `off`: what confines it on this machine.
    pub sandboxed: bool,
}

/// What one hook did, for `nanocrab hooks test` and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookReport {
    pub event: HookEvent,
    pub matcher: String,
    pub command: String,
    pub exit: Exit,
    pub reply: Reply,
    pub duration: Duration,
}

#[derive(Debug, thiserror::Error)]
#[error("hooks.{key}: {message}")]
pub struct HookSetupError {
    key: String,
    message: String,
}

impl CommandHooks {
    pub fn new(config: &HooksConfig, setup: HookSetup<'_>) -> Result<Self, HookSetupError> {
        let launcher = setup.launcher.map(|launcher| SandboxLauncher {
            // Hooks have a scratch directory of their own, apart from the agent's commands.
            agent_id: format!("{}-hooks", launcher.agent_id),
            ..launcher.clone()
        });
        let mut groups = Vec::new();
        for event in HookEvent::ALL {
            for (i, group) in config.of(event).iter().enumerate() {
                let regex = if nanocrab_config::matches_everything(&group.matcher) {
                    None
                } else {
                    Some(
                        regex::Regex::new(&format!("^(?:{})$", group.matcher)).map_err(|err| {
                            HookSetupError {
                                key: format!("{event}.{i}.matcher"),
                                message: err.to_string(),
                            }
                        })?,
                    )
                };
                let hooks = group
                    .hooks
                    .iter()
                    .map(|hook| Prepared {
                        sandbox: ExecSandbox::from_config(
                            &SandboxConfig {
                                workspace_access: hook.workspace_access,
                                network: hook.network,
                                scope: SandboxScope::Agent,
                                ..setup.sandbox.clone()
                            },
                            launcher.as_ref(),
                        ),
                        config: hook.clone(),
                    })
                    .collect();
                groups.push(Group {
                    event,
                    matcher: group.matcher.clone(),
                    regex,
                    hooks,
                });
            }
        }
        Ok(Self {
            groups,
            base_env: setup.base_env,
            audit: setup.audit,
            redactor: setup.redactor,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.groups.iter().all(|group| group.hooks.is_empty())
    }

    /// Every configured hook, by event in the order of [`HookEvent::ALL`], then as written.
    pub fn entries(&self) -> Vec<HookEntry> {
        self.groups
            .iter()
            .flat_map(|group| {
                group.hooks.iter().map(|hook| HookEntry {
                    event: group.event,
                    matcher: group.matcher.clone(),
                    command: hook.config.command.clone(),
                    timeout_secs: hook.config.timeout_secs(),
                    workspace_access: hook.config.workspace_access,
                    network: hook.config.network,
                    sandboxed: hook.sandbox.is_sandboxed(),
                })
            })
            .collect()
    }

    /// Runs every hook of `input`'s event that matches it, side by side, each reported in
    /// the order written.
    pub async fn run_each(&self, input: &HookInput, scope: &HookScope) -> Vec<HookReport> {
        let event = input.event();
        let payload = hook_payload(input, scope).to_string().into_bytes();
        let mut env = command_env(self.base_env.iter().cloned(), &scope.cwd);
        for name in ["NANOCRAB_PROJECT_DIR", "CLAUDE_PROJECT_DIR"] {
            env.push((name.into(), scope.cwd.clone().into_os_string()));
        }
        let runs = self
            .groups
            .iter()
            .filter(|group| group.event == event)
            .filter(|group| match (&group.regex, input.subject()) {
                (Some(regex), Some(subject)) => payload::matches(regex, subject),
                (None, _) | (Some(_), None) => true,
            })
            .flat_map(|group| group.hooks.iter().map(move |hook| (group, hook)))
            .map(|(group, hook)| {
                let env = &env;
                let payload = payload.clone();
                async move {
                    let started = Instant::now();
                    let timeout_secs = hook.config.timeout_secs();
                    let finished = process::Launch {
                        command: &hook.config.command,
                        workspace: &scope.cwd,
                        sandbox: &hook.sandbox,
                        env,
                        stdin: payload,
                        timeout: Duration::from_secs(timeout_secs),
                    }
                    .run()
                    .await;
                    let mut reply = Reply::read(event, &finished, timeout_secs);
                    for text in [&mut reply.reason, &mut reply.context, &mut reply.halt]
                        .into_iter()
                        .flatten()
                    {
                        *text = self.redactor.redact(text).into_owned();
                    }
                    HookReport {
                        event,
                        matcher: group.matcher.clone(),
                        command: self.redactor.redact(&hook.config.command).into_owned(),
                        exit: finished.exit,
                        reply,
                        duration: started.elapsed(),
                    }
                }
            });
        futures::future::join_all(runs).await
    }

    fn audit(&self, input: &HookInput, scope: &HookScope, report: &HookReport) {
        let Some(audit) = &self.audit else {
            return;
        };
        let (exit_code, timed_out) = match &report.exit {
            Exit::Code(code) => (*code, false),
            Exit::TimedOut => (None, true),
            Exit::NotStarted(_) => (None, false),
        };
        let tool = match input {
            HookInput::PreToolUse { call } | HookInput::PostToolUse { call, .. } => {
                Some(call.name.clone())
            }
            HookInput::SessionStart { .. }
            | HookInput::UserPromptSubmit { .. }
            | HookInput::PreCompact { .. }
            | HookInput::Stop { .. }
            | HookInput::SessionEnd { .. } => None,
        };
        let duration_ms = i64::try_from(report.duration.as_millis()).unwrap_or(i64::MAX);
        let record = HookRecord {
            id: 0,
            trace_id: scope.trace_id.clone(),
            run_id: scope.run_id.clone(),
            agent: scope.agent.clone(),
            session: Some(scope.session.to_string()),
            event: report.event.as_str().to_owned(),
            matcher: report.matcher.clone(),
            command: report.command.clone(),
            tool,
            decision: report.reply.decision,
            reason: report.reply.reason.clone().or(report.reply.halt.clone()),
            context_chars: report
                .reply
                .context
                .as_ref()
                .map_or(0, |c| c.chars().count() as u64),
            exit_code,
            timed_out,
            started_at_ms: jiff::Timestamp::now().as_millisecond() - duration_ms,
            duration_ms,
        };
        if let Err(err) = audit.append_hook(&record) {
            tracing::error!("a hook run is missing from the audit log: {err}");
        }
    }
}

#[async_trait]
impl Hooks for CommandHooks {
    fn handles(&self, event: HookEvent) -> bool {
        self.groups
            .iter()
            .any(|group| group.event == event && !group.hooks.is_empty())
    }

    async fn run(&self, input: &HookInput, scope: &HookScope) -> HookOutcome {
        let reports = self.run_each(input, scope).await;
        for report in &reports {
            self.audit(input, scope, report);
            let reply = &report.reply;
            if let Some(message) = &reply.message {
                tracing::info!(
                    "the {} hook `{}` says: {message}",
                    report.event,
                    report.command
                );
            }
            if reply.decision == HookDecision::Error {
                tracing::warn!(
                    "the {} hook `{}` failed: {}",
                    report.event,
                    report.command,
                    reply.reason.as_deref().unwrap_or("no reason given")
                );
            }
        }
        combine(&reports)
    }
}

/// What `reports`, the runs of one event's hooks, decide together: a block (a deny, or at
/// `PreToolUse` a failed hook) over an ask over an allow; every hook's context, in order; the
/// first halt.
pub fn combine(reports: &[HookReport]) -> HookOutcome {
    let mut outcome = HookOutcome::default();
    let mut blocks: Vec<(String, String)> = Vec::new();
    for report in reports {
        let by = report.command.clone();
        let reply = &report.reply;
        let reason = || {
            reply
                .reason
                .clone()
                .unwrap_or_else(|| "no reason given".to_owned())
        };
        if let Some(context) = &reply.context {
            outcome.context.push(context.clone());
        }
        if outcome.halt.is_none() {
            outcome.halt.clone_from(&reply.halt);
        }
        match reply.decision {
            HookDecision::Error if report.event == HookEvent::PreToolUse => blocks.push((
                by,
                format!("the hook failed ({}), which denies the call", reason()),
            )),
            HookDecision::Deny | HookDecision::Block => blocks.push((by, reason())),
            HookDecision::Ask => {
                if !matches!(outcome.verdict, HookVerdict::Ask { .. }) {
                    outcome.verdict = HookVerdict::Ask {
                        by,
                        reason: reason(),
                    };
                }
            }
            HookDecision::Allow => {
                if outcome.verdict == HookVerdict::Proceed {
                    outcome.verdict = HookVerdict::Allow { by };
                }
            }
            HookDecision::Error | HookDecision::Proceed | HookDecision::Halt => {}
        }
    }
    if let Some((by, _)) = blocks.first() {
        outcome.verdict = HookVerdict::Block {
            by: by.clone(),
            reason: blocks
                .iter()
                .map(|(_, reason)| reason.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        };
    }
    outcome
}
