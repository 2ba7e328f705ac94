//! `tools.transcription`: the OpenAI-compatible `/v1/audio/transcriptions` endpoint voice
//! messages and audio files from the channels are transcribed through (OpenAI, Groq, a local
//! server). Without this section, a key in `providers.groq.apiKey` stands in for it (nanobot
//! transcribes Telegram voice with Groq that way).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscriptionConfig {
    /// Transcribe at all; `false` also keeps `providers.groq.apiKey` from switching it on.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// A provider nanocrab knows (`openai`, `groq`) or any `providers.<name>`: its endpoint
    /// and key are used unless given here. Default: `openai`, or `custom` when only `apiBase`
    /// is given (a local server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The endpoint's base as the OpenAI SDK takes it (`https://api.groq.com/openai/v1`,
    /// `http://127.0.0.1:8000/v1`), or the whole URL ending in `/audio/transcriptions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    /// The API key; `${ENV_VAR}` placeholders are resolved at load. When empty, the provider's
    /// `providers.<name>.apiKey`, then its usual environment variable (`OPENAI_API_KEY`,
    /// `GROQ_API_KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The speech-to-text model: `whisper-1` (OpenAI's default here), `gpt-4o-mini-transcribe`,
    /// `whisper-large-v3` (Groq's default here), `whisper-large-v3-turbo`. Needed for other
    /// providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The language spoken, as an ISO-639-1 code (`en`, `de`); unset, the model detects it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Bytes of audio sent at most; a larger file is saved but not transcribed. OpenAI and
    /// Groq take 25 MB.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// Seconds one transcription may take, upload included.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
}

impl Default for TranscriptionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            provider: None,
            api_base: None,
            api_key: None,
            model: None,
            language: None,
            max_bytes: default_max_bytes(),
            timeout_seconds: default_timeout(),
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_max_bytes() -> u64 {
    25 * 1024 * 1024
}

fn default_timeout() -> u64 {
    120
}
