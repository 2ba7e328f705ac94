//! Memory on disk: session transcripts and the history window sent to the model, and the
//! search index over the user's memory files and documents.

mod chunker;
mod documents;
mod history;
mod index;
mod memory_files;
mod ranking;
mod session_store;
mod tokens;
mod usage;

pub use chunker::{Chunk, chunk_markdown};
pub use documents::document_text;
pub use history::CountedHistory;
pub use index::{IndexError, IndexStatus, MemoryIndex, SearchHit, SyncReport};
pub use memory_files::{MemoryFileError, append_history, read_memory, rewrite_memory};
pub use ranking::SearchOptions;
pub use session_store::{
    Compaction, Session, SessionEntry, SessionError, SessionMetadata, SessionSettings,
    SessionStore, SessionSummary,
};
pub use tokens::{Encoding, TokenCounter, estimate_tokens};
pub use usage::{ModelCall, TranscriptUsage, TurnUsage, read_usage};
