//! RAG mode: instead of the whole of MEMORY.md in every system prompt, the notes that match
//! the user's message are retrieved and attached to that message, for this turn only.

use nanocrab_memory::{IndexError, IndexSetup, SearchOptions};
use nanocrab_schema::{ContentBlock, RetrievedSource};
use nanocrab_tools::{MemoryProvenance, NoteOrigins};

/// Where the agent searches its memory, and whether it does so by default.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRetrieval {
    pub index: IndexSetup,
    /// How many notes to attach, and how they are ranked.
    pub search: SearchOptions,
    /// `memory.ragMode`: for conversations that did not choose with `/rag on|off`.
    pub rag_by_default: bool,
}

impl MemoryRetrieval {
    /// The best notes for `message`, as the block attached to it and their sources; `None`
    /// when nothing matches. The index is brought up to date first. Documents, transcripts and
    /// the notes `provenance` marks come fenced.
    pub(crate) async fn retrieve(
        &self,
        message: &str,
        provenance: Option<&MemoryProvenance>,
    ) -> Result<Option<(ContentBlock, Vec<RetrievedSource>)>, IndexError> {
        let this = self.clone();
        let message = message.to_owned();
        // SQLite and the file walk block: off the async threads, but on this runtime, whose
        // I/O a remote embedding model's request needs.
        let runtime = tokio::runtime::Handle::current();
        let hits = tokio::task::spawn_blocking(move || {
            runtime.block_on(async {
                let mut index = this.index.open().await?;
                index.sync().await?;
                index.search(&message, &this.search).await
            })
        })
        .await
        .map_err(|err| IndexError::Io {
            action: "search",
            path: self.index.database.clone(),
            source: std::io::Error::other(err.to_string()),
        })??
        .hits;
        if hits.is_empty() {
            return Ok(None);
        }
        let mut text = String::from(
            "\n\n[Memory retrieved for this message; not written by the user. Use memory_get for more of a file.]",
        );
        let origins = NoteOrigins::load(provenance);
        for hit in &hits {
            text.push_str(&format!(
                "\n\n{}:{}-{}\n{}",
                hit.path,
                hit.start_line,
                hit.end_line,
                origins.snippet_for_model(&hit.path, &hit.snippet)
            ));
        }
        let sources = hits
            .into_iter()
            .map(|hit| RetrievedSource {
                path: hit.path,
                start_line: hit.start_line,
                end_line: hit.end_line,
                score: hit.score,
            })
            .collect();
        Ok(Some((ContentBlock::text(text), sources)))
    }
}
