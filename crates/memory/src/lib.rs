//! Memory on disk: session transcripts and the history window sent to the model, and the
//! search index over the user's memory files and documents.

mod chunker;
mod documents;
mod embedding;
mod history;
mod index;
mod index_setup;
mod memory_files;
mod pdf;
mod provenance;
mod ranking;
mod session_store;
mod tokens;
mod usage;

pub use chunker::{Chunk, chunk_markdown};
pub use documents::{DocumentError, document_text};
pub use embedding::{
    DEFAULT_LOCAL_MODEL, EmbeddingError, EmbeddingProvider, EmbeddingSetup, LocalEmbeddings,
    RemoteEmbeddings,
};
pub use history::CountedHistory;
pub use index::{
    IndexError, IndexStatus, MemoryIndex, SearchHit, SearchMode, SearchResults, SyncReport,
};
pub use index_setup::IndexSetup;
pub use memory_files::{MemoryFileError, append_history, read_memory, rewrite_memory};
pub use provenance::{Mark, MemoryProvenance, NoteMark, ProvenanceEntry, ProvenanceError};
pub use ranking::SearchOptions;
pub use session_store::{
    Compaction, Session, SessionEntry, SessionError, SessionMetadata, SessionSettings,
    SessionStore, SessionSummary,
};
pub use tokens::{Encoding, TokenCounter, estimate_tokens};
pub use usage::{ModelCall, TranscriptUsage, TurnUsage, read_usage};
