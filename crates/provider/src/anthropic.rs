//! Anthropic Messages (`POST {apiBase}/v1/messages`, streaming).

use std::collections::BTreeMap;

use nanocrab_schema::{ContentBlock, Role, StopReason, ToolCall, Usage};
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::http::{ErrorInfo, StreamState, WireFormat, parse_arguments};
use crate::profile::ModelProfile;
use crate::provider::{ChatRequest, ChatResponse, ProviderDelta};
use crate::think::ThinkFilter;

pub(crate) struct Anthropic;

impl WireFormat for Anthropic {
    fn path(&self, _model: &str) -> String {
        "/v1/messages".to_owned()
    }

    fn auth_headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", "2023-06-01".to_owned())];
        if let Some(key) = api_key {
            headers.push(("x-api-key", key.to_owned()));
        }
        headers
    }

    fn body(
        &self,
        request: &ChatRequest<'_>,
        profile: &ModelProfile,
    ) -> serde_json::Result<Vec<u8>> {
        let mut messages: Vec<Value> = request
            .messages
            .iter()
            .map(|message| {
                let content: Vec<Value> = message
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
                        // Reasoning without a signature came from another provider and would
                        // be rejected.
                        ContentBlock::Thinking {
                            thinking,
                            signature: Some(signature),
                            ..
                        } => Some(json!({"type": "thinking", "thinking": thinking, "signature": signature})),
                        ContentBlock::Thinking { signature: None, .. } => None,
                        ContentBlock::RedactedThinking { data, .. } => {
                            Some(json!({"type": "redacted_thinking", "data": data}))
                        }
                        ContentBlock::Image(image) => Some(json!({"type": "image", "source": {
                            "type": "base64", "media_type": image.media_type, "data": image.data}})),
                        ContentBlock::ToolUse(call) => Some(json!({
                            "type": "tool_use", "id": call.id, "name": call.name,
                            "input": if call.input.is_object() { call.input.clone() } else { json!({}) },
                        })),
                        ContentBlock::ToolResult(result) => {
                            let mut block = json!({"type": "tool_result",
                                "tool_use_id": result.tool_use_id, "content": result.content});
                            if result.is_error {
                                block["is_error"] = Value::Bool(true);
                            }
                            Some(block)
                        }
                    })
                    .collect();
                let role = match message.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": content})
            })
            .collect();
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({"name": tool.name, "description": tool.description,
                              "input_schema": tool.parameters})
            })
            .collect();
        let mut system = json!([{"type": "text", "text": request.system}]);
        if profile.prompt_caching {
            // Three of the four breakpoints Anthropic allows: the system prompt and the tools
            // change rarely, and the newest message makes the whole history so far a prefix
            // the next call of the tool loop reads back at a tenth of the price.
            let ephemeral = json!({"type": "ephemeral"});
            system[0]["cache_control"] = ephemeral.clone();
            if let Some(tool) = tools.last_mut() {
                tool["cache_control"] = ephemeral.clone();
            }
            let last_block = messages
                .last_mut()
                .and_then(|m| m["content"].as_array_mut())
                .and_then(|blocks| {
                    blocks.iter_mut().rev().find(|b| {
                        !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"))
                    })
                });
            if let Some(block) = last_block {
                block["cache_control"] = ephemeral;
            }
        }
        let mut body = json!({
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "stream": true,
        });
        if !request.system.is_empty() {
            body["system"] = system;
        }
        if let Some(temperature) = profile.temperature(request.temperature) {
            body["temperature"] = json!(temperature);
        }
        if !tools.is_empty() {
            body["tools"] = Value::from(tools);
        }
        serde_json::to_vec(&body)
    }

    fn new_stream(&self, provider: &str) -> Box<dyn StreamState> {
        Box::new(AnthropicStream {
            provider: provider.to_owned(),
            ..AnthropicStream::default()
        })
    }

    fn whole_as_events(&self, body: Value) -> Vec<(String, String)> {
        let event = |value: Value| {
            let name = value["type"].as_str().unwrap_or_default().to_owned();
            (name, value.to_string())
        };
        if body["type"] == "error" {
            return vec![event(body)];
        }
        let mut events = vec![event(json!({"type": "message_start", "message": {
            "model": body["model"], "usage": body["usage"]}}))];
        for (index, block) in body["content"].as_array().into_iter().flatten().enumerate() {
            let (start, delta) = match block["type"].as_str().unwrap_or_default() {
                "text" => (
                    json!({"type": "text", "text": ""}),
                    Some(json!({"type": "text_delta", "text": block["text"]})),
                ),
                "thinking" => (
                    json!({"type": "thinking", "thinking": block["thinking"]}),
                    Some(json!({"type": "signature_delta", "signature": block["signature"]})),
                ),
                "tool_use" => (
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"]}),
                    Some(json!({"type": "input_json_delta",
                                "partial_json": block["input"].to_string()})),
                ),
                _ => (block.clone(), None),
            };
            events.push(event(
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            if let Some(delta) = delta {
                events.push(event(
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
        }
        events.push(event(json!({"type": "message_delta",
            "delta": {"stop_reason": body["stop_reason"]}, "usage": body["usage"]})));
        events
    }

    fn error_info(&self, body: &Value) -> ErrorInfo {
        ErrorInfo {
            message: body["error"]["message"].as_str().map(str::to_owned),
            kind: body["error"]["type"].as_str().map(str::to_owned),
            retry_after: None,
        }
    }
}

#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Redacted(String),
    Tool {
        id: String,
        name: String,
        json: String,
    },
}

#[derive(Debug, Default)]
struct AnthropicStream {
    provider: String,
    model: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
    think: ThinkFilter,
    /// Reasoning the model wrote in its text inside `<thinking>` tags (Claude 3), unsigned.
    tag_reasoning: String,
}

fn read_usage(usage: &Value, into: &mut Usage) {
    // message_start carries input tokens; message_delta the output (and, from some compatible
    // providers, the real input count): a later non-zero figure wins.
    let field = |name: &str| usage[name].as_u64().filter(|n| *n > 0);
    if let Some(n) = field("input_tokens") {
        into.input_tokens = n;
    }
    if let Some(n) = field("output_tokens") {
        into.output_tokens = n;
    }
    if let Some(n) = field("cache_read_input_tokens") {
        into.cache_read_tokens = n;
    }
    if let Some(n) = field("cache_creation_input_tokens") {
        into.cache_write_tokens = n;
    }
}

impl StreamState for AnthropicStream {
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
        let index = data["index"].as_u64().unwrap_or_default();
        match data["type"].as_str().unwrap_or_default() {
            "message_start" => {
                self.model = data["message"]["model"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                read_usage(&data["message"]["usage"], &mut self.usage);
            }
            "content_block_start" => {
                let block = &data["content_block"];
                let new = match block["type"].as_str().unwrap_or_default() {
                    "tool_use" => Block::Tool {
                        id: block["id"].as_str().unwrap_or_default().to_owned(),
                        name: block["name"].as_str().unwrap_or_default().to_owned(),
                        json: String::new(),
                    },
                    "thinking" => Block::Thinking {
                        text: block["thinking"].as_str().unwrap_or_default().to_owned(),
                        signature: None,
                    },
                    "redacted_thinking" => {
                        Block::Redacted(block["data"].as_str().unwrap_or_default().to_owned())
                    }
                    _ => Block::Text(String::new()),
                };
                self.blocks.insert(index, new);
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                let block = self
                    .blocks
                    .entry(index)
                    .or_insert_with(|| Block::Text(String::new()));
                match (block, delta["type"].as_str().unwrap_or_default()) {
                    (Block::Text(text), "text_delta") => {
                        let (answer, reasoning) =
                            self.think.push(delta["text"].as_str().unwrap_or_default());
                        text.push_str(&answer);
                        if !answer.is_empty() {
                            deltas.push(ProviderDelta::Text(answer));
                        }
                        if !reasoning.is_empty() {
                            self.tag_reasoning.push_str(&reasoning);
                            deltas.push(ProviderDelta::Reasoning(reasoning));
                        }
                    }
                    (Block::Thinking { text, .. }, "thinking_delta") => {
                        let piece = delta["thinking"].as_str().unwrap_or_default();
                        text.push_str(piece);
                        deltas.push(ProviderDelta::Reasoning(piece.to_owned()));
                    }
                    (Block::Thinking { signature, .. }, "signature_delta") => {
                        let piece = delta["signature"].as_str().unwrap_or_default();
                        signature.get_or_insert_with(String::new).push_str(piece);
                    }
                    (Block::Tool { json, .. }, "input_json_delta") => {
                        json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    // Deltas of kinds this version does not know (citations, ...) are ignored
                    // rather than failing the answer.
                    (_, _) => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                read_usage(&data["usage"], &mut self.usage);
            }
            "error" => {
                let kind = data["error"]["type"].as_str().unwrap_or("error").to_owned();
                let retriable = matches!(
                    kind.as_str(),
                    "overloaded_error" | "api_error" | "rate_limit_error"
                );
                return Err(ProviderError::Api {
                    provider: self.provider.clone(),
                    message: data["error"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    kind,
                    retriable,
                    attempts: 1,
                });
            }
            // ping, content_block_stop, message_stop: nothing to record.
            _ => {}
        }
        Ok(())
    }

    fn finish(
        mut self: Box<Self>,
        deltas: &mut Vec<ProviderDelta>,
    ) -> Result<Option<ChatResponse>, ProviderError> {
        let Some(stop_reason) = self.stop_reason.take() else {
            return Ok(None);
        };
        let (tail, tail_reasoning) = self.think.flush(deltas);
        self.tag_reasoning.push_str(&tail_reasoning);
        let mut content = Vec::new();
        if !self.tag_reasoning.is_empty() {
            content.push(ContentBlock::Thinking {
                thinking: std::mem::take(&mut self.tag_reasoning),
                signature: None,
                origin: None,
            });
        }
        for block in std::mem::take(&mut self.blocks).into_values() {
            match block {
                Block::Text(text) if text.is_empty() => {}
                Block::Text(text) => content.push(ContentBlock::Text { text }),
                Block::Thinking { text, signature } => content.push(ContentBlock::Thinking {
                    thinking: text,
                    signature,
                    origin: None,
                }),
                Block::Redacted(data) => {
                    content.push(ContentBlock::RedactedThinking { data, origin: None });
                }
                Block::Tool { id, name, json } => content.push(ContentBlock::ToolUse(ToolCall {
                    id,
                    name,
                    input: parse_arguments(&json),
                })),
            }
        }
        if !tail.is_empty() {
            match content.iter_mut().rev().find_map(|block| match block {
                ContentBlock::Text { text } => Some(text),
                _ => None,
            }) {
                Some(text) => text.push_str(&tail),
                None => content.push(ContentBlock::Text { text: tail }),
            }
        }
        Ok(Some(ChatResponse {
            content,
            stop_reason: match stop_reason.as_str() {
                "end_turn" => StopReason::EndTurn,
                "tool_use" => StopReason::ToolUse,
                "max_tokens" => StopReason::MaxTokens,
                "stop_sequence" => StopReason::StopSequence,
                "refusal" => StopReason::Refusal,
                _ => StopReason::Other(stop_reason),
            },
            usage: self.usage,
            model: self.model,
        }))
    }
}
