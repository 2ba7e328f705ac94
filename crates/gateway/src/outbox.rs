//! The outbox (`state/gateway-outbox.jsonl`): answers that could not be sent, kept to be sent
//! on the next start instead of only logged.
//!
//! An answer whose send still fails after the retries (the platform down, the network gone)
//! is appended here, synced, and only then are the messages it answers marked done in the
//! journal, so at every moment one of the two files holds it. On start the kept answers are
//! sent again, oldest first, before the channels take new messages; each one sent gets a
//! `sent` record. One kept for longer than [`KEEP_FOR_SECS`] is dropped with a warning:
//! an answer that late would confuse more than help.
//!
//! Append-only JSON lines like the journal: a torn last line from a crash is skipped, and the
//! file is rewritten to what is still unsent on open, through a temporary file renamed into
//! place.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use nanocrab_schema::OutboundMessage;
use serde::{Deserialize, Serialize};

use crate::jsonl_file::JsonlFile;

/// How long an unsent answer is kept.
pub const KEEP_FOR_SECS: i64 = 24 * 60 * 60;

/// A kept answer's number, unique in its outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeptId(u64);

/// An answer waiting to be sent again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub id: KeptId,
    pub message: OutboundMessage,
}

#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("cannot {action} the gateway outbox {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode an outbox record: {0}")]
    Encode(#[from] serde_json::Error),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Record {
    Kept {
        id: KeptId,
        /// Unix seconds when it was kept.
        at: i64,
        message: Box<OutboundMessage>,
    },
    Sent {
        id: KeptId,
    },
}

#[derive(Debug)]
pub struct Outbox {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: JsonlFile,
    next_id: u64,
    /// Kept and not sent, by id, with when each was kept.
    unsent: BTreeMap<KeptId, (i64, OutboundMessage)>,
}

impl Outbox {
    /// Opens the outbox at `path` (creating it), and returns the answers still to send, oldest
    /// first, leaving out those kept before `now - KEEP_FOR_SECS`.
    pub fn open(path: &Path, now: i64) -> Result<(Self, Vec<Kept>), OutboxError> {
        let io = |action, source| OutboxError::Io {
            action,
            path: path.to_owned(),
            source,
        };
        let mut next_id = 0;
        let mut unsent = BTreeMap::new();
        match File::open(path) {
            Ok(file) => {
                for (number, line) in BufReader::new(file).lines().enumerate() {
                    let line = line.map_err(|e| io("read", e))?;
                    if line.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Record>(&line) {
                        Ok(Record::Kept { id, at, message }) => {
                            next_id = next_id.max(id.0 + 1);
                            unsent.insert(id, (at, *message));
                        }
                        Ok(Record::Sent { id }) => {
                            unsent.remove(&id);
                        }
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
        unsent.retain(|_, (at, message): &mut (i64, OutboundMessage)| {
            let fresh = *at >= now - KEEP_FOR_SECS;
            if !fresh {
                tracing::warn!(
                    channel = %message.chat.channel,
                    chat = %message.chat.chat_id,
                    "an answer that could not be sent for a day is dropped"
                );
            }
            fresh
        });
        let file = rewrite(path, &unsent)?;
        let kept = unsent
            .iter()
            .map(|(id, (_, message))| Kept {
                id: *id,
                message: message.clone(),
            })
            .collect();
        Ok((
            Self {
                path: path.to_owned(),
                state: Mutex::new(State {
                    file,
                    next_id,
                    unsent,
                }),
            },
            kept,
        ))
    }

    /// Keeps `message` to send on the next start; on disk once this returns.
    pub fn keep(&self, message: &OutboundMessage, now: i64) -> Result<KeptId, OutboxError> {
        let mut state = self.lock();
        let id = KeptId(state.next_id);
        self.append(
            &mut state,
            &Record::Kept {
                id,
                at: now,
                message: Box::new(message.clone()),
            },
        )?;
        state.next_id += 1;
        state.unsent.insert(id, (now, message.clone()));
        Ok(id)
    }

    /// Records that kept answer `id` went out.
    pub fn sent(&self, id: KeptId) -> Result<(), OutboxError> {
        let mut state = self.lock();
        if !state.unsent.contains_key(&id) {
            return Ok(());
        }
        self.append(&mut state, &Record::Sent { id })?;
        state.unsent.remove(&id);
        Ok(())
    }

    /// Answers kept and not sent.
    pub fn unsent(&self) -> usize {
        self.lock().unsent.len()
    }

    fn append(&self, state: &mut State, record: &Record) -> Result<(), OutboxError> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        state
            .file
            .append(&line, true)
            .map_err(|source| OutboxError::Io {
                action: "write",
                path: self.path.clone(),
                source,
            })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is updated only after the file.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes the outbox anew with `unsent` only, and opens it for appending.
fn rewrite(
    path: &Path,
    unsent: &BTreeMap<KeptId, (i64, OutboundMessage)>,
) -> Result<JsonlFile, OutboxError> {
    let mut lines = Vec::new();
    for (id, (at, message)) in unsent {
        let record = Record::Kept {
            id: *id,
            at: *at,
            message: Box::new(message.clone()),
        };
        serde_json::to_writer(&mut lines, &record)?;
        lines.push(b'\n');
    }
    JsonlFile::replace(path, &lines).map_err(|(action, source)| OutboxError::Io {
        action,
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use nanocrab_schema::ChatRef;
    use pretty_assertions::assert_eq;

    use super::*;

    fn answer(chat: &str, text: &str) -> OutboundMessage {
        OutboundMessage {
            chat: ChatRef {
                channel: "telegram".into(),
                account: "default".into(),
                chat_id: chat.into(),
                thread_id: None,
            },
            text: text.into(),
            reply_to_message_id: None,
            file: None,
        }
    }

    #[test]
    fn kept_answers_come_back_in_order_until_sent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/gateway-outbox.jsonl");
        let (outbox, kept) = Outbox::open(&path, 1_000).unwrap();
        assert_eq!(kept, []);
        let first = outbox.keep(&answer("1", "one"), 1_000).unwrap();
        let second = outbox.keep(&answer("2", "two"), 1_001).unwrap();
        drop(outbox);

        let (outbox, kept) = Outbox::open(&path, 2_000).unwrap();
        assert_eq!(
            kept,
            [
                Kept {
                    id: first,
                    message: answer("1", "one")
                },
                Kept {
                    id: second,
                    message: answer("2", "two")
                },
            ]
        );
        outbox.sent(first).unwrap();
        let third = outbox.keep(&answer("3", "three"), 2_000).unwrap();
        drop(outbox);

        let (outbox, kept) = Outbox::open(&path, 3_000).unwrap();
        let ids: Vec<_> = kept.iter().map(|k| k.id).collect();
        assert_eq!(ids, [second, third]);
        assert_eq!(outbox.unsent(), 2);
    }

    #[test]
    fn an_answer_kept_for_more_than_a_day_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway-outbox.jsonl");
        let (outbox, _) = Outbox::open(&path, 0).unwrap();
        outbox.keep(&answer("1", "stale"), 0).unwrap();
        let fresh = outbox.keep(&answer("2", "fresh"), 10).unwrap();
        drop(outbox);
        let (_, kept) = Outbox::open(&path, KEEP_FOR_SECS + 5).unwrap();
        assert_eq!(
            kept,
            [Kept {
                id: fresh,
                message: answer("2", "fresh")
            }]
        );
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway-outbox.jsonl");
        let (outbox, _) = Outbox::open(&path, 0).unwrap();
        let id = outbox.keep(&answer("1", "whole"), 0).unwrap();
        drop(outbox);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"{\"type\":\"kept\",\"id\":7,\"at\":0,\"mess")
            .unwrap();
        drop(file);
        let (_, kept) = Outbox::open(&path, 0).unwrap();
        assert_eq!(
            kept,
            [Kept {
                id,
                message: answer("1", "whole")
            }]
        );
    }
}
