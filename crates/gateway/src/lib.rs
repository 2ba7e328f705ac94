//! The long-running side of nanocrab: channels in, turns run per session, answers out, and
//! the HTTP server.
//!
//! In: a channel hands a message to the gateway's intake, which checks access, journals it,
//! routes it to a session and queues it on [`Turns`], the per-session scheduler that also runs
//! the HTTP API's turns; a chat turn runs the agent. Out: whatever a turn or the gateway says
//! or shows (answers, "typing…", the turn's events, approval requests) is published once on
//! the [`OutboundBus`]; the channels' sender subscribes to put messages on the platforms, in
//! order per chat, keeping in the [`Outbox`] what cannot be sent; anyone else may subscribe
//! to watch. [`Status`] counts what happens for `GET /status`; [`server`] is the HTTP side.
//!
//! On its own, the [`Heartbeats`] tick each agent's `HEARTBEAT.md` and the [`CronScheduler`]
//! runs the jobs of the [`CronStore`] (which `nanocrab cron` and the agent's `cron` tool change
//! through a [`CronControl`]): an [`Autonomous`] run goes through the same [`Turns`] and
//! publishes its reply on the same bus, to the chat its target names ([`LastChats`] remembers
//! where each agent's user last wrote directly). A [`SubagentControl`] runs the subagents the
//! agents' `spawn` tool starts, through the same [`Turns`], and announces each one's end in
//! its parent's conversation.
//!
//! Each stage is a module that knows only the stages after it: `intake` → `turns` →
//! `chat_turn` → `bus`, and `sender` → `outbox`/`journal`; the HTTP modules (`server`,
//! `auth`, `openai_api`, `approvals_api`, `heartbeat_api`, `cron_api`, `subagents_api`) sit on top and nothing
//! below imports them.

mod access;
mod approvals;
mod approvals_api;
mod auth;
mod autonomous;
mod bus;
mod channel_supervisor;
mod chat_input;
mod chat_turn;
mod cron;
mod cron_api;
mod cron_jobs;
mod cron_store;
mod gateway;
mod gateway_agent;
mod heartbeat;
mod heartbeat_api;
mod intake;
mod journal;
mod jsonl_file;
mod last_chat;
mod openai_api;
mod openai_wire;
mod outbox;
mod pairing;
mod replies;
mod router;
mod sender;
pub mod server;
mod status;
mod subagents;
mod subagents_api;
mod turn_messages;
mod turns;
mod web_api;
mod web_assets;
mod web_auth;
mod web_chat;
mod web_files;
mod web_state;
mod web_wire;

pub use access::{Access, AccessDecision, AccessError, AccessRules};
pub use approvals::{Answered, Approvals};
pub use approvals_api::{PendingApproval, approval_routes};
pub use auth::CONTENT_SECURITY_POLICY;
pub use autonomous::{Autonomous, AutonomousError, AutonomousRun, Delivery};
pub use bus::{EventKind, OutboundBus, OutboundEvent, Outgoing, Sent, Subscription};
pub use cron::{
    CronRunOutcome, CronScheduler, FIRST_RETRY, LAST_RETRY, MISSED_AFTER, ONE_SHOT_TRIES, backoff,
    cron_session, job_prompt,
};
pub use cron_api::cron_routes;
pub use cron_jobs::{
    CLOCK_CHECK, CronControl, CronError, JobRequest, jitter_offset, job_line, next_run,
};
pub use cron_store::{
    AfterRun, CronJob, CronStore, CronStoreError, KEPT_RUNS, NewJob, RunEnd, RunRecord, RunStatus,
};
pub use gateway::{Gateway, GatewayError, INBOX_FILE, OUTBOX_FILE};
pub use gateway_agent::GatewayAgent;
pub use heartbeat::{
    AgentHeartbeat, Clock, HeartbeatOutcome, HeartbeatReport, Heartbeats, UnknownAgent,
};
pub use heartbeat_api::heartbeat_routes;
pub use journal::{EntryId, Journal, JournalEntry, JournalError, Recorded};
pub use last_chat::{LAST_CHATS_FILE, LastChats};
pub use openai_api::{DEFAULT_MODEL_NAME, SESSION_HEADER, openai_routes};
pub use outbox::{KEEP_FOR_SECS, Kept, KeptId, Outbox, OutboxError};
pub use pairing::{
    ApprovedSender, CODE_LIFETIME_SECS, MAX_PENDING_PER_CHANNEL, PairingError, PairingOutcome,
    PairingRequest, PairingStore,
};
pub use router::{Route, Router};
pub use status::{ChannelReport, ChannelState, MessageCounts, Status};
pub use subagents::{
    GATEWAY_STOPPED, KEPT_SUBAGENTS, SubagentControl, SubagentError, SubagentParent,
    SubagentRecord, SubagentState, read_subagents,
};
pub use subagents_api::subagent_routes;
pub use turn_messages::TurnMessages;
pub use turns::{
    SessionActivity, SubmitError, TurnError, TurnRequest, TurnResult, TurnTicket, Turns,
};
pub use web_api::web_routes;
pub use web_assets::files as web_files;
pub use web_auth::CSRF_HEADER;
pub use web_state::{Reports, Workbench, WorkbenchAgent};
