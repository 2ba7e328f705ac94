use std::time::Duration;

/// Why a model call failed. Messages name the provider, the status and what to do, and never
/// contain the API key: provider messages are passed through [`redact`] first.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{provider}: HTTP {status}: {message}{}. {hint}", attempts_note(*.attempts))]
    Status {
        provider: String,
        status: u16,
        message: String,
        /// The provider's error type or code, when its body names one.
        kind: Option<String>,
        hint: String,
        attempts: u32,
        retry_after: Option<Duration>,
    },
    #[error(
        "{provider}: cannot reach {url}: {detail}{}. Is the server running, and is providers.{provider}.apiBase right?",
        attempts_note(*.attempts)
    )]
    Connect {
        provider: String,
        url: String,
        detail: String,
        attempts: u32,
    },
    /// An error the provider reported inside a stream (Anthropic `event: error`, an OpenAI
    /// chunk with `error`).
    #[error("{provider}: {kind}: {message}{}", attempts_note(*.attempts))]
    Api {
        provider: String,
        kind: String,
        message: String,
        retriable: bool,
        attempts: u32,
    },
    #[error("{provider}: the response stream broke off: {detail}")]
    Stream { provider: String, detail: String },
    #[error("{provider}: cannot build the HTTP client: {detail}")]
    Client { provider: String, detail: String },
    #[error(
        "model {model:?} is not of the form provider/model (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, custom/qwen3)"
    )]
    BadModelName { model: String },
    #[error("unknown provider {name:?} in model {model:?}{}; known providers: {}", suggestion.as_ref().map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default(), known.join(", "))]
    UnknownProvider {
        name: String,
        model: String,
        suggestion: Option<String>,
        known: Vec<String>,
    },
    #[error(
        "no API key for {provider} (model {model}). Configure one of:\n  \
         - export {env_var}=...\n  \
         - run `nanocrab onboard`, then set providers.{provider}.apiKey in config.json\n  \
         - use a local OpenAI-compatible server (Ollama, vLLM, LM Studio): set providers.custom.apiBase \
           to e.g. http://localhost:11434/v1 and agents.defaults.model to custom/<model>"
    )]
    MissingKey {
        provider: String,
        model: String,
        env_var: String,
    },
    #[error(
        "{provider} needs an endpoint: set providers.{provider}.apiBase in config.json (e.g. http://localhost:11434/v1 for Ollama)"
    )]
    MissingApiBase { provider: String },
    /// A model of the local store could not be loaded or run.
    #[error("local/{model}: {source}")]
    Local {
        model: String,
        /// Boxed: model errors are large, and every provider call returns this type.
        source: Box<nanocrab_models::ModelError>,
    },
    #[error("local/{model} is not a chat model (see `nanocrab models list`)")]
    NotAChatModel { model: String },
    /// The primary model and every fallback failed; `last` is the last model's error.
    #[error("every model failed ({}); the last error: {last}", tried.join(", "))]
    AllModelsFailed {
        tried: Vec<String>,
        last: Box<ProviderError>,
    },
}

/// Error kinds that mean "out of credit": waiting does not help, another provider does.
const QUOTA_KINDS: [&str; 2] = ["insufficient_quota", "billing_hard_limit_reached"];

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

impl ProviderError {
    /// What went wrong in a word or two, for a one-line notice: the HTTP status, the
    /// in-stream error's kind, the connection failure; other errors say it whole.
    pub fn brief(&self) -> String {
        match self {
            Self::Status { status, .. } => status.to_string(),
            Self::Connect { detail, .. } => detail.clone(),
            Self::Api { kind, .. } => kind.clone(),
            Self::Stream { .. }
            | Self::Client { .. }
            | Self::BadModelName { .. }
            | Self::UnknownProvider { .. }
            | Self::MissingKey { .. }
            | Self::MissingApiBase { .. }
            | Self::Local { .. }
            | Self::NotAChatModel { .. }
            | Self::AllModelsFailed { .. } => self.to_string(),
        }
    }

    /// Worth trying again: rate limits, overloads, server errors and lost connections; not an
    /// exhausted quota, which answers 429 too but does not come back by waiting.
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Status { status, kind, .. } => {
                (matches!(status, 408 | 409 | 425 | 429) || *status >= 500)
                    && !kind.as_deref().is_some_and(|k| QUOTA_KINDS.contains(&k))
            }
            Self::Connect { .. } => true,
            Self::Api { retriable, .. } => *retriable,
            Self::Stream { .. }
            | Self::Client { .. }
            | Self::BadModelName { .. }
            | Self::UnknownProvider { .. }
            | Self::MissingKey { .. }
            | Self::MissingApiBase { .. }
            | Self::Local { .. }
            | Self::NotAChatModel { .. }
            | Self::AllModelsFailed { .. } => false,
        }
    }

    /// Worth asking a fallback model: the provider cannot serve now (capacity, outage,
    /// connection, quota or billing). Not when the request or the configuration is wrong
    /// (400, 401, 403, 404): another model would hide a mistake the user must fix.
    pub fn warrants_fallback(&self) -> bool {
        let quota = |kind: &str| QUOTA_KINDS.contains(&kind);
        match self {
            Self::Status { status, kind, .. } => {
                self.is_retriable() || *status == 402 || kind.as_deref().is_some_and(quota)
            }
            Self::Api { kind, .. } => self.is_retriable() || quota(kind),
            // A stream cut off mid-answer is the provider failing, not the request.
            Self::Connect { .. } | Self::Stream { .. } => true,
            // A local model that is missing or cannot load: another model can answer; a
            // prompt too long for it is the agent's to compact.
            Self::Local { source, .. } => !matches!(
                **source,
                nanocrab_models::ModelError::ContextOverflow { .. }
            ),
            Self::Client { .. }
            | Self::BadModelName { .. }
            | Self::UnknownProvider { .. }
            | Self::MissingKey { .. }
            | Self::MissingApiBase { .. }
            | Self::NotAChatModel { .. }
            | Self::AllModelsFailed { .. } => false,
        }
    }

    /// The request was longer than the model's context window: compacting the history and
    /// trying again can help, where retrying as is cannot.
    pub fn is_context_overflow(&self) -> bool {
        const SIGNS: [&str; 7] = [
            "prompt is too long",
            "maximum context length",
            "context_length_exceeded",
            "context length",
            "context window",
            "exceeds the maximum number of tokens",
            "too many tokens",
        ];
        let says = |text: &str| {
            let text = text.to_ascii_lowercase();
            SIGNS.iter().any(|sign| text.contains(sign))
        };
        match self {
            Self::Status {
                status,
                message,
                kind,
                ..
            } => {
                matches!(status, 400 | 413) && (says(message) || kind.as_deref().is_some_and(says))
            }
            Self::Api { kind, message, .. } => says(kind) || says(message),
            Self::Local { source, .. } => {
                matches!(
                    **source,
                    nanocrab_models::ModelError::ContextOverflow { .. }
                )
            }
            Self::Connect { .. }
            | Self::Stream { .. }
            | Self::Client { .. }
            | Self::BadModelName { .. }
            | Self::UnknownProvider { .. }
            | Self::MissingKey { .. }
            | Self::MissingApiBase { .. }
            | Self::NotAChatModel { .. }
            | Self::AllModelsFailed { .. } => false,
        }
    }

    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            Self::Connect { .. }
            | Self::Api { .. }
            | Self::Stream { .. }
            | Self::Client { .. }
            | Self::BadModelName { .. }
            | Self::UnknownProvider { .. }
            | Self::MissingKey { .. }
            | Self::MissingApiBase { .. }
            | Self::Local { .. }
            | Self::NotAChatModel { .. }
            | Self::AllModelsFailed { .. } => None,
        }
    }

    pub(crate) fn set_attempts(&mut self, n: u32) {
        match self {
            Self::Status { attempts, .. }
            | Self::Connect { attempts, .. }
            | Self::Api { attempts, .. } => *attempts = n,
            Self::Stream { .. }
            | Self::Client { .. }
            | Self::BadModelName { .. }
            | Self::UnknownProvider { .. }
            | Self::MissingKey { .. }
            | Self::MissingApiBase { .. }
            | Self::Local { .. }
            | Self::NotAChatModel { .. }
            | Self::AllModelsFailed { .. } => {}
        }
    }
}

/// Error kinds that mean the key itself was refused, whatever the status (Google answers an
/// invalid key with 400).
const KEY_KINDS: [&str; 3] = ["API_KEY_INVALID", "authentication_error", "invalid_api_key"];

/// What to tell the user for an HTTP error status and the provider's error kind.
pub(crate) fn status_hint(
    provider: &str,
    env_var: Option<&str>,
    status: u16,
    kind: Option<&str>,
) -> String {
    let kind = kind.unwrap_or_default();
    match status {
        _ if status == 401 || status == 403 || KEY_KINDS.contains(&kind) => match env_var {
            Some(var) => format!(
                "Check providers.{provider}.apiKey in config.json or the {var} environment variable"
            ),
            None => format!("Check providers.{provider}.apiKey in config.json"),
        },
        _ if status == 402 || QUOTA_KINDS.contains(&kind) => format!(
            "Out of credit or quota: check your plan and billing with {provider}; agents.defaults.fallbackModels can name a model to use meanwhile"
        ),
        404 => format!("Check the model name and providers.{provider}.apiBase"),
        400 | 413 | 422 => "The provider rejected the request".to_owned(),
        429 => "Rate limited: wait a little, or check your plan's limits".to_owned(),
        _ if status >= 500 => "The provider is having trouble: try again later".to_owned(),
        _ => "Unexpected answer from the provider".to_owned(),
    }
}

/// Removes the API key, and anything that looks like one, from a provider's message: OpenAI's
/// 401 echoes a masked key, and a proxy may echo the header.
pub(crate) fn redact(message: &str, api_key: Option<&str>) -> String {
    let mut out = match api_key {
        Some(key) if !key.is_empty() => message.replace(key, "[redacted]"),
        Some(_) | None => message.to_owned(),
    };
    for prefix in ["sk-", "sk_", "gsk_", "xai-"] {
        let mut from = 0;
        while let Some(found) = out[from..].find(prefix) {
            let start = from + found;
            let end = out[start..]
                .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ')'))
                .map_or(out.len(), |n| start + n);
            let end = if out[..end].ends_with('.') {
                end - 1
            } else {
                end
            };
            out.replace_range(start..end, "[redacted]");
            from = start + "[redacted]".len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn context_overflows_are_recognised_in_each_providers_words() {
        let status = |status: u16, kind: Option<&str>, message: &str| ProviderError::Status {
            provider: "p".into(),
            status,
            message: message.into(),
            kind: kind.map(str::to_owned),
            hint: String::new(),
            attempts: 1,
            retry_after: None,
        };
        for (error, overflow) in [
            (
                status(
                    400,
                    Some("invalid_request_error"),
                    "prompt is too long: 208310 tokens > 200000 maximum",
                ),
                true,
            ),
            (
                status(
                    400,
                    Some("context_length_exceeded"),
                    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens",
                ),
                true,
            ),
            (
                status(
                    400,
                    Some("INVALID_ARGUMENT"),
                    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)",
                ),
                true,
            ),
            (
                status(
                    400,
                    Some("invalid_request_error"),
                    "max_tokens: must be at most 8192",
                ),
                false,
            ),
            (status(429, None, "too many tokens per minute"), false),
        ] {
            assert_eq!(error.is_context_overflow(), overflow, "{error}");
        }
    }

    #[test]
    fn keys_are_redacted_from_provider_messages() {
        assert_eq!(
            redact(
                "Incorrect API key provided: sk-test-****rint. You can find your API key at x.",
                Some("sk-test-secret")
            ),
            "Incorrect API key provided: [redacted]. You can find your API key at x."
        );
        assert_eq!(
            redact("bad key my-raw-key!", Some("my-raw-key")),
            "bad key [redacted]!"
        );
    }
}
