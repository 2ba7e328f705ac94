//! Pairing: how an unknown person gets let in without editing the config.
//!
//! Under `dmPolicy: pairing` a direct message from an unknown sender creates a request with a
//! one-time code, which the bot sends back to them. The owner approves it on the host with
//! `nanocrab pairing approve CODE`, a separate process, so the store is a file
//! (`state/pairing.json`) read on each check and changed under a lock file: the gateway and
//! the CLI never overwrite each other's change.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How long a code stays valid.
pub const CODE_LIFETIME_SECS: i64 = 60 * 60;
/// Requests waiting per channel; more strangers are turned away until one is decided, so a
/// flood of DMs cannot grow the file or bury the owner's list.
pub const MAX_PENDING_PER_CHANNEL: usize = 3;
/// Letters and digits that cannot be misread for one another (no 0/O, 1/I/L).
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const CODE_LEN: usize = 8;

/// A stranger waiting for the owner's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingRequest {
    pub channel: String,
    pub sender_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub code: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// Someone the owner let in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovedSender {
    pub channel: String,
    pub sender_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Unix seconds.
    pub approved_at: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PairingFile {
    #[serde(default)]
    pending: Vec<PairingRequest>,
    #[serde(default)]
    approved: Vec<ApprovedSender>,
}

/// What asking to pair produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingOutcome {
    /// A new request: tell the sender this code.
    Created(PairingRequest),
    /// The sender already has a live request; they were told its code before.
    Pending(PairingRequest),
    /// The channel has [`MAX_PENDING_PER_CHANNEL`] requests waiting already.
    Full,
}

#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a pairing file: {source}")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("no pending pairing request has the code {code}; `nanocrab pairing list` shows them")]
    UnknownCode { code: String },
}

/// The pairing requests and approvals of every channel, kept in `state/pairing.json`.
#[derive(Debug, Clone)]
pub struct PairingStore {
    path: PathBuf,
    lock: PathBuf,
}

impl PairingStore {
    pub fn new(state_dir: &Path) -> Self {
        Self {
            path: state_dir.join("pairing.json"),
            lock: state_dir.join("pairing.lock"),
        }
    }

    /// Whether the owner approved `sender_id` on `channel`.
    pub fn is_approved(&self, channel: &str, sender_id: &str) -> Result<bool, PairingError> {
        Ok(self
            .read()?
            .approved
            .iter()
            .any(|a| a.channel == channel && a.sender_id == sender_id))
    }

    /// Requests still waiting, oldest first; expired ones are left out.
    pub fn pending(&self, now: i64) -> Result<Vec<PairingRequest>, PairingError> {
        let mut file = self.read()?;
        file.pending.retain(|r| live(r, now));
        Ok(file.pending)
    }

    pub fn approved(&self) -> Result<Vec<ApprovedSender>, PairingError> {
        Ok(self.read()?.approved)
    }

    /// Finds the live request of `sender` on `channel`, or makes one with a fresh code.
    pub fn request(
        &self,
        channel: &str,
        sender: &nanocrab_schema::Sender,
        now: i64,
    ) -> Result<PairingOutcome, PairingError> {
        self.update(|file| {
            file.pending.retain(|r| live(r, now));
            if let Some(existing) = file
                .pending
                .iter()
                .find(|r| r.channel == channel && r.sender_id == sender.id)
            {
                return PairingOutcome::Pending(existing.clone());
            }
            if file.pending.iter().filter(|r| r.channel == channel).count()
                >= MAX_PENDING_PER_CHANNEL
            {
                return PairingOutcome::Full;
            }
            let code = loop {
                let code = new_code();
                if !file.pending.iter().any(|r| r.code == code) {
                    break code;
                }
            };
            let request = PairingRequest {
                channel: channel.to_owned(),
                sender_id: sender.id.clone(),
                username: sender.username.clone(),
                display_name: sender.display_name.clone(),
                code,
                created_at: now,
            };
            file.pending.push(request.clone());
            PairingOutcome::Created(request)
        })
    }

    /// Lets the sender of the live request with `code` in (codes are case-insensitive).
    pub fn approve(&self, code: &str, now: i64) -> Result<ApprovedSender, PairingError> {
        let code = code.trim().to_ascii_uppercase();
        self.update(|file| {
            file.pending.retain(|r| live(r, now));
            let index = file
                .pending
                .iter()
                .position(|r| r.code == code)
                .ok_or_else(|| PairingError::UnknownCode { code: code.clone() })?;
            let request = file.pending.remove(index);
            let approved = ApprovedSender {
                channel: request.channel,
                sender_id: request.sender_id,
                username: request.username,
                approved_at: now,
            };
            file.approved
                .retain(|a| !(a.channel == approved.channel && a.sender_id == approved.sender_id));
            file.approved.push(approved.clone());
            Ok(approved)
        })?
    }

    /// Takes an approval back; returns whether there was one.
    pub fn revoke(&self, channel: &str, sender_id: &str) -> Result<bool, PairingError> {
        self.update(|file| {
            let before = file.approved.len();
            file.approved
                .retain(|a| !(a.channel == channel && a.sender_id == sender_id));
            file.approved.len() != before
        })
    }

    fn read(&self) -> Result<PairingFile, PairingError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| PairingError::Corrupt {
                path: self.path.clone(),
                source,
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(PairingFile::default()),
            Err(source) => Err(PairingError::Io {
                action: "read",
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// Reads, changes and writes the file under the lock, the write a temp file renamed into
    /// place so a crash leaves the old or the new file, never half of one.
    fn update<T>(&self, change: impl FnOnce(&mut PairingFile) -> T) -> Result<T, PairingError> {
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| PairingError::Io {
                action,
                path,
                source,
            }
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        let lock = File::create(&self.lock).map_err(io("create", &self.lock))?;
        lock.lock().map_err(io("lock", &self.lock))?;
        let mut file = self.read()?;
        let result = change(&mut file);
        let mut text =
            serde_json::to_vec_pretty(&file).map_err(|source| PairingError::Corrupt {
                path: self.path.clone(),
                source,
            })?;
        text.push(b'\n');
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(io("create a file in", dir))?;
        std::io::Write::write_all(&mut temp, &text).map_err(io("write", temp.path()))?;
        temp.persist(&self.path)
            .map_err(|err| io("write", &self.path)(err.error))?;
        // The lock is released when `lock` is dropped, after the rename.
        drop(lock);
        Ok(result)
    }
}

fn live(request: &PairingRequest, now: i64) -> bool {
    now - request.created_at < CODE_LIFETIME_SECS
}

fn new_code() -> String {
    // A v4 uuid is 122 random bits from the OS; 8 symbols of a 31-letter alphabet use 40.
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes
        .iter()
        .take(CODE_LEN)
        .map(|b| char::from(CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nanocrab_schema::Sender;
    use pretty_assertions::assert_eq;

    fn sender(id: &str) -> Sender {
        Sender {
            id: id.to_owned(),
            username: Some(format!("user{id}")),
            display_name: None,
            is_bot: false,
        }
    }

    #[test]
    fn a_code_is_issued_once_approved_and_then_the_sender_is_in() {
        let dir = tempfile::tempdir().unwrap();
        let store = PairingStore::new(dir.path());
        let PairingOutcome::Created(request) =
            store.request("telegram", &sender("7"), 100).unwrap()
        else {
            panic!("expected a new request");
        };
        assert_eq!(request.code.len(), CODE_LEN);
        assert!(request.code.bytes().all(|b| CODE_ALPHABET.contains(&b)));
        assert_eq!(
            store.request("telegram", &sender("7"), 101).unwrap(),
            PairingOutcome::Pending(request.clone())
        );
        assert!(!store.is_approved("telegram", "7").unwrap());

        let approved = store
            .approve(&request.code.to_ascii_lowercase(), 200)
            .unwrap();
        assert_eq!(
            approved,
            ApprovedSender {
                channel: "telegram".to_owned(),
                sender_id: "7".to_owned(),
                username: Some("user7".to_owned()),
                approved_at: 200,
            }
        );
        assert!(store.is_approved("telegram", "7").unwrap());
        assert!(!store.is_approved("discord", "7").unwrap());
        assert_eq!(store.pending(200).unwrap(), Vec::new());
        assert!(matches!(
            store.approve(&request.code, 201),
            Err(PairingError::UnknownCode { .. })
        ));
        assert!(store.revoke("telegram", "7").unwrap());
        assert!(!store.is_approved("telegram", "7").unwrap());
    }

    #[test]
    fn codes_expire_and_pending_requests_are_capped_per_channel() {
        let dir = tempfile::tempdir().unwrap();
        let store = PairingStore::new(dir.path());
        for id in ["1", "2", "3"] {
            assert!(matches!(
                store.request("telegram", &sender(id), 0).unwrap(),
                PairingOutcome::Created(_)
            ));
        }
        assert_eq!(
            store.request("telegram", &sender("4"), 10).unwrap(),
            PairingOutcome::Full
        );
        // Another channel has its own share.
        assert!(matches!(
            store.request("discord", &sender("4"), 10).unwrap(),
            PairingOutcome::Created(_)
        ));
        let code = store.pending(10).unwrap()[0].code.clone();
        let later = CODE_LIFETIME_SECS;
        assert!(matches!(
            store.approve(&code, later),
            Err(PairingError::UnknownCode { .. })
        ));
        assert!(matches!(
            store.request("telegram", &sender("4"), later).unwrap(),
            PairingOutcome::Created(_)
        ));
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it_not_an_open_door() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pairing.json"), "{\"approved\": [").unwrap();
        let store = PairingStore::new(dir.path());
        let err = store.is_approved("telegram", "7").unwrap_err().to_string();
        assert!(err.contains("pairing.json is not a pairing file"), "{err}");
    }
}
