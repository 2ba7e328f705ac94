//! Replies in the OpenAI Chat Completions wire format, shaped after the recorded streams in
//! `shared/fixtures/providers/openai/chat/` (`stream-text-usage.sse`,
//! `stream-parallel-tool-calls.sse`, `text.json`, `parallel-tool-calls.json`,
//! `stream-length-truncated.sse`, `stream-refusal.sse`, `refusal.json`) and, for reasoning,
//! DeepSeek's `reasoning_content` (`openai-compatible/deepseek-*`).

use serde_json::{Value, json};

use crate::reply::{ApiError, Part, Stop, Usage, has_tool_call, pieces};

const COMPLETION_ID: &str = "chatcmpl-mock";
const CREATED: u64 = 1_727_346_180;
const FINGERPRINT: &str = "fp_mock";

fn data(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

fn chunk(model: &str, choices: Value) -> Value {
    json!({"id": COMPLETION_ID, "object": "chat.completion.chunk", "created": CREATED,
           "model": model, "system_fingerprint": FINGERPRINT, "choices": choices})
}

fn delta(model: &str, delta: Value) -> String {
    data(&chunk(
        model,
        json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
    ))
}

/// A refusal finishes with `stop`, as in `refusal.json` and `stream-refusal.sse`.
fn finish_reason(parts: &[Part], stop: Stop) -> &'static str {
    match stop {
        Stop::Done | Stop::Refusal if has_tool_call(parts) => "tool_calls",
        Stop::Done | Stop::Refusal => "stop",
        Stop::MaxTokens => "length",
    }
}

/// OpenAI counts cached tokens inside `prompt_tokens`. `prompt_tokens_details` is left out
/// without a cache read, as in the recorded `stream-text-usage.sse`.
fn usage_json(usage: Usage) -> Value {
    let prompt = usage.input + usage.cache_read;
    let mut json = json!({"prompt_tokens": prompt, "completion_tokens": usage.output,
                          "total_tokens": prompt + usage.output});
    if usage.cache_read > 0 {
        json["prompt_tokens_details"] =
            json!({"cached_tokens": usage.cache_read, "audio_tokens": 0});
    }
    json
}

/// The SSE events of a streamed answer. The usage chunk (`choices: []`) comes only when the
/// request asked for it with `stream_options.include_usage`, as on the real API. With `fail`,
/// the parts are followed by an `event: error` and the stream stops there (no `[DONE]`).
pub(crate) fn stream(
    parts: &[Part],
    model: &str,
    usage: Option<Usage>,
    stop: Stop,
    fail: bool,
) -> Vec<String> {
    // The role comes first, with `content: ""` before text and `null` before anything else; a
    // refusal opens with `content: null, refusal: ""` and streams in `refusal`, not `content`.
    let (opening, text_field) = match (stop, parts.first()) {
        (Stop::Refusal, _) => (
            json!({"role": "assistant", "content": null, "refusal": ""}),
            "refusal",
        ),
        (Stop::Done | Stop::MaxTokens, Some(Part::Text(_))) => {
            (json!({"role": "assistant", "content": ""}), "content")
        }
        (Stop::Done | Stop::MaxTokens, Some(Part::Thinking(_) | Part::ToolCall { .. }) | None) => {
            (json!({"role": "assistant", "content": null}), "content")
        }
    };
    let mut events = vec![delta(model, opening)];
    let mut tool_index = 0;
    for part in parts {
        match part {
            Part::Thinking(thinking) => {
                for piece in pieces(thinking, 8) {
                    events.push(delta(
                        model,
                        json!({"content": null, "reasoning_content": piece}),
                    ));
                }
            }
            Part::Text(text) => {
                for piece in pieces(text, 8) {
                    events.push(delta(model, json!({ text_field: piece })));
                }
            }
            // The call's first chunk names it with empty arguments; the arguments follow in
            // several pieces under the same index.
            Part::ToolCall {
                id,
                name,
                raw_arguments,
            } => {
                events.push(delta(
                    model,
                    json!({"tool_calls": [{"index": tool_index, "id": id, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                ));
                for piece in pieces(raw_arguments, 10) {
                    events.push(delta(
                        model,
                        json!({"tool_calls": [{"index": tool_index,
                                               "function": {"arguments": piece}}]}),
                    ));
                }
                tool_index += 1;
            }
        }
    }
    if fail {
        events.push(format!(
            "event: error\ndata: {}\n\n",
            json!({"error": {"message": "The server is overloaded. Please try again later.",
                             "type": "server_error", "code": "overloaded", "status_code": 503}})
        ));
        return events;
    }
    events.push(data(&chunk(
        model,
        json!([{"index": 0, "delta": {}, "logprobs": null,
                "finish_reason": finish_reason(parts, stop)}]),
    )));
    if let Some(usage) = usage {
        let mut last = chunk(model, json!([]));
        last["usage"] = usage_json(usage);
        events.push(data(&last));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// A non-streamed answer.
pub(crate) fn completion(parts: &[Part], model: &str, usage: Usage, stop: Stop) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for part in parts {
        match part {
            Part::Thinking(thinking) => reasoning.push_str(thinking),
            Part::Text(piece) => text.push_str(piece),
            Part::ToolCall {
                id,
                name,
                raw_arguments,
            } => calls.push(json!({"id": id, "type": "function",
                                   "function": {"name": name, "arguments": raw_arguments}})),
        }
    }
    let text = if text.is_empty() {
        Value::Null
    } else {
        Value::from(text)
    };
    let (content, refusal) = match stop {
        Stop::Refusal => (Value::Null, text),
        Stop::Done | Stop::MaxTokens => (text, Value::Null),
    };
    let mut message = json!({"role": "assistant", "content": content, "refusal": refusal});
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::from(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::from(calls);
    }
    json!({"id": COMPLETION_ID, "object": "chat.completion", "created": CREATED, "model": model,
           "choices": [{"index": 0, "message": message, "logprobs": null,
                        "finish_reason": finish_reason(parts, stop)}],
           "usage": usage_json(usage), "system_fingerprint": FINGERPRINT})
}

/// Status and body of an HTTP error.
pub(crate) fn error(api_error: ApiError) -> (u16, Value) {
    let (status, kind, code, message) = match api_error {
        ApiError::BadRequest => (
            400,
            "invalid_request_error",
            Value::Null,
            "'messages' must contain at least one message.",
        ),
        ApiError::Unauthorized => (
            401,
            "invalid_request_error",
            json!("invalid_api_key"),
            "Incorrect API key provided: sk-test-********************rint. You can find your API key at https://platform.openai.com/account/api-keys.",
        ),
        ApiError::Forbidden => (
            403,
            "invalid_request_error",
            json!("unsupported_country_region_territory"),
            "Country, region, or territory not supported",
        ),
        ApiError::RateLimited => (
            429,
            "requests",
            json!("rate_limit_exceeded"),
            "Rate limit reached for requests",
        ),
        ApiError::ServerError => (
            500,
            "server_error",
            Value::Null,
            "The server had an error while processing your request. Sorry about that!",
        ),
        ApiError::Overloaded => (
            503,
            "server_error",
            json!("overloaded"),
            "The server is overloaded. Please try again later.",
        ),
    };
    (
        status,
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
}
