//! The HTTP server over real sockets on 127.0.0.1.

use std::net::SocketAddr;

use axum::routing::get;
use nanocrab_config::GatewayConfig;
use nanocrab_gateway::server::{self, ServerError, ServerState};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

use crate::harness::{Harness, Running, answer, dm, until};

const TOKEN: &str = "gw-test-t0ken";

/// Serves the gateway's app, with `/v1/ping` mounted as the API would be, on a free port.
async fn serve(config: &GatewayConfig, gateway: &Running) -> (SocketAddr, CancellationToken) {
    let state = ServerState::new(
        config,
        gateway.turns.clone(),
        std::sync::Arc::clone(&gateway.status),
    )
    .with_heartbeats(gateway.heartbeats.clone());
    let api = axum::Router::new().route("/v1/ping", get(|| async { "pong" }));
    let listener = server::bind(config).await.unwrap();
    let address = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(server::serve(
        listener,
        server::app(state, api),
        stop.clone(),
    ));
    (address, stop)
}

/// `GET path` with an optional Bearer token; the status and the body (JSON when it is).
async fn get_path(address: SocketAddr, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let auth = token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let (_, body) = response.split_once("\r\n\r\n").unwrap();
    let body = serde_json::from_str(body).unwrap_or_else(|_| Value::from(body));
    (status, body)
}

fn config(token: Option<&str>) -> GatewayConfig {
    let mut config = GatewayConfig {
        port: 0,
        ..GatewayConfig::default()
    };
    config.auth.token = token.map(str::to_owned);
    config
}

fn unauthorized() -> (u16, Value) {
    (
        401,
        json!({"error": {
            "message": "missing or wrong token: send Authorization: Bearer <gateway.auth.token>",
            "type": "invalid_request_error",
            "param": null,
            "code": "invalid_api_key"
        }}),
    )
}

#[tokio::test]
async fn health_is_open_and_status_needs_the_token_in_the_header() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    let config = config(Some(TOKEN));
    let (address, stop) = serve(&config, &gateway).await;
    let message = dm("1", "10", "hi");
    harness.channel.deliver(message.clone()).await.unwrap();
    assert_eq!(
        harness.channel.wait_for_sent(1).await,
        vec![answer(&message, "echo: hi")]
    );
    let turns = gateway.turns.clone();
    until(|| turns.activity().is_empty()).await;

    assert_eq!(
        get_path(address, "/health", None).await,
        (200, json!({"status": "ok"}))
    );
    assert_eq!(get_path(address, "/status", None).await, unauthorized());
    assert_eq!(
        get_path(address, "/status", Some("gw-test-t0kem")).await,
        unauthorized()
    );
    assert_eq!(
        get_path(address, &format!("/status?token={TOKEN}"), None).await,
        unauthorized()
    );
    let (status, mut report) = get_path(address, "/status", Some(TOKEN)).await;
    report["uptimeSeconds"] = json!(0);
    // The next tick depends on the wall clock.
    let next = report["heartbeats"][0]["next"].take();
    assert!(next.is_string(), "{next}");
    assert_eq!(
        (status, report),
        (
            200,
            json!({
                "uptimeSeconds": 0,
                "stopping": false,
                "channels": [{"name": "telegram", "account": "default", "state": "running",
                              "messagesIn": 1, "messagesOut": 1}],
                "turns": {"running": 0, "queued": 0, "finished": 1, "failed": 0},
                "sessions": [],
                "messages": {"received": 1, "ignored": 0, "denied": 0, "duplicates": 0,
                             "refused": 0, "kept": 0},
                "heartbeats": [{"agent": "main", "everySeconds": 1800, "next": null,
                                "running": false}]
            })
        )
    );
    stop.cancel();
    gateway.stop().await;
}

#[tokio::test]
async fn routes_mounted_by_the_caller_sit_behind_the_same_token() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    let (address, stop) = serve(&config(Some(TOKEN)), &gateway).await;
    assert_eq!(get_path(address, "/v1/ping", None).await, unauthorized());
    assert_eq!(
        get_path(address, "/v1/ping", Some(TOKEN)).await,
        (200, json!("pong"))
    );
    stop.cancel();
    gateway.stop().await;
}

#[tokio::test]
async fn without_a_token_status_is_open_to_loopback_clients() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    let (address, stop) = serve(&config(None), &gateway).await;
    assert_eq!(get_path(address, "/status", None).await.0, 200);
    stop.cancel();
    gateway.stop().await;
}

#[tokio::test]
async fn a_non_loopback_address_without_a_token_is_refused() {
    for token in [None, Some(""), Some("  ")] {
        let config = GatewayConfig {
            host: "0.0.0.0".to_owned(),
            ..config(token)
        };
        let error = server::bind(&config).await.err().unwrap();
        assert!(
            matches!(&error, ServerError::OpenWithoutToken { host } if host == "0.0.0.0"),
            "{error}"
        );
        assert!(error.to_string().contains("gateway.auth.token"), "{error}");
    }
    let localhost = GatewayConfig {
        host: "localhost".to_owned(),
        ..config(None)
    };
    let listener = server::bind(&localhost).await.unwrap();
    assert!(listener.local_addr().unwrap().ip().is_loopback());
}
