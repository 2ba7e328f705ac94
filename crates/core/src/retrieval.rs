//! RAG mode: instead of the whole of MEMORY.md in every system prompt, the notes that match
//! the user's message are retrieved and attached to that message, for this turn only.

use std::sync::Arc;

use async_trait::async_trait;
use nanocrab_memory::{IndexError, IndexSetup, SearchOptions};
use nanocrab_schema::{ContentBlock, RetrievedSource};
use nanocrab_tools::{MemoryProvenance, NoteOrigins};

/// A passage of the agent's memory found for a message, its text as stored (not fenced).
#[derive(Debug, Clone, PartialEq)]
pub struct RetrievedPassage {
    /// Relative to the workspace, with `/`: `memory/…`, `knowledge/…`, `sessions/…`.
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub snippet: String,
    /// 0 to 1, relative to the best passage of the message (1.0).
    pub score: f64,
}

/// Why memory could not be searched; the turn is answered without it.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RetrievalError(#[from] pub Box<dyn std::error::Error + Send + Sync>);

/// Finds the passages of an agent's memory that match a message, best first: the memory index
/// as the binary wires it in, so the turn does not depend on how memory is searched.
#[async_trait]
pub trait Retriever: Send + Sync {
    async fn retrieve(&self, message: &str) -> Result<Vec<RetrievedPassage>, RetrievalError>;
}

/// Where the agent searches its memory, and whether it does so by default.
pub struct MemoryRetrieval {
    pub retriever: Arc<dyn Retriever>,
    /// `memory.ragMode`: for conversations that did not choose with `/rag on|off`.
    pub rag_by_default: bool,
}

impl MemoryRetrieval {
    /// The best notes for `message`, as the block attached to it and their sources; `None`
    /// when nothing matches. Documents, transcripts and the notes `provenance` marks come
    /// fenced.
    pub(crate) async fn retrieve(
        &self,
        message: &str,
        provenance: Option<&MemoryProvenance>,
    ) -> Result<Option<(ContentBlock, Vec<RetrievedSource>)>, RetrievalError> {
        let passages = self.retriever.retrieve(message).await?;
        if passages.is_empty() {
            return Ok(None);
        }
        let mut text = String::from(
            "\n\n[Memory retrieved for this message; not written by the user. Use memory_get for more of a file.]",
        );
        let origins = NoteOrigins::load(provenance);
        for passage in &passages {
            text.push_str(&format!(
                "\n\n{}:{}-{}\n{}",
                passage.path,
                passage.start_line,
                passage.end_line,
                origins.snippet_for_model(&passage.path, &passage.snippet)
            ));
        }
        let sources = passages
            .into_iter()
            .map(|passage| RetrievedSource {
                path: passage.path,
                start_line: passage.start_line,
                end_line: passage.end_line,
                score: passage.score,
            })
            .collect();
        Ok(Some((ContentBlock::text(text), sources)))
    }
}

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
        let found =
            tokio::task::spawn_blocking(move || runtime.block_on(index.search(&message, &search)))
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
