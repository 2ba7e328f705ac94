//! The memory index as the agent's retriever in RAG mode.

use async_trait::async_trait;
use nanocrab_core::{RetrievalError, RetrievedPassage, Retriever};
use nanocrab_memory::{IndexError, IndexSetup, SearchOptions};

/// Searches the index of `index`, brought up to date first, for each message, ranked by
/// `search`.
pub struct IndexRetriever {
    pub index: IndexSetup,
    pub search: SearchOptions,
}

#[async_trait]
impl Retriever for IndexRetriever {
    async fn retrieve(&self, message: &str) -> Result<Vec<RetrievedPassage>, RetrievalError> {
        let index = self.index.clone();
        let search = self.search.clone();
        let message = message.to_owned();
        // SQLite and the file walk block: off the async threads, but on this runtime, whose
        // I/O a remote embedding model's request needs.
        let runtime = tokio::runtime::Handle::current();
        let found = tokio::task::spawn_blocking(move || {
            runtime.block_on(async {
                let mut opened = index.open().await?;
                opened.sync().await?;
                opened.search(&message, &search).await
            })
        })
        .await
        .map_err(|err| IndexError::Io {
            action: "search",
            path: self.index.database.clone(),
            source: std::io::Error::other(err.to_string()),
        })
        .and_then(|searched| searched)
        .map_err(|err| RetrievalError(Box::new(err)))?;
        Ok(found
            .hits
            .into_iter()
            .map(|hit| RetrievedPassage {
                path: hit.path,
                start_line: hit.start_line,
                end_line: hit.end_line,
                snippet: hit.snippet,
                score: hit.score,
            })
            .collect())
    }
}
