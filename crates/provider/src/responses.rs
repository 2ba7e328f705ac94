//! OpenAI Responses (`POST {apiBase}/responses`, streaming), stateless: `store: false`, the
//! whole history sent each time, reasoning carried forward as its encrypted content.
//!
//! Each output item arrives whole in `response.output_item.done`; the deltas before it are
//! only for showing progress. A whole (non-streamed) response is its `response.completed`.

use std::collections::BTreeMap;

use nanocrab_schema::{ContentBlock, LlmMessage, Role, StopReason, ToolCall, Usage};
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::http::{ErrorInfo, StreamState, WireFormat, bearer, parse_arguments};
use crate::openai::openai_error_info;
use crate::profile::ModelProfile;
use crate::provider::{ChatRequest, ChatResponse, ProviderDelta};

pub(crate) struct Responses;

impl WireFormat for Responses {
    fn path(&self, _model: &str) -> String {
        "/responses".to_owned()
    }

    fn auth_headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        bearer(api_key)
    }

    fn body(
        &self,
        request: &ChatRequest<'_>,
        profile: &ModelProfile,
    ) -> serde_json::Result<Vec<u8>> {
        let mut input = Vec::new();
        for message in request.messages.iter() {
            match message.role {
                Role::User => user_items(message, &mut input),
                Role::Assistant => assistant_items(message, &mut input),
            }
        }
        let mut body = json!({
            "model": request.model,
            "input": input,
            "max_output_tokens": request.max_tokens,
            "stream": true,
            // nanocrab keeps the history itself; nothing is left stored at OpenAI.
            "store": false,
        });
        if !request.system.is_empty() {
            body["instructions"] = Value::from(request.system.clone());
        }
        if let Some(temperature) = profile.temperature(request.temperature) {
            body["temperature"] = json!(temperature);
        }
        if profile.reasoning {
            // Without storage, reasoning survives between calls only as encrypted content
            // the client sends back; other models reject the `include`.
            body["include"] = json!(["reasoning.encrypted_content"]);
            body["reasoning"] = json!({"summary": "auto"});
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "name": tool.name,
                           "description": tool.description, "parameters": tool.parameters})
                })
                .collect();
        }
        serde_json::to_vec(&body)
    }

    fn new_stream(&self, provider: &str) -> Box<dyn StreamState> {
        Box::new(ResponsesStream {
            provider: provider.to_owned(),
            ..ResponsesStream::default()
        })
    }

    fn whole_as_events(&self, body: Value) -> Vec<(String, String)> {
        if body.get("error").is_some_and(|e| !e.is_null()) && body.get("output").is_none() {
            return vec![(
                "error".to_owned(),
                json!({"type": "error", "error": body["error"]}).to_string(),
            )];
        }
        let kind = match body["status"].as_str() {
            Some("incomplete") => "response.incomplete",
            Some("failed") => "response.failed",
            Some(_) | None => "response.completed",
        };
        vec![(
            kind.to_owned(),
            json!({"type": kind, "response": body}).to_string(),
        )]
    }

    fn error_info(&self, body: &Value) -> ErrorInfo {
        openai_error_info(body)
    }
}

fn user_items(message: &LlmMessage, input: &mut Vec<Value>) {
    for result in message.tool_results() {
        input.push(
            json!({"type": "function_call_output", "call_id": result.tool_use_id,
                          "output": result.content}),
        );
    }
    let content: Vec<Value> = message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(json!({"type": "input_text", "text": text})),
            ContentBlock::Image(image) => Some(json!({"type": "input_image",
                "image_url": format!("data:{};base64,{}", image.media_type, image.data)})),
            ContentBlock::Thinking { .. }
            | ContentBlock::RedactedThinking { .. }
            | ContentBlock::ToolUse(_)
            | ContentBlock::ToolResult(_) => None,
        })
        .collect();
    if !content.is_empty() {
        input.push(json!({"role": "user", "content": content}));
    }
}

fn assistant_items(message: &LlmMessage, input: &mut Vec<Value>) {
    for block in &message.content {
        match block {
            ContentBlock::Thinking {
                thinking,
                signature: Some(encrypted),
                ..
            } => {
                let summary: Vec<Value> = if thinking.is_empty() {
                    Vec::new()
                } else {
                    vec![json!({"type": "summary_text", "text": thinking})]
                };
                input.push(json!({"type": "reasoning", "summary": summary,
                                  "encrypted_content": encrypted}));
            }
            ContentBlock::Text { text } => {
                input.push(json!({"role": "assistant",
                                  "content": [{"type": "output_text", "text": text}]}));
            }
            ContentBlock::ToolUse(call) => {
                let arguments = match &call.input {
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                input.push(json!({"type": "function_call", "call_id": call.id,
                                  "name": call.name, "arguments": arguments}));
            }
            // Unsigned reasoning came from another provider; this API cannot take it back.
            ContentBlock::Thinking {
                signature: None, ..
            }
            | ContentBlock::RedactedThinking { .. }
            | ContentBlock::Image(_)
            | ContentBlock::ToolResult(_) => {}
        }
    }
}

#[derive(Debug, Default)]
struct ResponsesStream {
    provider: String,
    model: String,
    /// Finished output items by their `output_index`.
    items: BTreeMap<u64, Value>,
    /// The final `response` object, once `response.completed` (or `.incomplete`) arrived.
    done: Option<Value>,
}

impl ResponsesStream {
    fn api_error(&self, error: &Value) -> ProviderError {
        let code = error["code"]
            .as_str()
            .or_else(|| error["type"].as_str())
            .unwrap_or("error")
            .to_owned();
        ProviderError::Api {
            provider: self.provider.clone(),
            retriable: matches!(
                code.as_str(),
                "rate_limit_exceeded" | "server_error" | "server_is_overloaded"
            ),
            message: error["message"].as_str().unwrap_or_default().to_owned(),
            kind: code,
            attempts: 1,
        }
    }
}

impl StreamState for ResponsesStream {
    fn event(
        &mut self,
        _event: &str,
        data: &str,
        deltas: &mut Vec<ProviderDelta>,
    ) -> Result<(), ProviderError> {
        let data: Value = serde_json::from_str(data).map_err(|err| ProviderError::Stream {
            provider: self.provider.clone(),
            detail: format!("unreadable event ({err})"),
        })?;
        match data["type"].as_str().unwrap_or_default() {
            "response.created" | "response.in_progress" => {
                if let Some(model) = data["response"]["model"].as_str() {
                    self.model = model.to_owned();
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(piece) = data["delta"].as_str().filter(|p| !p.is_empty()) {
                    deltas.push(ProviderDelta::Text(piece.to_owned()));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(piece) = data["delta"].as_str().filter(|p| !p.is_empty()) {
                    deltas.push(ProviderDelta::Reasoning(piece.to_owned()));
                }
            }
            "response.output_item.done" => {
                let index = data["output_index"].as_u64().unwrap_or_default();
                self.items.insert(index, data["item"].clone());
            }
            "response.completed" | "response.incomplete" => {
                let response = &data["response"];
                if let Some(model) = response["model"].as_str() {
                    self.model = model.to_owned();
                }
                self.done = Some(response.clone());
            }
            "response.failed" => return Err(self.api_error(&data["response"]["error"])),
            // The error object sits under `error` in recorded streams, at the top in others.
            "error" => {
                let error = if data["error"].is_object() {
                    &data["error"]
                } else {
                    &data
                };
                return Err(self.api_error(error));
            }
            // Lifecycle events whose content arrives again in `output_item.done`.
            _ => {}
        }
        Ok(())
    }

    fn finish(
        self: Box<Self>,
        _deltas: &mut Vec<ProviderDelta>,
    ) -> Result<Option<ChatResponse>, ProviderError> {
        let Some(response) = self.done else {
            return Ok(None);
        };
        // A whole response has no item events: its `output` holds the items.
        let items: Vec<Value> = if self.items.is_empty() {
            response["output"].as_array().cloned().unwrap_or_default()
        } else {
            self.items.into_values().collect()
        };
        let mut content = Vec::new();
        let mut refused = false;
        for item in &items {
            match item["type"].as_str().unwrap_or_default() {
                "reasoning" => {
                    let summary: Vec<&str> = item["summary"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|part| part["text"].as_str())
                        .collect();
                    let signature = item["encrypted_content"].as_str().map(str::to_owned);
                    if !summary.is_empty() || signature.is_some() {
                        content.push(ContentBlock::Thinking {
                            thinking: summary.join("\n\n"),
                            signature,
                            origin: None,
                        });
                    }
                }
                "message" => {
                    for part in item["content"].as_array().into_iter().flatten() {
                        let text = match part["type"].as_str() {
                            Some("refusal") => {
                                refused = true;
                                part["refusal"].as_str()
                            }
                            Some(_) | None => part["text"].as_str(),
                        };
                        if let Some(text) = text.filter(|t| !t.is_empty()) {
                            content.push(ContentBlock::text(text));
                        }
                    }
                }
                "function_call" => content.push(ContentBlock::ToolUse(ToolCall {
                    id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                    name: item["name"].as_str().unwrap_or_default().to_owned(),
                    input: parse_arguments(item["arguments"].as_str().unwrap_or_default()),
                })),
                // Built-in tool items (web search, ...) are never requested.
                _ => {}
            }
        }
        let usage = &response["usage"];
        let count = |value: &Value| value.as_u64().unwrap_or_default();
        let input = count(&usage["input_tokens"]);
        let cached = count(&usage["input_tokens_details"]["cached_tokens"]).min(input);
        let calls = content
            .iter()
            .any(|block| matches!(block, ContentBlock::ToolUse(_)));
        let stop_reason = match (
            response["status"].as_str().unwrap_or_default(),
            response["incomplete_details"]["reason"].as_str(),
        ) {
            ("incomplete", Some("max_output_tokens")) => StopReason::MaxTokens,
            ("incomplete", Some("content_filter")) => StopReason::Refusal,
            ("incomplete", reason) => {
                StopReason::Other(format!("incomplete: {}", reason.unwrap_or("unknown")))
            }
            _ if calls => StopReason::ToolUse,
            _ if refused => StopReason::Refusal,
            _ => StopReason::EndTurn,
        };
        Ok(Some(ChatResponse {
            content,
            stop_reason,
            usage: Usage {
                input_tokens: input - cached,
                output_tokens: count(&usage["output_tokens"]),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
            },
            model: self.model,
        }))
    }
}
