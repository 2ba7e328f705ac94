//! Sessions on disk: the JSONL transcripts, the history window sent to the model, token
//! counting, and the usage the transcripts recorded.

mod group_commit;
mod history;
mod session_cache;
mod session_store;
mod tokens;
mod usage;
#[cfg(feature = "tiktoken")]
mod vocabularies;

pub use group_commit::{CommitError, GroupCommit};
pub use history::CountedHistory;
/// A file's identity and version, to tell whether a copy read from it is still current.
pub use session_cache::Stamp as FileStamp;
pub use session_store::{
    Compaction, Session, SessionEntry, SessionError, SessionMetadata, SessionSettings,
    SessionStore, SessionSummary,
};
pub use tokens::{Encoding, TokenCounter, estimate_tokens};
pub use usage::{ModelCall, TranscriptUsage, TurnUsage, read_usage};
