//! What a hook's exit and output mean, as Claude Code reads them: exit 0 with optional JSON on
//! stdout, exit 2 to block with stderr as the reason, any other exit an error. One difference:
//! a `PreToolUse` hook that fails (a crash, a timeout, unreadable output) denies the call here.

use nanocrab_config::HookEvent;
use nanocrab_policy::HookDecision;
use serde::Deserialize;

use crate::process::{Exit, Finished};

/// Characters of a hook's stderr kept in a reason.
const MAX_REASON_CHARS: usize = 2_000;

/// What one hook's run came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub decision: HookDecision,
    /// Why: the hook's own reason, or what went wrong with it.
    pub reason: Option<String>,
    /// Text for the model.
    pub context: Option<String>,
    /// `continue: false`: the turn ends with this shown to the user.
    pub halt: Option<String>,
    /// `systemMessage`: a note for the user, logged.
    pub message: Option<String>,
}

/// Claude Code's JSON output; unknown fields (newer ones) are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Output {
    #[serde(rename = "continue")]
    proceed: Option<bool>,
    stop_reason: Option<String>,
    system_message: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<Specific>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Specific {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    additional_context: Option<String>,
}

impl Reply {
    fn new(decision: HookDecision, reason: Option<String>) -> Self {
        Self {
            decision,
            reason,
            context: None,
            halt: None,
            message: None,
        }
    }

    /// Reads `finished`, the run of a hook of `event` whose timeout was `timeout_secs`.
    pub fn read(event: HookEvent, finished: &Finished, timeout_secs: u64) -> Self {
        let stderr = cut(finished.stderr.trim());
        match &finished.exit {
            Exit::NotStarted(why) => Self::new(HookDecision::Error, Some(why.clone())),
            Exit::TimedOut => Self::new(
                HookDecision::Error,
                Some(format!(
                    "timed out after {timeout_secs} s (its `timeout`) and was killed"
                )),
            ),
            Exit::Code(Some(0)) => Self::from_stdout(event, finished.stdout.trim()),
            Exit::Code(Some(2)) => {
                let reason = if stderr.is_empty() {
                    "exit code 2 (blocked, no reason on stderr)".to_owned()
                } else {
                    stderr
                };
                Self::new(blocked(event), Some(reason))
            }
            Exit::Code(code) => {
                let status = match code {
                    Some(code) => format!("exit code {code}"),
                    None => "killed by a signal".to_owned(),
                };
                let reason = if stderr.is_empty() {
                    status
                } else {
                    format!("{status}: {stderr}")
                };
                Self::new(HookDecision::Error, Some(reason))
            }
        }
    }

    fn from_stdout(event: HookEvent, stdout: &str) -> Self {
        if !stdout.starts_with('{') {
            // Plain text is context where Claude Code takes it as such; elsewhere it is only
            // for the hook's own log.
            let context = match event {
                HookEvent::SessionStart | HookEvent::UserPromptSubmit if !stdout.is_empty() => {
                    Some(stdout.to_owned())
                }
                HookEvent::SessionStart
                | HookEvent::UserPromptSubmit
                | HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PreCompact
                | HookEvent::Stop
                | HookEvent::SessionEnd => None,
            };
            return Self {
                context,
                ..Self::new(HookDecision::Proceed, None)
            };
        }
        let output: Output = match serde_json::from_str(stdout) {
            Ok(output) => output,
            Err(err) => {
                return Self::new(
                    HookDecision::Error,
                    Some(format!("its output is not the JSON of a hook: {err}")),
                );
            }
        };
        let specific = output.hook_specific_output.unwrap_or_default();
        let reason = specific.permission_decision_reason.or(output.reason);
        // `permissionDecision`, or the older `decision: approve | block`.
        let permission = match specific.permission_decision.as_deref() {
            Some("allow") => Some(HookDecision::Allow),
            Some("deny") => Some(HookDecision::Deny),
            Some("ask") => Some(HookDecision::Ask),
            _ => None,
        }
        .filter(|_| event == HookEvent::PreToolUse);
        let decision = permission.unwrap_or_else(|| match output.decision.as_deref() {
            Some("approve") if event == HookEvent::PreToolUse => HookDecision::Allow,
            Some("block") => blocked(event),
            _ => HookDecision::Proceed,
        });
        let halt = (output.proceed == Some(false)).then(|| {
            output
                .stop_reason
                .unwrap_or_else(|| "A hook ended the turn.".to_owned())
        });
        Self {
            decision: if halt.is_some() {
                HookDecision::Halt
            } else {
                decision
            },
            reason,
            context: specific.additional_context.filter(|c| !c.trim().is_empty()),
            halt,
            message: output.system_message,
        }
    }
}

/// What a block means at `event`: a denied call before a tool runs, a block elsewhere.
fn blocked(event: HookEvent) -> HookDecision {
    match event {
        HookEvent::PreToolUse => HookDecision::Deny,
        HookEvent::SessionStart
        | HookEvent::UserPromptSubmit
        | HookEvent::PostToolUse
        | HookEvent::PreCompact
        | HookEvent::Stop
        | HookEvent::SessionEnd => HookDecision::Block,
    }
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_REASON_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(MAX_REASON_CHARS).collect();
    format!("{kept} [... cut]")
}
