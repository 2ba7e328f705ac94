//! What a hook reads on stdin: Claude Code's hook input, with nanocrab's values (the session
//! key as `session_id`, the transcript JSONL, the workspace as `cwd`).

use std::path::Path;

use nanocrab_core::hooks::{HookInput, HookScope};
use serde_json::{Map, Value, json};

/// nanocrab's tools that Claude Code's names stand for, in matchers (`Bash` matches `exec`).
pub const CLAUDE_CODE_TOOLS: &[(&str, &str)] = &[
    ("Bash", "exec"),
    ("Read", "read_file"),
    ("Write", "write_file"),
    ("Edit", "edit_file"),
    ("MultiEdit", "edit_file"),
    ("LS", "list_dir"),
    ("WebFetch", "web_fetch"),
    ("WebSearch", "web_search"),
];

/// The file tools, whose `path` a hook also gets as an absolute `file_path`, as Claude Code's
/// `Read`, `Write` and `Edit` send it.
const FILE_TOOLS: &[&str] = &["read_file", "write_file", "edit_file", "list_dir"];

/// The JSON document a hook of `input`'s event reads on stdin.
pub fn hook_payload(input: &HookInput, scope: &HookScope) -> Value {
    let mut payload = json!({
        "session_id": scope.session.to_string(),
        "transcript_path": scope.transcript_path,
        "cwd": scope.cwd,
        "hook_event_name": input.event().as_str(),
        "agent_id": scope.agent,
    });
    let fields = match input {
        HookInput::SessionStart { source } => json!({ "source": source }),
        HookInput::UserPromptSubmit { prompt } => json!({ "prompt": prompt }),
        HookInput::PreToolUse { call } => json!({
            "tool_name": call.name,
            "tool_input": tool_input(&call.name, &call.input, &scope.cwd),
            "tool_use_id": call.id,
        }),
        HookInput::PostToolUse { call, result } => json!({
            "tool_name": call.name,
            "tool_input": tool_input(&call.name, &call.input, &scope.cwd),
            "tool_use_id": call.id,
            "tool_response": {
                "output": result.content,
                "is_error": result.is_error,
            },
        }),
        HookInput::PreCompact { trigger } => json!({
            "trigger": trigger,
            "custom_instructions": "",
        }),
        HookInput::Stop {
            stop_hook_active,
            last_message,
        } => json!({
            "stop_hook_active": stop_hook_active,
            "last_assistant_message": last_message,
        }),
        HookInput::SessionEnd { reason } => json!({ "reason": reason }),
    };
    if let (Value::Object(payload), Value::Object(fields)) = (&mut payload, fields) {
        payload.extend(fields);
    }
    payload
}

/// The call's arguments, plus `file_path` (absolute) for the file tools.
fn tool_input(tool: &str, input: &Value, workspace: &Path) -> Value {
    let mut input = input.clone();
    if FILE_TOOLS.contains(&tool)
        && let Value::Object(fields) = &mut input
        && let Some(Value::String(path)) = fields.get("path")
    {
        let absolute = workspace.join(path);
        fields.insert("file_path".to_owned(), json!(absolute));
    }
    input
}

/// Whether `matcher` (anchored) matches `subject`, or the Claude Code name of that tool.
pub fn matches(regex: &regex::Regex, subject: &str) -> bool {
    regex.is_match(subject)
        || CLAUDE_CODE_TOOLS
            .iter()
            .any(|(claude, ours)| *ours == subject && regex.is_match(claude))
}

/// A sample input for `nanocrab hooks test`: the event's fields, with `tool` and `fields`
/// (JSON the user gave: `{"command": "ls"}` as a tool's input, or the event's own fields)
/// filled in.
pub fn sample_input(
    event: nanocrab_config::HookEvent,
    tool: Option<&str>,
    fields: Option<&Map<String, Value>>,
) -> HookInput {
    use nanocrab_config::HookEvent;
    let text = |key: &str, default: &str| {
        fields
            .and_then(|f| f.get(key))
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    };
    let call = || nanocrab_schema::ToolCall {
        id: "call_sample".to_owned(),
        name: tool.unwrap_or("exec").to_owned(),
        input: fields.map_or_else(|| json!({"command": "ls"}), |f| Value::Object(f.clone())),
    };
    // Names the CLI accepts stand for themselves; anything else is the event's default.
    let pick = |key: &str, known: &[&'static str]| -> &'static str {
        let given = text(key, known[0]);
        known
            .iter()
            .find(|k| **k == given)
            .copied()
            .unwrap_or(known[0])
    };
    match event {
        HookEvent::SessionStart => HookInput::SessionStart {
            source: pick("source", &["startup", "resume", "clear"]),
        },
        HookEvent::UserPromptSubmit => HookInput::UserPromptSubmit {
            prompt: text("prompt", "hello"),
        },
        HookEvent::PreToolUse => HookInput::PreToolUse { call: call() },
        HookEvent::PostToolUse => HookInput::PostToolUse {
            call: call(),
            result: nanocrab_schema::ToolResult::ok("call_sample", text("output", "(no output)")),
        },
        HookEvent::PreCompact => HookInput::PreCompact {
            trigger: pick("trigger", &["manual", "auto"]),
        },
        HookEvent::Stop => HookInput::Stop {
            stop_hook_active: false,
            last_message: text("last_assistant_message", "Done."),
        },
        HookEvent::SessionEnd => HookInput::SessionEnd {
            reason: pick("reason", &["other", "clear", "prompt_input_exit"]),
        },
    }
}
