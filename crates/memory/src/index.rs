//! The memory search index: the user's memory files and documents, chunked, in SQLite with
//! their words' postings (BM25, `keyword.rs`) and vectors (`vectors.rs`). The files are the
//! truth; the index is rebuilt from them at any time and kept up to date by a cheap check (size
//! and modification time, then content hash) before every search, so edits made by hand or by
//! the agent are found at once.
//!
//! The index has a database file of its own (`state/memory-index.sqlite`): a rebuild writes a
//! new file and renames it over the old one, which must never take anything that cannot be
//! rebuilt (the audit log) with it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension as _, params};
use sha2::{Digest as _, Sha256};

use crate::chunker::chunk_markdown;
use crate::documents::document_text;
use crate::embedding::{EmbeddingProvider, EmbeddingSetup};
use crate::keyword::{self, KeywordChanges};
use crate::ranking::{SearchOptions, fuse, rank};
use crate::source_files::{ListError, SESSIONS, SOURCES, SourceFile, SourceFolders};
use crate::vectors::{self, Content, EXACT_MARGIN};

/// Bumped when the tables change, or what the chunker makes of a file (3: headings with
/// nothing under them are not chunks; 4: vectors in a rowid table, the full-text index without
/// a copy of the text; 5: the index's own postings instead of FTS5); an index of another
/// version is rebuilt, keeping its vectors.
const SCHEMA_VERSION: i64 = 5;
/// The key in `meta` that says for which model and content version every chunk has a vector.
const WHOLE_KEY: &str = "vectors_whole";
/// Bytes the -wal file is cut back to once checkpointed.
const WAL_SIZE_LIMIT: i64 = 8 << 20;
/// Chunks embedded per model call and per transaction: a killed indexer loses at most one.
const EMBED_BATCH: usize = 32;
/// Candidates each method brings to fusion: enough that a note ranked low by one method but
/// high by the other is still seen.
const FUSION_POOL: usize = 50;
/// What a search hit shows of its chunk.
const SNIPPET_CHARS: usize = 700;
/// Words of a query used at most; more add nothing to BM25 but time.
const MAX_QUERY_TERMS: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("memory index {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("memory index: embedding failed: {0}")]
    Embedding(String),
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What one sync changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Files looked at: every indexed one, or only those a watch said changed.
    pub files: usize,
    /// Files read from disk, because their size or time changed (or they are new).
    pub read: usize,
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    pub chunks: usize,
    /// Chunks given a vector by this sync (new or changed text, or a new model).
    pub embedded: usize,
    /// Why chunks were left without vectors; they are still found by keyword.
    pub embedding_error: Option<String>,
    pub elapsed: Duration,
}

/// How a search found its hits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "mode")]
pub enum SearchMode {
    /// BM25 and vector similarity, fused.
    Hybrid { model: String },
    /// BM25 only, for this reason.
    Keyword { reason: String },
}

/// A search's hits, best first, and how they were found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SearchResults {
    pub mode: SearchMode,
    pub hits: Vec<SearchHit>,
}

/// One search result: where, what, and how well it matched.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// Relative to the workspace, with `/`.
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub heading: String,
    pub snippet: String,
    /// 0 to 1, relative to the best hit of the query (1.0).
    pub score: f64,
}

/// `nanocrab memory status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexStatus {
    pub database: PathBuf,
    pub files: usize,
    pub chunks: usize,
    /// Files per source folder, in [`SOURCES`] order, then `sessions` when indexed.
    pub per_source: Vec<(&'static str, usize)>,
    /// When a sync last found the files changed (or first built the index).
    pub updated: Option<String>,
    /// The model the vectors are from, and how many chunks have one.
    pub embedding_model: Option<String>,
    pub embedded_chunks: usize,
}

pub struct MemoryIndex {
    conn: Connection,
    database: PathBuf,
    workspace: PathBuf,
    /// Also index the conversation transcripts here (`memory.indexSessions`).
    sessions: Option<PathBuf>,
    /// Embeds chunks and queries for search by meaning, or says why search is by keyword.
    embeddings: EmbeddingSetup,
}

impl MemoryIndex {
    /// Opens the index at `database` for `workspace`, creating it when missing. An index that
    /// cannot be read (another schema version, a damaged file) is rebuilt from the files.
    pub async fn open(database: &Path, workspace: &Path) -> Result<Self, IndexError> {
        match Self::open_existing(database, workspace) {
            Ok(index) => Ok(index),
            Err(err) => {
                tracing::warn!("{err}; rebuilding the memory index from the files");
                Box::pin(Self::rebuild(
                    database,
                    workspace,
                    None,
                    EmbeddingSetup::default(),
                ))
                .await
                .map(|(index, _)| index)
            }
        }
    }

    fn open_existing(database: &Path, workspace: &Path) -> Result<Self, IndexError> {
        if let Some(dir) = database.parent() {
            std::fs::create_dir_all(dir).map_err(|source| IndexError::Io {
                action: "create",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let sql = |source| IndexError::Sqlite {
            path: database.to_path_buf(),
            source,
        };
        let conn = Connection::open(database).map_err(sql)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        // WAL: a search never waits for an indexer, and a killed indexer leaves the last
        // committed index.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        // A first build is one transaction as large as the index, and the -wal file keeps its
        // largest size unless told otherwise.
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
            .map_err(sql)?;
        create_schema(&conn).map_err(sql)?;
        let version: Option<i64> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |row| row.get::<_, String>(0),
            )
            .optional()
            .map_err(sql)?
            .and_then(|v| v.parse().ok());
        match version {
            Some(SCHEMA_VERSION) => {}
            None => {
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?1)",
                    [SCHEMA_VERSION.to_string()],
                )
                .map_err(sql)?;
            }
            Some(other) => {
                return Err(sql(rusqlite::Error::InvalidParameterName(format!(
                    "schema version {other}, this nanocrab uses {SCHEMA_VERSION}"
                ))));
            }
        }
        Ok(Self {
            conn,
            database: database.to_path_buf(),
            workspace: workspace.to_path_buf(),
            sessions: None,
            embeddings: EmbeddingSetup::default(),
        })
    }

    /// With a ready model, chunks and queries are embedded and search also goes by meaning;
    /// otherwise search is by keyword and says why.
    pub fn with_embeddings(mut self, embeddings: EmbeddingSetup) -> Self {
        self.embeddings = embeddings;
        self
    }

    /// Indexes the session transcripts in `dir` too (their text, a line of the index for each
    /// line of the file, so a hit's lines are the transcript's); `None` leaves them out, and a
    /// sync then removes any indexed before.
    pub fn with_sessions(mut self, dir: Option<PathBuf>) -> Self {
        self.sessions = dir;
        self
    }

    /// Builds a new index from the files into a temporary file beside `database`, then renames
    /// it into place: until the rename, the old index stays whole and in use.
    /// The vectors the old index already has for the same model are kept, so a rebuild does
    /// not run the model again over text it has seen.
    pub async fn rebuild(
        database: &Path,
        workspace: &Path,
        sessions: Option<PathBuf>,
        embeddings: EmbeddingSetup,
    ) -> Result<(Self, SyncReport), IndexError> {
        let dir = database.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|source| IndexError::Io {
            action: "create",
            path: dir.to_path_buf(),
            source,
        })?;
        let temp = tempfile::Builder::new()
            .prefix(".memory-index-rebuild-")
            .tempfile_in(dir)
            .map_err(|source| IndexError::Io {
                action: "create a file in",
                path: dir.to_path_buf(),
                source,
            })?;
        let report = {
            let mut fresh = Self::open_existing(temp.path(), workspace)?
                .with_sessions(sessions.clone())
                .with_embeddings(embeddings.clone());
            if let Some(embedder) = embeddings.provider()
                && database.exists()
                && let Err(err) = fresh.adopt_vectors(database, embedder.id())
            {
                tracing::warn!(
                    "cannot reuse the vectors of {}: {err}; embedding everything again",
                    database.display()
                );
            }
            let report = fresh.sync().await?;
            if let Some(err) = &report.embedding_error {
                // A half-embedded index must not replace a whole one.
                return Err(IndexError::Embedding(err.clone()));
            }
            // Everything into the main file before it moves: no -wal file may be left behind.
            fresh
                .conn
                .pragma_update(None, "journal_mode", "DELETE")
                .map_err(|source| IndexError::Sqlite {
                    path: temp.path().to_path_buf(),
                    source,
                })?;
            report
        };
        for suffix in ["-wal", "-shm"] {
            let mut side = database.as_os_str().to_owned();
            side.push(suffix);
            // The old index's side files belong to the file being replaced.
            let _ = std::fs::remove_file(PathBuf::from(side));
        }
        temp.persist(database).map_err(|err| IndexError::Io {
            action: "replace",
            path: database.to_path_buf(),
            source: err.error,
        })?;
        let index = Self::open_existing(database, workspace)?
            .with_sessions(sessions)
            .with_embeddings(embeddings);
        Ok((index, report))
    }

    /// Copies `model`'s vectors from the index at `old` into this one.
    fn adopt_vectors(&self, old: &Path, model: &str) -> rusqlite::Result<()> {
        let old = old
            .to_str()
            .ok_or(rusqlite::Error::InvalidPath(old.to_path_buf()))?;
        self.conn.execute("ATTACH DATABASE ?1 AS old", [old])?;
        let copied = self.conn.execute(
            "INSERT OR IGNORE INTO embeddings (model, hash, vector)
             SELECT model, hash, vector FROM old.embeddings WHERE model = ?1",
            [model],
        );
        self.conn.execute("DETACH DATABASE old", [])?;
        copied.map(|_| ())
    }

    /// Brings the index up to date with the files: new and changed files are chunked and
    /// indexed, deleted ones removed. One transaction: a sync that is killed changes nothing.
    pub async fn sync(&mut self) -> Result<SyncReport, IndexError> {
        self.sync_only(None).await
    }

    /// [`MemoryIndex::sync`] of only the files `paths` name (`memory/2026-01-01.md`, as the
    /// index names them), which a watch of the folders said changed: each is looked at, read
    /// when its size or time changed, and removed from the index when it is gone.
    pub async fn sync_files(&mut self, paths: &[String]) -> Result<SyncReport, IndexError> {
        self.sync_only(Some(paths)).await
    }

    async fn sync_only(&mut self, only: Option<&[String]>) -> Result<SyncReport, IndexError> {
        let started = Instant::now();
        if let Some(embedder) = self.embeddings.provider()
            && let Some(previous) = self.meta("embedding_model")?
            && previous != embedder.id()
        {
            // Another model's vectors cannot be compared with this one's: everything is
            // embedded again in a new file, and the old index serves until it is whole.
            tracing::info!(
                "embedding model changed from {previous} to {}; rebuilding the memory index",
                embedder.id()
            );
            // Boxed: a rebuild syncs, so the two futures would otherwise contain each other.
            let rebuilt = Box::pin(Self::rebuild(
                &self.database,
                &self.workspace,
                self.sessions.clone(),
                self.embeddings.clone(),
            ))
            .await;
            match rebuilt {
                Ok((index, report)) => {
                    *self = index;
                    return Ok(report);
                }
                Err(IndexError::Embedding(err)) => {
                    // The old index stays, and its vectors are another model's: this search
                    // goes by keyword, and the next one tries the rebuild again.
                    tracing::warn!("{err}; the memory index keeps {previous}'s vectors for now");
                    self.embeddings = EmbeddingSetup::KeywordOnly(format!(
                        "the index could not be rebuilt for {}: {err}",
                        embedder.id()
                    ));
                    let mut report = Box::pin(self.sync()).await?;
                    report.embedding_error = Some(err);
                    return Ok(report);
                }
                Err(other) => return Err(other),
            }
        }
        let database = self.database.clone();
        let sql = |source| IndexError::Sqlite {
            path: database.clone(),
            source,
        };
        let folders = SourceFolders {
            workspace: &self.workspace,
            sessions: self.sessions.as_deref(),
        };
        // By path: the files on disk and in the index are matched in linear time, so a
        // search over 20,000 unchanged notes costs their stat calls and no more; the index's
        // list is read while the files are looked at.
        let conn = &self.conn;
        let (found, known) = match only {
            None => std::thread::scope(|scope| {
                let looked = scope.spawn(move || folders.every_file());
                let known = known_files(conn, None);
                let found = match looked.join() {
                    Ok(found) => found,
                    // A panic is a bug: carried on, not turned into files that look deleted.
                    Err(panic) => std::panic::resume_unwind(panic),
                };
                (found, known)
            }),
            Some(paths) => (
                Ok(folders.named_files(paths)),
                known_files(conn, Some(paths)),
            ),
        };
        let found = found.map_err(|ListError { folder, source }| IndexError::Io {
            action: "list",
            path: folder,
            source,
        })?;
        let mut known = known.map_err(sql)?;
        let mut report = SyncReport {
            files: found.len(),
            ..SyncReport::default()
        };
        let mut stale: Vec<&SourceFile> = found
            .iter()
            .filter(|file| known.remove(&file.relative) != Some((file.mtime, file.size)))
            .collect();
        // What the index has and the disk no longer does; in path order, as the stale files,
        // so that a sync reads and writes in the same order every time.
        let mut gone: Vec<String> = known.into_keys().collect();
        gone.sort_unstable();
        stale.sort_unstable_by(|a, b| a.relative.cmp(&b.relative));
        // Nothing to write when nothing changed: a search then takes no write lock and waits
        // for no commit to reach the disk. A new index records its first sync all the same.
        if gone.is_empty() && stale.is_empty() && self.meta("last_sync")?.is_some() {
            self.embed_then_report(&mut report, started).await;
            return Ok(report);
        }
        // Immediate: the files read above may only be written by whoever holds the lock.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sql)?;
        let mut keywords = KeywordChanges::default();
        for path in &gone {
            remove_file(&tx, path, &mut keywords).map_err(sql)?;
            report.removed += 1;
        }
        for file in stale {
            let absolute = folders
                .path(&file.relative)
                .unwrap_or_else(|| self.workspace.join(&file.relative));
            // Statements run once a file or a chunk are prepared once a sync: at 20,000 files,
            // parsing them again each time cost a thirteenth of a first build.
            let previous: Option<String> = tx
                .prepare_cached("SELECT hash FROM files WHERE path = ?1")
                .and_then(|mut stmt| {
                    stmt.query_row([&file.relative], |row| row.get(0))
                        .optional()
                })
                .map_err(sql)?;
            let bytes = std::fs::read(&absolute).map_err(|source| IndexError::Io {
                action: "read",
                path: absolute.clone(),
                source,
            })?;
            report.read += 1;
            let hash = hex(&Sha256::digest(&bytes));
            if previous.as_ref() == Some(&hash) {
                // Touched, not changed: only the stat is new.
                tx.prepare_cached("UPDATE files SET mtime = ?2, size = ?3 WHERE path = ?1")
                    .and_then(|mut stmt| {
                        stmt.execute(params![file.relative, file.mtime, file.size])
                    })
                    .map_err(sql)?;
                continue;
            }
            remove_file(&tx, &file.relative, &mut keywords).map_err(sql)?;
            // A document without text to give is indexed as nothing, with its hash, so that it
            // is read again when it changes and not at every search.
            let text = document_text(&absolute, &bytes).unwrap_or_else(|err| {
                tracing::warn!("{} is indexed without its text: {err}", file.relative);
                String::new()
            });
            let chunks = chunk_markdown(&text);
            for chunk in &chunks {
                let chunk_hash = hex(&Sha256::digest(embedding_text(&chunk.heading, &chunk.text)));
                tx.prepare_cached(
                    "INSERT INTO chunks (path, start_line, end_line, heading, text, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .and_then(|mut stmt| stmt.execute(params![file.relative, chunk.start_line as i64, chunk.end_line as i64, chunk.heading, chunk.text, chunk_hash]))
                .map_err(sql)?;
                keywords
                    .add(&tx, tx.last_insert_rowid(), &chunk.heading, &chunk.text)
                    .map_err(sql)?;
            }
            tx.prepare_cached(
                "INSERT INTO files (path, source, hash, mtime, size) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    file.relative,
                    file.source,
                    hash,
                    file.mtime,
                    file.size
                ])
            })
            .map_err(sql)?;
            report.chunks += chunks.len();
            if previous.is_some() {
                report.changed += 1;
            } else {
                report.added += 1;
            }
        }
        keywords.write(&tx).map_err(sql)?;
        vectors::forget_old_changes(&tx).map_err(sql)?;
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('last_sync', ?1)",
            [jiff::Timestamp::now().to_string()],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)?;
        self.embed_then_report(&mut report, started).await;
        Ok(report)
    }

    /// The end of every sync: chunks without a vector get one (when a model is set up), and
    /// the report says how long it all took.
    async fn embed_then_report(&mut self, report: &mut SyncReport, started: Instant) {
        if let Some(embedder) = self.embeddings.provider()
            && let Err(err) = self.embed_missing(embedder.as_ref(), report).await
        {
            tracing::warn!("{err}; those notes are found by keyword only");
            report.embedding_error = Some(err.to_string());
        }
        report.elapsed = started.elapsed();
    }

    /// Gives every chunk without a vector from `embedder` one, a batch per transaction, and
    /// drops vectors no chunk uses any more; counts them in `report` as they are stored.
    async fn embed_missing(
        &mut self,
        embedder: &dyn EmbeddingProvider,
        report: &mut SyncReport,
    ) -> Result<(), IndexError> {
        let database = self.database.clone();
        let sql = |source| IndexError::Sqlite {
            path: database.clone(),
            source,
        };
        let model = embedder.id();
        let content = Content::read(&self.conn).map_err(sql)?;
        // The last content at which every chunk had this model's vector: only the chunks
        // changed since can lack one, and a look at every chunk (a pass over 100,000 of them
        // after any edit) is needed only when the log no longer reaches back to it.
        let whole_since = self.meta(WHOLE_KEY)?.and_then(|whole| {
            let (whole_model, at) = whole.rsplit_once(' ')?;
            content.logged_since(at).filter(|_| whole_model == model)
        });
        if whole_since == Some(content.last_change()) {
            return Ok(());
        }
        let missing: Vec<(String, String)> = {
            let mut stmt = self
                .conn
                .prepare(match whole_since {
                    Some(_) => {
                        "SELECT hash, min(heading), min(text) FROM chunks c
                         WHERE c.id IN (SELECT chunk FROM vector_changes WHERE seq > ?2)
                           AND NOT EXISTS (SELECT 1 FROM embeddings e
                                           WHERE e.model = ?1 AND e.hash = c.hash)
                         GROUP BY hash"
                    }
                    None => {
                        "SELECT hash, min(heading), min(text) FROM chunks c WHERE NOT EXISTS
                           (SELECT 1 FROM embeddings e WHERE e.model = ?1 AND e.hash = c.hash)
                         GROUP BY hash"
                    }
                })
                .map_err(sql)?;
            let row = |row: &rusqlite::Row<'_>| {
                Ok((
                    row.get(0)?,
                    embedding_text(&row.get::<_, String>(1)?, &row.get::<_, String>(2)?),
                ))
            };
            match whole_since {
                Some(since) => stmt.query_map(params![model, since], row),
                None => stmt.query_map(params![model], row),
            }
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?
        };
        // Said first, so that the vectors of a sync cut short count as this model's.
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedding_model', ?1)",
                [model],
            )
            .map_err(sql)?;
        for batch in missing.chunks(EMBED_BATCH) {
            let texts: Vec<&str> = batch.iter().map(|(_, text)| text.as_str()).collect();
            let vectors = embedder
                .embed(&texts)
                .await
                .map_err(|err| IndexError::Embedding(err.to_string()))?;
            let tx = self.conn.transaction().map_err(sql)?;
            for ((hash, _), vector) in batch.iter().zip(&vectors) {
                let blob: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                tx.execute(
                    "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?1, ?2, ?3)",
                    params![model, hash, blob],
                )
                .map_err(sql)?;
            }
            tx.commit().map_err(sql)?;
            report.embedded += batch.len();
        }
        let tx = self.conn.transaction().map_err(sql)?;
        // Vectors no chunk uses any more go with the pass over every chunk: between two, an
        // edit undone finds its vector still there, and the log's cut bounds how long that is.
        if whole_since.is_none() {
            tx.execute(
                "DELETE FROM embeddings WHERE model != ?1 OR hash NOT IN (SELECT hash FROM chunks)",
                [model],
            )
            .map_err(sql)?;
        }
        vectors::forget_old_changes(&tx).map_err(sql)?;
        // Unused vectors are no chunk's: dropping them changes no row of a matrix, but it
        // counts as a change, so the content is read after it.
        let whole = format!("{model} {}", Content::read(&tx).map_err(sql)?);
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            [WHOLE_KEY, whole.as_str()],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(())
    }

    fn meta(&self, key: &str) -> Result<Option<String>, IndexError> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .optional()
            .map_err(|source| IndexError::Sqlite {
                path: self.database.clone(),
                source,
            })
    }

    /// The best chunks for `query`, ranked as `options` say, best first: by BM25 over their
    /// text and headings, fused with vector similarity when an embedding model is set up.
    /// Scores are relative to the best match (1.0): BM25's own scale depends on the corpus,
    /// and in a small one (a few notes) a term found in half of them weighs almost nothing.
    /// `&mut self` although it only reads: the index may not be shared between threads
    /// (SQLite's connection), and the future that waits for the query's vector must be `Send`.
    pub async fn search(
        &mut self,
        query: &str,
        options: &SearchOptions,
    ) -> Result<SearchResults, IndexError> {
        let sql = |source| IndexError::Sqlite {
            path: self.database.clone(),
            source,
        };
        let pool = if self.embeddings.provider().is_some() {
            options.pool().max(FUSION_POOL)
        } else {
            options.pool()
        };
        // The model that embeds the query, or why there is none.
        let embedder = match &self.embeddings {
            EmbeddingSetup::Ready(embedder) => Ok(embedder.clone()),
            EmbeddingSetup::KeywordOnly(reason) => Err(reason.clone()),
        };
        let conn = &mut self.conn;
        // The query's pass through the model (on a thread of its own, or a request) starts
        // first and the keyword search runs meanwhile: on two cores a hybrid search then
        // costs the longer of the two, not both.
        let (embedded, keyword) = tokio::join!(
            async move {
                let embedder = embedder?;
                match embedder.embed(&[query]).await {
                    Ok(vectors) => Ok((embedder, vectors)),
                    Err(err) => {
                        tracing::warn!("{err}; searching by keyword only");
                        Err(err.to_string())
                    }
                }
            },
            async { keyword::search(conn, &query_terms(query), pool) },
        );
        let keyword = keyword.map_err(sql)?;
        let (scored, mode) = match embedded {
            Ok((embedder, vectors)) => {
                let query_vector = vectors.into_iter().next().unwrap_or_default();
                let similar = self.nearest(embedder.id(), &query_vector, pool)?;
                (
                    fuse(&keyword, &similar, options),
                    SearchMode::Hybrid {
                        model: embedder.id().to_owned(),
                    },
                )
            }
            Err(reason) => (keyword, SearchMode::Keyword { reason }),
        };
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT path, start_line, end_line, heading, text FROM chunks WHERE id = ?1",
            )
            .map_err(sql)?;
        let mut hits = Vec::with_capacity(scored.len());
        for (id, score) in scored {
            let hit = stmt
                .query_row([id], |row| {
                    let text: String = row.get(4)?;
                    Ok(SearchHit {
                        path: row.get(0)?,
                        start_line: row.get::<_, i64>(1)? as usize,
                        end_line: row.get::<_, i64>(2)? as usize,
                        heading: row.get(3)?,
                        snippet: snippet(&text),
                        score,
                    })
                })
                .optional()
                .map_err(sql)?;
            // Both tables change in the same transactions; a full-text row without its chunk
            // would be damage, which costs that hit and not the search.
            hits.extend(hit);
        }
        Ok(SearchResults {
            mode,
            hits: rank(hits, options),
        })
    }

    /// The vector half of a hybrid search on its own: the ids of the `limit` chunks whose
    /// `model` vectors are most like `query`, with their cosine, best first. Public for the
    /// scale bench (`benches/memory_scale.rs`), which times the scan apart from the model.
    #[doc(hidden)]
    pub fn nearest_chunks(
        &self,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, IndexError> {
        self.nearest(model, query, limit)
    }

    /// The `limit` chunks whose `model` vectors are most like `query`, by cosine (the vectors
    /// are unit length, so a dot product), best first. A scan of every vector, without an
    /// extension or an approximate index: the int8 matrix in memory (read on the first search
    /// of the process and kept while the index does not change, for every `MemoryIndex` of
    /// this database) ranks them, and the best are scored exactly.
    fn nearest(
        &self,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, IndexError> {
        let sql = |source| IndexError::Sqlite {
            path: self.database.clone(),
            source,
        };
        let matrix = vectors::matrix(&self.conn, &self.database, model).map_err(sql)?;
        let candidates = matrix.nearest(query, limit.saturating_add(EXACT_MARGIN));
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT e.vector FROM chunks c
                 JOIN embeddings e ON e.model = ?1 AND e.hash = c.hash WHERE c.id = ?2",
            )
            .map_err(sql)?;
        let mut scored = Vec::with_capacity(candidates.len());
        for (id, _) in candidates {
            // A chunk removed since the matrix was read has no vector to score.
            let Some(blob) = stmt
                .query_row(params![model, id], |row| row.get::<_, Vec<u8>>(0))
                .optional()
                .map_err(sql)?
            else {
                continue;
            };
            let dot: f32 = blob
                .chunks_exact(4)
                .zip(query)
                .map(|(b, q)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * q)
                .sum();
            scored.push((id, f64::from(dot)));
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        Ok(scored)
    }

    pub fn status(&self) -> Result<IndexStatus, IndexError> {
        let sql = |source| IndexError::Sqlite {
            path: self.database.clone(),
            source,
        };
        let count = |query: &str| -> Result<usize, IndexError> {
            self.conn
                .query_row(query, [], |row| row.get::<_, i64>(0))
                .map(|n| n as usize)
                .map_err(sql)
        };
        let mut per_source = Vec::new();
        let sessions = self.sessions.as_ref().map(|_| SESSIONS);
        for source in SOURCES.iter().map(|(s, _)| *s).chain(sessions) {
            let n: i64 = self
                .conn
                .query_row(
                    "SELECT count(*) FROM files WHERE source = ?1",
                    [source],
                    |row| row.get(0),
                )
                .map_err(sql)?;
            per_source.push((source, n as usize));
        }
        Ok(IndexStatus {
            database: self.database.clone(),
            files: count("SELECT count(*) FROM files")?,
            chunks: count("SELECT count(*) FROM chunks")?,
            per_source,
            updated: self.meta("last_sync")?,
            embedding_model: self.meta("embedding_model")?,
            embedded_chunks: count(
                "SELECT count(*) FROM chunks c WHERE EXISTS (SELECT 1 FROM embeddings e
                 WHERE e.hash = c.hash AND e.model = (SELECT value FROM meta WHERE key = 'embedding_model'))",
            )?,
        })
    }
}

/// The size and time of each file the index has read (only of `only`, when given).
fn known_files(
    conn: &Connection,
    only: Option<&[String]>,
) -> rusqlite::Result<HashMap<String, (i64, i64)>> {
    let row = |row: &rusqlite::Row<'_>| Ok((row.get(0)?, (row.get(1)?, row.get(2)?)));
    match only {
        None => conn
            .prepare_cached("SELECT path, mtime, size FROM files")?
            .query_map([], row)?
            .collect(),
        Some(paths) => {
            let mut stmt =
                conn.prepare_cached("SELECT path, mtime, size FROM files WHERE path = ?1")?;
            let mut known = HashMap::new();
            for path in paths {
                known.extend(stmt.query_row([path], row).optional()?);
            }
            Ok(known)
        }
    }
}

/// Vectors are rows of a rowid table: as the key-ordered rows of a `WITHOUT ROWID` table, each
/// 1.5 kB vector spilled into a 4 kB overflow page of its own (601 MB at 100,000 chunks, in
/// docs/benchmarks.md). The text is in `chunks` only; the keyword index keeps postings.
fn create_schema(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS files (
             path TEXT PRIMARY KEY, source TEXT NOT NULL, hash TEXT NOT NULL,
             mtime INTEGER NOT NULL, size INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS chunks (
             id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
             end_line INTEGER NOT NULL, heading TEXT NOT NULL, text TEXT NOT NULL,
             hash TEXT NOT NULL);
         CREATE INDEX IF NOT EXISTS chunks_by_path ON chunks (path);
         CREATE INDEX IF NOT EXISTS chunks_by_hash ON chunks (hash);
         CREATE TABLE IF NOT EXISTS embeddings (
             id INTEGER PRIMARY KEY, model TEXT NOT NULL, hash TEXT NOT NULL,
             vector BLOB NOT NULL, UNIQUE (model, hash));",
    )?;
    conn.execute_batch(keyword::SCHEMA)?;
    conn.execute_batch(vectors::SCHEMA)
}

/// Takes `path` out of the index, its chunks' words into `keywords`.
fn remove_file(
    tx: &rusqlite::Transaction<'_>,
    path: &str,
    keywords: &mut KeywordChanges,
) -> rusqlite::Result<()> {
    {
        let mut stmt = tx.prepare_cached("SELECT id, heading, text FROM chunks WHERE path = ?1")?;
        let mut rows = stmt.query([path])?;
        while let Some(row) = rows.next()? {
            keywords.remove(
                row.get(0)?,
                row.get_ref(1)?.as_str()?,
                row.get_ref(2)?.as_str()?,
            );
        }
    }
    tx.prepare_cached("DELETE FROM chunks WHERE path = ?1")?
        .execute([path])?;
    tx.prepare_cached("DELETE FROM files WHERE path = ?1")?
        .execute([path])?;
    Ok(())
}

/// English function words: joined with OR, a question's "when is the" would match every note
/// that has them. A query of nothing else keeps them.
const STOPWORDS: [&str; 64] = [
    "a", "about", "after", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but",
    "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "how", "i",
    "if", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "so", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "to", "was", "we", "were",
    "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// The words a query is searched by, as the index keeps them: any of them may match, and BM25
/// ranks by how many and how rare. Operators of a search syntax (`-`, `:`, `AND`) are words or
/// nothing, like the rest of the user's text.
fn query_terms(query: &str) -> Vec<String> {
    let (mut every, mut content) = (Vec::new(), Vec::new());
    keyword::for_each_word(query, |word| {
        let term = keyword::stem(word).into_owned();
        if !STOPWORDS.contains(&word) {
            content.push(term.clone());
        }
        every.push(term);
    });
    let mut terms = if content.is_empty() { every } else { content };
    terms.truncate(MAX_QUERY_TERMS);
    terms
}

/// What a chunk's vector is made from: its heading path says what the text is about.
fn embedding_text(heading: &str, text: &str) -> String {
    if heading.is_empty() {
        text.to_owned()
    } else {
        format!("{heading}\n{text}")
    }
}

fn snippet(text: &str) -> String {
    match text.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
