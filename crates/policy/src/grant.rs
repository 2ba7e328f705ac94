//! Grants: who allowed which capabilities, for how long, and the decision a call gets from them.

use std::fmt;

use crate::capability::{Capability, CapabilityPattern, Invocation, Risk};

/// Where a grant came from, which is also how long it lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GrantSource {
    /// Written in config; `key` is where (`tools.grants[0]`, `channels.telegram.grants[1]`).
    Config { key: String },
    /// "Always allow for this session" in approval `request`; dies with the process.
    Session { request: String, by: String },
    /// Allowed once, for one call of the run.
    Once { request: String, by: String },
}

impl fmt::Display for GrantSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config { key } => write!(f, "config {key}"),
            Self::Session { request, by } => {
                write!(f, "approval {request} by {by} (this session)")
            }
            Self::Once { request, by } => write!(f, "approval {request} by {by} (once)"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CapabilityGrant {
    pub pattern: CapabilityPattern,
    pub source: GrantSource,
}

impl fmt::Display for CapabilityGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.pattern, self.source)
    }
}

/// A set of standing grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    grants: Vec<CapabilityGrant>,
}

impl Grants {
    pub fn new(grants: Vec<CapabilityGrant>) -> Self {
        Self { grants }
    }

    pub fn push(&mut self, grant: CapabilityGrant) {
        if !self.grants.contains(&grant) {
            self.grants.push(grant);
        }
    }

    pub fn extend(&mut self, other: &Grants) {
        for grant in &other.grants {
            self.push(grant.clone());
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &CapabilityGrant> {
        self.grants.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    pub fn covering(&self, capability: &Capability) -> Option<&CapabilityGrant> {
        self.grants
            .iter()
            .find(|grant| grant.pattern.covers(capability))
    }
}

/// What the policy says about one call before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it; `granted` names the grant behind each capability (none for a safe call).
    Allowed { granted: Vec<CapabilityGrant> },
    /// A human must approve `missing` first (`granted` covers the rest);
    /// `session_grant_offered` says whether "always allow for this session" may be offered
    /// (never for an unsafe call).
    NeedsApproval {
        granted: Vec<CapabilityGrant>,
        missing: Vec<Capability>,
        session_grant_offered: bool,
    },
}

/// Decides a call: a safe call runs; a guarded one runs when config or this session's
/// approvals cover every capability it asks for; an unsafe one only when config does, since
/// an approval for an unsafe call is good for that call alone.
pub fn decide(invocation: &Invocation, config: &Grants, session: &Grants) -> Verdict {
    let standing = |capability: &Capability| match invocation.risk {
        Risk::Safe | Risk::Guarded => config
            .covering(capability)
            .or_else(|| session.covering(capability)),
        Risk::Unsafe => config.covering(capability),
    };
    match invocation.risk {
        Risk::Safe => Verdict::Allowed {
            granted: Vec::new(),
        },
        Risk::Guarded | Risk::Unsafe => {
            let mut granted = Vec::new();
            let mut missing = Vec::new();
            for capability in &invocation.capabilities {
                match standing(capability) {
                    Some(grant) => granted.push(grant.clone()),
                    None => missing.push(capability.clone()),
                }
            }
            if missing.is_empty() {
                Verdict::Allowed { granted }
            } else {
                Verdict::NeedsApproval {
                    granted,
                    missing,
                    session_grant_offered: invocation.risk == Risk::Guarded,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn grant(text: &str, source: GrantSource) -> CapabilityGrant {
        CapabilityGrant {
            pattern: CapabilityPattern::parse(text, None).unwrap(),
            source,
        }
    }

    fn config(text: &str) -> CapabilityGrant {
        grant(
            text,
            GrantSource::Config {
                key: "tools.grants[0]".into(),
            },
        )
    }

    fn session(text: &str) -> CapabilityGrant {
        grant(
            text,
            GrantSource::Session {
                request: "a1".into(),
                by: "cli".into(),
            },
        )
    }

    fn call(risk: Risk, capabilities: Vec<Capability>) -> Invocation {
        Invocation::new(risk, "test", capabilities)
    }

    #[test]
    fn a_safe_call_runs_without_grants() {
        let verdict = decide(
            &call(Risk::Safe, vec![Capability::FsRead("/ws/a".into())]),
            &Grants::default(),
            &Grants::default(),
        );
        assert_eq!(verdict, Verdict::Allowed { granted: vec![] });
    }

    #[test]
    fn a_guarded_call_needs_every_capability_granted_by_config_or_the_session() {
        let invocation = call(
            Risk::Guarded,
            vec![
                Capability::Exec("sh".into()),
                Capability::Net("example.org".into()),
            ],
        );
        let config_grants = Grants::new(vec![config("exec:sh")]);
        assert_eq!(
            decide(&invocation, &config_grants, &Grants::default()),
            Verdict::NeedsApproval {
                granted: vec![config("exec:sh")],
                missing: vec![Capability::Net("example.org".into())],
                session_grant_offered: true,
            }
        );
        let session_grants = Grants::new(vec![session("net:example.org")]);
        assert_eq!(
            decide(&invocation, &config_grants, &session_grants),
            Verdict::Allowed {
                granted: vec![config("exec:sh"), session("net:example.org")]
            }
        );
    }

    #[test]
    fn an_unsafe_call_is_not_covered_by_a_session_approval() {
        let invocation = call(Risk::Unsafe, vec![Capability::Exec("sh".into())]);
        assert_eq!(
            decide(
                &invocation,
                &Grants::default(),
                &Grants::new(vec![session("exec")])
            ),
            Verdict::NeedsApproval {
                granted: vec![],
                missing: vec![Capability::Exec("sh".into())],
                session_grant_offered: false,
            }
        );
        assert_eq!(
            decide(
                &invocation,
                &Grants::new(vec![config("exec")]),
                &Grants::default()
            ),
            Verdict::Allowed {
                granted: vec![config("exec")]
            }
        );
    }
}
