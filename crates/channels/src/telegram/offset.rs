//! The last confirmed update, kept on disk so a restart neither loses nor repeats updates.
//!
//! Telegram forgets an update once `getUpdates` is called with an `offset` past it; the file
//! holds that next offset, written only once the update before it was delivered.
//!
//! After a week without updates Telegram numbers the next one at random, possibly below the
//! saved offset, which would then confirm it unseen: an offset that old is not used. Nothing
//! is lost by dropping it, as Telegram keeps unconfirmed updates for a day only.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::state_file::StateFile;

/// How long Telegram keeps numbering updates in sequence without any.
const SEQUENCE_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

#[derive(Debug)]
pub(crate) struct OffsetFile {
    file: StateFile,
}

impl OffsetFile {
    pub fn new(state_dir: &Path, account: &str) -> Self {
        Self {
            file: StateFile::new(state_dir, "telegram", account, "offset"),
        }
    }

    /// The offset to poll from; `None` on a first start.
    pub async fn load(&self) -> Option<i64> {
        let text = match tokio::fs::read_to_string(self.file.path()).await {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
            Err(err) => {
                tracing::warn!(path = %self.file.path().display(), error = %err,
                    "telegram: cannot read the saved update offset; polling from the oldest update Telegram still holds");
                return None;
            }
        };
        let saved = tokio::fs::metadata(self.file.path())
            .await
            .and_then(|metadata| metadata.modified())
            .ok();
        let age = saved.and_then(|saved| SystemTime::now().duration_since(saved).ok());
        if age.is_some_and(|age| age > SEQUENCE_KEPT) {
            tracing::info!(path = %self.file.path().display(),
                "telegram: the saved update offset is over a week old; polling from the oldest update Telegram still holds");
            return None;
        }
        match text.trim().parse() {
            Ok(offset) => Some(offset),
            Err(_) => {
                tracing::warn!(path = %self.file.path().display(),
                    "telegram: the saved update offset is not a number; polling from the oldest update Telegram still holds");
                None
            }
        }
    }

    /// Saves `offset` whole or not at all.
    pub async fn save(&self, offset: i64) -> std::io::Result<()> {
        self.file.save(format!("{offset}\n").as_bytes()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_offset_survives_and_a_broken_or_week_old_file_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let file = OffsetFile::new(dir.path(), "default");
        assert_eq!(file.load().await, None);
        file.save(42).await.unwrap();
        file.save(43).await.unwrap();
        assert_eq!(
            OffsetFile::new(dir.path(), "default").load().await,
            Some(43)
        );
        assert_eq!(OffsetFile::new(dir.path(), "other").load().await, None);
        let path = dir.path().join("telegram-default.offset");
        let eight_days_ago = SystemTime::now() - Duration::from_secs(8 * 24 * 3600);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(eight_days_ago)
            .unwrap();
        assert_eq!(file.load().await, None);
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(file.load().await, None);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["telegram-default.offset"]);
    }
}
