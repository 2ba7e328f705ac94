//! The web page's files, embedded in the binary when it is built (see `build.rs`): `GET /`
//! and the files it loads, gzipped for browsers that take it and revalidated by ETag.

use std::sync::OnceLock;

use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

/// `(path under web/, content)`, sorted by path.
static FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

/// A file's ETag and gzipped body, made the first time it is asked for.
struct Prepared {
    etag: HeaderValue,
    gzipped: Option<Vec<u8>>,
}

/// One slot per entry of [`FILES`].
static PREPARED: OnceLock<Vec<OnceLock<Prepared>>> = OnceLock::new();

/// The embedded files, by path, for the figures in `docs/benchmarks.md` and tests.
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

fn prepare(content: &[u8]) -> Prepared {
    let digest = Sha256::digest(content);
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    let etag = HeaderValue::from_str(&format!("\"{hex}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("\"0\""));
    // Small files and pictures gain nothing.
    let gzipped = (content.len() > 1024).then(|| {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder
            .write_all(content)
            .and_then(|()| encoder.finish())
            .ok()
    });
    Prepared {
        etag,
        gzipped: gzipped.flatten(),
    }
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
    let content = FILES[at].1;
    let slots = PREPARED.get_or_init(|| FILES.iter().map(|_| OnceLock::new()).collect());
    let prepared = slots[at].get_or_init(|| prepare(content));
    let cache = (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|tag| tag == prepared.etag)
    {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, prepared.etag.clone()), cache],
        )
            .into_response();
    }
    let takes_gzip = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
    let mut response = match (&prepared.gzipped, takes_gzip) {
        (Some(gzipped), true) => {
            let mut response = Body::from(gzipped.clone()).into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            response
        }
        (Some(_) | None, _) => Body::from(content).into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    headers.insert(header::ETAG, prepared.etag.clone());
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
