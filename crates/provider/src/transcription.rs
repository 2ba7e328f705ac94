//! Speech to text through an OpenAI-compatible `POST /v1/audio/transcriptions` (OpenAI, Groq,
//! a local whisper server): the audio as a `multipart/form-data` upload with `file`, `model`,
//! `response_format=json` and, when configured, `language`; the answer's `text` back.
//!
//! Configured under `tools.transcription`; without that section, a key in
//! `providers.groq.apiKey` switches on Groq's endpoint, as nanobot does. The key goes only
//! into the `Authorization` header: errors carry the endpoint's message with it redacted.

use std::time::Duration;

use nanocrab_config::Config;
use nanocrab_config::http::{Timeouts, client_builder};
use serde_json::Value;

use crate::error::redact;

/// Appended to a chat-style base (`https://api.groq.com/openai/v1`).
const TRANSCRIPTIONS_PATH: &str = "audio/transcriptions";

/// Why a transcription could not be made. Messages name the endpoint and what to check, and
/// never contain the API key.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptionError {
    #[error("`tools.transcription.{key}`: {message}")]
    Config { key: &'static str, message: String },
    #[error("{provider}: cannot build the HTTP client: {detail}")]
    Client { provider: String, detail: String },
    #[error("the audio is {bytes} bytes, more than tools.transcription.maxBytes ({max})")]
    TooLarge { bytes: u64, max: u64 },
    #[error("{provider}: HTTP {status}: {message}. Is the key in {key_source} right?")]
    Unauthorized {
        provider: String,
        status: u16,
        message: String,
        key_source: String,
    },
    #[error("{provider}: HTTP 413: the endpoint takes no file this large: {message}")]
    TooLargeForEndpoint { provider: String, message: String },
    #[error("{provider}: HTTP 429: rate limited{}: {message}", retry_after.map(|d| format!(", try again in {} s", d.as_secs())).unwrap_or_default())]
    RateLimited {
        provider: String,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("{provider}: HTTP {status}: the endpoint failed: {message}")]
    ServerError {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider}: HTTP {status}: {message}")]
    Rejected {
        provider: String,
        status: u16,
        message: String,
    },
    #[error(
        "{provider}: cannot reach {url}: {detail}. Is the server running, and is tools.transcription.apiBase right?"
    )]
    Connect {
        provider: String,
        url: String,
        detail: String,
    },
    #[error("{provider}: the answer is not a transcription: {detail}")]
    BadAnswer { provider: String, detail: String },
}

/// An endpoint that turns audio into text. No `Debug`: it holds the key.
pub struct Transcriber {
    client: reqwest::Client,
    /// `openai`, `groq`, `custom`, or the `providers.<name>` it uses: for messages.
    provider: String,
    url: String,
    api_key: Option<String>,
    /// Where the key came from, for a refused key's message.
    key_source: String,
    model: String,
    language: Option<String>,
    max_bytes: u64,
}

impl Transcriber {
    /// The transcriber `config` asks for: `tools.transcription` when present (none when its
    /// `enabled` is false), else Groq when `providers.groq.apiKey` is set, else none. A key
    /// left out is looked up in `providers.<provider>.apiKey`, then through `env` in the
    /// provider's usual variable.
    pub fn from_config(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TranscriptionError> {
        let section = match &config.tools.transcription {
            Some(section) if !section.enabled => return Ok(None),
            Some(section) => section.clone(),
            None => match config
                .providers
                .get("groq")
                .and_then(|groq| groq.api_key.as_deref())
            {
                Some(key) if !key.trim().is_empty() => nanocrab_config::TranscriptionConfig {
                    provider: Some("groq".to_owned()),
                    ..Default::default()
                },
                Some(_) | None => return Ok(None),
            },
        };
        let provider = section.provider.clone().unwrap_or_else(|| {
            if section.api_base.is_some() {
                "custom".to_owned()
            } else {
                "openai".to_owned()
            }
        });
        let configured = config.providers.get(&provider);
        let spec = crate::registry::spec(&provider);
        let api_base = section
            .api_base
            .clone()
            .or_else(|| configured.and_then(|p| p.api_base.clone()))
            .or_else(|| spec.and_then(|s| s.default_api_base).map(str::to_owned))
            .ok_or_else(|| TranscriptionError::Config {
                key: "apiBase",
                message: format!(
                    "nanocrab knows no endpoint of {provider}: give its base (e.g. http://127.0.0.1:8000/v1)"
                ),
            })?;
        let non_empty = |key: &Option<String>| key.clone().filter(|k| !k.trim().is_empty());
        let env_var = spec.and_then(|s| s.api_key_env);
        let (api_key, key_source) = match (
            non_empty(&section.api_key),
            configured.and_then(|p| non_empty(&p.api_key)),
            env_var.and_then(env).filter(|k| !k.trim().is_empty()),
        ) {
            (Some(key), _, _) => (Some(key), "tools.transcription.apiKey".to_owned()),
            (None, Some(key), _) => (Some(key), format!("providers.{provider}.apiKey")),
            (None, None, Some(key)) => (Some(key), env_var.unwrap_or_default().to_owned()),
            (None, None, None) => (None, "tools.transcription.apiKey".to_owned()),
        };
        // A known cloud provider needs a key; a server of the user's own may take none.
        if api_key.is_none() && spec.is_some_and(|s| s.requires_key) && section.api_base.is_none() {
            return Err(TranscriptionError::Config {
                key: "apiKey",
                message: format!(
                    "{provider} needs an API key: set it here, in providers.{provider}.apiKey{}",
                    env_var
                        .map(|var| format!(", or in {var}"))
                        .unwrap_or_default()
                ),
            });
        }
        let model = section
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .or_else(|| {
                match provider.as_str() {
                    "openai" => Some("whisper-1"),
                    "groq" => Some("whisper-large-v3"),
                    _ => None,
                }
                .map(str::to_owned)
            })
            .ok_or_else(|| TranscriptionError::Config {
                key: "model",
                message: format!(
                    "say which speech-to-text model of {provider} to use (e.g. whisper-1, whisper-large-v3-turbo)"
                ),
            })?;
        let base = api_base.trim_end_matches('/');
        let url = if base.ends_with(TRANSCRIPTIONS_PATH) {
            base.to_owned()
        } else {
            format!("{base}/{TRANSCRIPTIONS_PATH}")
        };
        let client = client_builder(Timeouts {
            connect: Duration::from_secs(10),
            read: None,
            total: Some(Duration::from_secs(section.timeout_seconds.max(1))),
        })
        .build()
        .map_err(|err| TranscriptionError::Client {
            provider: provider.clone(),
            detail: err.to_string(),
        })?;
        Ok(Some(Self {
            client,
            provider,
            url,
            api_key,
            key_source,
            model,
            language: section.language.clone().filter(|l| !l.trim().is_empty()),
            max_bytes: section.max_bytes,
        }))
    }

    /// What transcribes, for the log: `groq whisper-large-v3 at https://…/audio/transcriptions`.
    pub fn describe(&self) -> String {
        format!("{} {} at {}", self.provider, self.model, self.url)
    }

    /// The text spoken in `bytes`, an audio file named `file_name` (its extension tells the
    /// endpoint the format) of type `mime_type`.
    pub async fn transcribe(
        &self,
        file_name: &str,
        mime_type: Option<&str>,
        bytes: Vec<u8>,
    ) -> Result<String, TranscriptionError> {
        let size = bytes.len() as u64;
        if size > self.max_bytes {
            return Err(TranscriptionError::TooLarge {
                bytes: size,
                max: self.max_bytes,
            });
        }
        // Cheap to clone: a type the endpoint would not take falls back to none.
        let bytes = bytes::Bytes::from(bytes);
        let plain = || {
            reqwest::multipart::Part::stream_with_length(reqwest::Body::from(bytes.clone()), size)
                .file_name(file_name.to_owned())
        };
        let file = match mime_type.map(|mime| plain().mime_str(mime)) {
            Some(Ok(part)) => part,
            Some(Err(_)) | None => plain(),
        };
        let mut form = reqwest::multipart::Form::new()
            .part("file", file)
            .text("model", self.model.clone())
            .text("response_format", "json");
        if let Some(language) = &self.language {
            form = form.text("language", language.clone());
        }
        let mut request = self.client.post(&self.url).multipart(form);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|err| {
            let mut source: &dyn std::error::Error = &err;
            while let Some(next) = source.source() {
                source = next;
            }
            TranscriptionError::Connect {
                provider: self.provider.clone(),
                url: self.url.clone(),
                detail: redact(&source.to_string(), self.api_key.as_deref()),
            }
        })?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = response
            .text()
            .await
            .map_err(|err| TranscriptionError::BadAnswer {
                provider: self.provider.clone(),
                detail: err.to_string(),
            })?;
        if (200..300).contains(&status) {
            let answer: Value =
                serde_json::from_str(&body).map_err(|err| TranscriptionError::BadAnswer {
                    provider: self.provider.clone(),
                    detail: format!("not JSON ({err})"),
                })?;
            return match answer.get("text").and_then(Value::as_str) {
                Some(text) => Ok(text.trim().to_owned()),
                None => Err(TranscriptionError::BadAnswer {
                    provider: self.provider.clone(),
                    detail: "no `text` in it".to_owned(),
                }),
            };
        }
        // OpenAI's and Groq's `{"error": {"message": ...}}`, else the start of the body.
        let message = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|body| {
                body.pointer("/error/message")
                    .or_else(|| body.get("error"))
                    .or_else(|| body.get("detail"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| body.chars().take(300).collect());
        let message = redact(
            message.trim().trim_end_matches('.'),
            self.api_key.as_deref(),
        );
        let provider = self.provider.clone();
        Err(match status {
            401 | 403 => TranscriptionError::Unauthorized {
                provider,
                status,
                message,
                key_source: self.key_source.clone(),
            },
            413 => TranscriptionError::TooLargeForEndpoint { provider, message },
            429 => TranscriptionError::RateLimited {
                provider,
                message,
                retry_after,
            },
            500.. => TranscriptionError::ServerError {
                provider,
                status,
                message,
            },
            _ => TranscriptionError::Rejected {
                provider,
                status,
                message,
            },
        })
    }
}
