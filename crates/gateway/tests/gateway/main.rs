//! The gateway end to end: fake channels in, real agents against the mock LLM, answers out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod chat_turns;
mod cron;
mod discord;
mod fake_channel;
mod harness;
mod heartbeat;
mod lifecycle;
mod message_tool;
mod module_graph;
mod outbound;
mod routing;
mod server;
mod subagents;
mod telegram;
mod voice;
