//! OpenAI Chat Completions (`POST {apiBase}/chat/completions`, streaming); also every
//! OpenAI-compatible server (Ollama, vLLM, LM Studio, OpenRouter, DeepSeek, Groq, ...).

use std::collections::BTreeMap;

use nanocrab_schema::{ContentBlock, Role, StopReason, ToolCall, Usage};
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::http::{StreamState, WireFormat, parse_arguments};
use crate::provider::{ChatRequest, ChatResponse, ProviderDelta};
use crate::think::ThinkFilter;

pub(crate) struct OpenAi;

impl WireFormat for OpenAi {
    fn path(&self, _model: &str) -> String {
        "/chat/completions".to_owned()
    }

    fn auth_headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        api_key
            .map(|key| vec![("authorization", format!("Bearer {key}"))])
            .unwrap_or_default()
    }

    fn body(&self, request: &ChatRequest) -> Value {
        let mut messages = Vec::new();
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for message in &request.messages {
            match message.role {
                Role::User => {
                    // Tool results become `tool` messages, which must directly follow the
                    // assistant message that made the calls; any text goes after them.
                    for result in message.tool_results() {
                        messages.push(json!({"role": "tool", "tool_call_id": result.tool_use_id,
                                             "content": result.content}));
                    }
                    let text = message.text();
                    if !text.is_empty() {
                        messages.push(json!({"role": "user", "content": text}));
                    }
                }
                Role::Assistant => {
                    let text = message.text();
                    let calls: Vec<Value> = message
                        .tool_calls()
                        .map(|call| {
                            json!({"id": call.id, "type": "function", "function": {
                            "name": call.name,
                            "arguments": match &call.input {
                                Value::String(raw) => raw.clone(),
                                other => other.to_string(),
                            }}})
                        })
                        .collect();
                    let mut out = json!({"role": "assistant",
                        "content": if text.is_empty() { Value::Null } else { Value::from(text) }});
                    if !calls.is_empty() {
                        out["tool_calls"] = Value::from(calls);
                    } else if out["content"].is_null() {
                        // Strict servers reject an assistant message with neither.
                        out["content"] = Value::from("");
                    }
                    messages.push(out);
                }
            }
        }
        let mut body = json!({
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                    "name": tool.name, "description": tool.description,
                    "parameters": tool.parameters}})
                })
                .collect();
        }
        body
    }

    fn new_stream(&self, provider: &str) -> Box<dyn StreamState> {
        Box::new(OpenAiStream {
            provider: provider.to_owned(),
            ..OpenAiStream::default()
        })
    }

    fn error_message(&self, body: &Value) -> Option<String> {
        body["error"]["message"]
            .as_str()
            .or_else(|| body["message"].as_str())
            .map(str::to_owned)
    }
}

#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Default)]
struct OpenAiStream {
    provider: String,
    model: String,
    text: String,
    reasoning: String,
    calls: BTreeMap<u64, PendingCall>,
    finish_reason: Option<String>,
    usage: Usage,
    think: ThinkFilter,
}

impl StreamState for OpenAiStream {
    fn event(
        &mut self,
        _event: &str,
        data: &str,
        deltas: &mut Vec<ProviderDelta>,
    ) -> Result<(), ProviderError> {
        if data.trim() == "[DONE]" {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|err| ProviderError::Stream {
            provider: self.provider.clone(),
            detail: format!("unreadable chunk ({err})"),
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let code = error["code"].as_u64().unwrap_or_default();
            return Err(ProviderError::Api {
                provider: self.provider.clone(),
                kind: error["type"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| error["code"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("error {code}")),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                retriable: code == 429 || code >= 500,
                attempts: 1,
            });
        }
        if let Some(model) = chunk["model"].as_str() {
            self.model = model.to_owned();
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage.input_tokens = usage["prompt_tokens"].as_u64().unwrap_or_default();
            self.usage.output_tokens = usage["completion_tokens"].as_u64().unwrap_or_default();
            self.usage.cache_read_tokens = usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or_default();
        }
        let Some(choice) = chunk["choices"].get(0) else {
            return Ok(());
        };
        let delta = &choice["delta"];
        for field in ["reasoning_content", "reasoning"] {
            if let Some(piece) = delta[field].as_str().filter(|p| !p.is_empty()) {
                self.reasoning.push_str(piece);
                deltas.push(ProviderDelta::Reasoning(piece.to_owned()));
            }
        }
        if let Some(piece) = delta["content"].as_str() {
            let (answer, reasoning) = self.think.push(piece);
            if !answer.is_empty() {
                self.text.push_str(&answer);
                deltas.push(ProviderDelta::Text(answer));
            }
            if !reasoning.is_empty() {
                self.reasoning.push_str(&reasoning);
                deltas.push(ProviderDelta::Reasoning(reasoning));
            }
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for (position, call) in calls.iter().enumerate() {
                let index = call["index"].as_u64().unwrap_or(position as u64);
                let pending = self.calls.entry(index).or_default();
                if let Some(id) = call["id"].as_str() {
                    pending.id = id.to_owned();
                }
                if let Some(name) = call["function"]["name"].as_str() {
                    pending.name.push_str(name);
                }
                if let Some(arguments) = call["function"]["arguments"].as_str() {
                    pending.arguments.push_str(arguments);
                }
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    fn finish(
        mut self: Box<Self>,
        deltas: &mut Vec<ProviderDelta>,
    ) -> Result<ChatResponse, ProviderError> {
        let Some(finish_reason) = self.finish_reason.take() else {
            return Err(ProviderError::Stream {
                provider: self.provider.clone(),
                detail: "the stream ended without a finish_reason".to_owned(),
            });
        };
        let tail = self.think.flush(deltas);
        self.text.push_str(&tail);
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(ContentBlock::Thinking {
                thinking: self.reasoning,
                signature: None,
            });
        }
        if !self.text.is_empty() {
            content.push(ContentBlock::Text { text: self.text });
        }
        for (index, call) in self.calls {
            content.push(ContentBlock::ToolUse(ToolCall {
                // A few compatible servers omit ids; the result must still pair with its call.
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: call.name,
                input: parse_arguments(&call.arguments),
            }));
        }
        Ok(ChatResponse {
            content,
            stop_reason: match finish_reason.as_str() {
                "stop" => StopReason::EndTurn,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                "content_filter" => StopReason::Refusal,
                _ => StopReason::Other(finish_reason),
            },
            usage: self.usage,
            model: self.model,
        })
    }
}
