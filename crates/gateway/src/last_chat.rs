//! The direct chat each agent's user last wrote from: where an autonomous run's reply goes when
//! its target is `last`. Kept in `state/last-chats.json` so a restart does not forget it.
//!
//! Only direct messages count: a group is many people, and what a heartbeat finds on the
//! user's task list is for the user. The file is written by a task of its own, a second after
//! a change and never on the message path; changes in between are written together, and a
//! chat that writes again from where it wrote last changes nothing.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nanocrab_schema::ChatRef;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The file in the state directory.
pub const LAST_CHATS_FILE: &str = "last-chats.json";

/// How long a change waits to be written with those after it; a crash loses at most this
/// much, and a stop nothing.
const WRITE_DELAY: Duration = Duration::from_secs(1);

/// Agent id → the direct chat its user last wrote from.
#[derive(Debug)]
pub struct LastChats {
    path: PathBuf,
    chats: Mutex<BTreeMap<String, ChatRef>>,
    /// A change not yet on disk.
    dirty: AtomicBool,
    changed: Notify,
}

impl LastChats {
    /// What `path` remembers; a missing file is an empty memory, and so is one that cannot be
    /// read (logged): the next direct message fills it again.
    pub fn open(path: &Path) -> Self {
        let chats = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                tracing::warn!(
                    "{}: not readable ({err}); starting without it",
                    path.display()
                );
                BTreeMap::new()
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(err) => {
                tracing::warn!("cannot read {}: {err}; starting without it", path.display());
                BTreeMap::new()
            }
        };
        Self {
            path: path.to_path_buf(),
            chats: Mutex::new(chats),
            dirty: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, ChatRef>> {
        self.chats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The direct chat agent `agent_id`'s user last wrote from.
    pub fn get(&self, agent_id: &str) -> Option<ChatRef> {
        self.lock().get(agent_id).cloned()
    }

    /// Remembers that agent `agent_id`'s user wrote from `chat`.
    pub(crate) fn note(&self, agent_id: &str, chat: ChatRef) {
        let mut chats = self.lock();
        if chats.get(agent_id) == Some(&chat) {
            return;
        }
        chats.insert(agent_id.to_owned(), chat);
        drop(chats);
        self.dirty.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    /// Writes every change until `stop`, and what is left then. A change is written
    /// [`WRITE_DELAY`] after it, together with whatever changed meanwhile: a gateway answering
    /// many people in turn changes the last chat with nearly every message.
    pub(crate) async fn keep_written(&self, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = self.changed.notified() => {}
                () = stop.cancelled() => break,
            }
            tokio::select! {
                () = tokio::time::sleep(WRITE_DELAY) => self.write_if_changed(),
                () = stop.cancelled() => break,
            }
        }
        self.write_if_changed();
    }

    /// Writes the file whole (a temp file renamed over it) if anything changed; a failure is
    /// logged and tried again with the next change.
    fn write_if_changed(&self) {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        let result = serde_json::to_vec_pretty(&*self.lock())
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let dir = self.path.parent().unwrap_or(Path::new("."));
                let mut temp = tempfile::NamedTempFile::new_in(dir)?;
                temp.write_all(&bytes)?;
                temp.persist(&self.path).map_err(|err| err.error)?;
                Ok(())
            });
        if let Err(err) = result {
            self.dirty.store(true, Ordering::Release);
            tracing::error!("cannot write {}: {err}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn chat(id: &str) -> ChatRef {
        ChatRef {
            channel: "telegram".to_owned(),
            account: "default".to_owned(),
            chat_id: id.to_owned(),
            thread_id: None,
        }
    }

    #[tokio::test]
    async fn the_last_chat_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LAST_CHATS_FILE);
        let chats = LastChats::open(&path);
        assert_eq!(chats.get("main"), None);
        chats.note("main", chat("1"));
        chats.note("main", chat("2"));
        chats.note("work", chat("3"));
        let stop = CancellationToken::new();
        stop.cancel();
        chats.keep_written(stop).await;

        let again = LastChats::open(&path);
        assert_eq!(
            (again.get("main"), again.get("work"), again.get("other")),
            (Some(chat("2")), Some(chat("3")), None)
        );
    }

    #[test]
    fn an_unreadable_file_is_an_empty_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LAST_CHATS_FILE);
        std::fs::write(&path, "{ torn").unwrap();
        assert_eq!(LastChats::open(&path).get("main"), None);
    }
}
