//! Memory on disk: the user's memory files, the search index over them and documents, and the
//! memory tools (memory_search, memory_get) the agent reads them with.

mod change_watch;
mod chunker;
mod documents;
mod embedding;
mod index;
mod index_setup;
mod keyword;
mod memory_files;
mod memory_get;
mod memory_search;
mod memory_tools;
#[cfg(feature = "documents")]
mod pdf;
mod ranking;
mod source_files;
mod vectors;

pub use change_watch::{ChangeWatch, Changes, WatchError};
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
pub use memory_get::MemoryGetTool;
pub use memory_search::MemorySearchTool;
pub use memory_tools::memory_tools;
pub use ranking::SearchOptions;
#[doc(hidden)]
pub use vectors::{MatrixReads, matrix_reads};
