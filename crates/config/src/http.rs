//! The one way nanocrab builds an HTTP client: reqwest over rustls with the ring crypto
//! provider, nanocrab's user agent, and the caller's timeouts. Redirects, proxies and the
//! rest stay at the call site, where the reason for them is.

use std::sync::Once;
use std::time::Duration;

/// How long a client waits. `None` leaves that limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// For the TCP and TLS handshake.
    pub connect: Duration,
    /// Between two reads of the answer: a stream may last as long as it keeps talking.
    pub read: Option<Duration>,
    /// For the whole exchange, answer included.
    pub total: Option<Duration>,
}

/// A client builder with the TLS setup, the user agent and `timeouts`; the caller adds what
/// is its own and calls `build`.
pub fn client_builder(timeouts: Timeouts) -> reqwest::ClientBuilder {
    install_tls_provider();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .user_agent(concat!("nanocrab/", env!("CARGO_PKG_VERSION")));
    if let Some(read) = timeouts.read {
        builder = builder.read_timeout(read);
    }
    if let Some(total) = timeouts.total {
        builder = builder.timeout(total);
    }
    builder
}

/// Installs rustls's ring crypto provider for the process, once. reqwest and the other TLS
/// clients (Discord's gateway and REST) are built without a default one (ring builds faster and
/// smaller than aws-lc) and refuse to connect without it. Another part of the process (a test
/// harness) may have installed one already, which is as good.
pub fn install_tls_provider() {
    static TLS: Once = Once::new();
    TLS.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a crypto provider rustls refuses to make a client; a second call finds the one
    /// installed by the first.
    #[test]
    fn clients_build_with_the_tls_provider_installed_once() {
        let timeouts = Timeouts {
            connect: Duration::from_secs(1),
            read: Some(Duration::from_secs(2)),
            total: None,
        };
        for _ in 0..2 {
            assert!(client_builder(timeouts).build().is_ok());
        }
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
