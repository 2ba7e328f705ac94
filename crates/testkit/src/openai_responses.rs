//! Replies in the OpenAI Responses API wire format (`POST /v1/responses`), shaped after the
//! recorded streams in `shared/fixtures/providers/openai/responses/`. Events follow the newer
//! recordings (`stream-reasoning-encrypted.chunks.txt`, `stream-error-insufficient-quota.chunks.txt`):
//! `type` then `sequence_number` first in every event, `logprobs: []` on text, the response
//! object with all its current fields; the older `stream-text.sse` and
//! `stream-function-call.sse` show the same event sequence without those. The random
//! `obfuscation` padding of the recorded deltas is left out (clients must not rely on it, and
//! the real API drops it on `stream_options.include_obfuscation: false`).

use serde_json::{Map, Value, json};

use crate::reply::{Part, Stop, Usage, pieces};

const RESPONSE_ID: &str = "resp_mock";
const CREATED: u64 = 1_765_552_659;

/// One SSE event: the `event:` line equals the JSON `type`, which comes first, followed by the
/// event's place in the stream.
fn event(sequence_number: usize, kind: &str, fields: Value) -> String {
    let mut data = Map::new();
    data.insert("type".into(), Value::from(kind));
    data.insert("sequence_number".into(), Value::from(sequence_number));
    if let Value::Object(fields) = fields {
        data.extend(fields);
    }
    format!("event: {kind}\ndata: {}\n\n", Value::Object(data))
}

/// Cached tokens are counted inside `input_tokens`. `reasoning_tokens` stays 0, as in every
/// recorded stream, even those with reasoning.
fn usage_json(usage: Usage) -> Value {
    let input = usage.input + usage.cache_read;
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": usage.cache_read},
           "output_tokens": usage.output, "output_tokens_details": {"reasoning_tokens": 0},
           "total_tokens": input + usage.output})
}

/// The response object carried by the `response.*` events and by a non-stream answer. The
/// settings a client may check are echoed from the request, as the real API does.
fn response_object(request: &Value, status: &str, output: Vec<Value>, usage: Value) -> Value {
    let echo = |key: &str, default: Value| request.get(key).cloned().unwrap_or(default);
    json!({"id": RESPONSE_ID, "object": "response", "created_at": CREATED, "status": status,
           "background": false, "error": null, "incomplete_details": null,
           "instructions": echo("instructions", Value::Null),
           "max_output_tokens": echo("max_output_tokens", Value::Null), "max_tool_calls": null,
           "model": request["model"].as_str().unwrap_or("mock-model"), "output": output,
           "parallel_tool_calls": echo("parallel_tool_calls", Value::Bool(true)),
           "previous_response_id": echo("previous_response_id", Value::Null),
           "prompt_cache_key": echo("prompt_cache_key", Value::Null),
           "prompt_cache_retention": null,
           "reasoning": {"effort": request["reasoning"]["effort"],
                         "summary": request["reasoning"]["summary"]},
           "safety_identifier": null, "service_tier": "default",
           "store": echo("store", Value::Bool(true)), "temperature": 1,
           "text": {"format": {"type": "text"}, "verbosity": "medium"},
           "tool_choice": echo("tool_choice", Value::from("auto")),
           "tools": echo("tools", json!([])), "top_logprobs": 0, "top_p": 1,
           "truncation": "disabled", "usage": usage, "user": null, "metadata": {}})
}

/// A message's content part: the answer as `output_text`, or a refusal.
fn content_part(stop: Stop, text: &str) -> Value {
    match stop {
        Stop::Refusal => json!({"type": "refusal", "refusal": text}),
        Stop::Done | Stop::MaxTokens => {
            json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
        }
    }
}

/// The output items as `response.output_item.done` and the final `output` carry them, one per
/// part. Reasoning carries `encrypted_content` only when the request asked for it with
/// `"include": ["reasoning.encrypted_content"]`, as the real API does; the mock's is
/// deterministic (a Fernet-like prefix, then the thinking in hex) so a test can check that a
/// client sends it back unchanged.
fn finished_items(parts: &[Part], request: &Value, stop: Stop) -> Vec<Value> {
    let encrypted = request["include"]
        .as_array()
        .is_some_and(|include| include.iter().any(|v| v == "reasoning.encrypted_content"));
    parts
        .iter()
        .enumerate()
        .map(|(index, part)| {
            // The token limit cuts the item being written, the last one; the others finished.
            let status = match stop {
                Stop::MaxTokens if index + 1 == parts.len() => "incomplete",
                Stop::MaxTokens | Stop::Done | Stop::Refusal => "completed",
            };
            match part {
                Part::Thinking(thinking) => {
                    let mut item = json!({"id": format!("rs_mock_{index}"), "type": "reasoning"});
                    if encrypted {
                        let hex: String = thinking.bytes().map(|b| format!("{b:02x}")).collect();
                        item["encrypted_content"] = Value::from(format!("gAAAAABmock{hex}"));
                    }
                    item["summary"] = json!([{"type": "summary_text", "text": thinking}]);
                    item
                }
                Part::Text(text) => json!({"id": format!("msg_mock_{index}"), "type": "message",
                    "status": status, "content": [content_part(stop, text)], "role": "assistant"}),
                Part::ToolCall {
                    id,
                    name,
                    raw_arguments,
                } => json!({"id": format!("fc_mock_{index}"), "type": "function_call",
                    "status": status, "arguments": raw_arguments, "call_id": id, "name": name}),
            }
        })
        .collect()
}

/// The SSE events of a streamed answer: `response.created`, `response.in_progress`, each item
/// added, streamed and done, then `response.completed` (or `response.incomplete` when cut by
/// the token limit). With `fail`, the items are followed by an `error` event and
/// `response.failed`, as in `stream-error-insufficient-quota.chunks.txt`.
pub(crate) fn stream(
    parts: &[Part],
    request: &Value,
    usage: Usage,
    stop: Stop,
    fail: bool,
) -> Vec<String> {
    let started = response_object(request, "in_progress", Vec::new(), Value::Null);
    let mut events = vec![event(0, "response.created", json!({"response": started}))];
    events.push(event(
        events.len(),
        "response.in_progress",
        json!({"response": started}),
    ));
    let items = finished_items(parts, request, stop);
    for (index, (part, done)) in parts.iter().zip(items).enumerate() {
        let item_id = done["id"].clone();
        // The item is announced as it will end, minus what is still to be streamed.
        let mut added = done.clone();
        match part {
            Part::Thinking(thinking) => {
                added["summary"] = json!([]);
                events.push(event(
                    events.len(),
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                ));
                events.push(event(
                    events.len(),
                    "response.reasoning_summary_part.added",
                    json!({"item_id": item_id, "output_index": index, "summary_index": 0,
                           "part": {"type": "summary_text", "text": ""}}),
                ));
                for piece in pieces(thinking, 8) {
                    events.push(event(
                        events.len(),
                        "response.reasoning_summary_text.delta",
                        json!({"item_id": item_id, "output_index": index, "summary_index": 0,
                               "delta": piece}),
                    ));
                }
                events.push(event(
                    events.len(),
                    "response.reasoning_summary_text.done",
                    json!({"item_id": item_id, "output_index": index, "summary_index": 0,
                           "text": thinking}),
                ));
                events.push(event(
                    events.len(),
                    "response.reasoning_summary_part.done",
                    json!({"item_id": item_id, "output_index": index, "summary_index": 0,
                           "part": {"type": "summary_text", "text": thinking}}),
                ));
            }
            Part::Text(text) => {
                added["status"] = Value::from("in_progress");
                added["content"] = json!([]);
                events.push(event(
                    events.len(),
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                ));
                events.push(event(
                    events.len(),
                    "response.content_part.added",
                    json!({"item_id": item_id, "output_index": index, "content_index": 0,
                           "part": content_part(stop, "")}),
                ));
                match stop {
                    Stop::Refusal => {
                        for piece in pieces(text, 8) {
                            events.push(event(
                                events.len(),
                                "response.refusal.delta",
                                json!({"item_id": item_id, "output_index": index,
                                       "content_index": 0, "delta": piece}),
                            ));
                        }
                        events.push(event(
                            events.len(),
                            "response.refusal.done",
                            json!({"item_id": item_id, "output_index": index,
                                   "content_index": 0, "refusal": text}),
                        ));
                    }
                    Stop::Done | Stop::MaxTokens => {
                        for piece in pieces(text, 8) {
                            events.push(event(
                                events.len(),
                                "response.output_text.delta",
                                json!({"item_id": item_id, "output_index": index,
                                       "content_index": 0, "delta": piece, "logprobs": []}),
                            ));
                        }
                        events.push(event(
                            events.len(),
                            "response.output_text.done",
                            json!({"item_id": item_id, "output_index": index,
                                   "content_index": 0, "text": text, "logprobs": []}),
                        ));
                    }
                }
                events.push(event(
                    events.len(),
                    "response.content_part.done",
                    json!({"item_id": item_id, "output_index": index, "content_index": 0,
                           "part": content_part(stop, text)}),
                ));
            }
            Part::ToolCall { raw_arguments, .. } => {
                added["status"] = Value::from("in_progress");
                added["arguments"] = Value::from("");
                events.push(event(
                    events.len(),
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                ));
                for piece in pieces(raw_arguments, 10) {
                    events.push(event(
                        events.len(),
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": index, "delta": piece}),
                    ));
                }
                events.push(event(
                    events.len(),
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": index,
                           "arguments": raw_arguments}),
                ));
            }
        }
        events.push(event(
            events.len(),
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        ));
    }
    if fail {
        // The recorded failure nests the error under `error` in the event and keeps only
        // `code` and `message` in the failed response, whose output and usage stay empty.
        let message = "The server had an error while processing your request. Sorry about that!";
        events.push(event(
            events.len(),
            "error",
            json!({"error": {"type": "server_error", "code": "server_error",
                             "message": message, "param": null}}),
        ));
        let mut failed = response_object(request, "failed", Vec::new(), Value::Null);
        failed["error"] = json!({"code": "server_error", "message": message});
        events.push(event(
            events.len(),
            "response.failed",
            json!({"response": failed}),
        ));
        return events;
    }
    let kind = match stop {
        Stop::Done | Stop::Refusal => "response.completed",
        Stop::MaxTokens => "response.incomplete",
    };
    events.push(event(
        events.len(),
        kind,
        json!({"response": response(parts, request, usage, stop)}),
    ));
    events
}

/// The whole response object: a non-stream answer, and the last event of a stream.
pub(crate) fn response(parts: &[Part], request: &Value, usage: Usage, stop: Stop) -> Value {
    let (status, incomplete_details) = match stop {
        Stop::Done | Stop::Refusal => ("completed", Value::Null),
        Stop::MaxTokens => ("incomplete", json!({"reason": "max_output_tokens"})),
    };
    let mut body = response_object(
        request,
        status,
        finished_items(parts, request, stop),
        usage_json(usage),
    );
    body["incomplete_details"] = incomplete_details;
    body
}
