//! Calls to the Bot API over HTTP, with errors that never carry the token.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::types::{Envelope, File};
use crate::ChannelError;
use crate::error_text::{excerpt, redact, with_causes};
use nanocrab_config::http::Timeouts;

/// The channel's name in errors and logs.
pub(crate) const CHANNEL: &str = "telegram";

/// How long an ordinary call may take, connection included.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// A 20 MB file over a slow link still fits.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// A 50 MB file (the most a bot may send) over a slow link still fits.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a call failed, before it becomes a [`ChannelError`].
#[derive(Debug)]
pub(crate) enum CallError {
    /// Telegram answered `ok: false`, or an HTTP error without its JSON.
    Api {
        status: u16,
        description: String,
        retry_after: Option<u64>,
    },
    /// No answer: connection refused, reset, a body cut short, or the call's own timeout.
    Transport(String),
}

impl CallError {
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            Self::Transport(_) => None,
        }
    }

    pub fn into_channel_error(self, method: &str) -> ChannelError {
        match self {
            Self::Api {
                status: 401,
                description,
                ..
            } => ChannelError::Unauthorized {
                channel: CHANNEL.to_owned(),
                message: description,
            },
            Self::Api {
                status,
                description,
                ..
            } => ChannelError::Api {
                channel: CHANNEL.to_owned(),
                method: method.to_owned(),
                status: Some(status),
                message: description,
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
            Self::Api {
                status,
                description,
                ..
            } => write!(f, "{status} {description}"),
            Self::Transport(message) => f.write_str(message),
        }
    }
}

/// A Bot API client for one token.
pub(crate) struct BotApi {
    client: reqwest::Client,
    /// `{api_base}/bot{token}`: secret, never formatted into a message.
    method_base: String,
    /// `{api_base}/file/bot{token}`: secret too.
    file_base: String,
    /// Scrubbed from every error text, in case a library puts a URL back in.
    token: String,
}

// The token is in both bases: Debug must not show them.
impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi").finish_non_exhaustive()
    }
}

impl BotApi {
    pub fn new(api_base: &str, token: &str, proxy: Option<&str>) -> Result<Self, ChannelError> {
        let client_error = |message: String| ChannelError::Transport {
            channel: CHANNEL.to_owned(),
            method: "client".to_owned(),
            message,
        };
        // Each call sets its own limit: a long poll waits longer than a send.
        let mut builder = nanocrab_config::http::client_builder(Timeouts {
            connect: Duration::from_secs(10),
            read: None,
            total: None,
        });
        if let Some(proxy) = proxy {
            // The proxy URL may hold credentials: the message names neither.
            let proxy = reqwest::Proxy::all(proxy)
                .map_err(|_| client_error("the proxy address is not a valid URL".to_owned()))?;
            builder = builder.proxy(proxy);
        }
        let client = builder
            .build()
            .map_err(|err| client_error(describe(&err.without_url(), token)))?;
        let api_base = api_base.trim_end_matches('/');
        Ok(Self {
            client,
            method_base: format!("{api_base}/bot{token}"),
            file_base: format!("{api_base}/file/bot{token}"),
            token: token.to_owned(),
        })
    }

    /// Calls `method` with `body` as JSON, waiting at most `timeout` for the whole answer.
    pub async fn call_within<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &impl Serialize,
        timeout: Duration,
    ) -> Result<T, CallError> {
        let sent = self
            .client
            .post(format!("{}/{method}", self.method_base))
            .timeout(timeout)
            .json(body)
            .send()
            .await;
        self.answer(sent).await
    }

    /// Calls `method` with `fields` and the file `bytes` (named `file_name`, in the field
    /// `file_field`) as `multipart/form-data`, the one way the Bot API takes a new file.
    pub async fn upload<T: DeserializeOwned>(
        &self,
        method: &str,
        fields: &[(&str, String)],
        file_field: &str,
        file_name: &str,
        bytes: &[u8],
    ) -> Result<T, CallError> {
        let form = fields
            .iter()
            .fold(reqwest::multipart::Form::new(), |form, (name, value)| {
                form.text(name.to_string(), value.clone())
            })
            .part(
                file_field.to_owned(),
                reqwest::multipart::Part::bytes(bytes.to_vec()).file_name(file_name.to_owned()),
            );
        let sent = self
            .client
            .post(format!("{}/{method}", self.method_base))
            .timeout(UPLOAD_TIMEOUT)
            .multipart(form)
            .send()
            .await;
        self.answer(sent).await
    }

    /// The result of a call, or why there is none.
    async fn answer<T: DeserializeOwned>(
        &self,
        sent: Result<reqwest::Response, reqwest::Error>,
    ) -> Result<T, CallError> {
        let response =
            sent.map_err(|err| CallError::Transport(describe(&err.without_url(), &self.token)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|err| CallError::Transport(describe(&err.without_url(), &self.token)))?;
        let envelope: Envelope<T> = match serde_json::from_slice(&bytes) {
            Ok(envelope) => envelope,
            Err(err) if status.is_success() => {
                return Err(CallError::Transport(format!(
                    "the answer is not the Bot API's JSON: {err}"
                )));
            }
            // A proxy or load balancer in front of the API answered, in its own words.
            Err(_) => {
                return Err(CallError::Api {
                    status: status.as_u16(),
                    description: redact(excerpt(&String::from_utf8_lossy(&bytes)), &[&self.token]),
                    retry_after: None,
                });
            }
        };
        match (envelope.ok, envelope.result) {
            (true, Some(result)) => Ok(result),
            (true, None) => Err(CallError::Transport(
                "the answer says ok but has no result".to_owned(),
            )),
            (false, _) => Err(CallError::Api {
                status: envelope.error_code.unwrap_or(status.as_u16()),
                description: envelope
                    .description
                    .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_owned()),
                retry_after: envelope.parameters.and_then(|p| p.retry_after),
            }),
        }
    }

    /// Calls `method` with the usual timeout.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &impl Serialize,
    ) -> Result<T, CallError> {
        self.call_within(method, body, CALL_TIMEOUT).await
    }

    /// Fetches the file `getFile` pointed at, refusing more than `limit` bytes whatever the
    /// server claims.
    pub async fn download(&self, file: &File, limit: u64) -> Result<Vec<u8>, ChannelError> {
        let transport = |message: String| ChannelError::Transport {
            channel: CHANNEL.to_owned(),
            method: "download".to_owned(),
            message,
        };
        let too_large = |size: u64| ChannelError::TooLarge {
            channel: CHANNEL.to_owned(),
            file: file.file_path.clone().unwrap_or_default(),
            size,
            limit,
        };
        let Some(path) = file.file_path.as_deref() else {
            return Err(transport(
                "getFile gave no file_path: the file cannot be downloaded".to_owned(),
            ));
        };
        let mut response = self
            .client
            .get(format!("{}/{path}", self.file_base))
            .timeout(DOWNLOAD_TIMEOUT)
            .send()
            .await
            .map_err(|err| transport(describe(&err.without_url(), &self.token)))?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            return Err(ChannelError::Api {
                channel: CHANNEL.to_owned(),
                method: "download".to_owned(),
                status: Some(status),
                message: redact(excerpt(&text), &[&self.token]),
            });
        }
        if let Some(length) = response.content_length().filter(|length| *length > limit) {
            return Err(too_large(length));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| transport(describe(&err.without_url(), &self.token)))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > limit {
                return Err(too_large(bytes.len() as u64));
            }
        }
        Ok(bytes)
    }
}

/// An error and its causes on one line, the token scrubbed out.
fn describe(err: &dyn std::error::Error, token: &str) -> String {
    redact(&with_causes(err), &[token])
}
