//! The long-running side of nanocrab: channels in, turns run per session, answers out, and
//! the HTTP server.

mod access;
mod journal;
mod pairing;
mod router;

pub use access::{Access, AccessDecision, AccessError, AccessRules};
pub use journal::{EntryId, Journal, JournalEntry, JournalError, Recorded};
pub use pairing::{
    ApprovedSender, CODE_LIFETIME_SECS, MAX_PENDING_PER_CHANNEL, PairingError, PairingOutcome,
    PairingRequest, PairingStore,
};
pub use router::{Route, Router};
