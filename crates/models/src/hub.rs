//! Files from a Hugging Face hub, as `huggingface_hub` fetches them: `HEAD
//! {hub}/{repo}/resolve/{revision}/{path}` without following redirects tells the file's
//! commit (`X-Repo-Commit`), digest (`X-Linked-Etag`, the sha256 of an LFS file) and size
//! (`X-Linked-Size`), and where its bytes are (`Location`, often a CDN on another host); the
//! bytes are then fetched from there, resumably.

use std::path::Path;

use reqwest::StatusCode;
use reqwest::header::{ETAG, HeaderMap, LOCATION};

use crate::catalogue::ModelFile;
use crate::download::{Downloaded, Expected, download, without_url};
use crate::error::ModelError;

/// The file's URL on the hub.
pub(crate) fn resolve_url(hub_url: &str, repo: &str, revision: &str, path: &str) -> String {
    // A branch name may hold `/`; in the URL it is one segment.
    format!(
        "{}/{repo}/resolve/{}/{path}",
        hub_url.trim_end_matches('/'),
        revision.replace('/', "%2F")
    )
}

pub(crate) struct HubFile {
    pub downloaded: Downloaded,
    /// The commit the revision resolved to, when the hub said.
    pub commit: Option<String>,
}

/// Fetches `file` (at `path` in `repo`) into `target`. `head` must not follow redirects.
pub(crate) async fn fetch(
    head: &reqwest::Client,
    get: &reqwest::Client,
    url: &str,
    file: &ModelFile,
    target: &Path,
    progress: &mut dyn FnMut(u64, Option<u64>, u64),
) -> Result<HubFile, ModelError> {
    let unreachable = |detail: String| ModelError::Unreachable {
        url: url.to_owned(),
        detail,
    };
    let response = head
        .head(url)
        .send()
        .await
        .map_err(|err| unreachable(without_url(&err)))?;
    let status = response.status();
    let headers = response.headers();
    let commit = header(headers, "x-repo-commit");
    let location = if status.is_redirection() {
        let location = header(headers, LOCATION.as_str())
            .ok_or_else(|| unreachable(format!("HTTP {status} without a Location")))?;
        // The CDN's address may be relative to the hub's.
        reqwest::Url::parse(url)
            .and_then(|base| base.join(&location))
            .map_err(|err| unreachable(format!("bad Location {location}: {err}")))?
            .to_string()
    } else if status.is_success() {
        url.to_owned()
    } else {
        return Err(unreachable(hub_error(status, headers)));
    };
    // An LFS file's etag is its sha256; a small file's is a git hash, which says nothing here.
    let etag = header(headers, "x-linked-etag").or_else(|| header(headers, ETAG.as_str()));
    if let Some(etag) = etag {
        let digest = etag
            .trim_start_matches("W/")
            .trim_matches('"')
            .to_ascii_lowercase();
        if digest.len() == 64
            && digest.chars().all(|c| c.is_ascii_hexdigit())
            && digest != file.sha256
        {
            return Err(ModelError::Pinned {
                url: url.to_owned(),
                what: "sha256".to_owned(),
                hub: digest,
                pinned: file.sha256.clone(),
            });
        }
    }
    if let Some(size) = header(headers, "x-linked-size").and_then(|s| s.parse::<u64>().ok())
        && size != file.size
    {
        return Err(ModelError::Pinned {
            url: url.to_owned(),
            what: "size".to_owned(),
            hub: size.to_string(),
            pinned: file.size.to_string(),
        });
    }
    let expected = Expected {
        size: Some(file.size),
        sha256: file.sha256.clone(),
    };
    let downloaded = download(get, (&location, url), target, &expected, progress).await?;
    Ok(HubFile { downloaded, commit })
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// What the hub's `X-Error-Code` means, or the status.
fn hub_error(status: StatusCode, headers: &HeaderMap) -> String {
    let code = header(headers, "x-error-code");
    let message = header(headers, "x-error-message");
    let what = match code.as_deref() {
        Some("RepoNotFound") => "no such repository (or it is private)".to_owned(),
        Some("RevisionNotFound") => "no such revision in the repository".to_owned(),
        Some("EntryNotFound") => "no such file at this revision".to_owned(),
        Some("GatedRepo") => "the repository is gated: it needs an account and a token".to_owned(),
        Some(other) => other.to_owned(),
        None => return format!("HTTP {status}"),
    };
    match message {
        Some(message) => format!("HTTP {status}: {what} ({message})"),
        None => format!("HTTP {status}: {what}"),
    }
}
