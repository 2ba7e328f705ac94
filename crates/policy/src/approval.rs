//! Asking a human before a guarded or unsafe call runs.

use std::fmt;

use async_trait::async_trait;
use nanocrab_schema::SessionKey;
use serde::{Deserialize, Serialize};

use crate::capability::{Capability, Risk};

/// A call waiting for a human's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// Short and unique among pending requests: what the human types in `approve ID`.
    pub id: String,
    pub agent: String,
    /// The conversation the call came from; the approver asks there.
    pub session: Option<SessionKey>,
    pub tool: String,
    /// What will happen, in one line.
    pub summary: String,
    pub risk: Risk,
    pub missing: Vec<Capability>,
    /// Whether "always allow for this session" may be offered.
    pub session_grant_offered: bool,
}

impl ApprovalRequest {
    /// The question as a human reads it, on any channel.
    pub fn question(&self) -> String {
        let missing = if self.missing.is_empty() {
            // Granted already, and a hook asks all the same (the summary says why).
            "nothing beyond its grants".to_owned()
        } else {
            self.missing
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let choices = if self.session_grant_offered {
            format!("approve {0} · always {0} · deny {0}", self.id)
        } else {
            format!("approve {0} · deny {0}", self.id)
        };
        format!(
            "Approval {id} needed ({risk}): {tool} wants to {summary}\nNeeds: {missing}\nReply: {choices}",
            id = self.id,
            risk = self.risk,
            tool = self.tool,
            summary = self.summary,
        )
    }
}

/// Characters of an approval id: short enough to type after `approve`.
pub const APPROVAL_ID_LEN: usize = 6;

/// A human's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Run this call.
    Once,
    /// Run it, and grant the same capabilities for the rest of the session.
    Session,
    Deny,
}

impl ApprovalAnswer {
    /// The verbs a chat reply (`approve ID`) and the HTTP API take: `approve`, `always`,
    /// `deny`, in any case.
    pub fn from_verb(word: &str) -> Option<Self> {
        match word.to_ascii_lowercase().as_str() {
            "approve" => Some(Self::Once),
            "always" => Some(Self::Session),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }

    /// Parses what a human typed: `approve`, `always`, `deny` and their usual synonyms.
    pub fn parse(word: &str) -> Option<Self> {
        match word.to_ascii_lowercase().as_str() {
            "approve" | "allow" | "yes" | "y" | "once" => Some(Self::Once),
            "always" | "session" | "a" => Some(Self::Session),
            "deny" | "no" | "n" | "reject" => Some(Self::Deny),
            _ => None,
        }
    }
}

/// Who answered, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalReply {
    pub answer: ApprovalAnswer,
    /// `cli`, `telegram:12345`, `api`...
    pub by: String,
}

/// How an approval ended, as the audit log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalResult {
    AllowedOnce,
    AllowedForSession,
    Denied,
    TimedOut,
    /// No human could be asked (a cron job, a subagent, a non-interactive run).
    Unavailable,
}

impl fmt::Display for ApprovalResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AllowedOnce => "allowed_once",
            Self::AllowedForSession => "allowed_for_session",
            Self::Denied => "denied",
            Self::TimedOut => "timed_out",
            Self::Unavailable => "unavailable",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    /// Nobody can be asked where this call came from.
    #[error("no one can be asked here: {0}")]
    Unreachable(String),
}

/// Puts a request in front of a human and waits for the answer. The caller bounds the wait
/// (`tools.approvals.timeout`) and treats running out of time as a denial.
#[async_trait]
pub trait Approver: Send + Sync {
    async fn ask(&self, request: &ApprovalRequest) -> Result<ApprovalReply, ApprovalError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_question_names_the_call_and_the_replies() {
        let request = ApprovalRequest {
            id: "k3f9".into(),
            agent: "main".into(),
            session: None,
            tool: "exec".into(),
            summary: "run `rm -rf build` (sh -c) in /ws".into(),
            risk: Risk::Guarded,
            missing: vec![Capability::Exec("sh".into())],
            session_grant_offered: true,
        };
        assert_eq!(
            request.question(),
            "Approval k3f9 needed (guarded): exec wants to run `rm -rf build` (sh -c) in /ws\nNeeds: exec:sh\nReply: approve k3f9 · always k3f9 · deny k3f9"
        );
    }

    #[test]
    fn replies_are_read_leniently() {
        let answers: Vec<_> = ["Approve", "y", "always", "DENY", "maybe"]
            .iter()
            .map(|word| ApprovalAnswer::parse(word))
            .collect();
        assert_eq!(
            answers,
            [
                Some(ApprovalAnswer::Once),
                Some(ApprovalAnswer::Once),
                Some(ApprovalAnswer::Session),
                Some(ApprovalAnswer::Deny),
                None
            ]
        );
    }
}
