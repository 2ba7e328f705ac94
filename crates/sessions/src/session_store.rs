use std::collections::HashMap;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use nanocrab_schema::{
    ContentBlock, Image, LlmMessage, Role, RunSource, SessionKey, ToolResult, Usage,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::group_commit::{CommitError, GroupCommit};
use crate::session_cache::{CachedTranscript, SessionCache, Stamp};

/// Tool results longer than this are shortened in the transcript file (never in the live
/// loop): a transcript is for reading back, and a 5 MB `cat` output would make it unusable.
const MAX_STORED_RESULT_CHARS: usize = 16_000;
/// `nanocrab sessions list` shows this much of a session's first question.
const TITLE_CHARS: usize = 60;

/// One message as stored: the message itself plus when and, for answers, which model and
/// how many tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    pub role: Role,
    pub content: Vec<ContentBlock>,
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// On the question that starts a turn nobody asked for (a heartbeat, a scheduled job, a
    /// subagent): who started it. Absent for a chat's, the terminal's and the API's turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<RunSource>,
}

impl SessionEntry {
    /// A message stamped with the current time.
    pub fn now(message: LlmMessage) -> Self {
        Self {
            role: message.role,
            content: message.content,
            timestamp: jiff::Timestamp::now().to_string(),
            model: None,
            usage: None,
            source: None,
        }
    }

    /// See [`LlmMessage::starts_turn`].
    pub fn starts_turn(&self) -> bool {
        self.role == Role::User
            && !self
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolResult(_)))
    }

    pub fn message(&self) -> LlmMessage {
        LlmMessage {
            role: self.role,
            content: self.content.clone(),
        }
    }
}

/// The first line of every transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMetadata {
    #[serde(rename = "_type")]
    pub kind: String,
    pub key: SessionKey,
    pub created_at: String,
    pub version: u32,
}

/// A summary that stands, in what the model is sent, for the first `through` entries of the
/// transcript; the entries themselves stay in the file. A line of its own in the transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    #[serde(rename = "_type")]
    pub kind: String,
    pub through: usize,
    pub summary: String,
    pub timestamp: String,
}

impl Compaction {
    pub fn new(through: usize, summary: String) -> Self {
        Self {
            kind: "compaction".to_owned(),
            through,
            summary,
            timestamp: jiff::Timestamp::now().to_string(),
        }
    }
}

/// Choices made for one conversation (`/rag on`), kept beside its transcript in
/// `<key>.settings.json`. They outlive `/new`: they belong to the chat, not to one transcript.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSettings {
    /// Memory arrives by retrieval for each message instead of whole in the system prompt;
    /// `None`: as `memory.ragMode` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rag_mode: Option<bool>,
    /// Entries of the current transcript already folded into the memory files; back to 0
    /// when `/new` archives the transcript.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consolidated_entries: usize,
    /// The provider's prompt tokens per estimated token (about four characters), learned from
    /// its usage reports: code, other scripts and other tokenizers count differently. Neither
    /// learned nor applied while the model's tokens are counted exactly (OpenAI's models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_ratio: Option<f64>,
    /// A title the housekeeping model gave the conversation; `None`: its first question
    /// stands in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A transcript as loaded. Images stay references to their files in `entries`;
/// [`Session::messages`] reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub key: SessionKey,
    pub metadata: Option<SessionMetadata>,
    pub entries: Vec<SessionEntry>,
    /// The newest summary of the transcript's beginning, which the model gets instead of it.
    pub compaction: Option<Compaction>,
    /// The directory image references are relative to.
    pub(crate) dir: PathBuf,
}

impl Session {
    /// The history for the model, repaired so that every provider accepts it. A run that
    /// crashed between a tool call and its result left calls without results: each gets an
    /// error result saying so. A result whose call is not right before it (its line was lost)
    /// is dropped, and so is a message left with no content.
    pub fn messages(&self) -> Vec<LlmMessage> {
        let mut out: Vec<LlmMessage> = Vec::with_capacity(self.entries.len());
        // Calls of the last assistant message that still wait for their results.
        let mut pending: Vec<String> = Vec::new();
        let start = self
            .compaction
            .as_ref()
            .map_or(0, |c| c.through.min(self.entries.len()));
        for entry in &self.entries[start..] {
            let mut message = entry.message();
            for block in &mut message.content {
                if let ContentBlock::Image(image) = block
                    && let Some(file) = &image.file
                {
                    *block = match std::fs::read(self.dir.join(file)) {
                        Ok(bytes) => ContentBlock::Image(Image {
                            media_type: image.media_type.clone(),
                            data: BASE64.encode(bytes),
                            file: None,
                        }),
                        Err(err) => {
                            tracing::warn!("{}: cannot read image {file}: {err}", self.key);
                            ContentBlock::text(format!("[image no longer available: {file}]"))
                        }
                    };
                }
            }
            match message.role {
                Role::User => {
                    let (mut content, others): (Vec<ContentBlock>, Vec<ContentBlock>) = message
                        .content
                        .into_iter()
                        .filter(|block| match block {
                            ContentBlock::ToolResult(r) => pending.contains(&r.tool_use_id),
                            _ => true,
                        })
                        .partition(|block| matches!(block, ContentBlock::ToolResult(_)));
                    let answered = !content.is_empty();
                    pending.retain(|id| {
                        !content.iter().any(
                            |b| matches!(b, ContentBlock::ToolResult(r) if r.tool_use_id == *id),
                        )
                    });
                    content.extend(pending.drain(..).map(interrupted));
                    // Results and the next question stay apart: a question is where a turn,
                    // and so a history window, may start.
                    if !answered && !content.is_empty() {
                        out.push(LlmMessage {
                            role: Role::User,
                            content: std::mem::take(&mut content),
                        });
                    }
                    content.extend(others);
                    if !content.is_empty() {
                        out.push(LlmMessage {
                            role: Role::User,
                            content,
                        });
                    }
                }
                Role::Assistant => {
                    if !pending.is_empty() {
                        out.push(LlmMessage {
                            role: Role::User,
                            content: pending.drain(..).map(interrupted).collect(),
                        });
                    }
                    if !message.content.is_empty() {
                        pending = message.tool_calls().map(|c| c.id.clone()).collect();
                        out.push(message);
                    }
                }
            }
        }
        if !pending.is_empty() {
            out.push(LlmMessage {
                role: Role::User,
                content: pending.drain(..).map(interrupted).collect(),
            });
        }
        // The summary rides on the first question kept, so that the history still starts
        // with a question and alternates as every provider wants.
        if let Some(compaction) = &self.compaction {
            let note = ContentBlock::text(format!(
                "[Summary of the earlier conversation; the whole of it is in the transcript]\n{}\n\n",
                compaction.summary.trim()
            ));
            match out.first_mut() {
                Some(first) if first.role == Role::User => first.content.insert(0, note),
                Some(_) | None => out.insert(
                    0,
                    LlmMessage {
                        role: Role::User,
                        content: vec![note],
                    },
                ),
            }
        }
        out
    }
}

fn interrupted(id: String) -> ContentBlock {
    ContentBlock::ToolResult(ToolResult::error(
        id,
        "Error: interrupted: no result was recorded for this call",
    ))
}

/// A line of `nanocrab sessions list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub key: SessionKey,
    pub messages: usize,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    /// The title the housekeeping model gave it, else the first user message, shortened.
    pub title: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode a session record: {0}")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error("no session {0}")]
    NotFound(SessionKey),
    #[error("an image is not valid base64: {detail}")]
    BadImage { detail: String },
    #[error("{}: unreadable session settings ({detail}); fix or delete the file", path.display())]
    BadSettings { path: PathBuf, detail: String },
}

/// A transcript's handle, its stamp and the number of its last write, as
/// [`SessionStore::append_unsynced`] left them.
type Unsynced = (File, Stamp, u64);

/// Transcripts as append-only JSONL files, one per session key, and each conversation's
/// settings beside them.
///
/// Reads: the transcripts and settings of the sessions used last stay parsed in memory (see
/// `session_cache.rs` for the bounds), shared by the store's clones; each use compares the
/// file's size, modification time and inode with what was parsed, so a file changed from
/// outside is read again. Appends made through the store are added to what it keeps without
/// reading the file back.
///
/// Durability: a line is either whole or, torn by a crash mid-write, skipped when read (as is
/// any line that does not parse), and every append starts on a fresh line; so a crash never
/// costs more than the record being written. [`SessionStore::append`],
/// [`SessionStore::append_compaction`] and [`SessionStore::save_settings`] return once the data
/// is on disk (`fdatasync`). [`SessionStore::append_unsynced`] returns once it is written: a
/// crash of the process loses nothing of it, a power cut may, until the next synced append to
/// the session, [`SessionStore::sync`], [`SessionStore::commit`] (the group commit a turn
/// awaits) or [`SessionStore::reset`] makes it durable together with everything written
/// before it.
#[derive(Debug, Clone)]
pub struct SessionStore {
    dir: PathBuf,
    cache: Arc<Mutex<SessionCache>>,
    /// The handle of each transcript last written by [`SessionStore::append_unsynced`] and not
    /// yet synced, with the file's stamp and the write's number for the group commit: syncing
    /// it syncs every earlier write to that file.
    unsynced: Arc<Mutex<HashMap<SessionKey, Unsynced>>>,
    /// The committer of the sessions directory's filesystem, once something was written.
    group_commit: Arc<OnceLock<GroupCommit>>,
}

impl SessionStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            cache: Arc::default(),
            unsynced: Arc::default(),
            group_commit: Arc::default(),
        }
    }

    fn group_commit(&self) -> Result<&GroupCommit, SessionError> {
        if let Some(commit) = self.group_commit.get() {
            return Ok(commit);
        }
        let commit = GroupCommit::for_dir(&self.dir).map_err(|source| SessionError::Io {
            action: "open",
            path: self.dir.clone(),
            source,
        })?;
        Ok(self.group_commit.get_or_init(|| commit))
    }

    fn cache(&self) -> MutexGuard<'_, SessionCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The sessions directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, key: &SessionKey) -> PathBuf {
        self.dir.join(format!("{key}.jsonl"))
    }

    pub fn exists(&self, key: &SessionKey) -> bool {
        self.path(key).is_file()
    }

    /// Loads a transcript; a missing one is empty. Lines that do not parse (a torn last line
    /// after a crash, a hand edit gone wrong) are skipped with a warning, never fatal. Read
    /// from the file only when it changed since this store last saw it.
    pub fn load(&self, key: &SessionKey) -> Result<Arc<Session>, SessionError> {
        let path = self.path(key);
        let io = |source| SessionError::Io {
            action: "read",
            path: path.clone(),
            source,
        };
        let empty = || {
            self.cache().forget_transcript(key);
            Ok(Arc::new(Session {
                key: key.clone(),
                metadata: None,
                entries: Vec::new(),
                compaction: None,
                dir: self.dir.clone(),
            }))
        };
        let (stamp, bytes) =
            match read_unless_cached(&path, |stamp| self.cache().transcript(key, stamp)) {
                Ok(Fresh::Missing) => return empty(),
                Ok(Fresh::Cached(session)) => return Ok(session),
                Ok(Fresh::Read(stamp, bytes)) => (stamp, bytes),
                Err(source) => return Err(io(source)),
            };
        let parsed = parse_transcript(&path, &bytes);
        let session = Arc::new(Session {
            key: key.clone(),
            metadata: parsed.metadata,
            entries: parsed.entries,
            compaction: parsed.compaction,
            dir: self.dir.clone(),
        });
        self.cache().put_transcript(
            key,
            CachedTranscript {
                stamp,
                session: Arc::clone(&session),
                ends_with_newline: bytes.last().is_none_or(|b| *b == b'\n'),
            },
        );
        Ok(session)
    }

    fn settings_path(&self, key: &SessionKey) -> PathBuf {
        self.dir.join(format!("{key}.settings.json"))
    }

    /// The conversation's settings; none saved yet is the defaults. An unreadable file is
    /// reported, not silently replaced. Read from the file only when it changed since this
    /// store last saw it.
    pub fn settings(&self, key: &SessionKey) -> Result<SessionSettings, SessionError> {
        let path = self.settings_path(key);
        let io = |source| SessionError::Io {
            action: "read",
            path: path.clone(),
            source,
        };
        let defaults = || {
            self.cache().forget_settings(key);
            Ok(SessionSettings::default())
        };
        let (stamp, bytes) =
            match read_unless_cached(&path, |stamp| self.cache().settings(key, stamp)) {
                Ok(Fresh::Missing) => return defaults(),
                Ok(Fresh::Cached(settings)) => return Ok(settings),
                Ok(Fresh::Read(stamp, bytes)) => (stamp, bytes),
                Err(source) => return Err(io(source)),
            };
        let settings: SessionSettings =
            serde_json::from_slice(&bytes).map_err(|err| SessionError::BadSettings {
                path: path.clone(),
                detail: err.to_string(),
            })?;
        self.cache().put_settings(key, stamp, settings.clone());
        Ok(settings)
    }

    /// Saves the conversation's settings atomically (a temp file renamed into place).
    pub fn save_settings(
        &self,
        key: &SessionKey,
        settings: &SessionSettings,
    ) -> Result<(), SessionError> {
        let path = self.settings_path(key);
        let io = |action, source| SessionError::Io {
            action,
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| io("create", e))?;
        let mut temp = tempfile::NamedTempFile::new_in(&self.dir).map_err(|e| io("create", e))?;
        serde_json::to_writer_pretty(&mut temp, settings)?;
        temp.as_file().sync_data().map_err(|e| io("sync", e))?;
        // The renamed file keeps its inode and modification time.
        let stamp = Stamp::of(&temp.as_file().metadata().map_err(|e| io("read", e))?);
        temp.persist(&path).map_err(|e| io("rename", e.error))?;
        self.cache().put_settings(key, stamp, settings.clone());
        Ok(())
    }

    /// Appends a compaction record: from now on the model gets `summary` instead of the first
    /// `through` entries. On disk when it returns.
    pub fn append_compaction(
        &self,
        key: &SessionKey,
        compaction: &Compaction,
    ) -> Result<(), SessionError> {
        let mut line = serde_json::to_vec(compaction)?;
        line.push(b'\n');
        let appended = ParsedTranscript {
            metadata: None,
            entries: Vec::new(),
            compaction: Some(compaction.clone()),
        };
        let written = self.write_lines(key, &line, appended, false)?;
        self.sync_written(key, written)
    }

    /// Appends entries, writing the metadata line first for a new transcript. On disk when it
    /// returns, with every earlier unsynced append, so what a run did survives a crash right
    /// after.
    pub fn append(&self, key: &SessionKey, entries: &[SessionEntry]) -> Result<(), SessionError> {
        let (lines, appended) = self.lines(entries)?;
        let written = self.write_lines(key, &lines, appended, true)?;
        self.sync_written(key, written)
    }

    /// [`SessionStore::append`] without waiting for the disk: written when it returns, so a
    /// crash of the process loses nothing, and durable with the next synced append to the
    /// session or [`SessionStore::sync`]; a power cut before then may lose it (and, the
    /// lines being whole or skipped, nothing else).
    pub fn append_unsynced(
        &self,
        key: &SessionKey,
        entries: &[SessionEntry],
    ) -> Result<(), SessionError> {
        let (lines, appended) = self.lines(entries)?;
        let (file, stamp) = self.write_lines(key, &lines, appended, true)?;
        let write = self.group_commit()?.wrote();
        let earlier = self
            .unsynced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), (file, stamp, write));
        match earlier {
            // The transcript was reset since: the archived one must not stay behind.
            Some((earlier, was, _)) if !was.same_file(&stamp) => earlier
                .sync_data()
                .map_err(|source| self.sync_error(key, source)),
            Some(_) | None => Ok(()),
        }
    }

    /// Makes what [`SessionStore::append_unsynced`] wrote to `key`'s transcript durable; with
    /// nothing unsynced, does nothing.
    pub fn sync(&self, key: &SessionKey) -> Result<(), SessionError> {
        let unsynced = self
            .unsynced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
        match unsynced {
            Some((file, _, _)) => file
                .sync_data()
                .map_err(|source| self.sync_error(key, source)),
            None => Ok(()),
        }
    }

    /// [`SessionStore::sync`] without blocking the thread, and shared: what every writer to
    /// the filesystem wrote meanwhile is flushed with it, in one go (see `group_commit.rs`).
    /// A busy gateway's turns end here, a few at a time.
    pub async fn commit(&self, key: &SessionKey) -> Result<(), SessionError> {
        let unsynced = self
            .unsynced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
        match unsynced {
            Some((_, _, write)) => Ok(self.group_commit()?.commit_through(write).await?),
            None => Ok(()),
        }
    }

    fn sync_error(&self, key: &SessionKey, source: std::io::Error) -> SessionError {
        SessionError::Io {
            action: "sync",
            path: self.path(key),
            source,
        }
    }

    /// Syncs the file just written, which covers what was written to it unsynced before, and
    /// an unsynced earlier file of the session (reset since) too.
    fn sync_written(
        &self,
        key: &SessionKey,
        (file, stamp): (File, Stamp),
    ) -> Result<(), SessionError> {
        file.sync_data()
            .map_err(|source| self.sync_error(key, source))?;
        let earlier = self
            .unsynced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
        match earlier {
            Some((earlier, was, _)) if !was.same_file(&stamp) => earlier
                .sync_data()
                .map_err(|source| self.sync_error(key, source)),
            Some(_) | None => Ok(()),
        }
    }

    /// The entries as the transcript's lines, and as a load would read those lines back.
    fn lines(&self, entries: &[SessionEntry]) -> Result<(Vec<u8>, ParsedTranscript), SessionError> {
        let mut buf = Vec::new();
        let mut stored = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = self.for_storage(entry)?;
            serde_json::to_writer(&mut buf, &entry)?;
            buf.push(b'\n');
            stored.push(entry.into_owned());
        }
        let appended = ParsedTranscript {
            metadata: None,
            entries: stored,
            compaction: None,
        };
        Ok((buf, appended))
    }

    /// Writes `lines` (whole lines) at the end of `key`'s transcript, not synced, and keeps
    /// the cached copy in step with `appended`, what they hold (kept as is rather than parsed
    /// back from the lines just written). With `create`, a missing transcript is created, and
    /// an empty one (new, or left so by a crash right after creation) gets the metadata line
    /// first. Returns the file written and its stamp before the write.
    fn write_lines(
        &self,
        key: &SessionKey,
        lines: &[u8],
        mut appended: ParsedTranscript,
        create: bool,
    ) -> Result<(File, Stamp), SessionError> {
        let path = self.path(key);
        let io = |action, source| SessionError::Io {
            action,
            path: path.clone(),
            source,
        };
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .append(true)
                .create(create)
                .open(&path)
        };
        let mut file = match open() {
            Ok(file) => file,
            Err(err) if create && err.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.dir).map_err(|e| io("create", e))?;
                open().map_err(|e| io("open", e))?
            }
            Err(source) => return Err(io("open", source)),
        };
        let before = Stamp::of(&file.metadata().map_err(|e| io("read", e))?);
        let mut buf = Vec::with_capacity(lines.len() + 128);
        if before.len == 0 {
            if create {
                let meta = SessionMetadata {
                    kind: "metadata".to_owned(),
                    key: key.clone(),
                    created_at: jiff::Timestamp::now().to_string(),
                    version: 1,
                };
                serde_json::to_writer(&mut buf, &meta)?;
                buf.push(b'\n');
                appended.metadata = Some(meta);
            }
        } else {
            let known = self.cache().ends_with_newline(key, &before);
            let ends_with_newline = match known {
                Some(known) => known,
                None => {
                    use std::os::unix::fs::FileExt as _;
                    let mut last = [0u8; 1];
                    file.read_exact_at(&mut last, before.len - 1)
                        .map_err(|e| io("read", e))?;
                    last[0] == b'\n'
                }
            };
            // A previous crash may have torn the last line; start on a fresh line so this
            // record stays readable.
            if !ends_with_newline {
                buf.push(b'\n');
            }
        }
        buf.extend_from_slice(lines);
        file.write_all(&buf).map_err(|e| io("write", e))?;
        let after = file.metadata().map(|meta| Stamp::of(&meta));
        match after {
            Ok(after) if after.follows(&before, buf.len()) => {
                if before.len == 0 {
                    let session = Session {
                        key: key.clone(),
                        metadata: appended.metadata,
                        entries: appended.entries,
                        compaction: appended.compaction,
                        dir: self.dir.clone(),
                    };
                    self.cache().put_transcript(
                        key,
                        CachedTranscript {
                            stamp: after,
                            session: Arc::new(session),
                            ends_with_newline: true,
                        },
                    );
                } else {
                    self.cache()
                        .extend_transcript(key, &before, after, appended);
                }
            }
            // Something else wrote to it meanwhile: read it again next time.
            Ok(_) | Err(_) => self.cache().forget_transcript(key),
        }
        Ok((file, before))
    }

    /// The entry as written: long tool results shortened, image bytes moved to files under
    /// `media/` (named by their hash, so a picture sent twice is stored once).
    fn for_storage<'a>(
        &self,
        entry: &'a SessionEntry,
    ) -> Result<std::borrow::Cow<'a, SessionEntry>, SessionError> {
        let rewrite = entry.content.iter().any(|block| match block {
            ContentBlock::ToolResult(r) => r.content.chars().count() > MAX_STORED_RESULT_CHARS,
            ContentBlock::Image(image) => !image.data.is_empty(),
            ContentBlock::Text { .. }
            | ContentBlock::Thinking { .. }
            | ContentBlock::RedactedThinking { .. }
            | ContentBlock::ToolUse(_) => false,
        });
        if !rewrite {
            return Ok(std::borrow::Cow::Borrowed(entry));
        }
        let mut entry = entry.clone();
        for block in &mut entry.content {
            match block {
                ContentBlock::ToolResult(result) => {
                    let total = result.content.chars().count();
                    if total > MAX_STORED_RESULT_CHARS {
                        let head: String = result
                            .content
                            .chars()
                            .take(MAX_STORED_RESULT_CHARS)
                            .collect();
                        result.content = format!(
                            "{head}\n[transcript note: result shortened from {total} to {MAX_STORED_RESULT_CHARS} characters; the model saw all of it]"
                        );
                    }
                }
                ContentBlock::Image(image) if !image.data.is_empty() => {
                    let file = self.store_image(image)?;
                    *image = Image {
                        media_type: image.media_type.clone(),
                        data: String::new(),
                        file: Some(file),
                    };
                }
                ContentBlock::Image(_)
                | ContentBlock::Text { .. }
                | ContentBlock::Thinking { .. }
                | ContentBlock::RedactedThinking { .. }
                | ContentBlock::ToolUse(_) => {}
            }
        }
        Ok(std::borrow::Cow::Owned(entry))
    }

    /// Writes an image's bytes to `media/<hash>.<ext>`, atomically (a temp file renamed into
    /// place), and returns that path relative to the sessions directory.
    fn store_image(&self, image: &Image) -> Result<String, SessionError> {
        let bytes = BASE64
            .decode(&image.data)
            .map_err(|err| SessionError::BadImage {
                detail: err.to_string(),
            })?;
        let digest = Sha256::digest(&bytes);
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let ext = match image.media_type.as_str() {
            "image/png" => "png",
            "image/jpeg" => "jpg",
            "image/gif" => "gif",
            "image/webp" => "webp",
            _ => "bin",
        };
        let relative = format!("media/{name}.{ext}");
        let path = self.dir.join(&relative);
        if path.is_file() {
            return Ok(relative);
        }
        let media = self.dir.join("media");
        let io = |action, source| SessionError::Io {
            action,
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&media).map_err(|e| io("create", e))?;
        let mut temp = tempfile::NamedTempFile::new_in(&media).map_err(|e| io("create", e))?;
        temp.write_all(&bytes).map_err(|e| io("write", e))?;
        temp.as_file().sync_data().map_err(|e| io("sync", e))?;
        temp.persist(&path).map_err(|e| io("rename", e.error))?;
        Ok(relative)
    }

    /// Every transcript, most recently updated first.
    pub fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let read_dir = match std::fs::read_dir(&self.dir) {
            Ok(read_dir) => read_dir,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(SessionError::Io {
                    action: "list",
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        let mut out = Vec::new();
        for entry in read_dir.flatten() {
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            let Ok(key) = SessionKey::parse(stem) else {
                continue;
            };
            out.push(self.summary(&key)?);
        }
        out.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.key.cmp(&b.key)));
        Ok(out)
    }

    /// Transcript `key` as `nanocrab sessions list` shows it.
    pub fn summary(&self, key: &SessionKey) -> Result<SessionSummary, SessionError> {
        let session = self.load(key)?;
        Ok(SessionSummary {
            key: key.clone(),
            messages: session.entries.len(),
            created_at: session.metadata.as_ref().map(|m| m.created_at.clone()),
            updated_at: session.entries.last().map(|e| e.timestamp.clone()),
            title: self.title(&session)?,
        })
    }

    /// `session`'s title: the one the housekeeping model (or the user) gave it, or else the
    /// first line of its first question, shortened.
    pub fn title(&self, session: &Session) -> Result<String, SessionError> {
        if let Some(title) = self.settings(&session.key)?.title {
            return Ok(title);
        }
        let first_question = session
            .entries
            .iter()
            .filter(|e| e.role == Role::User)
            .map(|e| e.message().text())
            .find(|text| !text.trim().is_empty())
            .unwrap_or_default();
        let first_line = first_question.trim().lines().next().unwrap_or_default();
        let mut title: String = first_line.chars().take(TITLE_CHARS).collect();
        if title.len() < first_question.trim().len() {
            title.push('…');
        }
        Ok(title)
    }

    /// Moves the transcript to `archive/<key>.<timestamp>.jsonl` so the next turn starts
    /// fresh and nothing is lost. Returns where it went, or `None` if there was none.
    pub fn reset(&self, key: &SessionKey) -> Result<Option<PathBuf>, SessionError> {
        // What was written unsynced goes to the archive durably.
        self.sync(key)?;
        self.cache().forget_transcript(key);
        let path = self.path(key);
        if !path.exists() {
            return Ok(None);
        }
        let archive = self.dir.join("archive");
        std::fs::create_dir_all(&archive).map_err(|source| SessionError::Io {
            action: "create",
            path: archive.clone(),
            source,
        })?;
        let stamp = jiff::Timestamp::now()
            .strftime("%Y%m%dT%H%M%S%.fZ")
            .to_string();
        let target = archive.join(format!("{key}.{stamp}.jsonl"));
        std::fs::rename(&path, &target).map_err(|source| SessionError::Io {
            action: "archive",
            path,
            source,
        })?;
        Ok(Some(target))
    }
}

/// What a transcript file holds.
pub(crate) struct ParsedTranscript {
    pub metadata: Option<SessionMetadata>,
    pub entries: Vec<SessionEntry>,
    /// The newest compaction record.
    pub compaction: Option<Compaction>,
}

/// The records of a transcript file's bytes. Lines that do not parse (a torn last line after
/// a crash, a hand edit gone wrong) are skipped with a warning naming `path`, never fatal.
/// What [`read_unless_cached`] found.
enum Fresh<T> {
    Missing,
    /// The cache's copy, made from the file as it is now.
    Cached(T),
    /// The file's bytes, and the version they were read from.
    Read(Stamp, Vec<u8>),
}

/// The file at `path`, unless `cached` has a copy of the version on disk now.
fn read_unless_cached<T>(
    path: &Path,
    cached: impl FnOnce(&Stamp) -> Option<T>,
) -> std::io::Result<Fresh<T>> {
    let missing = |err: &std::io::Error| err.kind() == std::io::ErrorKind::NotFound;
    let stamp = match std::fs::metadata(path) {
        Ok(meta) => Stamp::of(&meta),
        Err(err) if missing(&err) => return Ok(Fresh::Missing),
        Err(err) => return Err(err),
    };
    if let Some(copy) = cached(&stamp) {
        return Ok(Fresh::Cached(copy));
    }
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(err) if missing(&err) => return Ok(Fresh::Missing),
        Err(err) => return Err(err),
    };
    // Stamped before reading: a write landing in between leaves the bytes newer than the
    // stamp, so the next use reads again, never the other way round.
    let stamp = Stamp::of(&file.metadata()?);
    // Bytes, not a `String`: a crash mid-write can tear a multi-byte character, and that must
    // cost only the torn line, not the whole file.
    let mut bytes = Vec::with_capacity(usize::try_from(stamp.len).unwrap_or_default());
    file.read_to_end(&mut bytes)?;
    Ok(Fresh::Read(stamp, bytes))
}

pub(crate) fn parse_transcript(path: &Path, bytes: &[u8]) -> ParsedTranscript {
    let mut metadata = None;
    let mut entries = Vec::new();
    let mut compaction = None;
    for (index, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        if index == 0
            && let Ok(meta) = serde_json::from_slice::<SessionMetadata>(line)
        {
            metadata = Some(meta);
            continue;
        }
        match serde_json::from_slice::<SessionEntry>(line) {
            Ok(entry) => entries.push(entry),
            Err(err) => match serde_json::from_slice::<Compaction>(line) {
                Ok(record) if record.kind == "compaction" => compaction = Some(record),
                Ok(_) | Err(_) => tracing::warn!(
                    "{}:{}: skipping an unreadable line ({err})",
                    path.display(),
                    index + 1
                ),
            },
        }
    }
    ParsedTranscript {
        metadata,
        entries,
        compaction,
    }
}
