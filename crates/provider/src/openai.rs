//! OpenAI Chat Completions (`POST {apiBase}/chat/completions`, streaming); also every
//! OpenAI-compatible server (Ollama, vLLM, LM Studio, OpenRouter, DeepSeek, Groq, ...).

use std::collections::BTreeMap;

use nanocrab_schema::{ContentBlock, LlmMessage, Role, StopReason, ToolCall, Usage};
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::http::{ErrorInfo, StreamState, WireFormat, bearer, parse_arguments};
use crate::profile::{MaxTokensField, ModelProfile, ReasoningEcho, ToolCallContent};
use crate::provider::{ChatRequest, ChatResponse, ProviderDelta};
use crate::think::ThinkFilter;

pub(crate) struct OpenAi;

impl WireFormat for OpenAi {
    fn path(&self, _model: &str) -> String {
        "/chat/completions".to_owned()
    }

    fn auth_headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        bearer(api_key)
    }

    fn body(&self, request: &ChatRequest, profile: &ModelProfile) -> Value {
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
                    if message.images().next().is_some() {
                        let mut parts = Vec::new();
                        if !text.is_empty() {
                            parts.push(json!({"type": "text", "text": text}));
                        }
                        for image in message.images() {
                            parts.push(json!({"type": "image_url", "image_url": {
                                "url": format!("data:{};base64,{}", image.media_type, image.data)}}));
                        }
                        messages.push(json!({"role": "user", "content": parts}));
                    } else if !text.is_empty() {
                        messages.push(json!({"role": "user", "content": text}));
                    }
                }
                Role::Assistant => messages.push(assistant_message(message, profile)),
            }
        }
        if profile.prompt_caching {
            mark_cacheable(&mut messages);
        }
        let mut body = json!({
            "model": request.model,
            "messages": messages,
            "stream": true,
        });
        let limit = match profile.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body[limit] = json!(request.max_tokens);
        if profile.stream_usage {
            body["stream_options"] = json!({"include_usage": true});
        }
        if let Some(temperature) = profile.temperature(request.temperature) {
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

    fn whole_as_events(&self, mut body: Value) -> Vec<(String, String)> {
        // A whole completion is one chunk whose `delta` is the complete message.
        if let Some(choice) = body["choices"].get_mut(0) {
            choice["delta"] = choice["message"].take();
        }
        vec![("message".to_owned(), body.to_string())]
    }

    fn error_info(&self, body: &Value) -> ErrorInfo {
        openai_error_info(body)
    }
}

/// An assistant message in Chat Completions form, with the provider's quirks: how a
/// tool-only message's content is written, and whether reasoning goes back.
fn assistant_message(message: &LlmMessage, profile: &ModelProfile) -> Value {
    let reasoning: String = message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Thinking { thinking, .. } => Some(thinking.as_str()),
            ContentBlock::Text { .. }
            | ContentBlock::RedactedThinking { .. }
            | ContentBlock::Image(_)
            | ContentBlock::ToolUse(_)
            | ContentBlock::ToolResult(_) => None,
        })
        .collect();
    let mut text = message.text();
    if profile.reasoning_echo == ReasoningEcho::ThinkTags && !reasoning.is_empty() {
        text = format!("<think>{reasoning}</think>\n{text}");
    }
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
    let content = match (text.is_empty(), profile.tool_call_content) {
        (false, _) => Value::from(text),
        (true, ToolCallContent::Null) if !calls.is_empty() => Value::Null,
        (true, ToolCallContent::Null | ToolCallContent::EmptyString) => Value::from(""),
    };
    let mut out = json!({"role": "assistant", "content": content});
    // DeepSeek and Kimi thinking models reject a tool-call message without its reasoning;
    // an empty one is accepted when the calls came from another model.
    if profile.reasoning_echo == ReasoningEcho::ReasoningContent
        && (!reasoning.is_empty() || !calls.is_empty())
    {
        out["reasoning_content"] = Value::from(reasoning);
    }
    if !calls.is_empty() {
        out["tool_calls"] = Value::from(calls);
    }
    out
}

/// Marks the system prompt and the newest message as cache breakpoints, in the content-part
/// form OpenRouter passes on to Anthropic and Gemini models.
fn mark_cacheable(messages: &mut [Value]) {
    let system = messages.iter().position(|m| m["role"] == "system");
    let last = messages
        .iter()
        .rposition(|m| m["role"] == "user" || m["role"] == "assistant");
    for index in [system, last].into_iter().flatten() {
        let message = &mut messages[index];
        let parts = match message["content"].take() {
            Value::String(text) if !text.is_empty() => vec![json!({"type": "text", "text": text})],
            Value::Array(parts) => parts,
            other => {
                message["content"] = other;
                continue;
            }
        };
        let mut parts = parts;
        if let Some(part) = parts.iter_mut().rev().find(|p| p["type"] == "text") {
            part["cache_control"] = json!({"type": "ephemeral"});
        }
        message["content"] = Value::from(parts);
    }
}

/// The error body of OpenAI and every compatible server; OpenRouter hides the upstream
/// provider's own message in `metadata.raw`.
pub(crate) fn openai_error_info(body: &Value) -> ErrorInfo {
    let error = if body["error"].is_object() {
        &body["error"]
    } else {
        body
    };
    let message =
        error["message"]
            .as_str()
            .map(|message| match error["metadata"]["raw"].as_str() {
                Some(raw) if !raw.is_empty() => format!("{message}: {raw}"),
                Some(_) | None => message.to_owned(),
            });
    let kind = error["code"]
        .as_str()
        .or_else(|| error["type"].as_str())
        .map(str::to_owned);
    ErrorInfo {
        message,
        kind,
        retry_after: None,
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
    /// OpenAI's `refusal`: the model declined, and this is its explanation.
    refused: bool,
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
        // Groq repeats the usage under `x_groq`, and some of its streams carry it only there.
        let usage = [&chunk["usage"], &chunk["x_groq"]["usage"]]
            .into_iter()
            .find(|u| u.is_object());
        if let Some(usage) = usage {
            let count = |value: &Value| value.as_u64().unwrap_or_default();
            // Cached tokens are counted inside the prompt total (DeepSeek names them its own
            // way); they are billed apart, so they are taken out of the input count.
            let prompt = count(&usage["prompt_tokens"]);
            let cached = [
                &usage["prompt_tokens_details"]["cached_tokens"],
                &usage["prompt_cache_hit_tokens"],
            ]
            .into_iter()
            .map(count)
            .max()
            .unwrap_or_default()
            .min(prompt);
            self.usage = Usage {
                input_tokens: prompt - cached,
                output_tokens: count(&usage["completion_tokens"]),
                cache_read_tokens: cached,
                cache_write_tokens: count(&usage["prompt_tokens_details"]["cache_write_tokens"]),
            };
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
        if let Some(piece) = delta["refusal"].as_str() {
            self.refused = true;
            self.text.push_str(piece);
            if !piece.is_empty() {
                deltas.push(ProviderDelta::Text(piece.to_owned()));
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
    ) -> Result<Option<ChatResponse>, ProviderError> {
        let Some(finish_reason) = self.finish_reason.take() else {
            return Ok(None);
        };
        let (answer, reasoning) = self.think.flush(deltas);
        self.text.push_str(&answer);
        self.reasoning.push_str(&reasoning);
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(ContentBlock::Thinking {
                thinking: self.reasoning,
                signature: None,
                origin: None,
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
        Ok(Some(ChatResponse {
            content,
            stop_reason: match finish_reason.as_str() {
                _ if self.refused => StopReason::Refusal,
                "stop" => StopReason::EndTurn,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                "content_filter" => StopReason::Refusal,
                _ => StopReason::Other(finish_reason),
            },
            usage: self.usage,
            model: self.model,
        }))
    }
}
