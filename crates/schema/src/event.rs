use serde::{Deserialize, Serialize};

use crate::usage::Usage;

/// Everything that happens during a run, in order. The CLI prints these, the web UI
/// renders them over SSE, channels use them for typing indicators.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A piece of the answer text as it streams.
    Token { text: String },
    /// A piece of model reasoning as it streams; never part of the answer.
    Reasoning { text: String },
    /// A tool is about to run.
    ToolStart {
        call_id: String,
        name: String,
        input: serde_json::Value,
    },
    /// A tool finished; `output` is what the model will see.
    ToolEnd {
        call_id: String,
        name: String,
        output: String,
        is_error: bool,
    },
    /// The model is called again after tool results: a new response begins.
    NewResponse { iteration: u32 },
    /// The history's older part was summarised to fit the context window; the model now gets
    /// the summary instead of those `messages` (the transcript keeps them).
    Compaction { messages: usize },
    /// Memory retrieved for this message (RAG mode): added to this turn's request only.
    Retrieval { sources: Vec<RetrievedSource> },
    /// Tokens used by one model call; `model` is the `provider/model` that answered.
    Usage { model: String, usage: Usage },
    /// `from` failed with `reason` (after its own retries); the call is repeated with `to`.
    ModelFallback {
        from: String,
        to: String,
        reason: String,
    },
    /// A model call failed in a way worth retrying (`reason`: the HTTP status, or the error's
    /// kind) and is sent again after `delay_ms`, as attempt `attempt` of at most `attempts`.
    Retry {
        provider: String,
        reason: String,
        delay_ms: u64,
        attempt: u32,
        attempts: u32,
    },
    /// `messages` messages are being folded into the memory files: a model call that may
    /// take a while (`/new`, or before older history is summarised).
    Consolidating { messages: usize },
    /// A tool changed a file the system prompt is built from (a bootstrap file or a skill);
    /// what it replaced is kept as `version` (`nanocrab workspace diff PATH VERSION`).
    InstructionsChanged(InstructionsChange),
    /// The run finished with this final answer.
    Done { text: String },
    /// The run failed; `message` is safe to show the user.
    Error { message: String },
}

/// One change to an instruction file, as [`AgentEvent::InstructionsChanged`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionsChange {
    pub agent: String,
    /// Relative to the agent's workspace (`SOUL.md`, `skills/weather/SKILL.md`).
    pub path: String,
    /// The number the previous content is kept under; the first change of a file is 1.
    pub version: u32,
    /// The tool that made the change (`write_file`, `edit_file`).
    pub tool: String,
}

/// Where a retrieved piece of memory came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievedSource {
    /// Relative to the workspace.
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    /// 0 to 1, relative to the best match.
    pub score: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn an_instructions_change_is_one_flat_object() {
        let event = AgentEvent::InstructionsChanged(InstructionsChange {
            agent: "main".into(),
            path: "SOUL.md".into(),
            version: 3,
            tool: "edit_file".into(),
        });
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "instructions_changed",
                "agent": "main",
                "path": "SOUL.md",
                "version": 3,
                "tool": "edit_file",
            })
        );
        assert_eq!(serde_json::from_value::<AgentEvent>(json).unwrap(), event);
    }
}
