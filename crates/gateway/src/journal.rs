//! The inbound journal (`state/gateway-inbox.jsonl`): what makes an accepted message safe.
//!
//! A channel confirms a message to its platform once the gateway accepts it, and the platform
//! then forgets it; so the gateway appends it here first, on disk, and accepts it after. When
//! its turn has finished (the answer sent, or the failure reported to the sender) a `done`
//! record follows. On start, messages without `done` are handed back in order to be answered:
//! a crash or a restart loses none. A platform may deliver a message again when the crash came
//! between the journal and its confirmation, so a message already journaled (same channel,
//! account, chat and message id, and for an edit its time) is recognised and dropped.
//!
//! The file is append-only JSON lines, one record each; a torn last line from a crash is
//! skipped (its message was never accepted, so the platform delivers it again). It is rewritten
//! to what is still needed — the unfinished messages and the identities of the most recently
//! finished ones — on open and whenever it has grown well past that, through a temporary file
//! renamed into place.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;
use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use nanocrab_schema::InboundMessage;
use nanocrab_sessions::{CommitError, GroupCommit};
use serde::{Deserialize, Serialize};

use crate::jsonl_file::JsonlFile;

/// A journaled message's number, unique in its journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EntryId(u64);

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A message journaled and not yet done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    pub id: EntryId,
    pub message: InboundMessage,
}

/// What [`Journal::record`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Journaled under this id: safe to accept.
    New(EntryId),
    /// The journal already has it: a redelivery, to drop.
    Duplicate,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot {action} the gateway journal {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode a journal record: {0}")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Commit(#[from] CommitError),
}

/// What identifies one delivery of a message on its platform.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageKey {
    channel: String,
    account: String,
    chat_id: String,
    message_id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    edited: bool,
    /// A message can be edited more than once; each edit is its own delivery, told apart by
    /// the time the platform gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    edited_at: Option<i64>,
}

impl MessageKey {
    fn of(message: &InboundMessage) -> Self {
        Self {
            channel: message.channel.clone(),
            account: message.account.clone(),
            chat_id: message.chat_id.clone(),
            message_id: message.message_id.clone(),
            edited: message.edited,
            edited_at: message.edited.then_some(message.timestamp),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Record {
    Message {
        id: EntryId,
        message: Box<InboundMessage>,
    },
    Done {
        id: EntryId,
    },
    /// A finished message's identity, kept through a rewrite to recognise a redelivery.
    Seen {
        key: MessageKey,
    },
}

/// The inbound journal. Its methods write to the file at once (records are a few hundred
/// bytes); [`Journal::commit`] makes what they wrote durable, in a group with whatever else
/// was written to the filesystem meanwhile (the turns' transcripts).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// How many finished messages are remembered for recognising redeliveries.
    remember: usize,
    state: Mutex<State>,
    group_commit: GroupCommit,
}

#[derive(Debug)]
struct State {
    file: JsonlFile,
    next_id: u64,
    /// Messages journaled and not done, by id, i.e. in arrival order.
    undone: BTreeMap<EntryId, InboundMessage>,
    /// Identities of finished messages, oldest first, at most `remember`.
    finished: VecDeque<MessageKey>,
    /// The identities of `undone` and `finished`.
    known: HashSet<MessageKey>,
    /// Records in the file, to know when a rewrite pays.
    records: usize,
    /// The number of the last write, for the group commit.
    last_write: u64,
}

impl Journal {
    /// Opens the journal at `path` (creating it and its directory), keeping the identities of
    /// the `remember` most recently finished messages, and returns the unfinished messages in
    /// the order they arrived.
    pub fn open(path: &Path, remember: usize) -> Result<(Self, Vec<JournalEntry>), JournalError> {
        let io = |action, source| JournalError::Io {
            action,
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
        }
        let mut next_id = 0;
        let mut undone = BTreeMap::new();
        let mut finished = VecDeque::new();
        match File::open(path) {
            Ok(file) => {
                for (number, line) in BufReader::new(file).lines().enumerate() {
                    let line = line.map_err(|e| io("read", e))?;
                    if line.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Record>(&line) {
                        Ok(Record::Message { id, message }) => {
                            next_id = next_id.max(id.0 + 1);
                            undone.insert(id, *message);
                        }
                        Ok(Record::Done { id }) => {
                            if let Some(message) = undone.remove(&id) {
                                finished.push_back(MessageKey::of(&message));
                            }
                        }
                        Ok(Record::Seen { key }) => finished.push_back(key),
                        // A torn last line after a crash; anything else is a hand edit.
                        Err(err) => tracing::warn!(
                            "{}:{}: skipping a record that does not parse: {err}",
                            path.display(),
                            number + 1
                        ),
                    }
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(io("open", err)),
        }
        while finished.len() > remember {
            finished.pop_front();
        }
        let known = undone
            .values()
            .map(MessageKey::of)
            .chain(finished.iter().cloned())
            .collect();
        let (file, records) = rewrite(path, &undone, &finished)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let group_commit = GroupCommit::for_dir(dir).map_err(|e| io("open the directory of", e))?;
        let entries = undone
            .iter()
            .map(|(id, message)| JournalEntry {
                id: *id,
                message: message.clone(),
            })
            .collect();
        let state = State {
            file,
            next_id,
            undone,
            finished,
            known,
            records,
            last_write: 0,
        };
        Ok((
            Self {
                path: path.to_owned(),
                remember,
                state: Mutex::new(state),
                group_commit,
            },
            entries,
        ))
    }

    /// Journals `message` unless it already is; once this returns [`Recorded::New`], the
    /// message is on disk. Blocks the thread for the commit.
    pub fn record(&self, message: &InboundMessage) -> Result<Recorded, JournalError> {
        let recorded = self.record_all(&[message])?;
        let write = self.lock().last_write;
        self.group_commit.commit_through_blocking(write)?;
        Ok(recorded.first().copied().unwrap_or(Recorded::Duplicate))
    }

    /// Journals each of `messages` that is not yet journaled, with one write for them all;
    /// they are on disk once [`Journal::commit`] returns. Returns what became of each, in
    /// order; on an error none of them is journaled.
    pub fn record_all(&self, messages: &[&InboundMessage]) -> Result<Vec<Recorded>, JournalError> {
        let mut state = self.lock();
        let mut recorded = Vec::with_capacity(messages.len());
        let mut new = Vec::new();
        let mut lines = Vec::with_capacity(512 * messages.len());
        let mut next_id = state.next_id;
        for message in messages {
            let key = MessageKey::of(message);
            if state.known.contains(&key) || new.iter().any(|(_, k, _)| *k == key) {
                recorded.push(Recorded::Duplicate);
                continue;
            }
            let id = EntryId(next_id);
            next_id += 1;
            serde_json::to_writer(
                &mut lines,
                &Record::Message {
                    id,
                    message: Box::new((*message).clone()),
                },
            )?;
            lines.push(b'\n');
            recorded.push(Recorded::New(id));
            new.push((id, key, *message));
        }
        if new.is_empty() {
            return Ok(recorded);
        }
        self.write(&mut state, &lines)?;
        state.records += new.len();
        state.next_id = next_id;
        for (id, key, message) in new {
            state.undone.insert(id, message.clone());
            state.known.insert(key);
        }
        Ok(recorded)
    }

    /// Marks message `id` done: it will not be handed back on the next start. The record is
    /// not committed on its own: the next commit carries it. A power loss before then can only
    /// make a finished message be answered again, never lose one.
    pub fn done(&self, id: EntryId) -> Result<(), JournalError> {
        let mut state = self.lock();
        if !state.undone.contains_key(&id) {
            return Ok(());
        }
        let mut line = serde_json::to_vec(&Record::Done { id })?;
        line.push(b'\n');
        self.write(&mut state, &line)?;
        state.records += 1;
        if let Some(message) = state.undone.remove(&id) {
            state.finished.push_back(MessageKey::of(&message));
        }
        while state.finished.len() > self.remember {
            if let Some(forgotten) = state.finished.pop_front() {
                state.known.remove(&forgotten);
            }
        }
        // Rewritten once the file holds several times what it needs to, so a long run does
        // not grow it without end; a failure leaves the old file, which is still right.
        let needed = state.undone.len() + state.finished.len();
        if state.records > 4 * needed + 1024 {
            match rewrite(&self.path, &state.undone, &state.finished) {
                Ok((file, records)) => {
                    state.file = file;
                    state.records = records;
                }
                Err(err) => tracing::warn!("the gateway journal stays as it is: {err}"),
            }
        }
        Ok(())
    }

    fn write(&self, state: &mut State, lines: &[u8]) -> Result<(), JournalError> {
        state
            .file
            .append(lines, false)
            .map_err(|source| JournalError::Io {
                action: "write",
                path: self.path.clone(),
                source,
            })?;
        state.last_write = self.group_commit.wrote();
        Ok(())
    }

    /// Returns once everything written to the journal so far is on disk, without blocking
    /// the thread: messages that arrive while a commit runs share the next.
    pub async fn commit(&self) -> Result<(), JournalError> {
        let write = self.lock().last_write;
        Ok(self.group_commit.commit_through(write).await?)
    }

    /// Syncs the `done` records written since the last sync, which [`Self::done`] leaves to
    /// the next message's sync (or this one at shutdown).
    pub fn sync(&self) -> Result<(), JournalError> {
        let state = self.lock();
        state.file.sync().map_err(|source| JournalError::Io {
            action: "sync",
            path: self.path.clone(),
            source,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is updated only after the file, so it is consistent even if a holder
        // panicked.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes the journal anew with `finished` and `undone` only, and opens it for appending.
/// Returns the file and its number of records.
fn rewrite(
    path: &Path,
    undone: &BTreeMap<EntryId, InboundMessage>,
    finished: &VecDeque<MessageKey>,
) -> Result<(JsonlFile, usize), JournalError> {
    let mut lines = Vec::new();
    for key in finished {
        serde_json::to_writer(&mut lines, &Record::Seen { key: key.clone() })?;
        lines.push(b'\n');
    }
    for (id, message) in undone {
        serde_json::to_writer(
            &mut lines,
            &Record::Message {
                id: *id,
                message: Box::new(message.clone()),
            },
        )?;
        lines.push(b'\n');
    }
    let file = JsonlFile::replace(path, &lines).map_err(|(action, source)| JournalError::Io {
        action,
        path: path.to_owned(),
        source,
    })?;
    Ok((file, finished.len() + undone.len()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write as _;

    use super::*;
    use pretty_assertions::assert_eq;

    fn message(chat: &str, id: &str) -> InboundMessage {
        InboundMessage {
            timestamp: 1_700_000_000,
            ..nanocrab_testkit::inbound_dm(chat, id, &format!("message {id} in {chat}"))
        }
    }

    fn entry(id: u64, message: InboundMessage) -> JournalEntry {
        JournalEntry {
            id: EntryId(id),
            message,
        }
    }

    fn lines(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn unfinished_messages_come_back_in_order_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/gateway-inbox.jsonl");
        let (journal, replay) = Journal::open(&path, 10).unwrap();
        assert_eq!(replay, vec![]);
        let ids: Vec<Recorded> = ["1", "2", "3"]
            .iter()
            .map(|id| journal.record(&message("42", id)).unwrap())
            .collect();
        assert_eq!(
            ids,
            vec![
                Recorded::New(EntryId(0)),
                Recorded::New(EntryId(1)),
                Recorded::New(EntryId(2))
            ]
        );
        journal.done(EntryId(1)).unwrap();
        drop(journal);

        let (journal, replay) = Journal::open(&path, 10).unwrap();
        assert_eq!(
            replay,
            vec![entry(0, message("42", "1")), entry(2, message("42", "3"))]
        );
        // Numbering goes on after the highest id ever given.
        assert_eq!(
            journal.record(&message("42", "4")).unwrap(),
            Recorded::New(EntryId(3))
        );
    }

    #[test]
    fn a_redelivered_message_is_a_duplicate_before_and_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.jsonl");
        let (journal, _) = Journal::open(&path, 10).unwrap();
        journal.record(&message("42", "1")).unwrap();
        journal.record(&message("42", "2")).unwrap();
        journal.done(EntryId(0)).unwrap();
        assert_eq!(
            journal.record(&message("42", "1")).unwrap(),
            Recorded::Duplicate
        );
        assert_eq!(
            journal.record(&message("42", "2")).unwrap(),
            Recorded::Duplicate
        );
        // The same message id in another chat is another message.
        assert_eq!(
            journal.record(&message("43", "1")).unwrap(),
            Recorded::New(EntryId(2))
        );
        drop(journal);

        let (journal, _) = Journal::open(&path, 10).unwrap();
        for id in ["1", "2"] {
            assert_eq!(
                journal.record(&message("42", id)).unwrap(),
                Recorded::Duplicate
            );
        }
    }

    #[test]
    fn messages_arriving_together_are_journaled_together_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.jsonl");
        let (journal, _) = Journal::open(&path, 10).unwrap();
        journal.record(&message("42", "1")).unwrap();
        let (two, again, three) = (message("42", "2"), message("42", "1"), message("42", "3"));
        assert_eq!(
            journal.record_all(&[&two, &again, &three, &two]).unwrap(),
            vec![
                Recorded::New(EntryId(1)),
                Recorded::Duplicate,
                Recorded::New(EntryId(2)),
                // Twice in the same batch is a redelivery too.
                Recorded::Duplicate,
            ]
        );
        drop(journal);
        let (_, unfinished) = Journal::open(&path, 10).unwrap();
        assert_eq!(
            unfinished,
            vec![entry(0, message("42", "1")), entry(1, two), entry(2, three)]
        );
    }

    #[test]
    fn each_edit_is_a_message_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) = Journal::open(&dir.path().join("inbox.jsonl"), 10).unwrap();
        let original = message("42", "1");
        let edit = |at| InboundMessage {
            edited: true,
            timestamp: at,
            ..original.clone()
        };
        assert_eq!(
            journal.record(&original).unwrap(),
            Recorded::New(EntryId(0))
        );
        assert_eq!(
            journal.record(&edit(10)).unwrap(),
            Recorded::New(EntryId(1))
        );
        assert_eq!(
            journal.record(&edit(20)).unwrap(),
            Recorded::New(EntryId(2))
        );
        assert_eq!(journal.record(&edit(20)).unwrap(), Recorded::Duplicate);
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_file_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.jsonl");
        let (journal, _) = Journal::open(&path, 10).unwrap();
        journal.record(&message("42", "1")).unwrap();
        journal.record(&message("42", "2")).unwrap();
        journal.done(EntryId(0)).unwrap();
        drop(journal);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(br#"{"type":"message","id":2,"message":{"chan"#)
            .unwrap();
        drop(file);

        let (journal, replay) = Journal::open(&path, 10).unwrap();
        assert_eq!(replay, vec![entry(1, message("42", "2"))]);
        assert_eq!(
            lines(&path),
            vec![
                serde_json::json!({"type": "seen", "key": {
                    "channel": "telegram", "account": "default", "chatId": "42", "messageId": "1"}}),
                serde_json::json!({"type": "message", "id": 1, "message": message("42", "2")}),
            ]
        );
        // The torn message was never accepted, so it is not known: its redelivery is new.
        assert_eq!(
            journal.record(&message("42", "3")).unwrap(),
            Recorded::New(EntryId(2))
        );
    }

    #[test]
    fn only_the_most_recently_finished_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.jsonl");
        let (journal, _) = Journal::open(&path, 2).unwrap();
        for id in 0..4 {
            journal.record(&message("42", &id.to_string())).unwrap();
            journal.done(EntryId(id)).unwrap();
        }
        journal.record(&message("42", "4")).unwrap();
        // Forgotten: delivered again long after, it counts as new.
        assert_eq!(
            journal.record(&message("42", "0")).unwrap(),
            Recorded::New(EntryId(5))
        );
        assert_eq!(
            journal.record(&message("42", "3")).unwrap(),
            Recorded::Duplicate
        );
        drop(journal);

        Journal::open(&path, 2).unwrap();
        let key = |id: &str| {
            serde_json::json!({"type": "seen", "key": {
                "channel": "telegram", "account": "default", "chatId": "42", "messageId": id}})
        };
        assert_eq!(
            lines(&path),
            vec![
                key("2"),
                key("3"),
                serde_json::json!({"type": "message", "id": 4, "message": message("42", "4")}),
                serde_json::json!({"type": "message", "id": 5, "message": message("42", "0")}),
            ]
        );
    }

    #[test]
    fn a_long_run_rewrites_the_file_to_what_is_needed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.jsonl");
        let (journal, _) = Journal::open(&path, 1).unwrap();
        for id in 0..600 {
            journal.record(&message("42", &id.to_string())).unwrap();
            journal.done(EntryId(id)).unwrap();
        }
        // The rewrite came when the file held 1030 records (more than 4 × 1 + 1024) and left
        // one; 85 messages and their `done` records followed.
        assert_eq!(lines(&path).len(), 171);
    }
}
