//! What the web API's bodies look like: sessions, messages and errors as JSON (camelCase),
//! apart from how the transcript stores them.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nanocrab_schema::{AgentEvent, ContentBlock, Role, SessionKey, Usage};
use nanocrab_sessions::{SessionEntry, SessionSummary};
use serde::Serialize;

/// A failed request: its status and a message for the user.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    pub fn internal(err: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({"error": {"message": self.message}})),
        )
            .into_response()
    }
}

/// A session as the sidebar lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub id: String,
    pub agent: String,
    /// `web`, `telegram`, `cli`, `openai`, `cron`...: the third part of the key.
    pub channel: String,
    pub title: String,
    pub messages: usize,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    /// A turn of it runs or waits now.
    pub running: bool,
    /// Another channel's conversation: the page shows it, and writes to it only when asked.
    pub read_only: bool,
}

impl SessionView {
    pub fn new(summary: SessionSummary, running: bool) -> Self {
        let (agent, channel) = key_parts(&summary.key);
        Self {
            id: summary.key.to_string(),
            read_only: channel != WEB_CHANNEL,
            agent,
            channel,
            title: summary.title,
            messages: summary.messages,
            created_at: summary.created_at,
            updated_at: summary.updated_at,
            running,
        }
    }
}

/// The channel part of the page's own sessions' keys: `agent:<id>:web:<name>`.
pub const WEB_CHANNEL: &str = "web";

/// The agent and channel a key names (`agent:main:telegram:…` → `main`, `telegram`).
pub fn key_parts(key: &SessionKey) -> (String, String) {
    let text = key.to_string();
    let mut parts = text.splitn(4, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("agent"), Some(agent), Some(channel)) => (agent.to_owned(), channel.to_owned()),
        _ => (nanocrab_config::DEFAULT_AGENT_ID.to_owned(), String::new()),
    }
}

/// One message of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    pub role: &'static str,
    pub timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageView>,
    pub content: Vec<BlockView>,
}

impl MessageView {
    pub fn new(entry: &SessionEntry) -> Self {
        Self {
            role: match entry.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            },
            timestamp: entry.timestamp.clone(),
            model: entry.model.clone(),
            usage: entry.usage.map(UsageView::from),
            content: entry.content.iter().filter_map(BlockView::new).collect(),
        }
    }
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum BlockView {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    Image {
        media_type: String,
        /// Where the page fetches it; `None` for an image kept inline.
        url: Option<String>,
    },
    ToolCall {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    #[serde(rename_all = "camelCase")]
    ToolResult {
        call_id: String,
        output: String,
        is_error: bool,
    },
}

impl BlockView {
    /// `None` for what only a provider reads (encrypted reasoning).
    fn new(block: &ContentBlock) -> Option<Self> {
        Some(match block {
            ContentBlock::Text { text } => Self::Text { text: text.clone() },
            ContentBlock::Thinking { thinking, .. } => Self::Reasoning {
                text: thinking.clone(),
            },
            ContentBlock::RedactedThinking { .. } => return None,
            ContentBlock::Image(image) => Self::Image {
                media_type: image.media_type.clone(),
                url: image.file.as_ref().map(|file| format!("/api/{file}")),
            },
            ContentBlock::ToolUse(call) => Self::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            },
            ContentBlock::ToolResult(result) => Self::ToolResult {
                call_id: result.tool_use_id.clone(),
                output: result.content.clone(),
                is_error: result.is_error,
            },
        })
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageView {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl From<Usage> for UsageView {
    fn from(usage: Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
        }
    }
}

/// An [`AgentEvent`] as the page's stream names it (`token`, `tool_start`...) with its data;
/// `None` for what the page does not show.
pub fn stream_event(event: &AgentEvent, query: &str) -> Option<(&'static str, serde_json::Value)> {
    use serde_json::json;
    Some(match event {
        AgentEvent::Token { text } => ("token", json!({ "content": text })),
        AgentEvent::Reasoning { text } => ("reasoning", json!({ "content": text })),
        AgentEvent::ToolStart {
            call_id,
            name,
            input,
        } => (
            "tool_start",
            json!({ "callId": call_id, "tool": name, "input": input }),
        ),
        AgentEvent::ToolEnd {
            call_id,
            name,
            output,
            is_error,
        } => (
            "tool_end",
            json!({ "callId": call_id, "tool": name, "output": output, "isError": is_error }),
        ),
        AgentEvent::NewResponse { iteration } => {
            ("new_response", json!({ "iteration": iteration }))
        }
        AgentEvent::Compaction { messages } => ("compaction", json!({ "messages": messages })),
        AgentEvent::Retrieval { sources } => (
            "retrieval",
            json!({
                "query": query,
                "results": sources.iter().map(|s| json!({
                    "path": s.path,
                    "startLine": s.start_line,
                    "endLine": s.end_line,
                    "score": s.score,
                })).collect::<Vec<_>>(),
            }),
        ),
        AgentEvent::Usage { model, usage } => {
            let mut data = serde_json::to_value(UsageView::from(*usage)).unwrap_or_default();
            if let Some(object) = data.as_object_mut() {
                object.insert("model".to_owned(), json!(model));
            }
            ("usage", data)
        }
        AgentEvent::ModelFallback { from, to, reason } => (
            "notice",
            json!({ "message": format!("{from} failed ({reason}); answering with {to}") }),
        ),
        AgentEvent::Retry {
            provider,
            reason,
            delay_ms,
            attempt,
            attempts,
        } => (
            "notice",
            json!({ "message": format!(
                "{provider}: {reason}; trying again in {:.1} s ({attempt}/{attempts})",
                *delay_ms as f64 / 1000.0
            ) }),
        ),
        AgentEvent::Consolidating { messages } => (
            "notice",
            json!({ "message": format!("saving {messages} messages to memory…") }),
        ),
        AgentEvent::InstructionsChanged(change) => (
            "notice",
            json!({ "message": format!(
                "{} changed {} (the previous version is kept as {})",
                change.tool, change.path, change.version
            ) }),
        ),
        // The stream's own `done` and `error` carry the outcome.
        AgentEvent::Done { .. } | AgentEvent::Error { .. } => return None,
    })
}

/// A query string, or 400 in the API's error shape saying what is wrong with it.
pub struct ApiQuery<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(query)| Self(query))
            .map_err(|rejection| ApiError::bad_request(rejection.body_text()))
    }
}
