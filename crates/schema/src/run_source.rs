use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids::RunId;

/// Who started a run: someone asking (a chat, the terminal, the HTTP API), or nanocrab on its
/// own. Kept with the run's question in its transcript and with each of its tool calls in the
/// audit log, so `nanocrab usage` and `nanocrab audit` can tell what the autonomous runs cost
/// and did.
///
/// Written as text in the audit log and on the command line: `chat`, `heartbeat`,
/// `cron:<job id>`, `subagent:<subagent id>:<parent run id>:<depth>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunSource {
    /// Someone asked: a chat message, the terminal or an HTTP API request.
    #[default]
    Chat,
    /// A heartbeat tick that found a task in `HEARTBEAT.md`.
    Heartbeat,
    /// A scheduled job.
    Cron { job: String },
    /// A subagent, started by the `spawn` tool in run `parent_run`; `depth` is 1 for a
    /// subagent of a run someone asked for, 2 for one of that subagent, and so on.
    Subagent {
        id: String,
        parent_run: RunId,
        depth: u32,
    },
}

impl RunSource {
    /// How many subagents deep this run is: 0 unless it is a subagent.
    pub fn depth(&self) -> u32 {
        match self {
            Self::Chat | Self::Heartbeat | Self::Cron { .. } => 0,
            Self::Subagent { depth, .. } => *depth,
        }
    }

    /// Nobody asked for it: nanocrab started it on its own.
    pub fn is_autonomous(&self) -> bool {
        match self {
            Self::Chat => false,
            Self::Heartbeat | Self::Cron { .. } | Self::Subagent { .. } => true,
        }
    }

    /// `chat`, `heartbeat`, `cron` or `subagent`: the sources `nanocrab usage` adds up.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Heartbeat => "heartbeat",
            Self::Cron { .. } => "cron",
            Self::Subagent { .. } => "subagent",
        }
    }
}

impl fmt::Display for RunSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Chat | Self::Heartbeat => f.write_str(self.kind()),
            Self::Cron { job } => write!(f, "cron:{job}"),
            Self::Subagent {
                id,
                parent_run,
                depth,
            } => write!(f, "subagent:{id}:{parent_run}:{depth}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown run source `{0}`; expected chat, heartbeat, cron:<job id> or \
     subagent:<id>:<parent run id>:<depth>"
)]
pub struct RunSourceError(String);

impl FromStr for RunSource {
    type Err = RunSourceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || RunSourceError(text.to_owned());
        match text.split_once(':') {
            None if text == "chat" => Ok(Self::Chat),
            None if text == "heartbeat" => Ok(Self::Heartbeat),
            Some(("cron", job)) if !job.is_empty() => Ok(Self::Cron {
                job: job.to_owned(),
            }),
            Some(("subagent", rest)) => {
                let mut parts = rest.split(':');
                match (parts.next(), parts.next(), parts.next(), parts.next()) {
                    (Some(id), Some(parent), Some(depth), None)
                        if !id.is_empty() && !parent.is_empty() =>
                    {
                        Ok(Self::Subagent {
                            id: id.to_owned(),
                            parent_run: RunId::from(parent.to_owned()),
                            depth: depth.parse().map_err(|_| bad())?,
                        })
                    }
                    _ => Err(bad()),
                }
            }
            None | Some(_) => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn text_form_reads_back() {
        let sources = [
            RunSource::Chat,
            RunSource::Heartbeat,
            RunSource::Cron {
                job: "j-4f2a".into(),
            },
            RunSource::Subagent {
                id: "sa-1".into(),
                parent_run: RunId::from("0a1b".to_owned()),
                depth: 1,
            },
        ];
        let texts: Vec<String> = sources.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            ["chat", "heartbeat", "cron:j-4f2a", "subagent:sa-1:0a1b:1"]
        );
        let read: Vec<RunSource> = texts.iter().map(|t| t.parse().unwrap()).collect();
        assert_eq!(read, sources);
    }

    #[test]
    fn malformed_text_is_refused() {
        for text in [
            "",
            "cron",
            "cron:",
            "subagent:a:b",
            "subagent:a:b:x",
            "mail",
        ] {
            assert_eq!(
                text.parse::<RunSource>(),
                Err(RunSourceError(text.to_owned())),
                "{text}"
            );
        }
    }

    #[test]
    fn json_form_names_the_kind() {
        let source = RunSource::Subagent {
            id: "sa-1".into(),
            parent_run: RunId::from("0a1b".to_owned()),
            depth: 2,
        };
        assert_eq!(
            serde_json::to_value(&source).unwrap(),
            serde_json::json!({"kind": "subagent", "id": "sa-1", "parent_run": "0a1b", "depth": 2})
        );
        assert_eq!(
            serde_json::to_value(RunSource::Cron { job: "j".into() }).unwrap(),
            serde_json::json!({"kind": "cron", "job": "j"})
        );
    }
}
