//! Connections to the mail servers: TCP, then TLS from the first byte or after STARTTLS, with
//! the platform's certificate verifier and the configured extra CA; unencrypted only to a
//! server on this machine. Errors never hold a password.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use nanocrab_config::{MailSecurity, MailServer};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::ChannelError;

/// The channel's name in errors, logs and session keys.
pub(crate) const CHANNEL: &str = "email";

/// How long connecting and the TLS handshake together may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// A byte stream to a server, plain or TLS.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send + std::fmt::Debug {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + std::fmt::Debug> Io for T {}

/// Why talking to a mail server failed, before it becomes a [`ChannelError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MailError {
    /// The server refused the login (or the mailbox): trying again will not help.
    Login(String),
    /// The server refused for good (an SMTP 5xx): sending the same again will not help.
    Rejected(String),
    /// No connection, a dropped one, a timeout, a refusal for now (an SMTP 4xx).
    Transport(String),
}

impl MailError {
    pub fn into_channel_error(self, method: &str) -> ChannelError {
        match self {
            Self::Login(message) => ChannelError::Unauthorized {
                channel: CHANNEL.to_owned(),
                message,
            },
            Self::Rejected(message) => ChannelError::Rejected {
                channel: CHANNEL.to_owned(),
                method: method.to_owned(),
                message,
            },
            Self::Transport(message) => ChannelError::Transport {
                channel: CHANNEL.to_owned(),
                method: method.to_owned(),
                message,
            },
        }
    }
}

impl std::fmt::Display for MailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Login(message) | Self::Rejected(message) | Self::Transport(message) => {
                f.write_str(message)
            }
        }
    }
}

/// The certificates a server's may chain to: the platform's, and the configured CA's.
#[derive(Clone)]
pub(crate) struct Trust {
    /// The configured CA file as it was read, for lettre, which takes PEM.
    pub extra_pem: Option<Vec<u8>>,
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("extra_ca", &self.extra_pem.is_some())
            .finish_non_exhaustive()
    }
}

impl Trust {
    /// The platform's roots, plus the certificates of `extra_pem` (a PEM file's bytes).
    pub fn new(extra_pem: Option<Vec<u8>>) -> Result<Self, String> {
        nanocrab_config::http::install_tls_provider();
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let extra: Vec<CertificateDer<'static>> = match &extra_pem {
            Some(pem) => CertificateDer::pem_slice_iter(pem)
                .collect::<Result<_, _>>()
                .map_err(|err| format!("not a PEM certificate file: {err}"))?,
            None => Vec::new(),
        };
        if extra_pem.is_some() && extra.is_empty() {
            return Err("holds no certificate (-----BEGIN CERTIFICATE-----)".to_owned());
        }
        let verifier =
            rustls_platform_verifier::Verifier::new_with_extra_roots(extra, Arc::clone(&provider))
                .map_err(|err| format!("cannot set up TLS: {err}"))?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| format!("cannot set up TLS: {err}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Self {
            extra_pem,
            config: Arc::new(config),
        })
    }

    /// `tcp` encrypted, the certificate checked against `host`.
    pub async fn wrap(&self, tcp: Box<dyn Io>, host: &str) -> Result<Box<dyn Io>, MailError> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| MailError::Transport(format!("{host} is not a name TLS can verify")))?;
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.config));
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp))
            .await
            .map_err(|_| MailError::Transport(format!("no TLS handshake with {host} in time")))?
            .map_err(|err| MailError::Transport(format!("TLS with {host} failed: {err}")))?;
        Ok(Box::new(stream))
    }
}

/// Whether `host` is this machine, where an unencrypted connection reveals nothing.
pub(crate) fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A TCP connection to `server`; a plain one only when the server is this machine.
pub(crate) async fn tcp(server: &MailServer) -> Result<Box<dyn Io>, MailError> {
    if server.security == MailSecurity::Plain && !is_loopback(&server.host) {
        return Err(MailError::Transport(format!(
            "{} is not on this machine: an unencrypted connection would show the password to the network (use tls or starttls)",
            server.host
        )));
    }
    let host = server.host.trim_start_matches('[').trim_end_matches(']');
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host, server.port)))
        .await
        .map_err(|_| {
            MailError::Transport(format!(
                "no connection to {}:{} in time",
                server.host, server.port
            ))
        })?
        .map_err(|err| {
            MailError::Transport(format!(
                "cannot connect to {}:{}: {err}",
                server.host, server.port
            ))
        })?;
    let _ = tcp.set_nodelay(true);
    Ok(Box::new(tcp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_counts_as_loopback() {
        for host in [
            "localhost",
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "[::1]",
            "LocalHost",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "imap.example.com",
            "10.0.0.1",
            "localhost.example.com",
            "192.168.1.2",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        assert!(Trust::new(Some(b"hello".to_vec())).is_err());
        assert!(Trust::new(None).is_ok());
    }
}
