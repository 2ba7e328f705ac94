//! Everything needed to open the memory index the way the configuration asks, in one value
//! that the CLI, the agent's tools and RAG mode share.

use std::path::PathBuf;

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
}

impl IndexSetup {
    pub async fn open(&self) -> Result<MemoryIndex, IndexError> {
        Ok(MemoryIndex::open(&self.database, &self.workspace)
            .await?
            .with_sessions(self.sessions.clone())
            .with_embeddings(self.embeddings.clone()))
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
