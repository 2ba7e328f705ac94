//! The Socket Mode WebSocket: `wss://` to Slack over rustls with the platform's certificate
//! verifier (as reqwest's), or plain `ws://` to a test double on the loopback.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::http::Uri;

/// How long connecting, TLS and the WebSocket handshake together may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A byte stream, plain or TLS.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub(crate) type Socket = WebSocketStream<Box<dyn Io>>;

/// Opens the WebSocket at `url` (from `apps.connections.open`). The address holds a one-use
/// ticket: errors never quote it.
pub(crate) async fn connect(url: &str) -> Result<Socket, String> {
    tokio::time::timeout(CONNECT_TIMEOUT, open(url))
        .await
        .map_err(|_| format!("no connection within {}s", CONNECT_TIMEOUT.as_secs()))?
}

async fn open(url: &str) -> Result<Socket, String> {
    let uri: Uri = url
        .parse()
        .map_err(|_| "apps.connections.open gave an address that is not a URL".to_owned())?;
    let tls = match uri.scheme_str() {
        Some("wss") => true,
        Some("ws") => false,
        Some(_) | None => {
            return Err("apps.connections.open gave an address that is not ws:// or wss://".into());
        }
    };
    let host = uri
        .host()
        .ok_or_else(|| "apps.connections.open gave an address without a host".to_owned())?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|err| format!("cannot connect to {host}:{port}: {err}"))?;
    // Events are small and want to go out at once.
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = if tls {
        use rustls_platform_verifier::ConfigVerifierExt as _;
        let config = rustls::ClientConfig::with_platform_verifier()
            .map_err(|err| format!("cannot set up TLS: {err}"))?;
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|_| format!("{host} is not a name TLS can verify"))?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        Box::new(
            connector
                .connect(name, tcp)
                .await
                .map_err(|err| format!("TLS with {host} failed: {err}"))?,
        )
    } else {
        Box::new(tcp)
    };
    let (socket, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .map_err(|err| format!("the WebSocket handshake with {host} failed: {err}"))?;
    Ok(socket)
}
