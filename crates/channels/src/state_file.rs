//! A small file of an adapter's own under the gateway's state folder (Telegram's update offset,
//! Discord's gateway session), one per bot account, replaced whole or not at all.

use std::path::{Path, PathBuf};

use tokio::io::AsyncWriteExt as _;

#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
}

impl StateFile {
    /// `<state_dir>/<channel>-<account>.<extension>`; an account name is anything the config
    /// holds, so whatever is not a plain letter, digit, `-` or `_` becomes `_`.
    pub fn new(state_dir: &Path, channel: &str, account: &str, extension: &str) -> Self {
        let account: String = account
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Self {
            path: state_dir.join(format!("{channel}-{account}.{extension}")),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` to a temporary file beside it, flushed to disk, then renamed over it: a
    /// crash leaves the old content or the new, never half of one.
    pub async fn save(&self, bytes: &[u8]) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        let mut temporary = self.path.clone().into_os_string();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let mut file = tokio::fs::File::create(&temporary).await?;
        file.write_all(bytes).await?;
        file.sync_all().await?;
        drop(file);
        tokio::fs::rename(&temporary, &self.path).await
    }
}
