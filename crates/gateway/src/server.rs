//! The HTTP server on `gateway.host:gateway.port`: `GET /health` for anyone, and behind the
//! gateway's token (see [`auth`](crate::auth)) `GET /status` and whatever routes the caller
//! mounts — the OpenAI-compatible API:
//!
//! ```no_run
//! # async fn demo(
//! #     gateway: nanocrab_gateway::Gateway,
//! #     config: nanocrab_config::Config,
//! #     shutdown: tokio_util::sync::CancellationToken,
//! # ) -> Result<(), nanocrab_gateway::server::ServerError> {
//! use std::sync::Arc;
//!
//! use nanocrab_gateway::server::{self, ServerState};
//!
//! let state = ServerState::new(&config.gateway, gateway.turns().clone(), Arc::clone(gateway.status()));
//! // Handlers take `State<ServerState>` for the turns.
//! let api = axum::Router::new().route("/v1/models", axum::routing::get(|| async { "[]" }));
//! let listener = server::bind(&config.gateway).await?;
//! let http = tokio::spawn(server::serve(listener, server::app(state, api), shutdown.clone()));
//! gateway.run(shutdown).await;
//! # let _ = http.await;
//! # Ok(())
//! # }
//! ```
//!
//! [`serve`] hands each request its client's address, which the token check needs when no
//! token is configured; an app served some other way must do the same
//! (`into_make_service_with_connect_info::<SocketAddr>`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use nanocrab_config::GatewayConfig;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::{Token, require_auth};
use crate::heartbeat::{HeartbeatReport, Heartbeats};
use crate::status::{ChannelReport, MessageCounts, Status};
use crate::turns::{SessionActivity, Turns};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("gateway.host {host:?} does not resolve: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error(
        "gateway.host {host:?} is not a loopback address, and gateway.auth.token is not set: anyone who can reach the port could use the assistant. Set gateway.auth.token (e.g. \"${{NANOCRAB_GATEWAY_TOKEN}}\") or bind 127.0.0.1"
    )]
    OpenWithoutToken { host: String },
    #[error("cannot listen on {host}:{port}: {source}")]
    Bind {
        host: String,
        port: u16,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

/// What handlers share: the scheduler, the counters and the token. Cheap to clone.
#[derive(Clone)]
pub struct ServerState {
    shared: Arc<Shared>,
}

struct Shared {
    turns: Turns,
    status: Arc<Status>,
    token: Option<Token>,
    with_model: std::sync::OnceLock<ModelBuilder>,
    heartbeats: std::sync::OnceLock<Heartbeats>,
}

/// Builds agent `.0` (an id) with model `.1` (`provider/model`), for API requests that name a
/// model instead of an agent; the error says why the model cannot be used.
pub type ModelBuilder =
    Arc<dyn Fn(&str, &str) -> Result<Arc<nanocrab_core::Agent>, String> + Send + Sync>;

impl ServerState {
    pub fn new(config: &GatewayConfig, turns: Turns, status: Arc<Status>) -> Self {
        Self {
            shared: Arc::new(Shared {
                turns,
                status,
                token: Token::from_config(config.auth.token.as_deref()),
                with_model: std::sync::OnceLock::new(),
                heartbeats: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Lets API requests name `provider/model`; without it such a request is a 404.
    pub fn with_model_builder(self, builder: ModelBuilder) -> Self {
        // Set once, while the state is being built.
        let _ = self.shared.with_model.set(builder);
        self
    }

    /// Shows the agents' heartbeats in `/status`.
    pub fn with_heartbeats(self, heartbeats: Heartbeats) -> Self {
        // Set once, while the state is being built.
        let _ = self.shared.heartbeats.set(heartbeats);
        self
    }

    /// The configured token, sharing its count of wrong guesses.
    pub(crate) fn token(&self) -> Option<Token> {
        self.shared.token.clone()
    }

    pub(crate) fn model_builder(&self) -> Option<&ModelBuilder> {
        self.shared.with_model.get()
    }

    pub fn turns(&self) -> &Turns {
        &self.shared.turns
    }

    pub fn status(&self) -> &Status {
        &self.shared.status
    }
}

/// The server's routes: `/health`, and `/status` with `protected`'s routes behind the token.
pub fn app(state: ServerState, protected: Router<ServerState>) -> Router {
    let protected = Router::new()
        .route("/status", get(status))
        .merge(protected)
        .route_layer(axum::middleware::from_fn_with_state(
            state.shared.token.clone(),
            require_auth,
        ));
    Router::new()
        .route("/health", get(health))
        .merge(protected)
        .layer(axum::middleware::map_response(
            crate::auth::security_headers,
        ))
        .with_state(state)
}

/// Listens on `gateway.host:gateway.port`, refusing an address that is not loopback unless
/// a token is configured.
pub async fn bind(config: &GatewayConfig) -> Result<TcpListener, ServerError> {
    let host = config.host.clone();
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), config.port))
        .await
        .map_err(|source| ServerError::Resolve {
            host: host.clone(),
            source,
        })?
        .collect();
    let open = addresses.iter().any(|address| !address.ip().is_loopback());
    if open && Token::from_config(config.auth.token.as_deref()).is_none() {
        return Err(ServerError::OpenWithoutToken { host });
    }
    TcpListener::bind(addresses.as_slice())
        .await
        .map_err(|source| ServerError::Bind {
            host,
            port: config.port,
            source,
        })
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then finishes the requests in
/// progress.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown.cancelled_owned())
    .await
    .map_err(ServerError::Serve)
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// The body of `GET /status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub uptime_seconds: u64,
    /// A shutdown has begun: running turns finish, no more start.
    pub stopping: bool,
    pub channels: Vec<ChannelReport>,
    pub turns: TurnCounts,
    /// Sessions with a turn running or waiting.
    pub sessions: Vec<SessionActivity>,
    pub messages: MessageCounts,
    /// Each agent's heartbeat and its next tick.
    pub heartbeats: Vec<HeartbeatReport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnCounts {
    pub running: usize,
    /// Items waiting in all sessions' queues.
    pub queued: usize,
    pub finished: u64,
    pub failed: u64,
}

async fn status(State(state): State<ServerState>) -> Json<StatusReport> {
    Json(status_report(&state))
}

/// What `GET /status` answers: the gateway's uptime, channels, turns and heartbeats.
pub fn status_report(state: &ServerState) -> StatusReport {
    let status = state.status();
    let sessions = state.turns().activity();
    let (finished, failed) = status.turns_done();
    StatusReport {
        uptime_seconds: status.uptime_seconds(),
        stopping: state.turns().is_stopping(),
        channels: status.channels(),
        turns: TurnCounts {
            running: state.turns().running(),
            queued: sessions.iter().map(|s| s.waiting).sum(),
            finished,
            failed,
        },
        sessions,
        messages: status.messages(),
        heartbeats: state
            .shared
            .heartbeats
            .get()
            .map(Heartbeats::reports)
            .unwrap_or_default(),
    }
}
