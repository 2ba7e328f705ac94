//! `$NANOCRAB_HOME/models/`: one folder per installed model, named as in the catalogue, with
//! a `manifest.json` written last. A folder without a manifest is an install that did not
//! finish and does not count. Downloads in progress, and files placed there by hand, are in
//! `models/.downloads/`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::catalogue::ModelSpec;
use crate::error::ModelError;

const MANIFEST: &str = "manifest.json";

#[derive(Debug, Clone)]
pub struct ModelStore {
    dir: PathBuf,
}

/// What an installed model's folder holds and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub name: String,
    /// Where the files came from: the wheel and its index, the hub repository and commit, or
    /// "placed by hand".
    pub source: String,
    pub files: Vec<ManifestFile>,
    pub installed_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledModel {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl InstalledModel {
    pub fn size(&self) -> u64 {
        self.manifest.files.iter().map(|f| f.size).sum()
    }
}

impl ModelStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where downloads grow (`<file>.incomplete`) and where a file fetched by hand is put.
    pub fn downloads(&self) -> PathBuf {
        self.dir.join(".downloads")
    }

    /// The folder of `spec` when it is installed.
    pub fn installed_dir(&self, spec: &ModelSpec) -> Result<PathBuf, ModelError> {
        let dir = self.dir.join(&spec.name);
        if dir.join(MANIFEST).is_file() {
            Ok(dir)
        } else {
            Err(ModelError::NotInstalled {
                name: spec.name.clone(),
            })
        }
    }

    /// The install of `spec` when it holds the files the catalogue pins: the manifest says so
    /// and each file on disk has its size. (Hashing 100 MB again on every pull would make a
    /// no-op slow; the digests were checked when the files arrived.)
    pub fn current(&self, spec: &ModelSpec) -> Result<Option<InstalledModel>, ModelError> {
        let Some(installed) = self.installed(spec)? else {
            return Ok(None);
        };
        let pinned = spec.files.iter().all(|file| {
            installed
                .manifest
                .files
                .iter()
                .any(|m| m.name == file.name && m.size == file.size && m.sha256 == file.sha256)
                && std::fs::metadata(installed.dir.join(&file.name))
                    .is_ok_and(|meta| meta.len() == file.size)
        });
        Ok(pinned.then_some(installed))
    }

    pub fn installed(&self, spec: &ModelSpec) -> Result<Option<InstalledModel>, ModelError> {
        let dir = self.dir.join(&spec.name);
        let path = dir.join(MANIFEST);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ModelError::Io {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        let manifest = serde_json::from_str(&text).map_err(|err| ModelError::Files {
            path: path.clone(),
            detail: err.to_string(),
        })?;
        Ok(Some(InstalledModel { dir, manifest }))
    }

    /// A new, empty folder in the store to assemble a model in before [`Self::install`].
    pub(crate) fn staging(&self, name: &str) -> Result<tempfile::TempDir, ModelError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| ModelError::Io {
            action: "create",
            path: self.dir.clone(),
            source,
        })?;
        tempfile::Builder::new()
            .prefix(&format!(".{name}-"))
            .tempdir_in(&self.dir)
            .map_err(|source| ModelError::Io {
                action: "create a folder in",
                path: self.dir.clone(),
                source,
            })
    }

    /// Writes the manifest of `files` (checked on their way in) into `staging` and moves it
    /// into place as `spec`'s folder, replacing an older install only at the very end.
    pub(crate) fn install(
        &self,
        spec: &ModelSpec,
        staging: tempfile::TempDir,
        source: String,
        mut files: Vec<ManifestFile>,
    ) -> Result<InstalledModel, ModelError> {
        files.sort_by(|a, b| a.name.cmp(&b.name));
        let manifest = Manifest {
            name: spec.name.clone(),
            source,
            files,
            installed_at: jiff::Timestamp::now().to_string(),
        };
        let manifest_path = staging.path().join(MANIFEST);
        let text = serde_json::to_string_pretty(&manifest).map_err(|err| ModelError::Files {
            path: manifest_path.clone(),
            detail: err.to_string(),
        })?;
        std::fs::write(&manifest_path, text).map_err(|source| ModelError::Io {
            action: "write",
            path: manifest_path,
            source,
        })?;
        let target = self.dir.join(&spec.name);
        // The old folder moves aside first (a rename cannot replace a non-empty folder) and is
        // deleted only once the new one is in place; if that fails, it moves back.
        let old = self.dir.join(format!(".{}-replaced", spec.name));
        let replacing = target.exists();
        if replacing {
            let _ = std::fs::remove_dir_all(&old);
            std::fs::rename(&target, &old).map_err(|source| ModelError::Io {
                action: "move aside",
                path: target.clone(),
                source,
            })?;
        }
        if let Err(source) = std::fs::rename(staging.path(), &target) {
            if replacing {
                let _ = std::fs::rename(&old, &target);
            }
            return Err(ModelError::Io {
                action: "install",
                path: target,
                source,
            });
        }
        // Moved into place: the staging folder no longer exists to be cleaned up.
        let _ = staging.keep();
        if replacing {
            let _ = std::fs::remove_dir_all(&old);
        }
        Ok(InstalledModel {
            dir: target,
            manifest,
        })
    }

    /// Deletes an installed model; `false` when it was not installed.
    pub fn remove(&self, spec: &ModelSpec) -> Result<bool, ModelError> {
        let dir = self.dir.join(&spec.name);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(ModelError::Io {
                action: "remove",
                path: dir,
                source,
            }),
        }
    }
}
