//! Replies in Gemini's `generateContent` / `streamGenerateContent?alt=sse` wire format, shaped
//! after `shared/fixtures/providers/gemini/` (`stream-text.sse`, `stream-tool-call.chunks.txt`,
//! `stream-thinking-function-call.sse`, `tool-call.json`, `error-400-api-key-invalid.json`,
//! `max-tokens.json`, `safety-blocked-candidate.json`): `\r\n` line breaks, the finish reason
//! and usage on the last chunk, thoughts as `thought: true` text parts, function calls whole
//! (Gemini never streams broken JSON).

use serde_json::{Value, json};

use crate::reply::{ApiError, Part, Stop, Usage, pieces};

fn data(chunk: &Value) -> String {
    format!("data: {chunk}\r\n\r\n")
}

/// Cached tokens are counted inside `promptTokenCount`; `cachedContentTokenCount` is only
/// there when some were read, as Gemini leaves out zero counts.
fn usage_json(usage: Usage) -> Value {
    let prompt = usage.input + usage.cache_read;
    let mut json = json!({"promptTokenCount": prompt, "candidatesTokenCount": usage.output,
                          "totalTokenCount": prompt + usage.output});
    if usage.cache_read > 0 {
        json["cachedContentTokenCount"] = Value::from(usage.cache_read);
    }
    json
}

/// The answer to a refused prompt, shaped after `safety-blocked-candidate.json`: empty content,
/// `finishReason: "SAFETY"`, the ratings with the blocking one marked, and no output tokens.
fn blocked(model: &str, usage: Usage) -> Value {
    let mut usage = usage_json(Usage { output: 0, ..usage });
    if let Some(fields) = usage.as_object_mut() {
        fields.shift_remove("candidatesTokenCount");
    }
    json!({"candidates": [{"content": {}, "finishReason": "SAFETY", "safetyRatings": [
              {"blocked": true, "category": "HARM_CATEGORY_HATE_SPEECH", "probability": "LOW"},
              {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "NEGLIGIBLE"},
              {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
              {"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "NEGLIGIBLE"}]}],
           "usageMetadata": usage, "modelVersion": model, "responseId": "mock-response"})
}

fn finish_reason(stop: Stop) -> &'static str {
    match stop {
        Stop::Done => "STOP",
        Stop::MaxTokens => "MAX_TOKENS",
        Stop::Refusal => "SAFETY",
    }
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

pub(crate) fn stream(
    parts: &[Part],
    model: &str,
    usage: Usage,
    stop: Stop,
    fail_midway: bool,
) -> Vec<String> {
    // A refusal has nothing to stream: the one chunk is the blocked candidate.
    match stop {
        Stop::Refusal => return vec![data(&blocked(model, usage))],
        Stop::Done | Stop::MaxTokens => {}
    }
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
    last["candidates"][0]["finishReason"] = Value::from(finish_reason(stop));
    last["usageMetadata"] = usage_json(usage);
    events.push(data(&last));
    events
}

pub(crate) fn response(parts: &[Part], model: &str, usage: Usage, stop: Stop) -> Value {
    match stop {
        Stop::Refusal => return blocked(model, usage),
        Stop::Done | Stop::MaxTokens => {}
    }
    let mut body = chunk(parts.iter().map(part_json).collect(), model);
    body["candidates"][0]["finishReason"] = Value::from(finish_reason(stop));
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
