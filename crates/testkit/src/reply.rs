//! Scripted replies: what the mock answers to one request, independent of the wire format.
//! `anthropic.rs`, `openai_chat.rs`, `openai_responses.rs` and `gemini.rs` turn a reply into
//! each provider's real bytes.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use serde_json::Value;

use crate::fixtures::{Protocol, chunks_to_sse, fixture_bytes};
use crate::gate::Gate;
use crate::{anthropic, gemini, openai_chat, openai_responses};

/// One piece of an assistant answer, in the order the model produces it.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Reasoning: an Anthropic `thinking` block; `reasoning_content` on OpenAI Chat endpoints
    /// (DeepSeek's field); a `reasoning` item with the text as its summary on the Responses API;
    /// a `thought: true` part on Gemini.
    Thinking(String),
    Text(String),
    /// A tool call whose arguments are sent exactly as `raw_arguments` (may be broken JSON).
    ToolCall {
        id: String,
        name: String,
        raw_arguments: String,
    },
}

/// The errors the mock can answer with, each in the envelope of the endpoint hit:
/// Anthropic `{"type":"error","error":{"type","message"},"request_id"}` (as in
/// `anthropic/error-400-invalid-request.json`), OpenAI Chat and Responses
/// `{"error":{"message","type","param","code"}}` (as in `openai/error-429-insufficient-quota.json`),
/// Gemini `{"error":{"code","message","status"}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiError {
    /// 400 `invalid_request_error`: never retried.
    BadRequest,
    /// 401; the OpenAI body echoes a masked key, as the real one does.
    Unauthorized,
    /// 403 `permission_error`: never retried.
    Forbidden,
    /// 429 rate limit.
    RateLimited,
    /// 500 `api_error` / `server_error`.
    ServerError,
    /// Anthropic's 529 `overloaded_error`; OpenAI-style endpoints answer 503.
    Overloaded,
}

#[derive(Debug, Clone)]
enum Body {
    Answer(Vec<Part>),
    /// Streams the answer's parts, then an in-stream error event instead of the end.
    StreamError(Vec<Part>),
    /// Streams the answer's parts, then neither ends nor fails: the stream stays open.
    Stall(Vec<Part>),
    Error(ApiError),
    Status {
        status: StatusCode,
        body: Value,
    },
    Fixture(String),
    /// `echo: ` and the text of the request's last user message.
    Echo,
}

/// What the mock answers to one request. The same reply is rendered as Anthropic Messages,
/// OpenAI Chat Completions, the OpenAI Responses API or Gemini depending on the endpoint hit,
/// as SSE when the request asks for a stream and as one JSON body otherwise.
#[derive(Debug, Clone)]
pub struct Reply {
    body: Body,
    stop: Stop,
    delay: Duration,
    gate: Option<Gate>,
    chunk_delay: Duration,
    chunk_size: Option<usize>,
    headers: Vec<(HeaderName, HeaderValue)>,
    usage: Usage,
}

/// How an answer ends, which each endpoint spells its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The model finished: `end_turn` / `stop` / `STOP` / `completed`, or the tool-call reason
    /// when the answer calls a tool.
    Done,
    /// Cut by the output token limit.
    MaxTokens,
    /// The model declined; its text parts are the refusal.
    Refusal,
}

/// Token counts the reply reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Input tokens not read from the prompt cache (Anthropic's `input_tokens`); the
    /// OpenAI-style endpoints and Gemini add `cache_read` to it for their prompt total.
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    /// Tokens written to the prompt cache: only Anthropic reports them.
    pub cache_write: u64,
}

/// A reply rendered for one endpoint: the body as the frames it is written in.
pub(crate) struct Rendered {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub frames: Vec<Bytes>,
    /// After the frames the body stays open, sending nothing, until the client goes away.
    pub hold: bool,
}

/// The endpoint a request hit, which decides the wire format of the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `POST /v1/messages`
    AnthropicMessages,
    /// `POST /v1/chat/completions`
    OpenAiChat,
    /// `POST /v1/responses`
    OpenAiResponses,
    /// `POST /v1beta/models/{model}:generateContent` or `:streamGenerateContent?alt=sse`: the
    /// model and whether to stream come from the path, not the body.
    Gemini,
}

impl Reply {
    /// An answer made of `parts`, e.g. thinking, then text, then two tool calls.
    pub fn parts(parts: Vec<Part>) -> Self {
        Self {
            body: Body::Answer(parts),
            stop: Stop::Done,
            delay: Duration::ZERO,
            gate: None,
            chunk_delay: Duration::ZERO,
            chunk_size: None,
            headers: Vec::new(),
            usage: Usage {
                input: 12,
                output: 7,
                cache_read: 0,
                cache_write: 0,
            },
        }
    }

    /// A plain text answer (`end_turn` / `stop`). `<think>` tags are just text.
    pub fn text(text: impl Into<String>) -> Self {
        Self::parts(vec![Part::Text(text.into())])
    }

    /// `text` cut off by the output token limit: Anthropic `stop_reason: "max_tokens"`, OpenAI
    /// Chat `finish_reason: "length"` (`chat/stream-length-truncated.sse`), Gemini
    /// `finishReason: "MAX_TOKENS"` (`gemini/max-tokens.json`), Responses `status: "incomplete"`
    /// with `incomplete_details.reason: "max_output_tokens"`, the message item `incomplete` and
    /// a final `response.incomplete` event.
    pub fn truncated(text: impl Into<String>) -> Self {
        Self {
            stop: Stop::MaxTokens,
            ..Self::text(text)
        }
    }

    /// The model declines with `text`: Anthropic a text block and `stop_reason: "refusal"`;
    /// OpenAI Chat `content: null` and the text in `refusal` (`delta.refusal` pieces when
    /// streamed, as in `chat/stream-refusal.sse`; `message.refusal` as in `chat/refusal.json`),
    /// `finish_reason: "stop"`; Responses a `refusal` content part (`response.refusal.delta` /
    /// `.done`); Gemini `finishReason: "SAFETY"` with empty content and no text at all, as in
    /// `gemini/safety-blocked-candidate.json`.
    pub fn refusal(text: impl Into<String>) -> Self {
        Self {
            stop: Stop::Refusal,
            ..Self::text(text)
        }
    }

    /// Reasoning, then a text answer.
    pub fn thinking(thinking: impl Into<String>, text: impl Into<String>) -> Self {
        Self::parts(vec![
            Part::Thinking(thinking.into()),
            Part::Text(text.into()),
        ])
    }

    /// One tool call with JSON arguments (`tool_use` / `tool_calls`).
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::tool_calls(vec![(id.into(), name.into(), input)])
    }

    /// Parallel tool calls in one answer: `(id, name, input)` each.
    pub fn tool_calls(calls: Vec<(String, String, Value)>) -> Self {
        Self::parts(
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
        Self::parts(vec![
            Part::Text(text.into()),
            Part::ToolCall {
                id: id.into(),
                name: name.into(),
                raw_arguments: input.to_string(),
            },
        ])
    }

    /// A tool call whose arguments are sent exactly as given, e.g. broken JSON. (A non-stream
    /// Anthropic answer carries `input` parsed; unparsable text goes there as a JSON string,
    /// a case the real API never produces.)
    pub fn tool_call_raw(
        id: impl Into<String>,
        name: impl Into<String>,
        raw_arguments: impl Into<String>,
    ) -> Self {
        Self::parts(vec![Part::ToolCall {
            id: id.into(),
            name: name.into(),
            raw_arguments: raw_arguments.into(),
        }])
    }

    /// `error` with the provider's own status and body for the endpoint hit.
    pub fn error(error: ApiError) -> Self {
        Self {
            body: Body::Error(error),
            ..Self::parts(Vec::new())
        }
    }

    /// Shorthand for `Reply::error(ApiError::Unauthorized)`.
    pub fn unauthorized() -> Self {
        Self::error(ApiError::Unauthorized)
    }

    /// Shorthand for `Reply::error(ApiError::Overloaded)`.
    pub fn overloaded() -> Self {
        Self::error(ApiError::Overloaded)
    }

    /// Shorthand for `Reply::error(ApiError::RateLimited)`; add `retry-after` with
    /// [`Reply::with_header`].
    pub fn rate_limited() -> Self {
        Self::error(ApiError::RateLimited)
    }

    /// Any status with a JSON body of your choice.
    pub fn status(status: u16, body: Value) -> Self {
        let status = StatusCode::from_u16(status)
            .unwrap_or_else(|err| panic!("mock LLM: invalid HTTP status {status}: {err}"));
        Self {
            body: Body::Status { status, body },
            ..Self::parts(Vec::new())
        }
    }

    /// A 200 stream that sends `text` and then fails: Anthropic's `event: error` with the
    /// `overloaded_error` body quoted in the fixtures README; on OpenAI Chat an `event: error`
    /// carrying an `{"error":{..}}` object, as Groq sends
    /// (`openai-compatible/groq-stream-tool-use-failed-error.sse`); on the Responses API a
    /// `type: "error"` event and then `response.failed`, as in
    /// `responses/stream-error-insufficient-quota.chunks.txt`; on Gemini an `{"error":{..}}`
    /// chunk. None ends the stream properly (no `message_stop`, no `[DONE]`, no
    /// `response.completed`, no finish reason). A non-stream request gets the overloaded HTTP
    /// error instead.
    pub fn stream_error_after(text: impl Into<String>) -> Self {
        Self {
            body: Body::StreamError(vec![Part::Text(text.into())]),
            ..Self::parts(Vec::new())
        }
    }

    /// A 200 stream that sends `text` and then stalls: no end, no error, the connection held
    /// open until the client goes away, like a model that hangs mid-answer (or a user who
    /// interrupts it before it is done). A non-stream request gets the status line and
    /// headers, then nothing.
    pub fn stall_after(text: impl Into<String>) -> Self {
        Self {
            body: Body::Stall(vec![Part::Text(text.into())]),
            ..Self::parts(Vec::new())
        }
    }

    /// Replays a recorded fixture (path relative to `shared/fixtures/`): `.sse` byte for byte
    /// as `text/event-stream`; `.chunks.txt` framed as SSE for the endpoint hit (see
    /// [`chunks_to_sse`]); `.json` as `application/json`, with the status taken from an
    /// `error-NNN` in the file name (200 otherwise).
    pub fn fixture(relative_path: impl Into<String>) -> Self {
        Self {
            body: Body::Fixture(relative_path.into()),
            ..Self::parts(Vec::new())
        }
    }

    /// A text answer `echo: <text>`, `<text>` being the text of the request's last user
    /// message (its text parts joined by newlines; messages holding only tool results are
    /// passed over). Meant for [`MockLlm::set_fallback`](crate::MockLlm::set_fallback) when
    /// conversations run concurrently, where a first-in-first-out script cannot say which
    /// request gets which reply.
    pub fn echo() -> Self {
        Self {
            body: Body::Echo,
            ..Self::parts(Vec::new())
        }
    }

    /// Waits this long before answering (before the status line).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Waits until `gate` is opened before answering (before the status line): a turn held in
    /// flight for as long as the test needs.
    pub fn held_by(mut self, gate: &Gate) -> Self {
        self.gate = Some(gate.clone());
        self
    }

    /// Waits this long before each frame of the body after the first.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Writes the body in pieces of `bytes` bytes instead of one per SSE event, so events and
    /// even UTF-8 characters straddle reads (exercises client SSE parsers).
    pub fn with_chunk_size(mut self, bytes: usize) -> Self {
        assert!(bytes > 0, "chunk size must be at least one byte");
        self.chunk_size = Some(bytes);
        self
    }

    /// Adds a response header, e.g. `retry-after`.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        let name = HeaderName::from_bytes(name.as_bytes())
            .unwrap_or_else(|err| panic!("mock LLM: invalid header name {name:?}: {err}"));
        let value = HeaderValue::from_str(value)
            .unwrap_or_else(|err| panic!("mock LLM: invalid header value {value:?}: {err}"));
        self.headers.push((name, value));
        self
    }

    /// Token counts reported (default 12 in, 7 out). `input_tokens` are the uncached ones; see
    /// [`Reply::with_cache_usage`].
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage.input = input_tokens;
        self.usage.output = output_tokens;
        self
    }

    /// Prompt-cache figures reported besides the uncached input of [`Reply::with_usage`]:
    /// Anthropic `cache_read_input_tokens` = `read` and `cache_creation_input_tokens` = `write`
    /// beside `input_tokens`; OpenAI Chat `prompt_tokens_details.cached_tokens` = `read` with
    /// `read` counted inside `prompt_tokens`; Responses `input_tokens_details.cached_tokens`
    /// inside `input_tokens`; Gemini `cachedContentTokenCount` inside `promptTokenCount`.
    /// `write` is Anthropic-only: the other APIs cache implicitly and report no such figure.
    /// OpenAI Chat and Gemini leave the cached figure out when `read` is 0, as the recorded
    /// streams do; Responses always carries it.
    pub fn with_cache_usage(mut self, read: u64, write: u64) -> Self {
        self.usage.cache_read = read;
        self.usage.cache_write = write;
        self
    }

    pub(crate) fn delay(&self) -> Duration {
        self.delay
    }

    pub(crate) fn gate(&self) -> Option<&Gate> {
        self.gate.as_ref()
    }

    pub(crate) fn chunk_delay(&self) -> Duration {
        self.chunk_delay
    }

    pub(crate) fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    /// The reply in the wire format of `endpoint`, for the request body `request`.
    pub(crate) fn render(&self, endpoint: Endpoint, request: &Value) -> Rendered {
        let stream = request["stream"].as_bool().unwrap_or(false);
        let model = request["model"].as_str().unwrap_or("mock-model");
        let (usage, stop) = (self.usage, self.stop);
        let rendered = match (&self.body, endpoint) {
            (Body::Answer(parts), Endpoint::AnthropicMessages) if stream => {
                sse(anthropic::stream(parts, model, usage, stop, false))
            }
            (Body::StreamError(parts), Endpoint::AnthropicMessages) if stream => {
                sse(anthropic::stream(parts, model, usage, stop, true))
            }
            (Body::Answer(parts), Endpoint::OpenAiChat) if stream => {
                let include_usage = request["stream_options"]["include_usage"] == true;
                sse(openai_chat::stream(
                    parts,
                    model,
                    include_usage.then_some(usage),
                    stop,
                    false,
                ))
            }
            (Body::StreamError(parts), Endpoint::OpenAiChat) if stream => {
                sse(openai_chat::stream(parts, model, None, stop, true))
            }
            (Body::Answer(parts), Endpoint::OpenAiResponses) if stream => {
                sse(openai_responses::stream(parts, request, usage, stop, false))
            }
            (Body::StreamError(parts), Endpoint::OpenAiResponses) if stream => {
                sse(openai_responses::stream(parts, request, usage, stop, true))
            }
            (Body::Answer(parts), Endpoint::Gemini) if stream => {
                sse(gemini::stream(parts, model, usage, stop, false))
            }
            (Body::StreamError(parts), Endpoint::Gemini) if stream => {
                sse(gemini::stream(parts, model, usage, stop, true))
            }
            (Body::Answer(parts), Endpoint::Gemini) => {
                json(StatusCode::OK, &gemini::response(parts, model, usage, stop))
            }
            (Body::Answer(parts), Endpoint::AnthropicMessages) => json(
                StatusCode::OK,
                &anthropic::message(parts, model, usage, stop),
            ),
            (Body::Answer(parts), Endpoint::OpenAiChat) => json(
                StatusCode::OK,
                &openai_chat::completion(parts, model, usage, stop),
            ),
            (Body::Answer(parts), Endpoint::OpenAiResponses) => json(
                StatusCode::OK,
                &openai_responses::response(parts, request, usage, stop),
            ),
            // The failing stream without its error event(s): the answer's parts, then silence.
            (Body::Stall(parts), _) if stream => {
                let failing = Self {
                    body: Body::StreamError(parts.clone()),
                    chunk_size: None,
                    ..self.clone()
                }
                .render(endpoint, request);
                let error_events = match endpoint {
                    Endpoint::OpenAiResponses => 2,
                    Endpoint::AnthropicMessages | Endpoint::OpenAiChat | Endpoint::Gemini => 1,
                };
                let mut frames = failing.frames;
                frames.truncate(frames.len().saturating_sub(error_events));
                Rendered {
                    frames,
                    hold: true,
                    ..failing
                }
            }
            (Body::Stall(_), _) => Rendered {
                status: StatusCode::OK,
                content_type: "application/json",
                frames: Vec::new(),
                hold: true,
            },
            (
                Body::StreamError(_),
                Endpoint::AnthropicMessages
                | Endpoint::OpenAiChat
                | Endpoint::OpenAiResponses
                | Endpoint::Gemini,
            ) => error(ApiError::Overloaded, endpoint),
            (Body::Error(api_error), _) => error(*api_error, endpoint),
            (Body::Status { status, body }, _) => json(*status, body),
            (Body::Fixture(path), _) => fixture(path, endpoint),
            // Re-cut below, with the rest.
            (Body::Echo, _) => Self {
                body: Body::Answer(vec![Part::Text(format!(
                    "echo: {}",
                    last_user_text(endpoint, request)
                ))]),
                chunk_size: None,
                ..self.clone()
            }
            .render(endpoint, request),
        };
        match self.chunk_size {
            Some(size) => Rendered {
                frames: rendered
                    .frames
                    .concat()
                    .chunks(size)
                    .map(Bytes::copy_from_slice)
                    .collect(),
                ..rendered
            },
            None => rendered,
        }
    }
}

/// The text of the last user message of `request` that has any, in the layout of `endpoint`.
fn last_user_text(endpoint: Endpoint, request: &Value) -> String {
    let (list, content) = match endpoint {
        Endpoint::AnthropicMessages | Endpoint::OpenAiChat => ("messages", "content"),
        Endpoint::OpenAiResponses => ("input", "content"),
        Endpoint::Gemini => ("contents", "parts"),
    };
    if let Value::String(text) = &request[list] {
        return text.clone();
    }
    let messages = request[list]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    messages
        .iter()
        .rev()
        .filter(|message| message["role"] == "user")
        .map(|message| match &message[content] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                // Text blocks are typed `text` or `input_text`; Gemini's parts are untyped.
                .filter(|part| matches!(part["type"].as_str(), None | Some("text" | "input_text")))
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .find(|text| !text.is_empty())
        .unwrap_or_default()
}

fn sse(events: Vec<String>) -> Rendered {
    Rendered {
        status: StatusCode::OK,
        content_type: "text/event-stream",
        frames: events.into_iter().map(Bytes::from).collect(),
        hold: false,
    }
}

fn json(status: StatusCode, body: &Value) -> Rendered {
    Rendered {
        status,
        content_type: "application/json",
        frames: vec![Bytes::from(body.to_string())],
        hold: false,
    }
}

fn error(api_error: ApiError, endpoint: Endpoint) -> Rendered {
    let (status, body) = match endpoint {
        Endpoint::AnthropicMessages => anthropic::error(api_error),
        // The Responses API shares Chat Completions' error envelope and statuses.
        Endpoint::OpenAiChat | Endpoint::OpenAiResponses => openai_chat::error(api_error),
        Endpoint::Gemini => gemini::error(api_error),
    };
    let status = StatusCode::from_u16(status).expect("error statuses are valid");
    json(status, &body)
}

fn fixture(path: &str, endpoint: Endpoint) -> Rendered {
    let bytes = fixture_bytes(path);
    if path.ends_with(".json") {
        return Rendered {
            status: error_status_in_name(path).unwrap_or(StatusCode::OK),
            content_type: "application/json",
            frames: vec![Bytes::from(bytes)],
            hold: false,
        };
    }
    let body = if path.ends_with(".chunks.txt") {
        let protocol = match endpoint {
            Endpoint::AnthropicMessages => Protocol::Anthropic,
            Endpoint::OpenAiChat => Protocol::OpenAiChat,
            Endpoint::OpenAiResponses => Protocol::OpenAiResponses,
            Endpoint::Gemini => Protocol::Gemini,
        };
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|err| panic!("fixture {path} is not UTF-8: {err}"));
        chunks_to_sse(protocol, &text).into_bytes()
    } else {
        assert!(
            path.ends_with(".sse"),
            "fixture {path}: expected .sse, .chunks.txt or .json"
        );
        bytes
    };
    Rendered {
        status: StatusCode::OK,
        content_type: "text/event-stream",
        frames: vec![Bytes::from(body)],
        hold: false,
    }
}

/// `400` from `.../groq-error-400-tool-use-failed.json`.
fn error_status_in_name(path: &str) -> Option<StatusCode> {
    let name = path.rsplit('/').next()?;
    let (_, after) = name.split_once("error-")?;
    StatusCode::from_bytes(after.get(..3)?.as_bytes()).ok()
}

/// Pieces of `text` a few characters long, as real servers stream them.
pub(crate) fn pieces(text: &str, chars: usize) -> Vec<String> {
    let all: Vec<char> = text.chars().collect();
    all.chunks(chars).map(|c| c.iter().collect()).collect()
}

pub(crate) fn has_tool_call(parts: &[Part]) -> bool {
    parts.iter().any(|p| matches!(p, Part::ToolCall { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_status_comes_from_the_file_name() {
        assert_eq!(
            error_status_in_name("providers/openai-compatible/groq-error-400-tool-use-failed.json"),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            error_status_in_name("providers/openai/error-429-insufficient-quota.json"),
            Some(StatusCode::TOO_MANY_REQUESTS)
        );
        assert_eq!(error_status_in_name("providers/anthropic/text.json"), None);
    }

    #[test]
    fn pieces_never_split_a_character() {
        assert_eq!(pieces("héllo wörld", 4), vec!["héll", "o wö", "rld"]);
        assert!(pieces("", 4).is_empty());
    }
}
