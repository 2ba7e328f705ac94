//! The OpenAI Chat Completions wire format as the gateway serves it: the request a client
//! sends, what nanocrab makes of it, and the bodies and stream chunks it answers with.
//!
//! nanocrab keeps the conversation itself, so a request is one new user message for a
//! session: the last user message is the turn's input, and the earlier messages only seed a
//! session that has no history yet (a stateless client sends the whole conversation each
//! time). Tools are nanocrab's own; a client's `tools` are refused rather than ignored.

use base64::Engine as _;
use nanocrab_schema::{ContentBlock, Image, LlmMessage, Role, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `POST /v1/chat/completions`, the fields nanocrab reads. Unknown fields (`temperature`,
/// `top_p`, ...) are accepted and left alone: the agent's own settings apply.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<RequestMessage>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Names the caller; requests with the same `user` continue one session.
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RequestMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ImageUrl {
    pub url: String,
}

/// A request the gateway cannot serve, in OpenAI's error shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WireError {
    pub status: u16,
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<&'static str>,
    pub message: String,
}

impl WireError {
    pub fn invalid(param: &'static str, message: impl Into<String>) -> Self {
        Self {
            status: 400,
            kind: "invalid_request_error",
            code: None,
            param: Some(param),
            message: message.into(),
        }
    }

    pub fn body(&self) -> Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

/// What a request asks of the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiTurn {
    /// The new message: text (system instructions of the request first) and images.
    pub text: String,
    pub images: Vec<Image>,
    /// The conversation before it, for a session that has none yet.
    pub earlier: Vec<LlmMessage>,
}

impl ChatRequest {
    /// Splits the messages into the turn's input and the history before it.
    pub fn turn(&self) -> Result<ApiTurn, WireError> {
        if self.tools.as_ref().is_some_and(|tools| !tools.is_empty()) {
            return Err(WireError::invalid(
                "tools",
                "nanocrab runs its own tools; tools defined by the client are not supported",
            ));
        }
        let last_user = self
            .messages
            .iter()
            .rposition(|m| m.role == "user")
            .ok_or_else(|| WireError::invalid("messages", "no message with role `user`"))?;
        let mut instructions = Vec::new();
        let mut earlier = Vec::new();
        for (i, message) in self.messages[..last_user].iter().enumerate() {
            let (text, images) = content(message, i)?;
            match message.role.as_str() {
                "system" | "developer" => instructions.push(text),
                "user" | "assistant" => {
                    let role = if message.role == "user" {
                        Role::User
                    } else {
                        Role::Assistant
                    };
                    let mut blocks = vec![ContentBlock::text(text)];
                    blocks.extend(images.into_iter().map(ContentBlock::Image));
                    earlier.push(LlmMessage {
                        role,
                        content: blocks,
                    });
                }
                // The client's own tool results answer tool calls nanocrab never made.
                "tool" | "function" => {
                    return Err(WireError::invalid(
                        "messages",
                        format!(
                            "messages[{i}]: role `{}` is not supported; nanocrab runs its own tools",
                            message.role
                        ),
                    ));
                }
                other => {
                    return Err(WireError::invalid(
                        "messages",
                        format!("messages[{i}]: unknown role `{other}`"),
                    ));
                }
            }
        }
        let (text, images) = content(&self.messages[last_user], last_user)?;
        // Instructions after the last user message (rare) are ignored with it: the turn is
        // the user's message.
        let text = if instructions.is_empty() {
            text
        } else {
            format!(
                "Instructions from the API client:\n{}\n\n{text}",
                instructions.join("\n\n")
            )
        };
        Ok(ApiTurn {
            text,
            images,
            earlier,
        })
    }
}

fn content(message: &RequestMessage, index: usize) -> Result<(String, Vec<Image>), WireError> {
    match &message.content {
        None => Ok((String::new(), Vec::new())),
        Some(MessageContent::Text(text)) => Ok((text.clone(), Vec::new())),
        Some(MessageContent::Parts(parts)) => {
            let mut texts = Vec::new();
            let mut images = Vec::new();
            for part in parts {
                match part {
                    ContentPart::Text { text } => texts.push(text.as_str()),
                    ContentPart::ImageUrl { image_url } => {
                        images.push(data_url_image(&image_url.url).ok_or_else(|| {
                            WireError::invalid(
                                "messages",
                                format!(
                                    "messages[{index}]: an image must be a base64 data: URL (PNG, JPEG, GIF or WebP); nanocrab does not fetch images from the web"
                                ),
                            )
                        })?);
                    }
                }
            }
            Ok((texts.join("\n"), images))
        }
    }
}

fn data_url_image(url: &str) -> Option<Image> {
    let rest = url.strip_prefix("data:")?;
    let (media_type, data) = rest.split_once(";base64,")?;
    if !matches!(
        media_type,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    ) {
        return None;
    }
    // Checked here so a bad image is the client's 400, not a provider error mid-turn.
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    Some(Image {
        media_type: media_type.to_owned(),
        data: data.to_owned(),
        file: None,
    })
}

/// The `usage` object of a response.
pub fn usage_body(usage: &Usage) -> Value {
    let prompt = usage.prompt_tokens();
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
    })
}

/// A whole (non-streamed) answer.
pub fn completion_body(id: &str, created: i64, model: &str, text: &str, usage: &Usage) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop",
        }],
        "usage": usage_body(usage),
    })
}

/// One `chat.completion.chunk` of a streamed answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chunk<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: i64,
    pub model: &'a str,
    pub choices: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
}

impl<'a> Chunk<'a> {
    fn new(id: &'a str, created: i64, model: &'a str, choices: Vec<Value>) -> Self {
        Self {
            id,
            object: "chat.completion.chunk",
            created,
            model,
            choices,
            usage: None,
        }
    }

    /// The first chunk: the assistant's role.
    pub fn role(id: &'a str, created: i64, model: &'a str) -> Self {
        Self::new(
            id,
            created,
            model,
            vec![
                json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}),
            ],
        )
    }

    pub fn text(id: &'a str, created: i64, model: &'a str, text: &str) -> Self {
        Self::new(
            id,
            created,
            model,
            vec![
                json!({"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null}),
            ],
        )
    }

    pub fn stop(id: &'a str, created: i64, model: &'a str) -> Self {
        Self::new(
            id,
            created,
            model,
            vec![json!({"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"})],
        )
    }

    /// The usage chunk `stream_options.include_usage` asks for: no choices.
    pub fn usage(id: &'a str, created: i64, model: &'a str, usage: &Usage) -> Self {
        Self {
            usage: Some(usage_body(usage)),
            ..Self::new(id, created, model, Vec::new())
        }
    }
}

/// The list `GET /v1/models` answers: one model per agent.
pub fn models_body(agent_ids: &[&str], created: i64) -> Value {
    let data: Vec<Value> = agent_ids
        .iter()
        .map(|id| json!({"id": id, "object": "model", "created": created, "owned_by": "nanocrab"}))
        .collect();
    json!({"object": "list", "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn request(body: Value) -> ChatRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn the_last_user_message_is_the_turn_and_the_rest_seeds_history() {
        let turn = request(json!({
            "model": "nanocrab",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
                ]}
            ],
            "temperature": 0.2
        }))
        .turn()
        .unwrap();
        assert_eq!(
            turn,
            ApiTurn {
                text: "Instructions from the API client:\nBe brief.\n\nWhat is this?".to_owned(),
                images: vec![Image {
                    media_type: "image/png".to_owned(),
                    data: "iVBORw0KGgo=".to_owned(),
                    file: None,
                }],
                earlier: vec![
                    LlmMessage {
                        role: Role::User,
                        content: vec![ContentBlock::text("Hi")],
                    },
                    LlmMessage {
                        role: Role::Assistant,
                        content: vec![ContentBlock::text("Hello!")],
                    },
                ],
            }
        );
    }

    #[test]
    fn what_nanocrab_cannot_do_is_a_400_saying_why() {
        let errors: Vec<String> = [
            json!({"model": "nanocrab", "messages": [{"role": "system", "content": "x"}]}),
            json!({"model": "nanocrab", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}),
            json!({"model": "nanocrab", "messages": [
                {"role": "tool", "content": "42"}, {"role": "user", "content": "x"}]}),
            json!({"model": "nanocrab", "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]}),
        ]
        .into_iter()
        .map(|body| request(body).turn().unwrap_err().to_string())
        .collect();
        assert_eq!(
            errors,
            [
                "no message with role `user`",
                "nanocrab runs its own tools; tools defined by the client are not supported",
                "messages[0]: role `tool` is not supported; nanocrab runs its own tools",
                "messages[0]: an image must be a base64 data: URL (PNG, JPEG, GIF or WebP); nanocrab does not fetch images from the web",
            ]
        );
    }

    #[test]
    fn bodies_and_chunks_have_openais_shape() {
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 2,
            cache_write_tokens: 0,
        };
        insta::assert_json_snapshot!(json!({
            "completion": completion_body("chatcmpl-1", 1700000000, "nanocrab", "Hello.", &usage),
            "chunks": [
                Chunk::role("chatcmpl-1", 1700000000, "nanocrab"),
                Chunk::text("chatcmpl-1", 1700000000, "nanocrab", "Hel"),
                Chunk::stop("chatcmpl-1", 1700000000, "nanocrab"),
                Chunk::usage("chatcmpl-1", 1700000000, "nanocrab", &usage),
            ],
            "models": models_body(&["nanocrab", "work"], 1700000000),
            "error": WireError::invalid("messages", "no message with role `user`").body(),
        }));
    }
}
