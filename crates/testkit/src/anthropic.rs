//! Replies in the Anthropic Messages wire format, shaped after the recorded streams in
//! `shared/fixtures/providers/anthropic/` (`stream-single-tool-call.sse`, `stream-thinking.sse`,
//! `stream-text.chunks.txt`, `text.json`, `thinking.json`).

use serde_json::{Value, json};

use crate::reply::{ApiError, Part, Stop, Usage, has_tool_call, pieces};

const MESSAGE_ID: &str = "msg_mock";
const SIGNATURE: &str = "sig_mock";

/// One SSE event with its `event:` line, which always equals the JSON `type`.
fn event(data: &Value) -> String {
    let kind = data["type"].as_str().unwrap_or_default();
    format!("event: {kind}\ndata: {data}\n\n")
}

fn stop_reason(parts: &[Part], stop: Stop) -> &'static str {
    match stop {
        Stop::Done if has_tool_call(parts) => "tool_use",
        Stop::Done => "end_turn",
        Stop::MaxTokens => "max_tokens",
        Stop::Refusal => "refusal",
    }
}

/// `input_tokens` is the uncached part only; cache reads and writes are counted beside it.
fn usage_json(usage: Usage, output_tokens: u64) -> Value {
    json!({"input_tokens": usage.input, "cache_creation_input_tokens": usage.cache_write,
           "cache_read_input_tokens": usage.cache_read, "output_tokens": output_tokens})
}

/// The SSE events of a streamed answer. With `fail`, the blocks are followed by an
/// `overloaded_error` event and the stream stops there.
pub(crate) fn stream(
    parts: &[Part],
    model: &str,
    usage: Usage,
    stop: Stop,
    fail: bool,
) -> Vec<String> {
    let mut events = vec![event(&json!({"type": "message_start", "message": {
        "model": model, "id": MESSAGE_ID, "type": "message", "role": "assistant", "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": usage_json(usage, 1)}}))];
    for (index, part) in parts.iter().enumerate() {
        let (block, deltas): (Value, Vec<Value>) = match part {
            Part::Thinking(thinking) => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                pieces(thinking, 8)
                    .into_iter()
                    .map(|t| json!({"type": "thinking_delta", "thinking": t}))
                    .chain([json!({"type": "signature_delta", "signature": SIGNATURE})])
                    .collect(),
            ),
            Part::Text(text) => (
                json!({"type": "text", "text": ""}),
                pieces(text, 8)
                    .into_iter()
                    .map(|t| json!({"type": "text_delta", "text": t}))
                    .collect(),
            ),
            // Real streams open tool input with an empty `partial_json` before the pieces.
            Part::ToolCall {
                id,
                name,
                raw_arguments,
            } => (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                std::iter::once(String::new())
                    .chain(pieces(raw_arguments, 10))
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ),
        };
        events.push(event(
            &json!({"type": "content_block_start", "index": index,
                                   "content_block": block}),
        ));
        if index == 0 {
            events.push(event(&json!({"type": "ping"})));
        }
        for delta in deltas {
            events.push(event(
                &json!({"type": "content_block_delta", "index": index,
                                       "delta": delta}),
            ));
        }
        events.push(event(
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    if fail {
        events.push(event(&stream_error_body()));
        return events;
    }
    events.push(event(&json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(parts, stop), "stop_sequence": null},
        "usage": {"output_tokens": usage.output}})));
    events.push(event(&json!({"type": "message_stop"})));
    events
}

/// The in-stream error quoted in the fixtures README.
fn stream_error_body() -> Value {
    json!({"type": "error",
           "error": {"details": null, "type": "overloaded_error", "message": "Overloaded"},
           "request_id": "req_mock"})
}

/// A non-streamed answer.
pub(crate) fn message(parts: &[Part], model: &str, usage: Usage, stop: Stop) -> Value {
    let content: Vec<Value> = parts
        .iter()
        .map(|part| match part {
            Part::Thinking(thinking) => {
                json!({"type": "thinking", "thinking": thinking, "signature": SIGNATURE})
            }
            Part::Text(text) => json!({"type": "text", "text": text}),
            Part::ToolCall {
                id,
                name,
                raw_arguments,
            } => {
                let input = serde_json::from_str::<Value>(raw_arguments)
                    .unwrap_or_else(|_| Value::from(raw_arguments.as_str()));
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        })
        .collect();
    json!({"model": model, "id": MESSAGE_ID, "type": "message", "role": "assistant",
           "content": content, "stop_reason": stop_reason(parts, stop), "stop_sequence": null,
           "usage": usage_json(usage, usage.output)})
}

/// Status and body of an HTTP error.
pub(crate) fn error(api_error: ApiError) -> (u16, Value) {
    let (status, kind, message) = match api_error {
        ApiError::BadRequest => (
            400,
            "invalid_request_error",
            "messages: at least one message is required",
        ),
        ApiError::Unauthorized => (401, "authentication_error", "invalid x-api-key"),
        ApiError::Forbidden => (
            403,
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        ApiError::RateLimited => (
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
        ),
        ApiError::ServerError => (500, "api_error", "Internal server error"),
        ApiError::Overloaded => (529, "overloaded_error", "Overloaded"),
    };
    (
        status,
        json!({"type": "error", "error": {"type": kind, "message": message},
               "request_id": "req_mock"}),
    )
}
