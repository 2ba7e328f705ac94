//! Scripted replies and how each is rendered in each provider's real wire format (shapes taken
//! from the recorded streams in `shared/fixtures/providers/`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::{Protocol, chunks_to_sse, fixture_bytes};

/// What the mock answers to one request. Builders cover the common cases; the same reply is
/// rendered as Anthropic Messages or OpenAI Chat Completions depending on the endpoint hit,
/// streaming or not depending on the request's `"stream"`.
#[derive(Debug, Clone)]
pub struct Reply {
    body: Body,
    delay: Duration,
    headers: Vec<(String, String)>,
    usage: (u64, u64),
}

#[derive(Debug, Clone)]
enum Body {
    Answer(Vec<Part>),
    Error { status: u16, kind: ErrorKind },
    Status { status: u16, body: Value },
    Fixture(String),
}

#[derive(Debug, Clone)]
enum Part {
    Text(String),
    ToolCall {
        id: String,
        name: String,
        raw_arguments: String,
    },
}

#[derive(Debug, Clone, Copy)]
enum ErrorKind {
    Unauthorized,
    Overloaded,
    RateLimited,
}

impl Reply {
    fn answer(parts: Vec<Part>) -> Self {
        Self {
            body: Body::Answer(parts),
            delay: Duration::ZERO,
            headers: Vec::new(),
            usage: (12, 7),
        }
    }

    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self::answer(vec![Part::Text(text.into())])
    }

    /// One tool call with JSON arguments.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::tool_calls(vec![(id.into(), name.into(), input)])
    }

    /// Parallel tool calls in one answer.
    pub fn tool_calls(calls: Vec<(String, String, Value)>) -> Self {
        Self::answer(
            calls
                .into_iter()
                .map(|(id, name, input)| Part::ToolCall {
                    id,
                    name,
                    raw_arguments: input.to_string(),
                })
                .collect(),
        )
    }

    /// Text, then a tool call, in one answer.
    pub fn text_then_tool_call(
        text: impl Into<String>,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Self {
        Self::answer(vec![
            Part::Text(text.into()),
            Part::ToolCall {
                id: id.into(),
                name: name.into(),
                raw_arguments: input.to_string(),
            },
        ])
    }

    /// A tool call whose arguments are sent exactly as given, e.g. broken JSON.
    pub fn tool_call_raw(
        id: impl Into<String>,
        name: impl Into<String>,
        raw_arguments: impl Into<String>,
    ) -> Self {
        Self::answer(vec![Part::ToolCall {
            id: id.into(),
            name: name.into(),
            raw_arguments: raw_arguments.into(),
        }])
    }

    /// 401 with the provider's own error body.
    pub fn unauthorized() -> Self {
        Self::error(401, ErrorKind::Unauthorized)
    }

    /// Anthropic's 529 `overloaded_error` (OpenAI-style endpoints get a 503).
    pub fn overloaded() -> Self {
        Self::error(529, ErrorKind::Overloaded)
    }

    /// 429 with the provider's own error body; add `retry-after` with [`Reply::with_header`].
    pub fn rate_limited() -> Self {
        Self::error(429, ErrorKind::RateLimited)
    }

    fn error(status: u16, kind: ErrorKind) -> Self {
        Self {
            body: Body::Error { status, kind },
            ..Self::text("")
        }
    }

    /// Any status with a JSON body of your choice.
    pub fn status(status: u16, body: Value) -> Self {
        Self {
            body: Body::Status { status, body },
            ..Self::text("")
        }
    }

    /// Replays a recorded fixture (path relative to `shared/fixtures/`) byte for byte; a
    /// `.chunks.txt` file is framed as SSE for the protocol of the endpoint hit.
    pub fn fixture(relative_path: impl Into<String>) -> Self {
        Self {
            body: Body::Fixture(relative_path.into()),
            ..Self::text("")
        }
    }

    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = (input_tokens, output_tokens);
        self
    }

    pub(crate) fn delay(&self) -> Duration {
        self.delay
    }

    pub(crate) fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// Status, content type and body for a request of `protocol`.
    pub(crate) fn render(&self, protocol: Protocol, stream: bool, model: &str) -> Rendered {
        match &self.body {
            Body::Answer(parts) if stream => Rendered {
                status: 200,
                content_type: "text/event-stream",
                body: match protocol {
                    Protocol::Anthropic => anthropic_stream(parts, model, self.usage),
                    Protocol::OpenAiChat | Protocol::Gemini => {
                        openai_stream(parts, model, self.usage)
                    }
                }
                .into_bytes(),
            },
            Body::Answer(parts) => Rendered::json(
                200,
                &match protocol {
                    Protocol::Anthropic => anthropic_message(parts, model, self.usage),
                    Protocol::OpenAiChat | Protocol::Gemini => {
                        openai_completion(parts, model, self.usage)
                    }
                },
            ),
            Body::Error { status, kind } => error_body(protocol, *status, *kind),
            Body::Status { status, body } => Rendered::json(*status, body),
            Body::Fixture(path) => {
                let bytes = fixture_bytes(path);
                if path.ends_with(".json") {
                    Rendered {
                        status: 200,
                        content_type: "application/json",
                        body: bytes,
                    }
                } else if path.ends_with(".chunks.txt") {
                    Rendered {
                        status: 200,
                        content_type: "text/event-stream",
                        body: chunks_to_sse(protocol, &String::from_utf8_lossy(&bytes))
                            .into_bytes(),
                    }
                } else {
                    Rendered {
                        status: 200,
                        content_type: "text/event-stream",
                        body: bytes,
                    }
                }
            }
        }
    }
}

pub(crate) struct Rendered {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Rendered {
    fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: body.to_string().into_bytes(),
        }
    }
}

/// Pieces of `text` a few characters long, as real servers stream them.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn sse(out: &mut String, event: Option<&str>, data: &Value) {
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

fn has_tool_call(parts: &[Part]) -> bool {
    parts.iter().any(|p| matches!(p, Part::ToolCall { .. }))
}

fn anthropic_stream(parts: &[Part], model: &str, (input, output): (u64, u64)) -> String {
    let mut out = String::new();
    sse(
        &mut out,
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1}}}),
    );
    for (index, part) in parts.iter().enumerate() {
        let (block, deltas): (Value, Vec<Value>) = match part {
            Part::Text(text) => (
                json!({"type": "text", "text": ""}),
                pieces(text, 8)
                    .into_iter()
                    .map(|t| json!({"type": "text_delta", "text": t}))
                    .collect(),
            ),
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
        sse(
            &mut out,
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        if index == 0 {
            sse(&mut out, Some("ping"), &json!({"type": "ping"}));
        }
        for delta in deltas {
            sse(
                &mut out,
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            );
        }
        sse(
            &mut out,
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
    let stop = if has_tool_call(parts) {
        "tool_use"
    } else {
        "end_turn"
    };
    sse(
        &mut out,
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": output}}),
    );
    sse(
        &mut out,
        Some("message_stop"),
        &json!({"type": "message_stop"}),
    );
    out
}

fn anthropic_message(parts: &[Part], model: &str, (input, output): (u64, u64)) -> Value {
    let content: Vec<Value> = parts
        .iter()
        .map(|part| match part {
            Part::Text(text) => json!({"type": "text", "text": text}),
            Part::ToolCall {
                id,
                name,
                raw_arguments,
            } => json!({"type": "tool_use", "id": id, "name": name,
                        "input": serde_json::from_str::<Value>(raw_arguments).unwrap_or(json!({}))}),
        })
        .collect();
    json!({"id": "msg_mock", "type": "message", "role": "assistant", "model": model,
           "content": content,
           "stop_reason": if has_tool_call(parts) { "tool_use" } else { "end_turn" },
           "stop_sequence": null,
           "usage": {"input_tokens": input, "output_tokens": output}})
}

fn openai_chunk(model: &str, choices: Value) -> Value {
    json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_727_346_180,
           "model": model, "choices": choices})
}

fn openai_stream(parts: &[Part], model: &str, (input, output): (u64, u64)) -> String {
    let mut out = String::new();
    let delta = |delta: Value| json!([{"index": 0, "delta": delta, "finish_reason": null}]);
    sse(
        &mut out,
        None,
        &openai_chunk(model, delta(json!({"role": "assistant", "content": ""}))),
    );
    let mut tool_index = 0;
    for part in parts {
        match part {
            Part::Text(text) => {
                for piece in pieces(text, 8) {
                    sse(
                        &mut out,
                        None,
                        &openai_chunk(model, delta(json!({"content": piece}))),
                    );
                }
            }
            Part::ToolCall {
                id,
                name,
                raw_arguments,
            } => {
                sse(
                    &mut out,
                    None,
                    &openai_chunk(
                        model,
                        delta(json!({"tool_calls": [{"index": tool_index, "id": id,
                            "type": "function", "function": {"name": name, "arguments": ""}}]})),
                    ),
                );
                for piece in pieces(raw_arguments, 10) {
                    sse(
                        &mut out,
                        None,
                        &openai_chunk(
                            model,
                            delta(json!({"tool_calls": [{"index": tool_index,
                                "function": {"arguments": piece}}]})),
                        ),
                    );
                }
                tool_index += 1;
            }
        }
    }
    let finish = if has_tool_call(parts) {
        "tool_calls"
    } else {
        "stop"
    };
    sse(
        &mut out,
        None,
        &openai_chunk(
            model,
            json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
        ),
    );
    let mut usage = openai_chunk(model, json!([]));
    usage["usage"] = json!({"prompt_tokens": input, "completion_tokens": output,
                            "total_tokens": input + output});
    sse(&mut out, None, &usage);
    out.push_str("data: [DONE]\n\n");
    out
}

fn openai_completion(parts: &[Part], model: &str, (input, output): (u64, u64)) -> Value {
    let text: String = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(text) => Some(text.as_str()),
            Part::ToolCall { .. } => None,
        })
        .collect();
    let calls: Vec<Value> = parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall {
                id,
                name,
                raw_arguments,
            } => Some(json!({"id": id, "type": "function",
                             "function": {"name": name, "arguments": raw_arguments}})),
            Part::Text(_) => None,
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::from(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::from(calls);
    }
    json!({"id": "chatcmpl-mock", "object": "chat.completion", "created": 1_727_346_180,
           "model": model,
           "choices": [{"index": 0, "message": message,
                        "finish_reason": if has_tool_call(parts) { "tool_calls" } else { "stop" }}],
           "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}})
}

/// Error bodies in each provider's envelope (Anthropic `{"type":"error","error":{..}}` as in
/// `anthropic/error-400-invalid-request.json`, OpenAI `{"error":{..}}` as in
/// `openai/error-429-insufficient-quota.json`). The OpenAI 401 echoes a masked key, as the
/// real one does, so tests can check it is never shown.
fn error_body(protocol: Protocol, status: u16, kind: ErrorKind) -> Rendered {
    match protocol {
        Protocol::Anthropic => {
            let (kind, message) = match kind {
                ErrorKind::Unauthorized => ("authentication_error", "invalid x-api-key"),
                ErrorKind::Overloaded => ("overloaded_error", "Overloaded"),
                ErrorKind::RateLimited => (
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit",
                ),
            };
            Rendered::json(
                status,
                &json!({"type": "error", "error": {"type": kind, "message": message},
                        "request_id": "req_mock"}),
            )
        }
        Protocol::OpenAiChat | Protocol::Gemini => {
            let (status, kind, code, message) = match kind {
                ErrorKind::Unauthorized => (
                    401,
                    "invalid_request_error",
                    "invalid_api_key",
                    "Incorrect API key provided: sk-test-********************rint. You can find your API key at https://platform.openai.com/account/api-keys.",
                ),
                ErrorKind::Overloaded => (
                    503,
                    "server_error",
                    "overloaded",
                    "The server is overloaded. Please try again later.",
                ),
                ErrorKind::RateLimited => (
                    429,
                    "requests",
                    "rate_limit_exceeded",
                    "Rate limit reached for requests",
                ),
            };
            Rendered::json(
                status,
                &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
            )
        }
    }
}
