//! Durability in groups: one flush of the whole filesystem for everything written to it since
//! the last one, however many files and writers.
//!
//! A busy gateway writes each message to the inbound journal and its answer to a transcript,
//! a different file per chat. Flushing each file on its own (`fdatasync`) costs a disk flush
//! and, in a virtual machine, several exits to the host per file: about 40 µs of CPU each on
//! the project's machine, most of a turn's own cost. `syncfs(2)` flushes every file of the
//! filesystem at once (and the directory entries of new ones, which `fdatasync` does not), so
//! writers that commit at about the same time share one: a commit asked for while one is
//! running is served by the next, which starts as soon as the running one ends. Nobody waits
//! for a timer, and an idle nanocrab pays one flush per commit, as before.
//!
//! The cost of that breadth: another program's unwritten data on the same filesystem is
//! flushed too, and a commit waits for it. The kernel writes such data within half a minute
//! anyway; a commit that waits for it is slower, never wrong.
//!
//! One committer (a thread, started at the first commit) serves each filesystem in the
//! process. A failed flush poisons it: the kernel may have dropped pages it could not write,
//! so nothing written to that filesystem can be promised durable again until the process
//! restarts (PostgreSQL's answer to the same problem).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

/// A handle on the committer of one filesystem; clones share it.
pub struct GroupCommit {
    shared: Arc<Shared>,
}

impl Clone for GroupCommit {
    fn clone(&self) -> Self {
        self.shared.lock().handles += 1;
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("dir", &self.shared.dir)
            .finish_non_exhaustive()
    }
}

/// Why a commit failed: the flush's error, the same for every writer it was to cover and for
/// every commit after it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot flush the filesystem of {}: {error}", dir.display())]
pub struct CommitError {
    pub dir: PathBuf,
    pub error: Arc<std::io::Error>,
}

struct Shared {
    /// A directory of the filesystem, as named and opened.
    dir: PathBuf,
    handle: File,
    /// Writes noted so far; a commit covers every write noted before it began.
    written: AtomicU64,
    state: Mutex<State>,
    /// Wakes the committer when a commit is wanted, and the blocking waiters when one ends.
    changed: Condvar,
    /// The writes durable so far, for async waiters.
    durable: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    /// The writes a commit has been asked for through.
    wanted: u64,
    /// The writes durable so far.
    durable: u64,
    failed: Option<Arc<std::io::Error>>,
    committer_running: bool,
    /// Live [`GroupCommit`] handles; the committer ends with the last.
    handles: usize,
    /// Every handle is gone: the committer ends.
    closed: bool,
}

/// The committers of the process, one per filesystem (by device number).
static COMMITTERS: OnceLock<Mutex<HashMap<u64, Weak<Shared>>>> = OnceLock::new();

impl GroupCommit {
    /// The committer of the filesystem `dir` is on; `dir` must exist.
    pub fn for_dir(dir: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let handle = File::open(dir)?;
        let device = handle.metadata()?.dev();
        let mut committers = COMMITTERS
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(shared) = committers.get(&device).and_then(Weak::upgrade) {
            let mut state = shared.lock();
            if !state.closed {
                state.handles += 1;
                drop(state);
                return Ok(Self { shared });
            }
        }
        let commit = Self::unshared(dir.to_path_buf(), handle);
        committers.retain(|_, shared| shared.strong_count() > 0);
        committers.insert(device, Arc::downgrade(&commit.shared));
        Ok(commit)
    }

    /// A committer of its own, which no other handle shares.
    fn unshared(dir: PathBuf, handle: File) -> Self {
        Self {
            shared: Arc::new(Shared {
                dir,
                handle,
                written: AtomicU64::new(0),
                state: Mutex::new(State {
                    handles: 1,
                    ..State::default()
                }),
                changed: Condvar::new(),
                durable: tokio::sync::watch::Sender::new(0),
            }),
        }
    }

    /// Notes that something was written to this filesystem, once the write returned; gives
    /// the write's number, for [`GroupCommit::commit_through`].
    pub fn wrote(&self) -> u64 {
        self.shared.written.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Returns once write number `write` (and every one before it) is on disk.
    pub async fn commit_through(&self, write: u64) -> Result<(), CommitError> {
        let Some(target) = self.ask(write)? else {
            return Ok(());
        };
        let mut durable = self.shared.durable.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail.
        let _ = durable.wait_for(|durable| *durable >= target).await;
        self.outcome()
    }

    /// [`GroupCommit::commit_through`] for a caller that is not async; it blocks the thread.
    pub fn commit_through_blocking(&self, write: u64) -> Result<(), CommitError> {
        let Some(target) = self.ask(write)? else {
            return Ok(());
        };
        let mut state = self.shared.lock();
        while state.durable < target && state.failed.is_none() {
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(state);
        self.outcome()
    }

    /// Asks for a commit through write `target`; `None` when it already is durable.
    fn ask(&self, target: u64) -> Result<Option<u64>, CommitError> {
        let mut state = self.shared.lock();
        if let Some(error) = &state.failed {
            return Err(self.error(error));
        }
        if state.durable >= target {
            return Ok(None);
        }
        state.wanted = state.wanted.max(target);
        if !state.committer_running {
            let shared = Arc::clone(&self.shared);
            let spawned = std::thread::Builder::new()
                .name("nanocrab-commit".to_owned())
                .spawn(move || shared.run());
            match spawned {
                Ok(_) => state.committer_running = true,
                Err(error) => {
                    let error = Arc::new(error);
                    state.failed = Some(Arc::clone(&error));
                    return Err(self.error(&error));
                }
            }
        }
        self.shared.changed.notify_all();
        Ok(Some(target))
    }

    fn outcome(&self) -> Result<(), CommitError> {
        match &self.shared.lock().failed {
            Some(error) => Err(self.error(error)),
            None => Ok(()),
        }
    }

    fn error(&self, error: &Arc<std::io::Error>) -> CommitError {
        CommitError {
            dir: self.shared.dir.clone(),
            error: Arc::clone(error),
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.handles -= 1;
        if state.handles == 0 {
            state.closed = true;
            self.shared.changed.notify_all();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a few counters, each updated in one step: consistent even if a holder
        // panicked.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The committer: flushes whenever more is wanted than is durable, until every handle is
    /// gone or a flush fails.
    fn run(self: Arc<Self>) {
        let mut state = self.lock();
        loop {
            while state.wanted <= state.durable && !state.closed {
                state = self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.wanted <= state.durable {
                state.committer_running = false;
                return;
            }
            drop(state);
            // Covers every write noted before this load, and perhaps some after.
            let target = self.written.load(Ordering::SeqCst);
            let flushed = flush(&self.handle);
            state = self.lock();
            match flushed {
                Ok(()) => {
                    state.durable = state.durable.max(target);
                    self.durable.send_replace(state.durable);
                    self.changed.notify_all();
                }
                Err(error) => {
                    tracing::error!(
                        "cannot flush the filesystem of {}: {error}; nothing more can be made durable until nanocrab restarts",
                        self.dir.display()
                    );
                    state.failed = Some(Arc::new(error));
                    state.committer_running = false;
                    // Every waiter wakes, finds the failure and reports it.
                    self.durable.send_replace(u64::MAX);
                    self.changed.notify_all();
                    return;
                }
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn flush(handle: &File) -> std::io::Result<()> {
    rustix::fs::syncfs(handle).map_err(std::io::Error::from)
}

/// Elsewhere, where there is no flush of one filesystem, every filesystem is flushed.
#[cfg(not(target_os = "linux"))]
fn flush(_handle: &File) -> std::io::Result<()> {
    rustix::fs::sync();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A committer no other test shares: the tests' temporary directories are all on one
    /// filesystem.
    fn private(dir: &Path) -> GroupCommit {
        GroupCommit::unshared(dir.to_path_buf(), File::open(dir).unwrap())
    }

    #[test]
    fn one_committer_per_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let a = GroupCommit::for_dir(dir.path()).unwrap();
        let b = GroupCommit::for_dir(&sub).unwrap();
        assert!(Arc::ptr_eq(&a.shared, &b.shared));
    }

    #[test]
    fn a_commit_with_nothing_written_starts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let commit = private(dir.path());
        commit.commit_through_blocking(0).unwrap();
        assert!(!commit.shared.lock().committer_running);
    }

    #[test]
    fn writes_are_durable_after_a_commit_from_either_kind_of_caller() {
        let dir = tempfile::tempdir().unwrap();
        let commit = private(dir.path());
        std::fs::write(dir.path().join("a"), "one").unwrap();
        assert_eq!(commit.wrote(), 1);
        commit.commit_through_blocking(1).unwrap();
        assert_eq!(commit.shared.lock().durable, 1);
        std::fs::write(dir.path().join("b"), "two").unwrap();
        let write = commit.wrote();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(commit.commit_through(write)).unwrap();
        assert_eq!(commit.shared.lock().durable, 2);
        // Many writers at once are served, however the flushes group them.
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let commit = commit.clone();
                let path = dir.path().join(format!("w{i}"));
                std::thread::spawn(move || {
                    std::fs::write(path, "x").unwrap();
                    let write = commit.wrote();
                    commit.commit_through_blocking(write)
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap().unwrap();
        }
        assert_eq!(commit.shared.lock().durable, 10);
    }

    #[test]
    fn a_failed_flush_fails_every_commit_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let commit = private(dir.path());
        commit.shared.lock().failed = Some(Arc::new(std::io::Error::other("EIO")));
        let write = commit.wrote();
        let err = commit.commit_through_blocking(write).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "cannot flush the filesystem of {}: EIO",
                dir.path().display()
            )
        );
    }

    #[test]
    fn the_committer_ends_with_the_last_handle() {
        let dir = tempfile::tempdir().unwrap();
        let commit = private(dir.path());
        let other = commit.clone();
        let write = commit.wrote();
        commit.commit_through_blocking(write).unwrap();
        let shared = Arc::downgrade(&commit.shared);
        drop(commit);
        assert!(other.shared.lock().committer_running, "a handle is left");
        drop(other);
        // The committer drops its reference as it returns.
        while shared.strong_count() > 0 {
            std::thread::yield_now();
        }
    }
}
