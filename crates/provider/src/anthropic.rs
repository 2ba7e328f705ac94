//! Anthropic Messages (`POST {apiBase}/v1/messages`, streaming).

use std::collections::BTreeMap;

use nanocrab_schema::{ContentBlock, Role, StopReason, ToolCall, Usage};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::http::{ErrorInfo, StreamState, WireFormat, parse_arguments};
use crate::profile::ModelProfile;
use crate::provider::{ChatRequest, ChatResponse, ProviderDelta};
use crate::text_part::{EPHEMERAL, Ephemeral, TextPart};
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
        let mut messages: Vec<Message<'_>> = request
            .messages
            .iter()
            .map(|message| Message {
                role: match message.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                },
                content: message
                    .content
                    .iter()
                    .filter_map(|block| {
                        let kind = match block {
                            ContentBlock::Text { text } => WireBlock::Text { text },
                            // Reasoning without a signature came from another provider and
                            // would be rejected.
                            ContentBlock::Thinking {
                                thinking,
                                signature: Some(signature),
                                ..
                            } => WireBlock::Thinking {
                                thinking,
                                signature,
                            },
                            ContentBlock::Thinking {
                                signature: None, ..
                            } => return None,
                            ContentBlock::RedactedThinking { data, .. } => {
                                WireBlock::RedactedThinking { data }
                            }
                            ContentBlock::Image(image) => WireBlock::Image {
                                source: ImageSource {
                                    kind: "base64",
                                    media_type: &image.media_type,
                                    data: &image.data,
                                },
                            },
                            ContentBlock::ToolUse(call) => WireBlock::ToolUse {
                                id: &call.id,
                                name: &call.name,
                                input: ToolInput(&call.input),
                            },
                            ContentBlock::ToolResult(result) => WireBlock::ToolResult {
                                tool_use_id: &result.tool_use_id,
                                content: &result.content,
                                is_error: result.is_error,
                            },
                        };
                        Some(Marked {
                            block: kind,
                            cache_control: None,
                        })
                    })
                    .collect(),
            })
            .collect();
        let mut tools: Vec<Tool<'_>> = request
            .tools
            .iter()
            .map(|tool| Tool {
                name: &tool.name,
                description: &tool.description,
                input_schema: &tool.parameters,
                cache_control: None,
            })
            .collect();
        let mut system = TextPart::new(&request.system, false);
        if profile.prompt_caching {
            // Three of the four breakpoints Anthropic allows: the system prompt and the tools
            // change rarely, and the newest message makes the whole history so far a prefix
            // the next call of the tool loop reads back at a tenth of the price.
            system.cache_control = Some(EPHEMERAL);
            if let Some(tool) = tools.last_mut() {
                tool.cache_control = Some(EPHEMERAL);
            }
            let last_block = messages.last_mut().and_then(|m| {
                m.content.iter_mut().rev().find(|b| {
                    !matches!(
                        b.block,
                        WireBlock::Thinking { .. } | WireBlock::RedactedThinking { .. }
                    )
                })
            });
            if let Some(block) = last_block {
                block.cache_control = Some(EPHEMERAL);
            }
        }
        serde_json::to_vec(&Body {
            model: &request.model,
            max_tokens: request.max_tokens,
            messages,
            stream: true,
            system: (!request.system.is_empty()).then_some([system]),
            temperature: profile.temperature(request.temperature),
            tools,
        })
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

/// A request body, written straight from the borrowed request (no `serde_json::Value` in
/// between: a turn sends its whole history with every call).
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    messages: Vec<Message<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[TextPart<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Vec<Marked<'a>>,
}

/// A content block, and whether it is a cache breakpoint (the mark comes after its fields).
#[derive(Serialize)]
struct Marked<'a> {
    #[serde(flatten)]
    block: WireBlock<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    Image {
        source: ImageSource<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: ToolInput<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

/// A call's arguments; ones that are not an object (unparseable, kept as text) go as `{}`,
/// which is all Anthropic accepts.
struct ToolInput<'a>(&'a Value);

impl Serialize for ToolInput<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(_) => self.0.serialize(serializer),
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_) => serde::ser::SerializeMap::end(serializer.serialize_map(Some(0))?),
        }
    }
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
