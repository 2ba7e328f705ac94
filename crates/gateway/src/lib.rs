//! The long-running side of nanocrab: channels in, turns run per session, answers out, and
//! the HTTP server.

mod journal;
mod router;

pub use journal::{EntryId, Journal, JournalEntry, JournalError, Recorded};
pub use router::{Route, Router};
