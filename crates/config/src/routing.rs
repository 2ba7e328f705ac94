//! `session` and `bindings`: which agent answers a message, and in which conversation.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The id of the agent `agents.defaults` describes.
pub const DEFAULT_AGENT_ID: &str = "main";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionConfig {
    /// How direct messages share conversations.
    #[serde(default)]
    pub dm_scope: DmScope,
    /// One person's identities on several channels, merged into one peer:
    /// `{"alice": ["telegram:111", "discord:222"]}`.
    #[serde(default)]
    pub identity_links: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DmScope {
    /// Every direct message, from anyone on any channel, continues one conversation.
    Main,
    /// One conversation per person, shared across channels.
    PerPeer,
    /// One conversation per person and channel (as nanobot keys sessions).
    #[default]
    PerChannelPeer,
}

/// Sends the messages that match to an agent of `agents.entries`. The most specific binding
/// wins: peer, then guild or team, then account, then channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Binding {
    /// An id of `agents.entries`, or `main` for the default agent.
    pub agent_id: String,
    #[serde(rename = "match")]
    pub matches: BindingMatch,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingMatch {
    /// A channel name (`telegram`).
    pub channel: String,
    /// A bot account of the channel; `*` or absent for any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    /// One chat: a person (`dm`) or a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerMatch>,
    /// A Discord server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<String>,
    /// A Slack workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PeerMatch {
    pub kind: PeerKind,
    /// The user id (for `dm`) or chat id.
    pub id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PeerKind {
    Dm,
    Group,
    Channel,
}
