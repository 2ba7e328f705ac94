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
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::auth::{Token, bearer, is_loopback_host, proxied};

/// The sign-in cookie.
pub const AUTH_COOKIE: &str = "nanocrab_auth";
/// The header state-changing requests of the page carry.
pub const CSRF_HEADER: &str = "x-nanocrab-csrf";
/// A sign-in lasts this long.
const SIGN_IN_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// At most this many browsers are signed in at once; the oldest sign-in goes first.
const MAX_SIGN_INS: usize = 32;

/// The page's sign-ins and its CSRF secret; one per server.
pub struct WebAuth {
    token: Option<Token>,
    /// SHA-256 of each sign-in cookie, with when it was given (seconds since the epoch).
    sign_ins: Mutex<HashMap<[u8; 32], i64>>,
    csrf: String,
    /// Where the sign-ins and the CSRF secret are kept, so that a restart of the gateway
    /// signs nobody out; `None`: in memory only.
    store: Option<PathBuf>,
}

/// What `state/web-sign-ins.json` holds: no cookie, only digests of them.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    /// Which token the sign-ins were made with (a digest of its digest): another token
    /// signs everyone out.
    token: String,
    csrf: String,
    sign_ins: Vec<KeptSignIn>,
}

#[derive(Debug, Serialize, Deserialize)]
struct KeptSignIn {
    digest: String,
    given: i64,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn fresh(given: i64) -> bool {
    now().saturating_sub(given) < SIGN_IN_LIFETIME.as_secs() as i64
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
    /// With the server's `token`, whose count of wrong guesses the page shares; sign-ins
    /// kept in `store` when given (read now, what is still valid for this token).
    pub(crate) fn new(token: Option<Token>, store: Option<PathBuf>) -> Arc<Self> {
        let fingerprint = token.as_ref().map(Token::fingerprint).unwrap_or_default();
        let kept = store.as_deref().and_then(|path| match std::fs::read(path) {
            Ok(bytes) => match serde_json::from_slice::<Kept>(&bytes) {
                Ok(kept) => Some(kept),
                Err(err) => {
                    // Only sign-ins: the browsers sign in again.
                    tracing::warn!("{} is damaged ({err}); it is started again", path.display());
                    None
                }
            },
            Err(_) => None,
        });
        let (csrf, sign_ins) = match kept {
            Some(kept) if !kept.csrf.is_empty() => {
                let sign_ins = if kept.token == fingerprint {
                    kept.sign_ins
                        .iter()
                        .filter(|s| fresh(s.given))
                        .filter_map(|s| {
                            let bytes: Vec<u8> = (0..s.digest.len())
                                .step_by(2)
                                .filter_map(|i| {
                                    u8::from_str_radix(s.digest.get(i..i + 2)?, 16).ok()
                                })
                                .collect();
                            <[u8; 32]>::try_from(bytes).ok().map(|d| (d, s.given))
                        })
                        .collect()
                } else {
                    HashMap::new()
                };
                (kept.csrf, sign_ins)
            }
            Some(_) | None => (random_secret(), HashMap::new()),
        };
        let auth = Arc::new(Self {
            token,
            sign_ins: Mutex::new(sign_ins),
            csrf,
            store,
        });
        auth.keep();
        auth
    }

    /// Writes the sign-ins and the CSRF secret to the store: a temporary file, then renamed,
    /// readable by its owner only. A failure is said and changes nothing else.
    fn keep(&self) {
        let Some(path) = &self.store else {
            return;
        };
        let kept = Kept {
            token: self
                .token
                .as_ref()
                .map(Token::fingerprint)
                .unwrap_or_default(),
            csrf: self.csrf.clone(),
            sign_ins: self
                .sign_ins
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .map(|(digest, given)| KeptSignIn {
                    digest: hex(digest),
                    given: *given,
                })
                .collect(),
        };
        let written = (|| -> std::io::Result<()> {
            use std::io::Write as _;
            let dir = path.parent().unwrap_or(std::path::Path::new("."));
            std::fs::create_dir_all(dir)?;
            let mut temp = tempfile::Builder::new()
                .prefix(".web-sign-ins-")
                .tempfile_in(dir)?;
            temp.write_all(&serde_json::to_vec_pretty(&kept)?)?;
            temp.as_file().sync_all()?;
            temp.persist(path).map_err(|err| err.error)?;
            Ok(())
        })();
        if let Err(err) = written {
            tracing::warn!(
                "cannot keep the page's sign-ins in {} ({err}); a restart signs browsers out",
                path.display()
            );
        }
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
        if let Some(presented) = bearer(headers) {
            if token.matches(presented) {
                return Proof::Bearer;
            }
            token.guesses.wrong(peer.ip());
        }
        let signed_in = cookie(headers, AUTH_COOKIE).is_some_and(|value| {
            let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
            let sign_ins = self.sign_ins.lock().unwrap_or_else(PoisonError::into_inner);
            sign_ins.get(&digest).is_some_and(|given| fresh(*given))
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

    /// Whether `ip` guessed the token wrong too often this minute.
    fn blocked(&self, ip: IpAddr) -> bool {
        self.token.as_ref().is_some_and(|t| t.guesses.blocked(ip))
    }

    /// Checks `presented`, from `ip`, and when it is the token returns a new sign-in cookie's
    /// value.
    fn sign_in(&self, presented: &str, ip: IpAddr) -> Result<String, SignInError> {
        let Some(token) = &self.token else {
            return Err(SignInError::NoToken);
        };
        if token.guesses.blocked(ip) {
            return Err(SignInError::TooMany);
        }
        if !token.matches(presented) {
            token.guesses.wrong(ip);
            return Err(SignInError::Wrong);
        }
        let value = random_secret();
        let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        {
            let mut sign_ins = self.sign_ins.lock().unwrap_or_else(PoisonError::into_inner);
            sign_ins.retain(|_, given| fresh(*given));
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
            sign_ins.insert(digest, now());
        }
        self.keep();
        Ok(value)
    }

    fn sign_out(&self, headers: &HeaderMap) {
        if let Some(value) = cookie(headers, AUTH_COOKIE) {
            let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
            self.sign_ins
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&digest);
            self.keep();
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
    let api = is_api(request.uri().path());
    let mut response =
        crate::auth::security_headers(check(&auth, &peer, request, next).await).await;
    if api {
        // Transcripts and files: not for any cache on the way.
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
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
        if proxied(headers) {
            return refuse(
                StatusCode::FORBIDDEN,
                "this request came through a proxy, and without gateway.auth.token everyone behind it would be let in: set gateway.auth.token",
                false,
            );
        }
    }
    let path = request.uri().path();
    let api = is_api(path);
    if api {
        // A page of another site: neither its writes nor its reads (an `<img>` probing
        // whether a file exists, an EventSource) are served.
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|site| matches!(site, "cross-site" | "same-site"));
        if cross_site || !same_origin(headers) {
            return refuse(
                StatusCode::FORBIDDEN,
                "the request comes from another site's page",
                false,
            );
        }
    }
    // The page itself holds nothing private; it asks to sign in when needed.
    let open = !api || matches!(path, "/api/me" | "/api/login" | "/api/logout");
    let proof = auth.proof(headers, peer);
    // A signed-in browser is never held up by someone else's guesses from its address.
    if api && proof != Proof::Cookie && auth.blocked(peer.ip()) {
        return refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "too many wrong tokens from this address; wait a minute",
            true,
        );
    }
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
pub(crate) fn login(
    auth: &WebAuth,
    peer: &SocketAddr,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let Ok(SignIn { token }) = serde_json::from_slice::<SignIn>(body) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the body must be {\"token\": \"…\"}",
            true,
        );
    };
    match auth.sign_in(token.trim(), peer.ip()) {
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
    fn sign_in_gives_a_cookie_that_signs_in_and_wrong_tokens_are_limited_per_address() {
        let auth = WebAuth::new(Token::from_config(Some("s3cret")), None);
        let peer: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let owner: IpAddr = "10.0.0.3".parse().unwrap();
        assert!(!auth.signed_in(&HeaderMap::new(), &peer));
        let value = auth.sign_in("s3cret", peer.ip()).ok().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{AUTH_COOKIE}={value}")).unwrap(),
        );
        assert!(auth.signed_in(&headers, &peer));
        auth.sign_out(&headers);
        assert!(!auth.signed_in(&headers, &peer));
        for _ in 0..crate::auth::MAX_WRONG_TOKENS {
            assert!(matches!(
                auth.sign_in("wrong", peer.ip()),
                Err(SignInError::Wrong)
            ));
        }
        // Even the right token waits now: guessing is not worth it...
        assert!(matches!(
            auth.sign_in("s3cret", peer.ip()),
            Err(SignInError::TooMany)
        ));
        // ...from that address; the owner elsewhere signs in.
        assert!(auth.sign_in("s3cret", owner).is_ok());
        // A wrong bearer token counts as a guess too.
        let mut bearer = HeaderMap::new();
        bearer.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer nope"),
        );
        let other: SocketAddr = "10.0.0.4:1".parse().unwrap();
        for _ in 0..crate::auth::MAX_WRONG_TOKENS {
            assert!(!auth.signed_in(&bearer, &other));
        }
        assert!(auth.blocked(other.ip()));
    }
}
