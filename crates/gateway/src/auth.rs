//! Who may call the gateway's protected routes (`/status`, `/v1/*`): with `gateway.auth.token`
//! set, whoever sends `Authorization: Bearer <token>`; without it, loopback clients only (the
//! server refuses to listen anywhere else without a token). A token in the URL is never
//! looked at: URLs end up in logs and browser histories.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

/// Wrong tokens tolerated from one address per minute; past them that address is refused,
/// even with the right token, until the minute is over.
pub(crate) const MAX_WRONG_TOKENS: u32 = 5;
/// Addresses followed at once; past it the one followed longest is forgotten.
const MAX_FOLLOWED: usize = 4096;

/// Wrong tokens by client address, for every route that takes the token (`/v1`, `/api`, the
/// page's sign-in): per address, so that a stranger's guesses never lock the owner out.
#[derive(Default)]
pub(crate) struct Guesses {
    seen: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl Guesses {
    const WINDOW: Duration = Duration::from_secs(60);

    /// Who `ip` counts as: an IPv6 address by its /64, which one machine usually has whole.
    fn client(ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(_) => ip,
            IpAddr::V6(v6) => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                IpAddr::from(octets)
            }
        }
    }

    /// Whether `ip` guessed wrong too often this minute.
    pub(crate) fn blocked(&self, ip: IpAddr) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(&Self::client(ip)).is_some_and(|(since, wrong)| {
            since.elapsed() < Self::WINDOW && *wrong >= MAX_WRONG_TOKENS
        })
    }

    /// Counts a wrong token from `ip`.
    pub(crate) fn wrong(&self, ip: IpAddr) {
        let ip = Self::client(ip);
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= MAX_FOLLOWED && !seen.contains_key(&ip) {
            seen.retain(|_, (since, _)| since.elapsed() < Self::WINDOW);
            // Still full: the address followed longest makes room.
            let oldest = (seen.len() >= MAX_FOLLOWED)
                .then(|| {
                    seen.iter()
                        .min_by_key(|(_, (since, _))| *since)
                        .map(|(ip, _)| *ip)
                })
                .flatten();
            if let Some(oldest) = oldest {
                seen.remove(&oldest);
            }
        }
        let entry = seen.entry(ip).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= Self::WINDOW {
            *entry = (Instant::now(), 0);
        }
        entry.1 += 1;
    }
}

/// The configured token, kept only as its SHA-256: comparing digests of equal length in
/// constant time tells a caller nothing about the token's length or its leading characters.
/// Clones share the count of wrong guesses.
#[derive(Clone)]
pub(crate) struct Token {
    digest: [u8; 32],
    pub(crate) guesses: Arc<Guesses>,
}

impl Token {
    /// The token of `gateway.auth.token`; `None` when unset or blank (an unset
    /// `${NANOCRAB_GATEWAY_TOKEN}` leaves it empty), which must not mean "the empty token".
    pub(crate) fn from_config(token: Option<&str>) -> Option<Self> {
        token
            .filter(|token| !token.trim().is_empty())
            .map(|token| Self {
                digest: Sha256::digest(token.as_bytes()).into(),
                guesses: Arc::default(),
            })
    }

    /// Names the token without telling it: a digest of its digest, to notice it changed.
    pub(crate) fn fingerprint(&self) -> String {
        Sha256::digest(self.digest)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    pub(crate) fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        // Every byte is looked at whatever the others hold: no early return.
        let difference = self
            .digest
            .iter()
            .zip(presented.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

/// Whether `host` (a `Host` header: name and port) names this machine's loopback:
/// `localhost` or a loopback address.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]:port`
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether a proxy forwarded the request: then its client is not the loopback peer it seems.
pub(crate) fn proxied(headers: &HeaderMap) -> bool {
    [
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",
    ]
    .iter()
    .any(|name| headers.contains_key(*name))
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The page's strict Content-Security-Policy: its own scripts and styles only, so Markdown a
/// model wrote cannot run any.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The headers every answer of the server carries: what it sends is neither sniffed, framed,
/// embedded by another site, nor sent on as a referrer.
pub(crate) async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            HeaderValue::from_static("same-origin"),
        ),
    ] {
        headers.insert(name, value);
    }
    response
}

/// 429 for an address that guessed wrong too often, in the OpenAI error shape.
fn too_many_guesses() -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        Json(serde_json::json!({"error": {
            "message": "too many wrong tokens from this address; wait a minute",
            "type": "invalid_request_error",
            "param": null,
            "code": "rate_limit_exceeded",
        }})),
    )
        .into_response()
}

/// Middleware of the protected routes; its state is the configured token.
pub(crate) async fn require_auth(
    State(token): State<Option<Token>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &token
        && token.guesses.blocked(peer.ip())
    {
        return too_many_guesses();
    }
    let allowed = match &token {
        Some(token) => match bearer(request.headers()) {
            Some(presented) if token.matches(presented) => true,
            Some(_) => {
                token.guesses.wrong(peer.ip());
                false
            }
            None => false,
        },
        // A web page the user visits may send requests here too: a browser always says where
        // such a request comes from (`Origin`), and API clients do not send one.
        // A name that resolves to 127.0.0.1 for a site's page (DNS rebinding) is refused too.
        None => {
            let headers = request.headers();
            peer.ip().is_loopback()
                && !headers.contains_key(header::ORIGIN)
                && headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .is_none_or(is_loopback_host)
                // Behind a proxy on this machine everyone would be a loopback client.
                && !proxied(headers)
        }
    };
    if allowed {
        return next.run(request).await;
    }
    let (status, message) = match token {
        Some(_) => (
            StatusCode::UNAUTHORIZED,
            "missing or wrong token: send Authorization: Bearer <gateway.auth.token>",
        ),
        None => (
            StatusCode::FORBIDDEN,
            "without gateway.auth.token only loopback clients may call this, not through a proxy and not from a web page",
        ),
    };
    // The OpenAI error shape, so that OpenAI clients of `/v1/*` show the message.
    (
        status,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        Json(serde_json::json!({"error": {
            "message": message,
            "type": "invalid_request_error",
            "param": null,
            "code": "invalid_api_key",
        }})),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn only_the_exact_token_matches() {
        let token = Token::from_config(Some("s3cret-token")).unwrap();
        assert!(token.matches("s3cret-token"));
        for wrong in [
            "",
            "s3cret",
            "s3cret-token ",
            "S3CRET-TOKEN",
            "s3cret-tokenx",
        ] {
            assert!(!token.matches(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn a_blank_token_is_no_token() {
        assert!(Token::from_config(None).is_none());
        assert!(Token::from_config(Some("")).is_none());
        assert!(Token::from_config(Some("  ")).is_none());
    }

    #[test]
    fn only_loopback_names_are_loopback_hosts() {
        let hosts = [
            ("127.0.0.1:18790", true),
            ("localhost:18790", true),
            ("LOCALHOST", true),
            // Resolvers need not send subdomains of localhost to this machine.
            ("app.localhost:80", false),
            ("[::1]:18790", true),
            ("127.1.2.3", true),
            ("evil.example:18790", false),
            ("localhost.evil.example", false),
            ("192.168.1.5:18790", false),
            ("", false),
        ];
        let got: Vec<_> = hosts
            .iter()
            .map(|(h, _)| (*h, is_loopback_host(h)))
            .collect();
        assert_eq!(got, hosts.to_vec());
    }

    #[test]
    fn guesses_are_counted_per_address_and_ipv6_per_64() {
        let guesses = Guesses::default();
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let same_64: IpAddr = "2001:db8::ffff".parse().unwrap();
        let other: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        for _ in 0..MAX_WRONG_TOKENS {
            assert!(!guesses.blocked(same_64));
            guesses.wrong(a);
        }
        assert!(guesses.blocked(same_64));
        assert!(!guesses.blocked(other));
    }

    #[test]
    fn the_token_comes_from_a_bearer_header_only() {
        let headers = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            headers
        };
        assert_eq!(bearer(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&headers("Basic abc")), None);
        assert_eq!(bearer(&headers("abc")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }
}
