//! OpenAI Chat Completions (`POST {apiBase}/chat/completions`, streaming); also every
//! OpenAI-compatible server (Ollama, vLLM, LM Studio, OpenRouter, DeepSeek, Groq, ...).

use std::borrow::Cow;
use std::collections::BTreeMap;

use nanocrab_schema::{ContentBlock, Image, LlmMessage, Role, StopReason, ToolCall, Usage};
use serde::Serialize;
use serde_json::Value;

use crate::error::ProviderError;
use crate::http::{ErrorInfo, StreamState, WireFormat, bearer, parse_arguments};
use crate::profile::{MaxTokensField, ModelProfile, ReasoningEcho, ToolCallContent};
use crate::provider::{ChatRequest, ChatResponse, ProviderDelta};
use crate::text_part::TextPart;
use crate::think::ThinkFilter;

pub(crate) struct OpenAi;

impl WireFormat for OpenAi {
    fn path(&self, _model: &str) -> String {
        "/chat/completions".to_owned()
    }

    fn auth_headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)> {
        bearer(api_key)
    }

    fn body(
        &self,
        request: &ChatRequest<'_>,
        profile: &ModelProfile,
    ) -> serde_json::Result<Vec<u8>> {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(Message::System(Content::Text(&request.system)));
        }
        for message in request.messages.iter() {
            match message.role {
                Role::User => {
                    // Tool results become `tool` messages, which must directly follow the
                    // assistant message that made the calls; any text goes after them.
                    for result in message.tool_results() {
                        messages.push(Message::Tool {
                            tool_call_id: &result.tool_use_id,
                            content: &result.content,
                        });
                    }
                    let text = joined_text(message);
                    if message.images().next().is_some() {
                        messages.push(Message::User(Content::Parts {
                            text: (!text.is_empty()).then_some(text),
                            images: message.images().collect(),
                            cached: false,
                        }));
                    } else if !text.is_empty() {
                        messages.push(Message::User(Content::Owned(text)));
                    }
                }
                Role::Assistant => messages.push(assistant_message(message, profile)),
            }
        }
        if profile.prompt_caching {
            mark_cacheable(&mut messages);
        }
        let temperature = profile.temperature(request.temperature);
        let body = Body {
            model: &request.model,
            messages,
            stream: true,
            max_tokens: (profile.max_tokens_field == MaxTokensField::MaxTokens)
                .then_some(request.max_tokens),
            max_completion_tokens: (profile.max_tokens_field
                == MaxTokensField::MaxCompletionTokens)
                .then_some(request.max_tokens),
            stream_options: profile.stream_usage.then_some(StreamOptions {
                include_usage: true,
            }),
            temperature,
            tools: request
                .tools
                .iter()
                .map(|tool| Tool {
                    kind: "function",
                    function: Function {
                        name: &tool.name,
                        description: &tool.description,
                        parameters: &tool.parameters,
                    },
                })
                .collect(),
        };
        serde_json::to_vec(&body)
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

/// A request body, written straight from the borrowed request: a busy gateway sends a whole
/// history with every call, and building it as a `serde_json::Value` first would copy every
/// message once more.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    System(Content<'a>),
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
    User(Content<'a>),
    Assistant {
        content: AssistantContent<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
}

/// A message's `content` (serialized as `{"content": ...}` through the enum's newtype arms).
enum Content<'a> {
    Text(&'a str),
    Owned(Cow<'a, str>),
    /// Content parts: the text, if any, then the images; `cached` marks the text part as a
    /// cache breakpoint.
    Parts {
        text: Option<Cow<'a, str>>,
        images: Vec<&'a Image>,
        cached: bool,
    },
}

impl Serialize for Content<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(1))?;
        match self {
            Content::Text(text) => map.serialize_entry("content", text)?,
            Content::Owned(text) => map.serialize_entry("content", text)?,
            Content::Parts {
                text,
                images,
                cached,
            } => map.serialize_entry(
                "content",
                &Parts {
                    text: text.as_deref(),
                    images,
                    cached: *cached,
                },
            )?,
        }
        map.end()
    }
}

struct Parts<'a> {
    text: Option<&'a str>,
    images: &'a [&'a Image],
    cached: bool,
}

impl Serialize for Parts<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq as _;
        let mut seq =
            serializer.serialize_seq(Some(usize::from(self.text.is_some()) + self.images.len()))?;
        if let Some(text) = self.text {
            seq.serialize_element(&TextPart::new(text, self.cached))?;
        }
        for image in self.images {
            seq.serialize_element(&ImagePart {
                kind: "image_url",
                image_url: ImageUrl {
                    url: format!("data:{};base64,{}", image.media_type, image.data),
                },
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct ImagePart {
    #[serde(rename = "type")]
    kind: &'static str,
    image_url: ImageUrl,
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

/// An assistant message's `content`: its text, or for one that only calls tools, `null` or
/// `""` as the provider wants; marked as a cache breakpoint, the text as one part.
enum AssistantContent<'a> {
    Text { text: Cow<'a, str>, cached: bool },
    Null,
}

impl Serialize for AssistantContent<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AssistantContent::Text { text, cached } if *cached && !text.is_empty() => Parts {
                text: Some(text),
                images: &[],
                cached: true,
            }
            .serialize(serializer),
            AssistantContent::Text { text, .. } => serializer.serialize_str(text),
            AssistantContent::Null => serializer.serialize_unit(),
        }
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    /// The arguments as JSON text; a call whose arguments could not be parsed keeps its raw
    /// text.
    arguments: Cow<'a, str>,
}

/// A message's text blocks as one string, borrowed when there is only one.
fn joined_text(message: &LlmMessage) -> Cow<'_, str> {
    let mut texts = message.content.iter().filter_map(|block| match block {
        ContentBlock::Text { text } => Some(text.as_str()),
        ContentBlock::Thinking { .. }
        | ContentBlock::RedactedThinking { .. }
        | ContentBlock::Image(_)
        | ContentBlock::ToolUse(_)
        | ContentBlock::ToolResult(_) => None,
    });
    match (texts.next(), texts.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(only), None) => Cow::Borrowed(only),
        (Some(first), Some(second)) => {
            let mut joined = String::from(first);
            joined.push_str(second);
            texts.for_each(|text| joined.push_str(text));
            Cow::Owned(joined)
        }
    }
}

/// An assistant message in Chat Completions form, with the provider's quirks: how a
/// tool-only message's content is written, and whether reasoning goes back.
fn assistant_message<'a>(message: &'a LlmMessage, profile: &ModelProfile) -> Message<'a> {
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
    let mut text = joined_text(message);
    if profile.reasoning_echo == ReasoningEcho::ThinkTags && !reasoning.is_empty() {
        text = Cow::Owned(format!("<think>{reasoning}</think>\n{text}"));
    }
    let tool_calls: Vec<WireCall<'_>> = message
        .tool_calls()
        .map(|call| WireCall {
            id: &call.id,
            kind: "function",
            function: CallFunction {
                name: &call.name,
                arguments: match &call.input {
                    Value::String(raw) => Cow::Borrowed(raw),
                    other => Cow::Owned(other.to_string()),
                },
            },
        })
        .collect();
    let content = match (text.is_empty(), profile.tool_call_content) {
        (false, _) => AssistantContent::Text {
            text,
            cached: false,
        },
        (true, ToolCallContent::Null) if !tool_calls.is_empty() => AssistantContent::Null,
        (true, ToolCallContent::Null | ToolCallContent::EmptyString) => AssistantContent::Text {
            text: Cow::Borrowed(""),
            cached: false,
        },
    };
    // DeepSeek and Kimi thinking models reject a tool-call message without its reasoning;
    // an empty one is accepted when the calls came from another model.
    let reasoning_content = (profile.reasoning_echo == ReasoningEcho::ReasoningContent
        && (!reasoning.is_empty() || !tool_calls.is_empty()))
    .then_some(reasoning);
    Message::Assistant {
        content,
        reasoning_content,
        tool_calls,
    }
}

/// Marks the system prompt and the newest message as cache breakpoints, in the content-part
/// form OpenRouter passes on to Anthropic and Gemini models.
fn mark_cacheable(messages: &mut [Message<'_>]) {
    let system = messages
        .iter()
        .position(|m| matches!(m, Message::System(_)));
    let last = messages
        .iter()
        .rposition(|m| matches!(m, Message::User(_) | Message::Assistant { .. }));
    for index in [system, last].into_iter().flatten() {
        match &mut messages[index] {
            Message::System(content) | Message::User(content) => {
                *content = match std::mem::replace(content, Content::Text("")) {
                    Content::Parts { text, images, .. } => Content::Parts {
                        cached: text.is_some(),
                        text,
                        images,
                    },
                    Content::Text(text) if !text.is_empty() => Content::Parts {
                        text: Some(Cow::Borrowed(text)),
                        images: Vec::new(),
                        cached: true,
                    },
                    Content::Owned(text) if !text.is_empty() => Content::Parts {
                        text: Some(text),
                        images: Vec::new(),
                        cached: true,
                    },
                    other @ (Content::Text(_) | Content::Owned(_)) => other,
                };
            }
            Message::Assistant { content, .. } => {
                if let AssistantContent::Text { cached, .. } = content {
                    *cached = true;
                }
            }
            Message::Tool { .. } => {}
        }
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
