//! Which indexed files changed since the last search, from the operating system's file
//! events (the `notify` crate): a long-running process (the gateway, an interactive agent)
//! then syncs only those before a search, instead of looking at every file.
//!
//! Events are gathered as they come and taken whole at the next search, which is all the
//! debouncing they need: a file saved ten times is read once. Whatever the events cannot
//! say exactly (a folder created, moved or removed, the kernel's queue overflowing, an error
//! of the watcher) asks for one full sync instead, which is what a process without a
//! watcher does each time; so is the first search after the watch starts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use notify::event::{CreateKind, EventKind, ModifyKind, RemoveKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::source_files::{SESSIONS, SOURCES};

/// What changed since the changes were last taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// Index-relative paths (`memory/2026-01-01.md`) of files created, changed or removed.
    Files(Vec<String>),
    /// Not known file by file: every file must be looked at.
    Everything,
}

#[derive(Debug, Default)]
struct Pending {
    files: BTreeSet<String>,
    everything: bool,
    /// A top folder (`knowledge/`) appeared: watch it before the next sync.
    new_folder: bool,
}

/// The roots watched: the workspace's indexed folders, and the transcripts when searched.
#[derive(Debug, Clone)]
struct Roots {
    workspace: PathBuf,
    sessions: Option<PathBuf>,
}

impl Roots {
    /// The index's name for `path` (`knowledge/a.pdf`), when it is a file the index reads.
    fn relative(&self, path: &Path) -> Option<String> {
        let (source, rest, endings): (&str, &Path, &[&str]) = SOURCES
            .iter()
            .find_map(|(source, endings)| {
                path.strip_prefix(self.workspace.join(source))
                    .ok()
                    .map(|rest| (*source, rest, *endings))
            })
            .or_else(|| {
                let sessions = self.sessions.as_ref()?;
                path.strip_prefix(sessions)
                    .ok()
                    .map(|rest| (SESSIONS, rest, &["jsonl"][..]))
            })?;
        let ending = rest.extension()?.to_str()?.to_ascii_lowercase();
        if !endings.contains(&ending.as_str()) {
            return None;
        }
        let rest = rest.to_str()?.replace(std::path::MAIN_SEPARATOR, "/");
        Some(format!("{source}/{rest}"))
    }
}

/// Watches the indexed folders of one workspace; the watch ends when the last clone drops.
#[derive(Clone)]
pub struct ChangeWatch {
    pending: Arc<Mutex<Pending>>,
    watcher: Arc<Mutex<Watched>>,
    roots: Roots,
}

/// The watcher, and the folders it watches recursively.
struct Watched {
    watcher: RecommendedWatcher,
    folders: BTreeSet<PathBuf>,
}

impl Watched {
    /// Watches whichever of `roots`' folders exist and are not watched yet.
    fn arm(&mut self, roots: &Roots) -> Result<(), WatchError> {
        let folders = SOURCES
            .iter()
            .map(|(source, _)| roots.workspace.join(source))
            .chain(roots.sessions.clone());
        for folder in folders {
            if self.folders.contains(&folder) || !folder.is_dir() {
                continue;
            }
            self.watcher
                .watch(&folder, RecursiveMode::Recursive)
                .map_err(|source| WatchError {
                    path: folder.clone(),
                    source,
                })?;
            self.folders.insert(folder);
        }
        Ok(())
    }
}

impl std::fmt::Debug for ChangeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeWatch").finish_non_exhaustive()
    }
}

impl PartialEq for ChangeWatch {
    /// The same watch, not two watches of the same folders.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.pending, &other.pending)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot watch {} for changes: {source}", path.display())]
pub struct WatchError {
    path: PathBuf,
    source: notify::Error,
}

impl ChangeWatch {
    /// Watches `workspace`'s `memory/` and `knowledge/` (and `sessions`, when transcripts are
    /// searched too). Folders that do not exist yet are watched once they are made.
    pub fn start(workspace: &Path, sessions: Option<&Path>) -> Result<Self, WatchError> {
        let roots = Roots {
            workspace: workspace.to_path_buf(),
            sessions: sessions.map(Path::to_path_buf),
        };
        // The first search after the start syncs everything: what changed before it is not
        // known.
        let pending = Arc::new(Mutex::new(Pending {
            everything: true,
            ..Pending::default()
        }));
        let sink = Arc::clone(&pending);
        let handler_roots = roots.clone();
        // The handler runs on the watcher's own thread, which the watcher's methods wait for:
        // it only takes notes, and `take` acts on them.
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let mut pending = sink.lock().unwrap_or_else(PoisonError::into_inner);
            let event = match event {
                Ok(event) => event,
                Err(err) => {
                    tracing::debug!("memory watch: {err}; the next search syncs every file");
                    pending.everything = true;
                    return;
                }
            };
            if event.need_rescan() {
                pending.everything = true;
                return;
            }
            // Opening and reading (a sync's own) changes nothing; a write also comes as a
            // modification.
            if matches!(event.kind, EventKind::Access(_)) {
                return;
            }
            for path in &event.paths {
                if path.parent() == Some(handler_roots.workspace.as_path()) {
                    // A top folder made (or moved in) after the start: watched from the next
                    // sync on, which looks at everything in it.
                    if SOURCES.iter().any(|(source, _)| path.ends_with(source)) {
                        pending.new_folder = true;
                        pending.everything = true;
                    }
                    continue;
                }
                match handler_roots.relative(path) {
                    Some(relative) => {
                        pending.files.insert(relative);
                    }
                    // Not a file the index reads: a folder moved or removed can hide many,
                    // anything else (an editor's swap file) changes nothing.
                    None => {
                        let folder = matches!(
                            event.kind,
                            EventKind::Create(CreateKind::Folder)
                                | EventKind::Remove(RemoveKind::Folder)
                                | EventKind::Modify(ModifyKind::Name(_))
                        ) && path.extension().is_none();
                        if folder || path.is_dir() {
                            pending.everything = true;
                        }
                    }
                }
            }
        })
        .map_err(|source| WatchError {
            path: workspace.to_path_buf(),
            source,
        })?;
        let mut watched = Watched {
            watcher,
            folders: BTreeSet::new(),
        };
        // The workspace itself only for its top folders appearing.
        watched
            .watcher
            .watch(workspace, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError {
                path: workspace.to_path_buf(),
                source,
            })?;
        watched.arm(&roots)?;
        Ok(Self {
            pending,
            watcher: Arc::new(Mutex::new(watched)),
            roots,
        })
    }

    /// What changed since the last call, taken: the next call reports only what changes
    /// after this one.
    pub fn take(&self) -> Changes {
        let taken =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if taken.new_folder {
            let mut watched = self.watcher.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(err) = watched.arm(&self.roots) {
                // Unwatched, its files are still found: every search then looks at them all.
                tracing::warn!("{err}");
                self.pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .new_folder = true;
            }
        }
        if taken.everything {
            Changes::Everything
        } else {
            Changes::Files(taken.files.into_iter().collect())
        }
    }

    /// Puts changes back, for a sync that failed before it was done.
    pub fn restore(&self, changes: Changes) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match changes {
            Changes::Everything => pending.everything = true,
            Changes::Files(files) => pending.files.extend(files),
        }
    }

    /// Whether a change is waiting (for tests that wait for the events to arrive).
    pub fn has_changes(&self) -> bool {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.everything || !pending.files.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_the_files_the_index_reads_have_names() {
        let roots = Roots {
            workspace: PathBuf::from("/w"),
            sessions: Some(PathBuf::from("/h/sessions")),
        };
        let named: Vec<Option<String>> = [
            "/w/memory/2026-01-01.md",
            "/w/memory/.2026-01-01.md.swp",
            "/w/knowledge/deep/report.PDF",
            "/w/knowledge/image.png",
            "/w/SOUL.md",
            "/h/sessions/agent:main:web:x.jsonl",
            "/elsewhere/memory/a.md",
        ]
        .iter()
        .map(|p| roots.relative(Path::new(p)))
        .collect();
        assert_eq!(
            named,
            [
                Some("memory/2026-01-01.md".to_owned()),
                None,
                Some("knowledge/deep/report.PDF".to_owned()),
                None,
                None,
                Some("sessions/agent:main:web:x.jsonl".to_owned()),
                None,
            ]
        );
    }
}
