//! Google Gemini (`POST {apiBase}/v1beta/models/{model}:streamGenerateContent?alt=sse`).
//!
//! Gemini attaches an opaque `thoughtSignature` to parts, and wants it back on the same part
//! in the next request. It is kept as a signature-only thinking block placed just before the
//! block it belonged to, and re-attached to that block when the history is sent back.

use std::collections::HashMap;
use std::time::Duration;

use nanocrab_schema::{ContentBlock, Role, StopReason, ToolCall, Usage};
use serde_json::{Map, Value, json};

use crate::error::ProviderError;
use crate::http::{ErrorInfo, StreamState, WireFormat};
use crate::profile::ModelProfile;
use crate::provider::{ChatRequest, ChatResponse, ProviderDelta};
use crate::think::ThinkFilter;

pub(crate) struct Gemini;

/// JSON Schema keywords Gemini's function declarations accept; others are rejected with 400.
const SCHEMA_KEYS: [&str; 9] = [
    "type",
    "description",
    "properties",
    "required",
    "items",
    "enum",
    "format",
    "nullable",
    "anyOf",
];

fn sanitize_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| SCHEMA_KEYS.contains(&key.as_str()))
                .map(|(key, value)| {
                    let value = match key.as_str() {
                        // Property names are free-form: sanitise each property's schema.
                        "properties" => Value::Object(
                            value
                                .as_object()
                                .map(|props| {
                                    props
                                        .iter()
                                        .map(|(name, s)| (name.clone(), sanitize_schema(s)))
                                        .collect()
                                })
                                .unwrap_or_default(),
                        ),
                        "items" | "anyOf" => sanitize_schema(value),
                        _ => value.clone(),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(sanitize_schema).collect()),
        other => other.clone(),
    }
}

impl WireFormat for Gemini {
    fn path(&self, model: &str) -> String {
        format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
    }

    fn auth_headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        // The key travels in a header, never in the URL, so it cannot end up in a log line.
        api_key
            .map(|key| vec![("x-goog-api-key", key.to_owned())])
            .unwrap_or_default()
    }

    fn body(
        &self,
        request: &ChatRequest<'_>,
        profile: &ModelProfile,
    ) -> serde_json::Result<Vec<u8>> {
        // functionResponse is matched by name, not id: find each call's name.
        let names: HashMap<&str, &str> = request
            .messages
            .iter()
            .flat_map(|m| m.tool_calls())
            .map(|call| (call.id.as_str(), call.name.as_str()))
            .collect();
        let contents: Vec<Value> = request
            .messages
            .iter()
            .map(|message| {
                let mut parts = Vec::new();
                let mut signature: Option<&String> = None;
                for block in &message.content {
                    let mut part = match block {
                        ContentBlock::Thinking {
                            signature: Some(sig),
                            ..
                        } => {
                            signature = Some(sig);
                            continue;
                        }
                        ContentBlock::Thinking {
                            signature: None, ..
                        }
                        | ContentBlock::RedactedThinking { .. } => continue,
                        ContentBlock::Text { text } => json!({"text": text}),
                        ContentBlock::Image(image) => json!({"inlineData": {
                            "mimeType": image.media_type, "data": image.data}}),
                        ContentBlock::ToolUse(call) => json!({"functionCall": {
                            "name": call.name,
                            "args": if call.input.is_object() { call.input.clone() } else { json!({}) },
                        }}),
                        ContentBlock::ToolResult(result) => {
                            let key = if result.is_error { "error" } else { "content" };
                            json!({"functionResponse": {
                                "name": names.get(result.tool_use_id.as_str()).copied().unwrap_or("unknown"),
                                "response": {key: result.content},
                            }})
                        }
                    };
                    if let Some(sig) = signature.take() {
                        part["thoughtSignature"] = Value::from(sig.clone());
                    }
                    parts.push(part);
                }
                if let Some(sig) = signature {
                    parts.push(json!({"text": "", "thoughtSignature": sig}));
                }
                let role = match message.role {
                    Role::User => "user",
                    Role::Assistant => "model",
                };
                json!({"role": role, "parts": parts})
            })
            .collect();
        let mut generation = json!({"maxOutputTokens": request.max_tokens});
        if let Some(temperature) = profile.temperature(request.temperature) {
            generation["temperature"] = json!(temperature);
        }
        let mut body = json!({"contents": contents, "generationConfig": generation});
        if !request.system.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": request.system}]});
        }
        if !request.tools.is_empty() {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"name": tool.name, "description": tool.description,
                                  "parameters": sanitize_schema(&tool.parameters)})
                })
                .collect();
            body["tools"] = json!([{"functionDeclarations": declarations}]);
        }
        serde_json::to_vec(&body)
    }

    fn new_stream(&self, provider: &str) -> Box<dyn StreamState> {
        Box::new(GeminiStream {
            provider: provider.to_owned(),
            ..GeminiStream::default()
        })
    }

    fn whole_as_events(&self, body: Value) -> Vec<(String, String)> {
        // A whole response has the shape of one stream chunk.
        vec![("message".to_owned(), body.to_string())]
    }

    fn error_info(&self, body: &Value) -> ErrorInfo {
        // Error bodies come as an object, or as a one-element array of them.
        let Some(error) = body
            .get("error")
            .or_else(|| body.get(0).and_then(|e| e.get("error")))
        else {
            return ErrorInfo::default();
        };
        // google.rpc.RetryInfo says when the quota allows the next call, e.g. "34.4s".
        let retry_after = error["details"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|detail| detail["retryDelay"].as_str())
            .find_map(|delay| delay.strip_suffix('s')?.parse::<f64>().ok())
            .filter(|secs| secs.is_finite() && *secs >= 0.0)
            .map(Duration::from_secs_f64);
        // `google.rpc.ErrorInfo.reason` says more than the status (`API_KEY_INVALID` comes
        // with a plain INVALID_ARGUMENT).
        let reason = error["details"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|detail| detail["reason"].as_str());
        ErrorInfo {
            message: error["message"].as_str().map(str::to_owned),
            kind: reason
                .or_else(|| error["status"].as_str())
                .map(str::to_owned),
            retry_after,
        }
    }
}

/// A function call whose arguments Vertex streams piece by piece (`partialArgs`).
#[derive(Debug, Default)]
struct StreamingCall {
    name: String,
    args: Map<String, Value>,
}

#[derive(Debug, Default)]
struct GeminiStream {
    provider: String,
    model: String,
    content: Vec<ContentBlock>,
    streaming: Option<StreamingCall>,
    calls: usize,
    finish_reason: Option<String>,
    usage: Usage,
    think: ThinkFilter,
}

impl GeminiStream {
    fn push_call(&mut self, name: String, input: Value) {
        self.calls += 1;
        self.content.push(ContentBlock::ToolUse(ToolCall {
            id: format!("call_{}", self.calls),
            name,
            input,
        }));
    }

    fn push_text(&mut self, text: &str) {
        match self.content.last_mut() {
            Some(ContentBlock::Text { text: last }) => last.push_str(text),
            _ => self.content.push(ContentBlock::text(text)),
        }
    }

    fn push_reasoning(&mut self, text: &str) {
        match self.content.last_mut() {
            Some(ContentBlock::Thinking {
                thinking,
                signature: None,
                ..
            }) => thinking.push_str(text),
            _ => self.content.push(ContentBlock::Thinking {
                thinking: text.to_owned(),
                signature: None,
                origin: None,
            }),
        }
    }

    fn blocked(&self, what: &str, reason: &str) -> ProviderError {
        ProviderError::Api {
            provider: self.provider.clone(),
            kind: "blocked".to_owned(),
            message: format!(
                "{what} was blocked by Gemini's safety filters ({reason}); rephrase the request"
            ),
            retriable: false,
            attempts: 1,
        }
    }
}

impl StreamState for GeminiStream {
    fn event(
        &mut self,
        _event: &str,
        data: &str,
        deltas: &mut Vec<ProviderDelta>,
    ) -> Result<(), ProviderError> {
        let chunk: Value = serde_json::from_str(data).map_err(|err| ProviderError::Stream {
            provider: self.provider.clone(),
            detail: format!("unreadable chunk ({err})"),
        })?;
        if let Some(error) = chunk.get("error") {
            let code = error["code"].as_u64().unwrap_or_default();
            return Err(ProviderError::Api {
                provider: self.provider.clone(),
                kind: error["status"].as_str().unwrap_or("error").to_owned(),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                retriable: code == 429 || code >= 500,
                attempts: 1,
            });
        }
        if let Some(reason) = chunk["promptFeedback"]["blockReason"].as_str() {
            return Err(self.blocked("the prompt", reason));
        }
        if let Some(model) = chunk["modelVersion"].as_str() {
            self.model = model.to_owned();
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            let count = |name: &str| usage[name].as_u64().unwrap_or_default();
            // The prompt count includes the cached tokens, which are billed apart.
            let cached = count("cachedContentTokenCount").min(count("promptTokenCount"));
            self.usage = Usage {
                input_tokens: count("promptTokenCount") - cached,
                output_tokens: count("candidatesTokenCount") + count("thoughtsTokenCount"),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
            };
        }
        let Some(candidate) = chunk["candidates"].get(0) else {
            return Ok(());
        };
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(signature) = part["thoughtSignature"].as_str() {
                self.content.push(ContentBlock::Thinking {
                    thinking: String::new(),
                    signature: Some(signature.to_owned()),
                    origin: None,
                });
            }
            if let Some(call) = part.get("functionCall") {
                let name = call["name"].as_str();
                let streaming = call["willContinue"].as_bool().unwrap_or(false);
                match (name, self.streaming.as_mut()) {
                    (Some(name), _) if streaming => {
                        self.streaming = Some(StreamingCall {
                            name: name.to_owned(),
                            args: Map::new(),
                        });
                    }
                    (Some(name), _) => {
                        let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
                        self.push_call(name.to_owned(), args);
                    }
                    (None, Some(pending)) => {
                        for piece in call["partialArgs"].as_array().into_iter().flatten() {
                            let key = piece["jsonPath"]
                                .as_str()
                                .unwrap_or_default()
                                .trim_start_matches("$.")
                                .to_owned();
                            let value = ["stringValue", "numberValue", "boolValue", "nullValue"]
                                .iter()
                                .find_map(|field| piece.get(*field).cloned())
                                .unwrap_or(Value::Null);
                            match (pending.args.get_mut(&key), value) {
                                (Some(Value::String(text)), Value::String(more)) => {
                                    text.push_str(&more);
                                }
                                (_, value) => {
                                    pending.args.insert(key, value);
                                }
                            }
                        }
                        if !streaming
                            && call["partialArgs"].is_null()
                            && let Some(done) = self.streaming.take()
                        {
                            self.push_call(done.name, Value::Object(done.args));
                        }
                    }
                    (None, None) => {}
                }
                continue;
            }
            let Some(text) = part["text"].as_str().filter(|t| !t.is_empty()) else {
                continue;
            };
            if part["thought"].as_bool().unwrap_or(false) {
                self.push_reasoning(text);
                deltas.push(ProviderDelta::Reasoning(text.to_owned()));
                continue;
            }
            let (answer, reasoning) = self.think.push(text);
            if !reasoning.is_empty() {
                self.push_reasoning(&reasoning);
                deltas.push(ProviderDelta::Reasoning(reasoning));
            }
            if !answer.is_empty() {
                self.push_text(&answer);
                deltas.push(ProviderDelta::Text(answer));
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    fn finish(
        mut self: Box<Self>,
        deltas: &mut Vec<ProviderDelta>,
    ) -> Result<Option<ChatResponse>, ProviderError> {
        let Some(finish_reason) = self.finish_reason.take() else {
            return Ok(None);
        };
        let (answer, reasoning) = self.think.flush(deltas);
        if !reasoning.is_empty() {
            self.push_reasoning(&reasoning);
        }
        if !answer.is_empty() {
            self.push_text(&answer);
        }
        if let Some(done) = self.streaming.take() {
            self.push_call(done.name, Value::Object(done.args));
        }
        let stop_reason = match finish_reason.as_str() {
            _ if self.calls > 0 => StopReason::ToolUse,
            "STOP" => StopReason::EndTurn,
            "MAX_TOKENS" => StopReason::MaxTokens,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "IMAGE_SAFETY" => return Err(self.blocked("the answer", &finish_reason)),
            _ => StopReason::Other(finish_reason),
        };
        Ok(Some(ChatResponse {
            content: self.content,
            stop_reason,
            usage: self.usage,
            model: self.model,
        }))
    }
}
