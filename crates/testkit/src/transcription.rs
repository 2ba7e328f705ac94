//! The mock's OpenAI-compatible `POST /v1/audio/transcriptions`: the `multipart/form-data`
//! upload read into a [`TranscriptionRequest`] (recorded apart from the model requests, so a
//! test's model requests keep their numbers), answered from its own script of
//! [`Transcription`]s: a text as `{"text": ...}`, or an error in OpenAI's body shape.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::multipart::multipart_parts;

/// A real voice note: "Meet me at noon." as Ogg/Opus, mono, 2,881 bytes (how it was made:
/// `fixtures/audio/README.md`).
pub const VOICE_NOTE_OGG: &[u8] = include_bytes!("../fixtures/audio/meet-me-at-noon.ogg");

/// One upload the transcription endpoint received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptionRequest {
    /// The `Authorization` header, e.g. `Bearer gsk-test`.
    pub authorization: Option<String>,
    pub model: Option<String>,
    /// The `file` part's name, its `Content-Type` and its bytes.
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
    pub language: Option<String>,
    pub response_format: Option<String>,
    /// Any other text fields, by name.
    pub other: BTreeMap<String, String>,
}

/// What the transcription endpoint answers next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transcription {
    /// `200 {"text": ...}`.
    Text(String),
    /// `status` with `{"error": {"message", "type", "code"}}`, as OpenAI and Groq send.
    Error {
        status: u16,
        message: String,
        kind: String,
    },
}

impl Transcription {
    pub fn text(text: &str) -> Self {
        Self::Text(text.to_owned())
    }

    /// OpenAI's answer to a wrong key.
    pub fn unauthorized() -> Self {
        Self::Error {
            status: 401,
            message: "Incorrect API key provided: gsk-wro**ong. You can find your API key at https://console.groq.com/keys.".to_owned(),
            kind: "invalid_request_error".to_owned(),
        }
    }

    /// A rate limit, as Groq words it.
    pub fn rate_limited() -> Self {
        Self::Error {
            status: 429,
            message: "Rate limit reached for model `whisper-large-v3` on seconds of audio per hour (ASPH): Limit 7200, Used 7190. Please try again in 25s.".to_owned(),
            kind: "tokens".to_owned(),
        }
    }

    fn response(&self) -> Response {
        match self {
            Self::Text(text) => axum::Json(json!({ "text": text })).into_response(),
            Self::Error {
                status,
                message,
                kind,
            } => (
                StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                axum::Json(json!({"error": {
                    "message": message,
                    "type": kind,
                    "param": null,
                    "code": null,
                }})),
            )
                .into_response(),
        }
    }
}

/// The upload in `body`, or why it is not one.
pub(crate) fn read_upload(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<TranscriptionRequest, String> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let boundary = content_type
        .strip_prefix("multipart/form-data")
        .and_then(|rest| rest.split_once("boundary="))
        .map(|(_, boundary)| boundary.trim_matches('"').to_owned())
        .ok_or_else(|| format!("expected multipart/form-data, got {content_type:?}"))?;
    let mut request = TranscriptionRequest {
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        model: None,
        file_name: None,
        content_type: None,
        bytes: Vec::new(),
        language: None,
        response_format: None,
        other: BTreeMap::new(),
    };
    let mut file = false;
    for part in multipart_parts(body, &boundary) {
        let text = || String::from_utf8_lossy(&part.bytes).into_owned();
        match part.name.as_str() {
            "file" => {
                file = true;
                request.file_name = part.file_name.clone();
                request.content_type = part.content_type.clone();
                request.bytes = part.bytes.clone();
            }
            "model" => request.model = Some(text()),
            "language" => request.language = Some(text()),
            "response_format" => request.response_format = Some(text()),
            other => {
                request.other.insert(other.to_owned(), text());
            }
        }
    }
    if !file {
        return Err("no `file` part".to_owned());
    }
    if request.model.is_none() {
        return Err("no `model` part".to_owned());
    }
    Ok(request)
}

/// The answer to an upload: `next` from the script, or the 400 OpenAI gives a malformed one
/// (`upload` failed), or a 500 when the script is empty.
pub(crate) fn answer(
    upload: Result<&TranscriptionRequest, &String>,
    next: Option<Transcription>,
) -> Response {
    match (upload, next) {
        (Err(why), _) => Transcription::Error {
            status: 400,
            message: format!("mock LLM: not a transcription request: {why}"),
            kind: "invalid_request_error".to_owned(),
        }
        .response(),
        (Ok(_), Some(reply)) => reply.response(),
        (Ok(_), None) => Transcription::Error {
            status: 500,
            message: "mock LLM: no scripted transcription left".to_owned(),
            kind: "server_error".to_owned(),
        }
        .response(),
    }
}
