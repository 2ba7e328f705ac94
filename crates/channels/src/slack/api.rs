//! Calls to Slack's Web API over HTTP, with errors that never carry a token.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ChannelError;
use crate::error_text::{excerpt, redact, with_causes};
use nanocrab_config::http::Timeouts;

/// The channel's name in errors and logs.
pub(crate) const CHANNEL: &str = "slack";

/// How long an ordinary call may take, connection included.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A large file over a slow link still fits.
const FILE_TIMEOUT: Duration = Duration::from_secs(600);

/// The errors by which Slack says a token is wrong, revoked or lacks what the call needs:
/// trying again will not help.
const AUTH_ERRORS: [&str; 7] = [
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
    "missing_scope",
];

/// Which of the app's two tokens a call is made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token {
    /// `xoxb-`: everything the bot does.
    Bot,
    /// `xapp-`: `apps.connections.open` only.
    App,
}

/// Why a call failed, before it becomes a [`ChannelError`].
#[derive(Debug)]
pub(crate) enum CallError {
    /// Slack answered `ok: false` (`error` is its code, `invalid_auth`), or an HTTP error.
    Api {
        status: u16,
        error: String,
        /// From a 429's `Retry-After`, in seconds.
        retry_after: Option<u64>,
    },
    /// No answer: connection refused, reset, a body cut short, or the call's own timeout.
    Transport(String),
}

impl CallError {
    /// Whether the tokens are at fault, so that retrying is pointless.
    pub fn is_auth(&self) -> bool {
        match self {
            Self::Api { status, error, .. } => {
                *status == 401 || *status == 403 || AUTH_ERRORS.contains(&error.as_str())
            }
            Self::Transport(_) => false,
        }
    }

    /// Whether the same call may succeed later: a 429, a 5xx, no answer.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Api { status, error, .. } => {
                *status == 429 || *status >= 500 || error == "ratelimited"
            }
            Self::Transport(_) => true,
        }
    }

    pub fn into_channel_error(self, method: &str) -> ChannelError {
        if self.is_auth() {
            return ChannelError::Unauthorized {
                channel: CHANNEL.to_owned(),
                message: format!("{method}: {self}"),
            };
        }
        match self {
            Self::Api { status, error, .. } => ChannelError::Api {
                channel: CHANNEL.to_owned(),
                method: method.to_owned(),
                status: Some(status),
                message: error,
            },
            Self::Transport(message) => ChannelError::Transport {
                channel: CHANNEL.to_owned(),
                method: method.to_owned(),
                message,
            },
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Api { status, error, .. } => write!(f, "{status} {error}"),
            Self::Transport(message) => f.write_str(message),
        }
    }
}

/// A Web API client for one app's two tokens.
pub(crate) struct WebApi {
    client: reqwest::Client,
    /// `https://slack.com/api`, without the trailing slash.
    base: String,
    bot_token: String,
    app_token: String,
}

// The tokens must never reach a log through Debug.
impl std::fmt::Debug for WebApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebApi")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl WebApi {
    pub fn new(api_base: &str, bot_token: &str, app_token: &str) -> Result<Self, ChannelError> {
        let client = nanocrab_config::http::client_builder(Timeouts {
            connect: Duration::from_secs(10),
            read: None,
            total: None,
        })
        .build()
        .map_err(|err| ChannelError::Transport {
            channel: CHANNEL.to_owned(),
            method: "client".to_owned(),
            message: err.without_url().to_string(),
        })?;
        Ok(Self {
            client,
            base: api_base.trim_end_matches('/').to_owned(),
            bot_token: bot_token.to_owned(),
            app_token: app_token.to_owned(),
        })
    }

    fn bearer(&self, token: Token) -> &str {
        match token {
            Token::Bot => &self.bot_token,
            Token::App => &self.app_token,
        }
    }

    /// Calls `method` with `body` as JSON.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        token: Token,
        body: &impl Serialize,
    ) -> Result<T, CallError> {
        let sent = self
            .client
            .post(format!("{}/{method}", self.base))
            .bearer_auth(self.bearer(token))
            .timeout(CALL_TIMEOUT)
            .json(body)
            .send()
            .await;
        self.answer(sent).await
    }

    /// Calls `method` with `fields` form-encoded, as the methods that take no JSON need
    /// (`files.getUploadURLExternal`, `files.info`).
    pub async fn call_form<T: DeserializeOwned>(
        &self,
        method: &str,
        fields: &[(&str, String)],
    ) -> Result<T, CallError> {
        let sent = self
            .client
            .post(format!("{}/{method}", self.base))
            .bearer_auth(&self.bot_token)
            .timeout(CALL_TIMEOUT)
            .form(fields)
            .send()
            .await;
        self.answer(sent).await
    }

    /// Sends `bytes` to the address `files.getUploadURLExternal` gave, as the raw body
    /// (which Slack takes as well as a form).
    pub async fn upload(&self, url: &str, bytes: &[u8]) -> Result<(), CallError> {
        let response = self
            .client
            .post(url)
            .bearer_auth(&self.bot_token)
            .timeout(FILE_TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .map_err(|err| CallError::Transport(self.redact(&with_causes(&err.without_url()))))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        Err(CallError::Api {
            status: status.as_u16(),
            error: self.redact(excerpt(&text)),
            retry_after: None,
        })
    }

    /// Fetches a file's private address with the bot token, refusing more than `limit` bytes
    /// whatever the server claims.
    pub async fn download(&self, url: &str, limit: u64) -> Result<Vec<u8>, ChannelError> {
        let transport = |message: String| ChannelError::Transport {
            channel: CHANNEL.to_owned(),
            method: "download".to_owned(),
            message,
        };
        let too_large = |size: u64| ChannelError::TooLarge {
            channel: CHANNEL.to_owned(),
            file: url.rsplit('/').next().unwrap_or_default().to_owned(),
            size,
            limit,
        };
        let mut response = self
            .client
            .get(url)
            .bearer_auth(&self.bot_token)
            .timeout(FILE_TIMEOUT)
            .send()
            .await
            .map_err(|err| transport(self.redact(&with_causes(&err.without_url()))))?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            return Err(ChannelError::Api {
                channel: CHANNEL.to_owned(),
                method: "download".to_owned(),
                status: Some(status),
                message: self.redact(excerpt(&text)),
            });
        }
        if let Some(length) = response.content_length().filter(|length| *length > limit) {
            return Err(too_large(length));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| transport(self.redact(&with_causes(&err.without_url()))))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > limit {
                return Err(too_large(bytes.len() as u64));
            }
        }
        Ok(bytes)
    }

    /// The result of a call, or why there is none.
    async fn answer<T: DeserializeOwned>(
        &self,
        sent: Result<reqwest::Response, reqwest::Error>,
    ) -> Result<T, CallError> {
        let response = sent
            .map_err(|err| CallError::Transport(self.redact(&with_causes(&err.without_url()))))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse().ok());
        let bytes = response
            .bytes()
            .await
            .map_err(|err| CallError::Transport(self.redact(&with_causes(&err.without_url()))))?;
        let body: Value = match serde_json::from_slice(&bytes) {
            Ok(body) => body,
            Err(err) if status.is_success() => {
                return Err(CallError::Transport(format!(
                    "the answer is not the Web API's JSON: {err}"
                )));
            }
            // A proxy or load balancer in front of the API answered, in its own words.
            Err(_) => {
                return Err(CallError::Api {
                    status: status.as_u16(),
                    error: self.redact(excerpt(&String::from_utf8_lossy(&bytes))),
                    retry_after,
                });
            }
        };
        if body.get("ok").and_then(Value::as_bool) == Some(true) {
            return serde_json::from_value(body).map_err(|err| {
                CallError::Transport(format!("the answer lacks what was asked for: {err}"))
            });
        }
        Err(CallError::Api {
            status: status.as_u16(),
            error: body
                .get("error")
                .and_then(Value::as_str)
                .map_or_else(|| status.to_string(), str::to_owned),
            retry_after,
        })
    }

    /// `text` without either token.
    pub fn redact(&self, text: &str) -> String {
        redact(text, &[&self.bot_token, &self.app_token])
    }
}
