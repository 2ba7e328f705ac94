//! `hooks`: the user's programs run at points of an agent's life, in Claude Code's settings
//! shape (`{"PreToolUse": [{"matcher": "exec|write_file", "hooks": [{"type": "command",
//! "command": "...", "timeout": 10}]}]}`) so that a user can paste theirs, with nanocrab's own
//! confinement per hook (`workspaceAccess`, `network`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How long a hook may run when its entry says nothing, as in Claude Code.
pub const DEFAULT_HOOK_TIMEOUT_SECS: u64 = 60;

/// The hooks by the event they run at.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    #[serde(
        rename = "SessionStart",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub session_start: Vec<HookMatcher>,
    #[serde(
        rename = "UserPromptSubmit",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub user_prompt_submit: Vec<HookMatcher>,
    #[serde(rename = "PreToolUse", default, skip_serializing_if = "Vec::is_empty")]
    pub pre_tool_use: Vec<HookMatcher>,
    #[serde(rename = "PostToolUse", default, skip_serializing_if = "Vec::is_empty")]
    pub post_tool_use: Vec<HookMatcher>,
    #[serde(rename = "PreCompact", default, skip_serializing_if = "Vec::is_empty")]
    pub pre_compact: Vec<HookMatcher>,
    #[serde(rename = "Stop", default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<HookMatcher>,
    #[serde(rename = "SessionEnd", default, skip_serializing_if = "Vec::is_empty")]
    pub session_end: Vec<HookMatcher>,
}

impl HooksConfig {
    /// The matchers of `event`, in the order written.
    pub fn of(&self, event: HookEvent) -> &[HookMatcher] {
        match event {
            HookEvent::SessionStart => &self.session_start,
            HookEvent::UserPromptSubmit => &self.user_prompt_submit,
            HookEvent::PreToolUse => &self.pre_tool_use,
            HookEvent::PostToolUse => &self.post_tool_use,
            HookEvent::PreCompact => &self.pre_compact,
            HookEvent::Stop => &self.stop,
            HookEvent::SessionEnd => &self.session_end,
        }
    }

    pub fn is_empty(&self) -> bool {
        HookEvent::ALL
            .iter()
            .all(|event| self.of(*event).is_empty())
    }
}

/// A point of an agent's life a hook can run at (Claude Code's names).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum HookEvent {
    /// The first turn of a conversation in this process (`startup` for a new one, `resume`
    /// for one with a transcript, `clear` after `/new`); may add context.
    SessionStart,
    /// The user's message, before the model sees it; may add context or block it.
    UserPromptSubmit,
    /// A tool call, before it runs; may allow, deny or ask for approval.
    PreToolUse,
    /// A tool call's result, before the model sees it; may add context or feedback.
    PostToolUse,
    /// Before older conversation is summarised (`auto` or `manual`).
    PreCompact,
    /// The model's final answer of a turn; may have the agent continue.
    Stop,
    /// A conversation ends (`clear` on `/new`, `prompt_input_exit` when the CLI ends).
    SessionEnd,
}

impl HookEvent {
    pub const ALL: [Self; 7] = [
        Self::SessionStart,
        Self::UserPromptSubmit,
        Self::PreToolUse,
        Self::PostToolUse,
        Self::PreCompact,
        Self::Stop,
        Self::SessionEnd,
    ];

    /// The name in config and in the hook's input (`hook_event_name`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::PreCompact => "PreCompact",
            Self::Stop => "Stop",
            Self::SessionEnd => "SessionEnd",
        }
    }

    /// What its matcher is tested against: the tool name, the session start's source, the
    /// compaction's trigger, the session end's reason; `None`: it takes no matcher.
    pub fn matches_on(self) -> Option<&'static str> {
        match self {
            Self::PreToolUse | Self::PostToolUse => Some("the tool name"),
            Self::SessionStart => Some("the source (startup, resume, clear)"),
            Self::PreCompact => Some("the trigger (auto, manual)"),
            Self::SessionEnd => Some("the reason (clear, prompt_input_exit, other)"),
            Self::UserPromptSubmit | Self::Stop => None,
        }
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Hooks that run when `matcher` matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookMatcher {
    /// A regular expression the whole tool name (or source, trigger, reason) must match:
    /// `exec`, `write_file|edit_file`, `mcp__github__.*`; Claude Code's tool names (`Bash`,
    /// `Read`, `Write`, `Edit`, ...) match nanocrab's (`exec`, `read_file`, ...). Empty or `*`:
    /// everything.
    #[serde(default)]
    pub matcher: String,
    pub hooks: Vec<HookCommand>,
}

/// One program to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookCommand {
    /// Only `command`.
    #[serde(rename = "type", default)]
    pub kind: HookKind,
    /// Run with `sh -c` in the workspace; the event's input arrives as JSON on stdin.
    pub command: String,
    /// Seconds before the hook's whole process group is killed; default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// What the hook may do in the workspace: `ro` (read, the default), `rw`, or `none`
    /// (it runs in its scratch directory). Its scratch directory is writable either way.
    #[serde(default = "default_hook_access")]
    pub workspace_access: crate::WorkspaceAccess,
    /// The hook may open network sockets (Unix sockets always work).
    #[serde(default)]
    pub network: bool,
}

impl HookCommand {
    pub fn timeout_secs(&self) -> u64 {
        self.timeout.unwrap_or(DEFAULT_HOOK_TIMEOUT_SECS)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HookKind {
    #[default]
    Command,
}

fn default_hook_access() -> crate::WorkspaceAccess {
    crate::WorkspaceAccess::ReadOnly
}

/// Whether `matcher` is one that matches everything (empty or `*`).
pub fn matches_everything(matcher: &str) -> bool {
    matches!(matcher.trim(), "" | "*")
}

/// The first problem of `hooks`, as (key under `hooks`, message).
pub(crate) fn validate(hooks: &HooksConfig) -> Result<(), (String, String)> {
    for event in HookEvent::ALL {
        for (i, group) in hooks.of(event).iter().enumerate() {
            if !matches_everything(&group.matcher)
                && let Err(err) = regex::Regex::new(&group.matcher)
            {
                // The parser's message ends with a line that says what is wrong.
                let text = err.to_string();
                let why = text
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim_start_matches("error: ");
                return Err((
                    format!("{event}.{i}.matcher"),
                    format!("{:?} is not a regular expression ({why})", group.matcher),
                ));
            }
            for (j, hook) in group.hooks.iter().enumerate() {
                if hook.command.trim().is_empty() {
                    return Err((
                        format!("{event}.{i}.hooks.{j}.command"),
                        "is empty; give the program to run".to_owned(),
                    ));
                }
                if hook.timeout == Some(0) {
                    return Err((
                        format!("{event}.{i}.hooks.{j}.timeout"),
                        "0 is too small; allowed: at least 1 (seconds)".to_owned(),
                    ));
                }
            }
        }
    }
    Ok(())
}
