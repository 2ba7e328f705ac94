//! Who may use the web page and `/api`, and the headers that keep a browser from being turned
//! against it.
//!
//! - Without `gateway.auth.token` the server listens on loopback only (see
//!   [`crate::server::bind`]) and anyone on this machine may use the page. A web site the user
//!   visits could still send requests to `127.0.0.1`: state-changing requests must carry the
//!   `X-Nanocrab-CSRF` header (a cross-site page cannot set it without a CORS preflight, which
//!   is never granted) and an `Origin`, when sent, naming this server; and the `Host` must be a
//!   loopback name, so that a site whose name is made to resolve to 127.0.0.1 (DNS rebinding)
//!   is refused.
//! - With a token, the page asks for it once (`POST /api/login`) and keeps a sign-in cookie,
//!   HttpOnly and SameSite=Strict; the token never travels in a URL. A remote CLI sends
//!   `Authorization: Bearer <token>` instead, and needs no CSRF header.
//!
//! Every response carries a strict Content-Security-Policy: the page runs only its own
//! scripts, so Markdown a model wrote cannot run any.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::auth::{Token, bearer};

/// The sign-in cookie.
pub const AUTH_COOKIE: &str = "nanocrab_auth";
/// The header state-changing requests of the page carry.
pub const CSRF_HEADER: &str = "x-nanocrab-csrf";
/// A sign-in lasts this long.
const SIGN_IN_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// At most this many browsers are signed in at once; the oldest sign-in goes first.
const MAX_SIGN_INS: usize = 32;
/// Wrong tokens tolerated per minute before sign-in is refused for the rest of it.
const MAX_FAILED_SIGN_INS: u32 = 5;

pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The page's sign-ins and its CSRF secret; one per server.
pub struct WebAuth {
    token: Option<Token>,
    /// SHA-256 of each sign-in cookie, with when it was given.
    sign_ins: Mutex<HashMap<[u8; 32], Instant>>,
    failures: Mutex<(Instant, u32)>,
    csrf: String,
}

/// How a request proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proof {
    /// No token is configured and the client is on this machine.
    Loopback,
    Cookie,
    Bearer,
    None,
}

impl WebAuth {
    pub fn new(token: Option<&str>) -> Arc<Self> {
        Arc::new(Self {
            token: Token::from_config(token),
            sign_ins: Mutex::default(),
            failures: Mutex::new((Instant::now(), 0)),
            csrf: random_secret(),
        })
    }

    /// Whether a token is needed to use the page.
    pub fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    /// The value `X-Nanocrab-CSRF` must have.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    fn proof(&self, headers: &HeaderMap, peer: &SocketAddr) -> Proof {
        let Some(token) = &self.token else {
            return if peer.ip().is_loopback() {
                Proof::Loopback
            } else {
                Proof::None
            };
        };
        if bearer(headers).is_some_and(|presented| token.matches(presented)) {
            return Proof::Bearer;
        }
        let signed_in = cookie(headers, AUTH_COOKIE).is_some_and(|value| {
            let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
            let sign_ins = self.sign_ins.lock().unwrap_or_else(PoisonError::into_inner);
            sign_ins
                .get(&digest)
                .is_some_and(|given| given.elapsed() < SIGN_IN_LIFETIME)
        });
        if signed_in {
            Proof::Cookie
        } else {
            Proof::None
        }
    }

    /// Whether the request may use `/api`.
    pub fn signed_in(&self, headers: &HeaderMap, peer: &SocketAddr) -> bool {
        self.proof(headers, peer) != Proof::None
    }

    /// Checks `presented` and, when it is the token, returns a new sign-in cookie's value.
    fn sign_in(&self, presented: &str) -> Result<String, SignInError> {
        let Some(token) = &self.token else {
            return Err(SignInError::NoToken);
        };
        {
            let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
            if failures.0.elapsed() >= Duration::from_secs(60) {
                *failures = (Instant::now(), 0);
            }
            if failures.1 >= MAX_FAILED_SIGN_INS {
                return Err(SignInError::TooMany);
            }
            if !token.matches(presented) {
                failures.1 += 1;
                return Err(SignInError::Wrong);
            }
        }
        let value = random_secret();
        let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        let mut sign_ins = self.sign_ins.lock().unwrap_or_else(PoisonError::into_inner);
        sign_ins.retain(|_, given| given.elapsed() < SIGN_IN_LIFETIME);
        while sign_ins.len() >= MAX_SIGN_INS {
            let oldest = sign_ins
                .iter()
                .min_by_key(|(_, given)| **given)
                .map(|(digest, _)| *digest);
            match oldest {
                Some(oldest) => sign_ins.remove(&oldest),
                None => break,
            };
        }
        sign_ins.insert(digest, Instant::now());
        Ok(value)
    }

    fn sign_out(&self, headers: &HeaderMap) {
        if let Some(value) = cookie(headers, AUTH_COOKIE) {
            let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
            self.sign_ins
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&digest);
        }
    }
}

enum SignInError {
    NoToken,
    Wrong,
    TooMany,
}

/// 256 random bits as hex.
fn random_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Whether `host` (a `Host` header: name and port) names this machine's loopback.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]:port`
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether the request's `Origin`, when it has one, is the server it was sent to.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.trim_end_matches('/'));
    matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
}

fn refuse(status: StatusCode, message: &str, needs_token: bool) -> Response {
    let mut body = serde_json::json!({"error": {"message": message}});
    if needs_token {
        body["needsToken"] = serde_json::json!(true);
    }
    (status, Json(body)).into_response()
}

/// Middleware of the page and `/api`: the host, sign-in and CSRF checks, then the security
/// headers on whatever the handler answered.
pub async fn guard(
    State(auth): State<Arc<WebAuth>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = check(&auth, &peer, request, next).await;
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
    ] {
        headers.insert(name, value);
    }
    response
}

async fn check(auth: &WebAuth, peer: &SocketAddr, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if !auth.needs_token() {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !is_loopback_host(host) {
            return refuse(
                StatusCode::FORBIDDEN,
                "without gateway.auth.token the page answers only at a loopback address (http://127.0.0.1:<port>/ or http://localhost:<port>/)",
                false,
            );
        }
    }
    let path = request.uri().path();
    let api = path == "/api" || path.starts_with("/api/");
    // The page itself holds nothing private; it asks to sign in when needed.
    let open = !api || matches!(path, "/api/me" | "/api/login" | "/api/logout");
    let proof = auth.proof(headers, peer);
    if !open && proof == Proof::None {
        return if auth.needs_token() {
            refuse(
                StatusCode::UNAUTHORIZED,
                "sign in first: POST /api/login with the gateway's token, or send Authorization: Bearer <gateway.auth.token>",
                true,
            )
        } else {
            refuse(
                StatusCode::FORBIDDEN,
                "without gateway.auth.token only this machine may use the page",
                false,
            )
        };
    }
    let changes = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if api && changes && proof != Proof::Bearer {
        if !same_origin(headers) {
            return refuse(
                StatusCode::FORBIDDEN,
                "the request comes from another site's page",
                false,
            );
        }
        let csrf_ok = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == auth.csrf());
        if !csrf_ok && path != "/api/login" {
            return refuse(
                StatusCode::FORBIDDEN,
                "missing or wrong X-Nanocrab-CSRF header (reload the page)",
                false,
            );
        }
    }
    next.run(request).await
}

#[derive(Debug, Deserialize)]
pub(crate) struct SignIn {
    token: String,
}

/// `POST /api/login`.
pub(crate) fn login(auth: &WebAuth, headers: &HeaderMap, body: &[u8]) -> Response {
    let Ok(SignIn { token }) = serde_json::from_slice::<SignIn>(body) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the body must be {\"token\": \"…\"}",
            true,
        );
    };
    match auth.sign_in(token.trim()) {
        Ok(value) => {
            let secure = headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.eq_ignore_ascii_case("https"));
            let cookie = format!(
                "{AUTH_COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
                SIGN_IN_LIFETIME.as_secs(),
                if secure { "; Secure" } else { "" }
            );
            (
                StatusCode::OK,
                [(header::SET_COOKIE, cookie)],
                Json(serde_json::json!({"csrf": auth.csrf()})),
            )
                .into_response()
        }
        Err(SignInError::NoToken) => refuse(
            StatusCode::BAD_REQUEST,
            "this gateway has no token (gateway.auth.token): nothing to sign in to",
            false,
        ),
        Err(SignInError::Wrong) => refuse(StatusCode::UNAUTHORIZED, "wrong token", true),
        Err(SignInError::TooMany) => refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "too many wrong tokens; wait a minute",
            true,
        ),
    }
}

/// `POST /api/logout`.
pub(crate) fn logout(auth: &WebAuth, headers: &HeaderMap) -> Response {
    auth.sign_out(headers);
    (
        StatusCode::NO_CONTENT,
        [(
            header::SET_COOKIE,
            format!("{AUTH_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
        )],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_loopback_names_are_loopback_hosts() {
        let hosts = [
            ("127.0.0.1:18790", true),
            ("localhost:18790", true),
            ("LOCALHOST", true),
            ("app.localhost:80", true),
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
    fn cookies_are_found_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; nanocrab_auth=xyz; b=2"),
        );
        assert_eq!(cookie(&headers, AUTH_COOKIE), Some("xyz"));
        assert_eq!(cookie(&headers, "c"), None);
    }

    #[test]
    fn an_origin_must_name_the_host() {
        let headers = |origin: Option<&'static str>| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:18790"));
            if let Some(origin) = origin {
                headers.insert(header::ORIGIN, HeaderValue::from_static(origin));
            }
            headers
        };
        assert!(same_origin(&headers(None)));
        assert!(same_origin(&headers(Some("http://127.0.0.1:18790"))));
        assert!(!same_origin(&headers(Some("http://evil.example"))));
        assert!(!same_origin(&headers(Some("http://127.0.0.1:8080"))));
        assert!(!same_origin(&headers(Some("null"))));
    }

    #[test]
    fn sign_in_gives_a_cookie_that_signs_in_and_wrong_tokens_are_limited() {
        let auth = WebAuth::new(Some("s3cret"));
        let peer: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        assert!(!auth.signed_in(&HeaderMap::new(), &peer));
        let value = auth.sign_in("s3cret").ok().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{AUTH_COOKIE}={value}")).unwrap(),
        );
        assert!(auth.signed_in(&headers, &peer));
        auth.sign_out(&headers);
        assert!(!auth.signed_in(&headers, &peer));
        for _ in 0..MAX_FAILED_SIGN_INS {
            assert!(matches!(auth.sign_in("wrong"), Err(SignInError::Wrong)));
        }
        // Even the right token waits now: guessing is not worth it.
        assert!(matches!(auth.sign_in("s3cret"), Err(SignInError::TooMany)));
    }
}
