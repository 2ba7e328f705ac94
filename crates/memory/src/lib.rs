//! Memory on disk: session transcripts and the history window sent to the model.

mod history;
mod session_store;
mod usage;

pub use history::{estimate_tokens, window};
pub use session_store::{
    Session, SessionEntry, SessionError, SessionMetadata, SessionStore, SessionSummary,
};
pub use usage::{ModelCall, TranscriptUsage, TurnUsage, read_usage};
