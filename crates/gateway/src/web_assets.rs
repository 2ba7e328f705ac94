//! The web page's files, embedded gzipped in the binary when it is built (see `build.rs`):
//! `GET /` and the files it loads, sent as they are to browsers (all take gzip), unzipped for
//! a client that does not, and revalidated by ETag.

use std::sync::OnceLock;

use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

/// `(path under web/, gzipped content)`, sorted by path.
static FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

/// Each file's ETag, made the first time it is asked for; one slot per entry of [`FILES`].
static ETAGS: OnceLock<Vec<OnceLock<HeaderValue>>> = OnceLock::new();

/// The embedded files by path, gzipped, for the figures in `docs/benchmarks.md` and tests.
pub fn files() -> impl Iterator<Item = (&'static str, &'static [u8])> {
    FILES.iter().copied()
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        Some("md" | "txt" | "LICENSE") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn etag(gzipped: &[u8]) -> HeaderValue {
    let digest = Sha256::digest(gzipped);
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    HeaderValue::from_str(&format!("\"{hex}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
}

/// `GET /`.
pub async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// `GET /{*path}`: a file of the page, or 404.
pub async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Ok(at) = FILES.binary_search_by(|(p, _)| (*p).cmp(path)) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let gzipped = FILES[at].1;
    let slots = ETAGS.get_or_init(|| FILES.iter().map(|_| OnceLock::new()).collect());
    let etag = slots[at].get_or_init(|| etag(gzipped)).clone();
    let cache = (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|tag| *tag == etag)
    {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag), cache]).into_response();
    }
    let takes_gzip = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let named = parts
                .next()
                .is_some_and(|name| name.eq_ignore_ascii_case("gzip") || name == "*");
            // `gzip;q=0` says no.
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            named && !refused
        });
    let mut response = if takes_gzip {
        let mut response = Body::from(gzipped).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        response
    } else {
        use std::io::Read as _;
        let mut content = Vec::new();
        match flate2::read::GzDecoder::new(gzipped).read_to_end(&mut content) {
            Ok(_) => Body::from(content).into_response(),
            Err(err) => {
                return (StatusCode::INTERNAL_SERVER_ERROR, format!("{path}: {err}"))
                    .into_response();
            }
        }
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    headers.insert(header::ETAG, etag);
    headers.insert(cache.0, cache.1);
    headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_files_are_sorted_for_the_lookup_and_the_page_is_there() {
        let paths: Vec<&str> = files().map(|(p, _)| p).collect();
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        assert_eq!(paths, sorted);
        assert!(paths.contains(&"index.html"), "{paths:?}");
    }
}
