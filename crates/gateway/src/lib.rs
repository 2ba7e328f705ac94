//! The long-running side of nanocrab: channels in, turns run per session, answers out, and
//! the HTTP server.
//!
//! [`Gateway`] takes messages from the channels (access, journal, routing) and queues them on
//! [`Turns`], the per-session scheduler that also runs the HTTP API's turns; [`Status`] counts
//! what happens for `GET /status`; [`server`] is the HTTP side.

mod access;
mod approvals;
mod auth;
mod chat_input;
mod chat_turn;
mod gateway;
mod journal;
mod openai_api;
mod openai_wire;
mod pairing;
mod router;
pub mod server;
mod status;
mod turns;

pub use access::{Access, AccessDecision, AccessError, AccessRules};
pub use approvals::{Answered, Approvals, PendingApproval, approval_routes};
pub use gateway::{Gateway, GatewayAgent, GatewayError, INBOX_FILE};
pub use journal::{EntryId, Journal, JournalEntry, JournalError, Recorded};
pub use openai_api::{DEFAULT_MODEL_NAME, SESSION_HEADER, openai_routes};
pub use pairing::{
    ApprovedSender, CODE_LIFETIME_SECS, MAX_PENDING_PER_CHANNEL, PairingError, PairingOutcome,
    PairingRequest, PairingStore,
};
pub use router::{Route, Router};
pub use status::{ChannelReport, ChannelState, MessageCounts, Status};
pub use turns::{
    SessionActivity, SubmitError, TurnError, TurnRequest, TurnResult, TurnTicket, Turns,
};
