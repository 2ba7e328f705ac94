//! The gateway session, kept on disk so a restart resumes it instead of starting a new one.
//!
//! Discord sends each event once, numbered; a session resumed from the number of the last
//! event handled gets everything sent after it again (for as long as Discord keeps the session,
//! a few minutes). The file holds the session's id, its resume address and the number of the
//! last message the gateway accepted, written only once it was accepted: a crash repeats at
//! most what the gateway's journal already holds, and it drops those as redeliveries. A
//! session Discord no longer knows is answered with a new one, which replaces the file.

use std::path::Path;

use crate::state_file::StateFile;
use serde::{Deserialize, Serialize};

/// What resuming needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedSession {
    pub session_id: String,
    pub sequence: u64,
    pub resume_url: String,
}

#[derive(Debug)]
pub(crate) struct SessionFile {
    file: StateFile,
}

impl SessionFile {
    pub fn new(state_dir: &Path, account: &str) -> Self {
        Self {
            file: StateFile::new(state_dir, "discord", account, "session"),
        }
    }

    /// The session to resume; `None` on a first start or when the file cannot be read.
    pub async fn load(&self) -> Option<SavedSession> {
        let text = match tokio::fs::read_to_string(self.file.path()).await {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
            Err(err) => {
                tracing::warn!(path = %self.file.path().display(), error = %err,
                    "discord: cannot read the saved gateway session; starting a new one");
                return None;
            }
        };
        match serde_json::from_str(&text) {
            Ok(saved) => Some(saved),
            Err(err) => {
                tracing::warn!(path = %self.file.path().display(), error = %err,
                    "discord: the saved gateway session is unreadable; starting a new one");
                None
            }
        }
    }

    /// Saves `session` whole or not at all.
    pub async fn save(&self, session: &SavedSession) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(session).map_err(std::io::Error::other)?;
        self.file.save(&bytes).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[tokio::test]
    async fn a_saved_session_is_loaded_back_per_account() {
        let dir = tempfile::tempdir().unwrap();
        let file = SessionFile::new(dir.path(), "work/../x");
        assert_eq!(file.load().await, None);
        let session = SavedSession {
            session_id: "f97bdc3210d0da33a3c61d8363e68579".to_owned(),
            sequence: 42,
            resume_url: "wss://gateway-us-east1-b.discord.gg".to_owned(),
        };
        file.save(&session).await.unwrap();
        assert_eq!(file.load().await, Some(session));
        assert!(dir.path().join("discord-work____x.session").is_file());
        assert_eq!(SessionFile::new(dir.path(), "other").load().await, None);
    }

    #[tokio::test]
    async fn an_unreadable_file_starts_a_new_session() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("discord-default.session"), "not json").unwrap();
        assert_eq!(SessionFile::new(dir.path(), "default").load().await, None);
    }
}
