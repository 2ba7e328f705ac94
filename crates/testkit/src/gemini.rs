//! Replies in Gemini's `generateContent` / `streamGenerateContent?alt=sse` wire format, shaped
//! after `shared/fixtures/providers/gemini/` (`stream-text.sse`, `stream-tool-call.chunks.txt`,
//! `stream-thinking-function-call.sse`, `tool-call.json`, `error-400-api-key-invalid.json`):
//! `\r\n` line breaks, the finish reason and usage on the last chunk, thoughts as
//! `thought: true` text parts, function calls whole (Gemini never streams broken JSON).

use serde_json::{Value, json};

use crate::reply::{ApiError, Part, Usage, pieces};

fn data(chunk: &Value) -> String {
    format!("data: {chunk}\r\n\r\n")
}

fn usage_json(usage: Usage) -> Value {
    json!({"promptTokenCount": usage.input, "candidatesTokenCount": usage.output,
           "totalTokenCount": usage.input + usage.output})
}

fn part_json(part: &Part) -> Value {
    match part {
        Part::Thinking(text) => json!({"text": text, "thought": true}),
        Part::Text(text) => json!({"text": text}),
        Part::ToolCall {
            name,
            raw_arguments,
            ..
        } => json!({"functionCall": {
            "name": name,
            "args": serde_json::from_str::<Value>(raw_arguments).unwrap_or_else(|_| json!({})),
        }}),
    }
}

fn chunk(parts: Vec<Value>, model: &str) -> Value {
    json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
           "modelVersion": model, "responseId": "mock-response"})
}

pub(crate) fn stream(parts: &[Part], model: &str, usage: Usage, fail_midway: bool) -> Vec<String> {
    let mut events = Vec::new();
    for part in parts {
        match part {
            Part::Thinking(text) | Part::Text(text) => {
                let thought = matches!(part, Part::Thinking(_));
                for piece in pieces(text, 8) {
                    let mut part = json!({"text": piece});
                    if thought {
                        part["thought"] = Value::Bool(true);
                    }
                    events.push(data(&chunk(vec![part], model)));
                }
            }
            Part::ToolCall { .. } => events.push(data(&chunk(vec![part_json(part)], model))),
        }
    }
    if fail_midway {
        events.push(data(&json!({"error": {"code": 503,
            "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}})));
        return events;
    }
    let mut last = chunk(vec![json!({"text": ""})], model);
    last["candidates"][0]["finishReason"] = Value::from("STOP");
    last["usageMetadata"] = usage_json(usage);
    events.push(data(&last));
    events
}

pub(crate) fn response(parts: &[Part], model: &str, usage: Usage) -> Value {
    let mut body = chunk(parts.iter().map(part_json).collect(), model);
    body["candidates"][0]["finishReason"] = Value::from("STOP");
    body["usageMetadata"] = usage_json(usage);
    body
}

/// Gemini answers a bad key with 400 `API_KEY_INVALID`, as recorded, not 401.
pub(crate) fn error(api_error: ApiError) -> (u16, Value) {
    let (code, status, message) = match api_error {
        ApiError::BadRequest => (400, "INVALID_ARGUMENT", "Invalid JSON payload received."),
        ApiError::Unauthorized => (
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
        ),
        ApiError::Forbidden => (
            403,
            "PERMISSION_DENIED",
            "The caller does not have permission",
        ),
        ApiError::RateLimited => (
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
        ),
        ApiError::ServerError => (500, "INTERNAL", "An internal error has occurred."),
        ApiError::Overloaded => (
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
        ),
    };
    (
        code,
        json!({"error": {"code": code, "message": message, "status": status}}),
    )
}
