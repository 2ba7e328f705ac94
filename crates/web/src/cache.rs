//! Fetched pages kept on disk for a while (`state/web-cache/`), so that paging through a long
//! page with `offset`, or reading it again in the same hour, does not fetch it again. An entry
//! is the page as text, under the hash of the URL asked for and of the one the redirects led
//! to; it is written to a temporary file and renamed into place, so a reader never sees half.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// Entries kept at most; past it the oldest go first.
const MAX_ENTRIES: usize = 256;

/// One page as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The URL the redirects led to.
    pub url: String,
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub text: String,
    /// The download stopped at the cap.
    pub cut: bool,
    /// Every hop's `host` or `host:port`, and those on non-public addresses: a later fetch
    /// takes the entry only if it would have been let through them itself.
    pub hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_hosts: Vec<String>,
    /// When it was fetched, in seconds since 1970.
    pub fetched_at: i64,
}

pub struct WebCache {
    dir: PathBuf,
    ttl: Duration,
}

impl WebCache {
    pub fn new(dir: impl Into<PathBuf>, ttl: Duration) -> Self {
        Self {
            dir: dir.into(),
            ttl,
        }
    }

    fn file(&self, url: &str) -> PathBuf {
        let digest = sha2::Sha256::digest(url.as_bytes());
        let name: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    fn fresh(&self, entry: &Entry, now: jiff::Timestamp) -> bool {
        let age = now.as_second().saturating_sub(entry.fetched_at);
        (0..i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX)).contains(&age)
    }

    /// The entry for `url` (asked for, or led to), if it is younger than the TTL.
    pub fn get(&self, url: &str, now: jiff::Timestamp) -> Option<Entry> {
        let text = std::fs::read(self.file(url)).ok()?;
        let entry: Entry = serde_json::from_slice(&text).ok()?;
        self.fresh(&entry, now).then_some(entry)
    }

    /// Keeps `entry` under the URL `asked` and the URL it was led to; drops what has expired.
    pub fn put(&self, asked: &str, entry: &Entry, now: jiff::Timestamp) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let json = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        for url in [entry.url.as_str(), asked] {
            let mut temp = tempfile::Builder::new()
                .prefix(".web-cache-")
                .tempfile_in(&self.dir)?;
            temp.write_all(&json)?;
            temp.persist(self.file(url)).map_err(|err| err.error)?;
        }
        self.prune(now);
        Ok(())
    }

    /// Removes expired entries, and the oldest past [`MAX_ENTRIES`]. A failure leaves a file
    /// for the next time; it is never read past its TTL anyway.
    fn prune(&self, now: jiff::Timestamp) {
        let Ok(listing) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut kept: Vec<(i64, PathBuf)> = Vec::new();
        for path in listing.flatten().map(|entry| entry.path()) {
            if path.extension().is_none_or(|ext| ext != "json") {
                continue;
            }
            match read_entry(&path) {
                Some(entry) if self.fresh(&entry, now) => kept.push((entry.fetched_at, path)),
                Some(_) | None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        if kept.len() > MAX_ENTRIES {
            kept.sort();
            for (_, path) in &kept[..kept.len() - MAX_ENTRIES] {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

fn read_entry(path: &Path) -> Option<Entry> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}
