//! Tool calls of a local model, in the Hermes format its chat template teaches it (Qwen 2.5,
//! SmolLM2 1.7B, Hermes): each call a JSON object `{"name": ..., "arguments": {...}}` (or a
//! list of them) between `<tool_call>` and `</tool_call>` in the answer; results go back
//! between `<tool_response>` and `</tool_response>`.

use nanocrab_schema::{ToolCall, ToolDef};
use serde_json::{Value, json};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// The tools as the chat template takes them: OpenAI-style function definitions.
pub(crate) fn definitions(tools: &[ToolDef]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            }})
        })
        .collect()
}

/// An earlier call, written back into the assistant's turn as the model wrote it.
pub(crate) fn call_text(call: &ToolCall) -> String {
    format!(
        "{OPEN}\n{}\n{CLOSE}",
        json!({"name": call.name, "arguments": call.input})
    )
}

pub(crate) fn response_text(content: &str) -> String {
    format!("<tool_response>\n{content}\n</tool_response>")
}

/// The answer's text outside the calls, and the calls; `id_prefix` makes the calls' ids
/// (`<prefix>-1`, ...). A block that is not a call (no name, broken JSON) stays in the text,
/// where the user sees what the model meant.
pub(crate) fn split(text: &str, id_prefix: &str) -> (String, Vec<ToolCall>) {
    let mut prose = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        prose.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let (body, next) = match after.find(CLOSE) {
            Some(end) => (&after[..end], &after[end + CLOSE.len()..]),
            // Cut off by the token limit or the end of turn: what is there may still parse.
            None => (after, ""),
        };
        let parsed: Option<Vec<(String, Value)>> = serde_json::from_str::<Value>(body.trim())
            .ok()
            .and_then(|value| match value {
                Value::Array(items) => items.iter().map(named_call).collect(),
                other => named_call(&other).map(|call| vec![call]),
            });
        match parsed {
            Some(found) => {
                for (name, input) in found {
                    calls.push(ToolCall {
                        id: format!("{id_prefix}-{}", calls.len() + 1),
                        name,
                        input,
                    });
                }
            }
            None => prose.push_str(&rest[start..rest.len() - next.len()]),
        }
        rest = next;
    }
    prose.push_str(rest);
    (prose.trim().to_owned(), calls)
}

/// `{"name": ..., "arguments": {...}}`; arguments given as a JSON string are read too.
fn named_call(value: &Value) -> Option<(String, Value)> {
    let name = value.get("name")?.as_str()?.to_owned();
    let input = match value.get("arguments").or_else(|| value.get("parameters")) {
        Some(Value::String(text)) => serde_json::from_str(text).ok()?,
        Some(arguments @ Value::Object(_)) => arguments.clone(),
        Some(_) => return None,
        None => json!({}),
    };
    Some((name, input))
}

/// What of a streamed answer may be shown at once: everything before a tool call, and
/// nothing that could be the start of one until it is clear that it is not.
#[derive(Debug, Default)]
pub(crate) struct Visible {
    held: String,
    in_call: bool,
}

impl Visible {
    pub(crate) fn push(&mut self, piece: &str) -> Option<String> {
        if self.in_call {
            return None;
        }
        self.held.push_str(piece);
        if let Some(start) = self.held.find(OPEN) {
            self.in_call = true;
            let shown: String = self.held.drain(..start).collect();
            return (!shown.is_empty()).then_some(shown);
        }
        // Keep the longest end of the text that `<tool_call>` begins with.
        let keep = (1..OPEN.len())
            .rev()
            .find(|&n| self.held.ends_with(&OPEN[..n]))
            .unwrap_or(0);
        let shown: String = self.held.drain(..self.held.len() - keep).collect();
        (!shown.is_empty()).then_some(shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn call(id: &str, name: &str, input: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            input,
        }
    }

    #[test]
    fn calls_are_taken_out_of_the_text_in_either_form() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.md\"}}\n</tool_call>\n<tool_call>[{\"name\": \"list_dir\", \"arguments\": \"{\\\"path\\\": \\\".\\\"}\"}, {\"name\": \"exec\"}]</tool_call>";
        assert_eq!(
            split(text, "c"),
            (
                "Let me look.".to_owned(),
                vec![
                    call("c-1", "read_file", json!({"path": "a.md"})),
                    call("c-2", "list_dir", json!({"path": "."})),
                    call("c-3", "exec", json!({})),
                ]
            )
        );
    }

    #[test]
    fn a_block_that_is_not_a_call_stays_text_and_an_unclosed_one_still_counts() {
        assert_eq!(
            split("<tool_call>not json</tool_call> done", "c"),
            (
                "<tool_call>not json</tool_call> done".to_owned(),
                Vec::new()
            )
        );
        assert_eq!(
            split(
                "<tool_call>{\"name\": \"exec\", \"arguments\": {\"command\": \"ls\"}}",
                "c"
            ),
            (
                String::new(),
                vec![call("c-1", "exec", json!({"command": "ls"}))]
            )
        );
    }

    #[test]
    fn streaming_holds_back_what_may_begin_a_call_and_shows_nothing_after_one() {
        let mut visible = Visible::default();
        let shown: Vec<Option<String>> = ["Sure", " <to", "day", " is <tool", "_call>{", "\"x\""]
            .iter()
            .map(|piece| visible.push(piece))
            .collect();
        assert_eq!(
            shown,
            vec![
                Some("Sure".to_owned()),
                Some(" ".to_owned()),
                Some("<today".to_owned()),
                Some(" is ".to_owned()),
                None,
                None,
            ]
        );
    }

    #[test]
    fn earlier_calls_and_results_are_written_back_in_the_same_format() {
        assert_eq!(
            call_text(&call("1", "exec", json!({"command": "ls"}))),
            "<tool_call>\n{\"name\":\"exec\",\"arguments\":{\"command\":\"ls\"}}\n</tool_call>"
        );
        assert_eq!(
            response_text("a.md"),
            "<tool_response>\na.md\n</tool_response>"
        );
    }
}
