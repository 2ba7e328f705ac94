//! The seam to the user's hooks: what the agent loop tells them at each point of a
//! conversation's life, and what it does with their answer. Running the programs (the
//! sandbox, the timeout, the JSON they speak) is the business of whoever fills the seam
//! (`nanocrab-hooks`, assembled by the binary).

use std::path::PathBuf;

use async_trait::async_trait;
use nanocrab_config::HookEvent;
use nanocrab_schema::{SessionKey, ToolCall, ToolResult};
use nanocrab_tools::CallGate;

/// How many times in a row a `Stop` hook may have the agent continue instead of answering.
pub const MAX_STOP_CONTINUES: u32 = 3;

/// What happened, as the hooks of its event are told.
#[derive(Debug, Clone, PartialEq)]
pub enum HookInput {
    /// `source`: `startup` (a new conversation), `resume` (one with a transcript) or `clear`
    /// (after `/new`).
    SessionStart {
        source: &'static str,
    },
    UserPromptSubmit {
        prompt: String,
    },
    PreToolUse {
        call: ToolCall,
    },
    PostToolUse {
        call: ToolCall,
        result: ToolResult,
    },
    /// `trigger`: `auto` (the history outgrew its budget) or `manual` (asked for).
    PreCompact {
        trigger: &'static str,
    },
    /// `stop_hook_active`: the agent is already continuing because a `Stop` hook asked.
    Stop {
        stop_hook_active: bool,
        last_message: String,
    },
    /// `reason`: `clear` (`/new`), `prompt_input_exit` (the CLI ended) or `other`.
    SessionEnd {
        reason: &'static str,
    },
}

impl HookInput {
    pub fn event(&self) -> HookEvent {
        match self {
            Self::SessionStart { .. } => HookEvent::SessionStart,
            Self::UserPromptSubmit { .. } => HookEvent::UserPromptSubmit,
            Self::PreToolUse { .. } => HookEvent::PreToolUse,
            Self::PostToolUse { .. } => HookEvent::PostToolUse,
            Self::PreCompact { .. } => HookEvent::PreCompact,
            Self::Stop { .. } => HookEvent::Stop,
            Self::SessionEnd { .. } => HookEvent::SessionEnd,
        }
    }

    /// What a matcher is tested against (see [`HookEvent::matches_on`]); `None` for the
    /// events that take no matcher.
    pub fn subject(&self) -> Option<&str> {
        match self {
            Self::PreToolUse { call } | Self::PostToolUse { call, .. } => Some(&call.name),
            Self::SessionStart { source } => Some(source),
            Self::PreCompact { trigger } => Some(trigger),
            Self::SessionEnd { reason } => Some(reason),
            Self::UserPromptSubmit { .. } | Self::Stop { .. } => None,
        }
    }
}

/// Where it happened: the facts every hook's input carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookScope {
    pub agent: String,
    pub session: SessionKey,
    /// The conversation's transcript (JSONL).
    pub transcript_path: PathBuf,
    /// The agent's workspace, where hooks run.
    pub cwd: PathBuf,
    pub trace_id: String,
    pub run_id: String,
}

/// What the hooks of one event decided, together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutcome {
    pub verdict: HookVerdict,
    /// Text for the model (`additionalContext`, or what a `SessionStart` or
    /// `UserPromptSubmit` hook printed), one entry per hook that gave some.
    pub context: Vec<String>,
    /// `continue: false`: the turn ends, and the user is shown this (`stopReason`).
    pub halt: Option<String>,
}

/// The strongest decision of the hooks that ran: a block over an ask over an allow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HookVerdict {
    /// No hook objected.
    #[default]
    Proceed,
    /// `PreToolUse`: run the call without asking a human.
    Allow { by: String },
    /// `PreToolUse`: ask a human first.
    Ask { by: String, reason: String },
    /// Refused: the tool call is denied (the model told `reason`), the prompt is blocked (the
    /// user told), the tool's result comes with `reason` as feedback, or (`Stop`) the agent
    /// is asked to continue with `reason` as its instruction.
    Block { by: String, reason: String },
}

impl HookVerdict {
    /// What a `PreToolUse` verdict asks of the tool registry.
    pub fn gate(&self) -> CallGate {
        match self {
            Self::Proceed => CallGate::Policy,
            Self::Allow { by } => CallGate::Allowed { by: by.clone() },
            Self::Ask { by, reason } => CallGate::Ask {
                by: by.clone(),
                reason: reason.clone(),
            },
            Self::Block { by, reason } => CallGate::Denied {
                by: by.clone(),
                reason: reason.clone(),
            },
        }
    }
}

/// The user's hooks, as the agent loop sees them.
#[async_trait]
pub trait Hooks: Send + Sync {
    /// Whether any hook runs at `event`: without one the loop builds no input for it.
    fn handles(&self, event: HookEvent) -> bool;

    /// Runs the hooks of `input`'s event that match it and combines what they decided. A hook
    /// that fails (a non-zero exit other than 2, a timeout, unreadable output) is reported
    /// (logged and audited) and, at `PreToolUse`, denies the call.
    async fn run(&self, input: &HookInput, scope: &HookScope) -> HookOutcome;
}
