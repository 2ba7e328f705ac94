//! Memory on disk: the user's memory files, and the search index over them and documents.

mod chunker;
mod documents;
mod embedding;
mod index;
mod index_setup;
mod memory_files;
#[cfg(feature = "documents")]
mod pdf;
mod provenance;
mod ranking;

pub use chunker::{Chunk, chunk_markdown};
pub use documents::{DocumentError, document_text};
pub use embedding::{
    DEFAULT_LOCAL_MODEL, EmbeddingError, EmbeddingProvider, EmbeddingSetup, LocalEmbeddings,
    RemoteEmbeddings,
};
pub use index::{
    IndexError, IndexStatus, MemoryIndex, SearchHit, SearchMode, SearchResults, SyncReport,
};
pub use index_setup::IndexSetup;
pub use memory_files::{MemoryFileError, append_history, read_memory, rewrite_memory};
pub use provenance::{Mark, MemoryProvenance, NoteMark, ProvenanceEntry, ProvenanceError};
pub use ranking::SearchOptions;
