//! One file over HTTP into `models/.downloads/`: it grows as `<name>.incomplete`, a rerun
//! resumes it with `Range: bytes=N-`, it is hashed as it arrives, and only a whole file with
//! the right size and digest is renamed to its final name.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use futures::StreamExt as _;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_RANGE, RANGE};
use sha2::{Digest as _, Sha256};

use crate::error::ModelError;
use crate::pull::Progress;

/// What the finished file must be.
pub(crate) struct Expected {
    pub size: Option<u64>,
    /// Lowercase hex.
    pub sha256: String,
}

/// A whole, checked file.
pub(crate) struct Downloaded {
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
}

pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ModelError {
    let path = path.to_path_buf();
    move |source| ModelError::Io {
        action,
        path,
        source,
    }
}

/// The size and sha256 of a file on disk.
pub(crate) fn hash_file(path: &Path) -> Result<(u64, String), ModelError> {
    let mut file = std::fs::File::open(path).map_err(io("open", path))?;
    let mut hasher = Sha256::new();
    let size = hash_into(&mut file, &mut hasher, path)?;
    Ok((size, hex(&hasher.finalize())))
}

fn hash_into(
    reader: &mut impl std::io::Read,
    hasher: &mut Sha256,
    path: &Path,
) -> Result<u64, ModelError> {
    let mut buffer = vec![0; 1 << 20];
    let mut size = 0;
    loop {
        let n = reader.read(&mut buffer).map_err(io("read", path))?;
        if n == 0 {
            return Ok(size);
        }
        hasher.update(&buffer[..n]);
        size += n as u64;
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Downloads `url` to `target`, resuming `target.incomplete` when a previous run left one.
/// A lost connection keeps what arrived (the error says to pull again); bytes that do not
/// match `expected` are deleted. Errors name `shown` (a CDN's signed address means nothing
/// to the user; the hub's does).
pub(crate) async fn download(
    client: &reqwest::Client,
    (url, shown): (&str, &str),
    target: &Path,
    expected: &Expected,
    progress: &mut dyn FnMut(u64, Option<u64>, u64),
) -> Result<Downloaded, ModelError> {
    let unreachable = |detail: String| ModelError::Unreachable {
        url: shown.to_owned(),
        detail,
    };
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    let mut name = target.as_os_str().to_owned();
    name.push(".incomplete");
    let partial = PathBuf::from(name);

    let mut hasher = Sha256::new();
    let mut have = match std::fs::File::open(&partial) {
        Ok(mut file) => hash_into(&mut file, &mut hasher, &partial)?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => 0,
        Err(source) => {
            return Err(ModelError::Io {
                action: "open",
                path: partial,
                source,
            });
        }
    };
    if expected.size.is_some_and(|size| have > size) {
        have = 0;
        hasher = Sha256::new();
    }

    let mut request = client.get(url);
    if have > 0 {
        request = request.header(RANGE, format!("bytes={have}-"));
    }
    let response = request
        .send()
        .await
        .map_err(|err| unreachable(without_url(&err)))?;
    let status = response.status();
    let resumed_from = match status {
        StatusCode::PARTIAL_CONTENT
            if have > 0 && range_start(response.headers()) == Some(have) =>
        {
            have
        }
        StatusCode::RANGE_NOT_SATISFIABLE if have > 0 && Some(have) == expected.size => have,
        status if status.is_success() && status != StatusCode::PARTIAL_CONTENT => {
            // The server sent the whole file (it ignored the range, or none was asked for).
            hasher = Sha256::new();
            0
        }
        status => {
            if status == StatusCode::RANGE_NOT_SATISFIABLE || status == StatusCode::PARTIAL_CONTENT
            {
                // A range this server will not serve as asked: start over next time.
                let _ = std::fs::remove_file(&partial);
            }
            return Err(unreachable(format!("HTTP {status}")));
        }
    };
    let total = expected.size.or_else(|| {
        response
            .content_length()
            .map(|length| resumed_from + length)
    });
    let mut done = resumed_from;
    progress(done, total, resumed_from);
    if status != StatusCode::RANGE_NOT_SATISFIABLE {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(resumed_from > 0)
            .write(true)
            .truncate(resumed_from == 0)
            .open(&partial)
            .map_err(io("create", &partial))?;
        let mut body = response.bytes_stream();
        while let Some(piece) = body.next().await {
            let piece = piece.map_err(|err| {
                unreachable(format!(
                    "the connection broke after {done} bytes ({}); pull again to resume",
                    without_url(&err)
                ))
            })?;
            if expected
                .size
                .is_some_and(|size| done + piece.len() as u64 > size)
            {
                drop(file);
                let _ = std::fs::remove_file(&partial);
                return Err(unreachable(format!(
                    "sent more than the {} bytes the file has",
                    expected.size.unwrap_or_default()
                )));
            }
            hasher.update(&piece);
            file.write_all(&piece).map_err(io("write", &partial))?;
            done += piece.len() as u64;
            progress(done, total, resumed_from);
        }
        file.flush().map_err(io("write", &partial))?;
    }
    if let Some(size) = expected.size
        && done != size
    {
        return Err(unreachable(format!(
            "the download ended after {done} of {size} bytes; pull again to resume"
        )));
    }
    let actual = hex(&hasher.finalize());
    if actual != expected.sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(ModelError::Digest {
            what: shown.to_owned(),
            expected: expected.sha256.clone(),
            actual,
        });
    }
    std::fs::rename(&partial, target).map_err(io("rename", &partial))?;
    Ok(Downloaded {
        path: target.to_path_buf(),
        size: done,
        sha256: actual,
    })
}

/// `Content-Range: bytes START-END/TOTAL`: START.
fn range_start(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let value = headers.get(CONTENT_RANGE)?.to_str().ok()?;
    let range = value.strip_prefix("bytes ")?;
    range.split('-').next()?.trim().parse().ok()
}

/// reqwest's messages repeat the URL, which the error already names.
pub(crate) fn without_url(err: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut text = err.to_string();
    if let Some(url) = err.url() {
        text = text.replace(&format!(" for url ({url})"), "");
    }
    // "error sending request" alone does not say that nothing was listening.
    let mut cause = err.source();
    while let Some(inner) = cause {
        text = format!("{text}: {inner}");
        cause = inner.source();
    }
    text
}

/// Reads a progress report's pieces into a [`Progress`] for `file` from `source`.
pub(crate) fn reporter<'a>(
    progress: &'a mut (dyn FnMut(Progress) + Send),
    source: &'a str,
    file: &'a str,
) -> impl FnMut(u64, Option<u64>, u64) + 'a {
    move |done, total, resumed_from| {
        progress(Progress {
            source: source.to_owned(),
            file: file.to_owned(),
            done,
            total,
            resumed_from,
        });
    }
}
