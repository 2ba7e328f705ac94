//! Who may call the gateway's protected routes (`/status`, `/v1/*`): with `gateway.auth.token`
//! set, whoever sends `Authorization: Bearer <token>`; without it, loopback clients only (the
//! server refuses to listen anywhere else without a token). A token in the URL is never
//! looked at: URLs end up in logs and browser histories.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

/// The configured token, kept only as its SHA-256: comparing digests of equal length in
/// constant time tells a caller nothing about the token's length or its leading characters.
#[derive(Clone)]
pub(crate) struct Token([u8; 32]);

impl Token {
    /// The token of `gateway.auth.token`; `None` when unset or blank (an unset
    /// `${NANOCRAB_GATEWAY_TOKEN}` leaves it empty), which must not mean "the empty token".
    pub(crate) fn from_config(token: Option<&str>) -> Option<Self> {
        token
            .filter(|token| !token.trim().is_empty())
            .map(|token| Self(Sha256::digest(token.as_bytes()).into()))
    }

    pub(crate) fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        // Every byte is looked at whatever the others hold: no early return.
        let difference = self
            .0
            .iter()
            .zip(presented.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Middleware of the protected routes; its state is the configured token.
pub(crate) async fn require_auth(
    State(token): State<Option<Token>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let allowed = match &token {
        Some(token) => bearer(request.headers()).is_some_and(|presented| token.matches(presented)),
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
                    .is_none_or(crate::web_auth::is_loopback_host)
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
            "without gateway.auth.token only loopback clients may call this, and not from a web page",
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
