//! Asking the running gateway over its local API (`gateway.host:gateway.port`, with
//! `gateway.auth.token` when set): what `nanocrab heartbeat run` and `nanocrab cron` do for
//! what only the gateway can (run a turn whose reply goes to a chat, wake its scheduler).

use std::time::Duration;

use nanocrab_config::GatewayConfig;
use nanocrab_config::http::{Timeouts, client_builder};
use serde::Deserialize;

/// The gateway of a config.
pub struct GatewayApi {
    base: String,
    token: Option<String>,
    client: reqwest::Client,
}

/// Why a request got no answer it could use.
#[derive(Debug)]
pub enum ApiError {
    /// Nothing listens: no gateway runs.
    NotRunning { base: String },
    Request {
        base: String,
        source: reqwest::Error,
    },
    /// It answered with an error status: the status, and its message.
    Refused {
        base: String,
        status: reqwest::StatusCode,
        message: String,
    },
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotRunning { base } => write!(f, "no gateway answers at {base}"),
            Self::Request { base, source } => {
                write!(f, "cannot ask the gateway at {base}: {source}")
            }
            Self::Refused {
                base,
                status,
                message,
            } => write!(f, "the gateway at {base} refused: {status}: {message}"),
        }
    }
}

impl std::error::Error for ApiError {}

#[derive(Debug, Deserialize)]
struct ErrorAnswer {
    error: ErrorBody,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    message: String,
}

impl GatewayApi {
    pub fn new(gateway: &GatewayConfig) -> anyhow::Result<Self> {
        // A gateway listening on every address answers on loopback too.
        let host = match gateway.host.as_str() {
            "0.0.0.0" => "127.0.0.1".to_owned(),
            "::" => "[::1]".to_owned(),
            host if host.contains(':') => format!("[{host}]"),
            host => host.to_owned(),
        };
        let client = client_builder(Timeouts {
            connect: Duration::from_secs(5),
            // A run lasts as long as its turn.
            read: None,
            total: None,
        })
        .build()?;
        Ok(Self {
            base: format!("http://{host}:{}", gateway.port),
            token: gateway
                .auth
                .token
                .as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
            client,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// POSTs `body` to `path` and returns the answer's body, on a runtime of its own.
    pub fn post(&self, path: &str, body: &serde_json::Value) -> Result<Vec<u8>, ApiError> {
        let mut request = self.client.post(format!("{}{path}", self.base)).json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let base = self.base.clone();
        let request_error = |source: reqwest::Error| {
            if source.is_connect() {
                ApiError::NotRunning { base: base.clone() }
            } else {
                ApiError::Request {
                    base: base.clone(),
                    source,
                }
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| ApiError::Refused {
                base: base.clone(),
                status: reqwest::StatusCode::INTERNAL_SERVER_ERROR,
                message: format!("no runtime to ask with: {err}"),
            })?;
        let (status, body) = runtime.block_on(async {
            let response = request.send().await.map_err(request_error)?;
            let status = response.status();
            let body = response.bytes().await.map_err(request_error)?;
            Ok::<_, ApiError>((status, body))
        })?;
        if !status.is_success() {
            let message = serde_json::from_slice::<ErrorAnswer>(&body)
                .map(|e| e.error.message)
                .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
            return Err(ApiError::Refused {
                base,
                status,
                message,
            });
        }
        Ok(body.to_vec())
    }
}
