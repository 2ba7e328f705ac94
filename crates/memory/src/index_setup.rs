//! Everything needed to open the memory index the way the configuration asks, in one value
//! that the CLI, the agent's tools and RAG mode share.

use std::path::PathBuf;

use crate::change_watch::{ChangeWatch, Changes};
use crate::embedding::EmbeddingSetup;
use crate::index::{IndexError, MemoryIndex, SyncReport};

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
