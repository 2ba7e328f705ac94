//! Everything needed to open the memory index the way the configuration asks, in one value
//! that the CLI, the agent's tools and RAG mode share.

use std::path::PathBuf;

use crate::change_watch::{ChangeWatch, Changes};
use crate::embedding::EmbeddingSetup;
use crate::index::{IndexError, MemoryIndex, SearchResults, SyncReport};
use crate::ranking::SearchOptions;

#[derive(Debug, Clone, PartialEq)]
pub struct IndexSetup {
    /// The index's database file (`state/memory-index.sqlite`).
    pub database: PathBuf,
    pub workspace: PathBuf,
    /// The transcripts, when they are searched too (`memory.indexSessions`).
    pub sessions: Option<PathBuf>,
    pub embeddings: EmbeddingSetup,
    /// The files' changes as they happen, in a long-running process: a search then syncs
    /// only what changed. `None`: every search looks at every file (a one-shot command).
    pub watch: Option<ChangeWatch>,
}

impl IndexSetup {
    pub async fn open(&self) -> Result<MemoryIndex, IndexError> {
        Ok(MemoryIndex::open(&self.database, &self.workspace)
            .await?
            .with_sessions(self.sessions.clone())
            .with_embeddings(self.embeddings.clone()))
    }

    /// Brings `index` up to date before a search: only the files the watch saw change, or,
    /// without a watch (or when it cannot tell), every file.
    pub async fn refresh(&self, index: &mut MemoryIndex) -> Result<SyncReport, IndexError> {
        let Some(watch) = &self.watch else {
            return index.sync().await;
        };
        let changes = watch.take();
        let synced = match &changes {
            Changes::Everything => index.sync().await,
            Changes::Files(files) if files.is_empty() => Ok(SyncReport::default()),
            Changes::Files(files) => index.sync_files(files).await,
        };
        if synced.is_err() {
            // Not done: the next search tries again.
            watch.restore(changes);
        }
        synced
    }

    /// The index brought up to date with the files, then searched. With a watch, only what it
    /// saw change is synced first. Without one, looking at every file costs about as much as
    /// a keyword search at 100,000 chunks, so for a keyword search the two run side by side:
    /// the search of the index as it is stands when the look finds nothing changed (nearly
    /// always), and is made again on the brought-up-to-date index when it does. A search
    /// that asks a model for the query's vector looks first: made twice, it would ask twice.
    pub async fn search(
        &self,
        query: &str,
        options: &SearchOptions,
    ) -> Result<SearchResults, IndexError> {
        let mut index = self.open().await?;
        if self.watch.is_some() || self.embeddings.provider().is_some() {
            self.refresh(&mut index).await?;
            return index.search(query, options).await;
        }
        let checker = self.clone();
        // Its own connection, on a thread of its own; on this runtime, whose I/O a remote
        // embedding model's requests need.
        let runtime = tokio::runtime::Handle::current();
        let check = tokio::task::spawn_blocking(move || {
            runtime.block_on(async move { checker.open().await?.sync().await })
        });
        let searched = index.search(query, options).await;
        let report = check
            .await
            .map_err(|err| IndexError::Io {
                action: "check",
                path: self.workspace.clone(),
                source: std::io::Error::other(err.to_string()),
            })
            .and_then(|checked| checked)?;
        if report.added + report.changed + report.removed + report.embedded == 0 {
            return searched;
        }
        // Opened again: a sync that rebuilt the index (another model) replaced its file.
        self.open().await?.search(query, options).await
    }

    /// [`MemoryIndex::rebuild`] with this setup.
    pub async fn rebuild(&self) -> Result<(MemoryIndex, SyncReport), IndexError> {
        MemoryIndex::rebuild(
            &self.database,
            &self.workspace,
            self.sessions.clone(),
            self.embeddings.clone(),
        )
        .await
    }
}
