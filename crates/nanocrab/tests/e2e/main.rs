//! End-to-end tests: the real `nanocrab` binary against the loopback mock LLM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gateway_process;
mod harness;

mod answers;
mod api_session;
mod approvals;
mod config_errors;
mod cron;
#[cfg(feature = "discord")]
mod discord;
#[cfg(feature = "email")]
mod email;
mod exec_escapes;
mod first_hour;
mod gateway;
mod gateway_approvals;
mod gemini;
mod heartbeat;
mod hooks;
mod images;
mod instructions;
mod local_model;
mod mcp;
mod mcp_conformance;
mod memory;
mod memory_provenance;
mod memory_templates;
mod message_tool;
mod models;
mod nanobot_config;
mod onboard;
mod policy_denials;
mod provider_failures;
mod providers;
mod sandbox;
mod security;
mod sessions;
mod sessions_list;
mod skills;
#[cfg(feature = "slack")]
mod slack;
mod subagents;
mod terminal;
mod tool_loop;
mod usage;
mod voice;
mod wasm_tools;
mod web_api;
mod web_client;
mod web_page;
mod web_tools;
mod webdriver;
