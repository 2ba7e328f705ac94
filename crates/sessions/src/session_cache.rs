//! What a [`crate::SessionStore`] keeps in memory of the sessions it used last: their parsed
//! transcripts and settings, so that a turn neither reads nor parses its whole conversation
//! again. The files stay the truth: every use first compares the file's [`Stamp`] with the one
//! the cached copy was made from, and a file changed by anything else (a hand edit, `nanocrab
//! sessions reset`, another process) is read again.
//!
//! Bounded by [`MAX_BYTES`] of transcript (counted as their size on disk; parsed, they take
//! several times as much memory) and [`MAX_SESSIONS`] sessions; the least recently used
//! goes first. A transcript larger than [`MAX_BYTES`] alone is not kept: each turn reads
//! it, as every turn did before.

use std::collections::HashMap;
use std::sync::Arc;

use nanocrab_schema::SessionKey;

use crate::session_store::{ParsedTranscript, Session, SessionSettings};

/// A parsed transcript takes several times its size on disk, so the cache is kept to
/// what a person's few conversations at a time need: holding every conversation of a busy
/// gateway (the `gateway_load` bench's hundred chats) cost 15 MB of memory to save about
/// 0.3 ms a turn, and 32 of them twice what 16 hold, for no saving at all (a hundred chats
/// taking turns outrun any cache smaller than all of them). A busier gateway reads the
/// transcripts of the chats beyond these, as before.
pub(crate) const MAX_BYTES: u64 = 2 << 20;
pub(crate) const MAX_SESSIONS: usize = 16;

/// One version of a file: a write through any handle changes its size or modification time, a
/// rename or a new file its inode. A rewrite in place that keeps the size, within the
/// filesystem's timestamp granularity (a few milliseconds), is the one change it misses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    pub(crate) len: u64,
    modified: (i64, i64),
}

impl Stamp {
    pub fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
        }
    }

    pub(crate) fn same_file(&self, other: &Stamp) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }

    /// Whether `self` is the file `before` was with exactly `written` bytes appended, and
    /// nothing else written meanwhile.
    pub(crate) fn follows(&self, before: &Stamp, written: usize) -> bool {
        self.same_file(before) && self.len == before.len + written as u64
    }
}

/// A transcript as parsed from the version of its file that `stamp` names.
#[derive(Debug)]
pub(crate) struct CachedTranscript {
    pub(crate) stamp: Stamp,
    pub(crate) session: Arc<Session>,
    /// Whether the file's last byte is a newline: an append after a torn line starts a new
    /// one, and knowing it saves reading the file's end.
    pub(crate) ends_with_newline: bool,
}

#[derive(Debug, Default)]
struct Cached {
    transcript: Option<CachedTranscript>,
    settings: Option<(Stamp, SessionSettings)>,
    /// The cache's clock at the last use.
    used: u64,
}

#[derive(Debug, Default)]
pub(crate) struct SessionCache {
    sessions: HashMap<SessionKey, Cached>,
    /// The sizes of the transcripts kept.
    bytes: u64,
    clock: u64,
}

impl SessionCache {
    fn touch(&mut self, key: &SessionKey) -> Option<&mut Cached> {
        self.clock += 1;
        let cached = self.sessions.get_mut(key)?;
        cached.used = self.clock;
        Some(cached)
    }

    /// The session parsed from the file version `stamp`, if that is the one kept.
    pub(crate) fn transcript(&mut self, key: &SessionKey, stamp: &Stamp) -> Option<Arc<Session>> {
        let cached = self.touch(key)?.transcript.as_ref()?;
        (cached.stamp == *stamp).then(|| Arc::clone(&cached.session))
    }

    /// Whether the file version `stamp` ends with a newline, if that is the version kept.
    pub(crate) fn ends_with_newline(&self, key: &SessionKey, stamp: &Stamp) -> Option<bool> {
        let cached = self.sessions.get(key)?.transcript.as_ref()?;
        (cached.stamp == *stamp).then_some(cached.ends_with_newline)
    }

    pub(crate) fn put_transcript(&mut self, key: &SessionKey, transcript: CachedTranscript) {
        self.forget_transcript(key);
        if transcript.stamp.len > MAX_BYTES {
            return;
        }
        self.bytes += transcript.stamp.len;
        self.clock += 1;
        let clock = self.clock;
        let cached = self.sessions.entry(key.clone()).or_default();
        cached.used = clock;
        cached.transcript = Some(transcript);
        self.evict();
    }

    /// Adds what was appended to the file version `before`, making it version `after`; kept
    /// only if the version kept was `before`, since otherwise what else the file holds is
    /// unknown.
    pub(crate) fn extend_transcript(
        &mut self,
        key: &SessionKey,
        before: &Stamp,
        after: Stamp,
        appended: ParsedTranscript,
    ) {
        let Some(cached) = self.touch(key).and_then(|c| c.transcript.as_mut()) else {
            return;
        };
        if cached.stamp != *before {
            self.forget_transcript(key);
            return;
        }
        let added = after.len - before.len;
        cached.stamp = after;
        cached.ends_with_newline = true;
        // Copied only when a reader still holds the session (a compaction summarising it).
        let session = Arc::make_mut(&mut cached.session);
        session.entries.extend(appended.entries);
        if appended.compaction.is_some() {
            session.compaction = appended.compaction;
        }
        self.bytes += added;
        if after.len > MAX_BYTES {
            self.forget_transcript(key);
        }
        self.evict();
    }

    pub(crate) fn forget_transcript(&mut self, key: &SessionKey) {
        if let Some(cached) = self.sessions.get_mut(key)
            && let Some(transcript) = cached.transcript.take()
        {
            self.bytes -= transcript.stamp.len;
        }
    }

    /// The settings read from the file version `stamp`, if that is the one kept.
    pub(crate) fn settings(&mut self, key: &SessionKey, stamp: &Stamp) -> Option<SessionSettings> {
        let (kept, settings) = self.touch(key)?.settings.as_ref()?;
        (kept == stamp).then(|| settings.clone())
    }

    pub(crate) fn put_settings(
        &mut self,
        key: &SessionKey,
        stamp: Stamp,
        settings: SessionSettings,
    ) {
        self.clock += 1;
        let clock = self.clock;
        let cached = self.sessions.entry(key.clone()).or_default();
        cached.used = clock;
        cached.settings = Some((stamp, settings));
        self.evict();
    }

    pub(crate) fn forget_settings(&mut self, key: &SessionKey) {
        if let Some(cached) = self.sessions.get_mut(key) {
            cached.settings = None;
        }
    }

    /// Drops the least recently used sessions until the bounds hold.
    fn evict(&mut self) {
        while self.bytes > MAX_BYTES || self.sessions.len() > MAX_SESSIONS {
            let Some(oldest) = self
                .sessions
                .iter()
                .min_by_key(|(_, cached)| cached.used)
                .map(|(key, _)| key.clone())
            else {
                return;
            };
            if let Some(transcript) = self.sessions.remove(&oldest).and_then(|c| c.transcript) {
                self.bytes -= transcript.stamp.len;
            }
        }
    }

    /// How many transcripts are kept and their total size; for the tests of the bounds.
    #[cfg(test)]
    fn kept(&self) -> (usize, u64) {
        let transcripts = self
            .sessions
            .values()
            .filter(|c| c.transcript.is_some())
            .count();
        (transcripts, self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn stamp(ino: u64, len: u64) -> Stamp {
        Stamp {
            dev: 1,
            ino,
            len,
            modified: (0, 0),
        }
    }

    fn key(n: u64) -> SessionKey {
        SessionKey::parse(&format!("cli:s{n}")).unwrap()
    }

    fn transcript(ino: u64, len: u64) -> CachedTranscript {
        CachedTranscript {
            stamp: stamp(ino, len),
            session: Arc::new(Session {
                key: key(ino),
                metadata: None,
                entries: Vec::new(),
                compaction: None,
                dir: std::path::PathBuf::new(),
            }),
            ends_with_newline: true,
        }
    }

    #[test]
    fn the_least_recently_used_go_first_once_over_the_byte_bound() {
        let mut cache = SessionCache::default();
        let third = MAX_BYTES / 3;
        for n in 0..3 {
            cache.put_transcript(&key(n), transcript(n, third));
        }
        // Used again, so the second one is now the oldest.
        assert!(cache.transcript(&key(0), &stamp(0, third)).is_some());
        cache.put_transcript(&key(3), transcript(3, third));
        assert_eq!(cache.kept(), (3, 3 * third));
        assert!(cache.transcript(&key(1), &stamp(1, third)).is_none());
        assert!(cache.transcript(&key(0), &stamp(0, third)).is_some());

        // A transcript over the bound alone is not kept, and costs the others nothing.
        cache.put_transcript(&key(4), transcript(4, MAX_BYTES + 1));
        assert_eq!(cache.kept(), (3, 3 * third));
    }

    #[test]
    fn no_more_than_max_sessions_are_kept() {
        let mut cache = SessionCache::default();
        for n in 0..=MAX_SESSIONS as u64 {
            cache.put_transcript(&key(n), transcript(n, 10));
        }
        assert_eq!(cache.kept(), (MAX_SESSIONS, 10 * MAX_SESSIONS as u64));
        assert!(cache.transcript(&key(0), &stamp(0, 10)).is_none());
    }

    #[test]
    fn an_append_to_another_version_than_the_one_kept_forgets_it() {
        let mut cache = SessionCache::default();
        cache.put_transcript(&key(0), transcript(0, 100));
        let appended = || ParsedTranscript {
            metadata: None,
            entries: Vec::new(),
            compaction: None,
        };
        cache.extend_transcript(&key(0), &stamp(0, 100), stamp(0, 150), appended());
        assert_eq!(cache.kept(), (1, 150));
        // Someone else appended 30 bytes first.
        cache.extend_transcript(&key(0), &stamp(0, 180), stamp(0, 230), appended());
        assert_eq!(cache.kept(), (0, 0));
    }
}
