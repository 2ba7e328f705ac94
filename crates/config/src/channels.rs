//! `channels.*`: the chat platforms the gateway connects, and who may talk through them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One section per platform. Platforms this build does not know (a nanobot file's
/// `feishu`, `matrix`, ...) are kept as they are and reported by the gateway, so a copied
/// nanobot config still loads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelsConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telegram: Option<TelegramConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discord: Option<DiscordConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackConfig>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl ChannelsConfig {
    /// The `grants` of each configured channel, by channel name.
    pub fn grants(&self) -> impl Iterator<Item = (&'static str, &[String])> {
        [
            self.telegram
                .as_ref()
                .map(|t| ("telegram", t.grants.as_slice())),
            self.discord
                .as_ref()
                .map(|d| ("discord", d.grants.as_slice())),
            self.slack.as_ref().map(|s| ("slack", s.grants.as_slice())),
        ]
        .into_iter()
        .flatten()
    }
}

/// A Telegram bot, over the Bot API with long polling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TelegramConfig {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The token BotFather gave; `${TELEGRAM_BOT_TOKEN}` keeps it out of the file. Falls back
    /// to the `TELEGRAM_BOT_TOKEN` environment variable when empty.
    #[serde(default, alias = "botToken")]
    pub token: String,
    /// The Bot API's address; change it for a local Bot API server or a test double.
    #[serde(default = "default_telegram_api_base")]
    pub api_base: String,
    /// An HTTP(S) proxy for reaching the Bot API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// Senders always allowed, in DMs and in allowed groups: user ids, or `@username`.
    /// When set, only they (and approved pairings) may talk in DMs, whatever `dmPolicy` says.
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// Direct messages from senders not in `allowFrom`.
    #[serde(default)]
    pub dm_policy: DmPolicy,
    /// Group chats: `allowlist` (only those listed in `groups`), `open` or `disabled`.
    #[serde(default)]
    pub group_policy: GroupPolicy,
    /// Groups by chat id; `*` applies to every group not listed.
    #[serde(default)]
    pub groups: BTreeMap<String, GroupConfig>,
    /// In groups, only messages that @mention the bot or reply to it reach the model.
    #[serde(default = "default_true")]
    pub require_mention: bool,
    /// Seconds one `getUpdates` long poll waits for news before returning empty.
    #[serde(default = "default_poll_timeout")]
    pub poll_timeout: u32,
    /// What an edited message does: `ignore` (default) or `respond` (answered as a new
    /// message marked as an edit).
    #[serde(default)]
    pub edited_messages: EditedMessages,
    /// Capabilities granted outright to runs started from Telegram, on top of the agent's
    /// `tools.grants` (same syntax).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            token: String::new(),
            api_base: default_telegram_api_base(),
            proxy: None,
            allow_from: Vec::new(),
            dm_policy: DmPolicy::default(),
            group_policy: GroupPolicy::default(),
            groups: BTreeMap::new(),
            require_mention: true,
            poll_timeout: default_poll_timeout(),
            edited_messages: EditedMessages::default(),
            grants: Vec::new(),
        }
    }
}

/// A Discord bot (or several), over the gateway WebSocket in and REST out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscordConfig {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The bot token of the application's Bot page (the `default` account);
    /// `${DISCORD_BOT_TOKEN}` keeps it out of the file. Falls back to the `DISCORD_BOT_TOKEN`
    /// environment variable when empty and no `accounts` are given.
    #[serde(default, alias = "botToken")]
    pub token: String,
    /// More bots on the same rules, by account name (the `accountId` of bindings).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accounts: BTreeMap<String, DiscordAccount>,
    /// The REST API's address (`https://discord.com`); change it for a proxy or a test double.
    #[serde(default = "default_discord_api_base")]
    pub api_base: String,
    /// The gateway WebSocket's address (`wss://gateway.discord.gg`), for a proxy or a test
    /// double. A resumed session goes to the address Discord gave when it started.
    #[serde(default = "default_discord_gateway_url")]
    pub gateway_url: String,
    /// Senders always allowed, in DMs and in allowed guilds: user ids, or usernames. When set,
    /// only they (and approved pairings) may talk in DMs, whatever `dmPolicy` says.
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// Direct messages from senders not in `allowFrom`.
    #[serde(default)]
    pub dm_policy: DmPolicy,
    /// Guild channels: `allowlist` (only the guilds or channels listed in `guilds`), `open`
    /// or `disabled`.
    #[serde(default)]
    pub group_policy: GroupPolicy,
    /// Guilds (servers) by guild id, or single channels by channel id; `*` applies to every
    /// guild not listed.
    #[serde(default)]
    pub guilds: BTreeMap<String, GroupConfig>,
    /// In guild channels, only messages that @mention the bot or reply to it reach the model.
    #[serde(default = "default_true")]
    pub require_mention: bool,
    /// What an edited message does: `ignore` (default) or `respond`.
    #[serde(default)]
    pub edited_messages: EditedMessages,
    /// Capabilities granted outright to runs started from Discord, on top of the agent's
    /// `tools.grants` (same syntax).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            token: String::new(),
            accounts: BTreeMap::new(),
            api_base: default_discord_api_base(),
            gateway_url: default_discord_gateway_url(),
            allow_from: Vec::new(),
            dm_policy: DmPolicy::default(),
            group_policy: GroupPolicy::default(),
            guilds: BTreeMap::new(),
            require_mention: true,
            edited_messages: EditedMessages::default(),
            grants: Vec::new(),
        }
    }
}

/// One more Discord bot of `channels.discord.accounts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscordAccount {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// This bot's token; `${ENV}` placeholders keep it out of the file.
    #[serde(alias = "botToken")]
    pub token: String,
}

fn default_discord_api_base() -> String {
    "https://discord.com".to_owned()
}
fn default_discord_gateway_url() -> String {
    "wss://gateway.discord.gg".to_owned()
}

/// A Slack app, over Socket Mode (no public address needed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackConfig {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The bot token (`xoxb-…`, under OAuth & Permissions); `${SLACK_BOT_TOKEN}` keeps it out
    /// of the file. Falls back to the `SLACK_BOT_TOKEN` environment variable when empty and
    /// no `accounts` are given.
    #[serde(default)]
    pub bot_token: String,
    /// The app-level token (`xapp-…`, scope `connections:write`) that opens the Socket Mode
    /// connection; falls back to `SLACK_APP_TOKEN` like `botToken`.
    #[serde(default)]
    pub app_token: String,
    /// The Web API's address; change it for a test double.
    #[serde(default = "default_slack_api_base")]
    pub api_base: String,
    /// More Slack apps (one per workspace, say), by account name, each with its own tokens;
    /// the tokens above are the account `default`. The rules below apply to all of them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accounts: BTreeMap<String, SlackAccount>,
    /// Senders always allowed, in DMs and in allowed channels: Slack member ids (`U…`).
    /// When set, only they (and approved pairings) may talk in DMs, whatever `dmPolicy` says.
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// Direct messages from senders not in `allowFrom`.
    #[serde(default)]
    pub dm_policy: DmPolicy,
    /// Channels: `allowlist` (only those listed in `groups`), `open` or `disabled`.
    #[serde(default)]
    pub group_policy: GroupPolicy,
    /// Channels by id (`C…`); `*` applies to every channel not listed.
    #[serde(default)]
    pub groups: BTreeMap<String, GroupConfig>,
    /// In channels, only messages that @mention the bot reach the model.
    #[serde(default = "default_true")]
    pub require_mention: bool,
    /// Capabilities granted outright to runs started from Slack, on top of the agent's
    /// `tools.grants` (same syntax).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

impl Default for SlackConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            bot_token: String::new(),
            app_token: String::new(),
            api_base: default_slack_api_base(),
            accounts: BTreeMap::new(),
            allow_from: Vec::new(),
            dm_policy: DmPolicy::default(),
            group_policy: GroupPolicy::default(),
            groups: BTreeMap::new(),
            require_mention: true,
            grants: Vec::new(),
        }
    }
}

/// One more Slack app of `channels.slack.accounts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackAccount {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// `xoxb-…`; `${VAR}` keeps it out of the file.
    pub bot_token: String,
    /// `xapp-…` with `connections:write`.
    pub app_token: String,
}

fn default_slack_api_base() -> String {
    "https://slack.com/api".to_owned()
}

fn default_true() -> bool {
    true
}
fn default_telegram_api_base() -> String {
    "https://api.telegram.org".to_owned()
}
fn default_poll_timeout() -> u32 {
    30
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum EditedMessages {
    /// The first version was already answered; an edit changes nothing.
    #[default]
    Ignore,
    /// The edited text is answered as a new message that says it is an edit.
    Respond,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DmPolicy {
    /// An unknown sender gets a one-time code; `nanocrab pairing approve CODE` lets them in.
    #[default]
    Pairing,
    /// Only `allowFrom` and approved pairings.
    Allowlist,
    /// Anyone may talk to the bot.
    Open,
    /// No direct messages at all.
    Disabled,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum GroupPolicy {
    /// Only the groups listed in `groups`.
    #[default]
    Allowlist,
    /// Any group the bot is added to.
    Open,
    /// No group messages at all.
    Disabled,
}

/// Settings of one group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupConfig {
    /// Overrides the channel's `requireMention` in this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_mention: Option<bool>,
    /// When set, only these senders (ids or `@username`) are answered in this group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_from: Vec<String>,
}
