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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<EmailConfig>,
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
            self.email.as_ref().map(|e| ("email", e.grants.as_slice())),
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

/// A mailbox the bot reads over IMAP and answers from over SMTP (one account, or several).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmailConfig {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The bot's own address: its answers come from it and people write to it. With it set,
    /// the keys below are the account `default`.
    #[serde(default)]
    pub from_address: String,
    /// The name shown beside `fromAddress` in its answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_name: Option<String>,
    /// The IMAP server mail is read from (`imap.gmail.com`).
    #[serde(default)]
    pub imap_host: String,
    #[serde(default = "default_imap_port")]
    pub imap_port: u16,
    /// `tls` (the connection starts encrypted, port 993), `starttls` (143) or `plain`
    /// (unencrypted, only to a server on this machine).
    #[serde(default)]
    pub imap_security: MailSecurity,
    /// The login; empty means `fromAddress`.
    #[serde(default)]
    pub imap_username: String,
    /// The password or app password; `${EMAIL_PASSWORD}` keeps it out of the file.
    #[serde(default)]
    pub imap_password: String,
    /// The folder read; a folder of the bot's own, or a mailbox used for nothing else.
    #[serde(default = "default_imap_mailbox")]
    pub imap_mailbox: String,
    /// The SMTP server answers are sent through (`smtp.gmail.com`).
    #[serde(default)]
    pub smtp_host: String,
    #[serde(default = "default_smtp_port")]
    pub smtp_port: u16,
    /// `starttls` (587, the default), `tls` (465) or `plain` (only to a server on this
    /// machine).
    #[serde(default = "default_smtp_security")]
    pub smtp_security: MailSecurity,
    /// Empty means `imapUsername`.
    #[serde(default)]
    pub smtp_username: String,
    /// Empty means `imapPassword`.
    #[serde(default)]
    pub smtp_password: String,
    /// A PEM file of a certificate authority trusted besides the system's, for servers with
    /// certificates of their own CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Seconds between looks at the mailbox when the server has no IMAP IDLE (with IDLE, new
    /// mail is read as it arrives).
    #[serde(default = "default_email_poll_interval", alias = "pollIntervalSeconds")]
    pub poll_interval: u64,
    /// Mark the mails the bot took as read (`\Seen`).
    #[serde(default = "default_true")]
    pub mark_seen: bool,
    /// The most characters of one mail's text the model reads; the rest is cut, and it is
    /// told so.
    #[serde(default = "default_max_body_chars")]
    pub max_body_chars: usize,
    /// More mailboxes on the same rules, by account name (the `accountId` of bindings); each
    /// gives its `fromAddress` and password and may set any server key above, and takes the
    /// rest from here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accounts: BTreeMap<String, EmailAccount>,
    /// The addresses answered (case does not matter). When set, only they (and approved
    /// pairings) are answered, whatever `dmPolicy` says.
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// Mail from addresses not in `allowFrom`: `allowlist` (the default: not answered),
    /// `pairing` (answered with a pairing code), `open` or `disabled`.
    #[serde(default = "default_email_dm_policy")]
    pub dm_policy: DmPolicy,
    /// Answer only mail that the receiving server vouches for: its `Authentication-Results`
    /// header (the one `authservId` added) says DKIM or SPF passed for the From domain, or
    /// DMARC did. Mail that fails is logged and never answered: a From line is easy to forge.
    #[serde(default)]
    pub require_auth_results: bool,
    /// The name the receiving server signs its `Authentication-Results` with (`mx.google.com`,
    /// the first word of the header); needed with `requireAuthResults`.
    #[serde(default)]
    pub authserv_id: String,
    /// Capabilities granted outright to runs started by mail, on top of the agent's
    /// `tools.grants` (same syntax).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

/// One more mailbox of `channels.email.accounts`: its own address and password, and any
/// server key that differs from `channels.email`'s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmailAccount {
    #[serde(default = "default_true")]
    pub enabled: bool,
    pub from_address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imap_host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imap_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imap_security: Option<MailSecurity>,
    /// Empty means this account's `fromAddress`.
    #[serde(default)]
    pub imap_username: String,
    /// `${VAR}` keeps it out of the file.
    #[serde(default)]
    pub imap_password: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imap_mailbox: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp_host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp_security: Option<MailSecurity>,
    /// Empty means this account's IMAP login.
    #[serde(default)]
    pub smtp_username: String,
    /// Empty means this account's `imapPassword`.
    #[serde(default)]
    pub smtp_password: String,
}

/// How a connection to a mail server is encrypted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MailSecurity {
    /// TLS from the first byte (IMAP 993, SMTP 465).
    #[default]
    Tls,
    /// A plain connection upgraded with STARTTLS before the login (IMAP 143, SMTP 587).
    Starttls,
    /// No encryption: only to a server on this machine (a local relay, a test server).
    Plain,
}

/// One mail server of an account, its keys resolved.
#[derive(Clone, PartialEq, Eq)]
pub struct MailServer {
    pub host: String,
    pub port: u16,
    pub security: MailSecurity,
    pub username: String,
    pub password: String,
}

// The password must never reach a log through Debug.
impl std::fmt::Debug for MailServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailServer")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("username", &self.username)
            .field("password", &"[redacted]")
            .finish()
    }
}

/// One mailbox of `channels.email`, as the top level and its `accounts` entry give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailAccount {
    /// `default` for the top level, else the name under `accounts`.
    pub name: String,
    /// Where its keys are, for errors (`channels.email`, `channels.email.accounts.work`).
    pub key: String,
    pub from_address: String,
    pub from_name: Option<String>,
    pub mailbox: String,
    pub imap: MailServer,
    pub smtp: MailServer,
}

impl EmailConfig {
    /// The enabled mailboxes: the top level as `default` when it names a `fromAddress` (or
    /// when no accounts are listed, so that a missing address is reported), then each enabled
    /// entry of `accounts` with what it leaves out taken from the top level.
    pub fn mail_accounts(&self) -> Vec<MailAccount> {
        let mut accounts = Vec::new();
        if !self.from_address.is_empty() || self.accounts.is_empty() {
            let imap_username = or_else(&self.imap_username, &self.from_address);
            accounts.push(MailAccount {
                name: "default".to_owned(),
                key: "channels.email".to_owned(),
                from_address: self.from_address.clone(),
                from_name: self.from_name.clone(),
                mailbox: self.imap_mailbox.clone(),
                imap: MailServer {
                    host: self.imap_host.clone(),
                    port: self.imap_port,
                    security: self.imap_security,
                    username: imap_username.clone(),
                    password: self.imap_password.clone(),
                },
                smtp: MailServer {
                    host: self.smtp_host.clone(),
                    port: self.smtp_port,
                    security: self.smtp_security,
                    username: or_else(&self.smtp_username, &imap_username),
                    password: or_else(&self.smtp_password, &self.imap_password),
                },
            });
        }
        for (name, account) in self.accounts.iter().filter(|(_, a)| a.enabled) {
            let imap_username = or_else(&account.imap_username, &account.from_address);
            accounts.push(MailAccount {
                name: name.clone(),
                key: format!("channels.email.accounts.{name}"),
                from_address: account.from_address.clone(),
                from_name: account.from_name.clone().or_else(|| self.from_name.clone()),
                mailbox: account
                    .imap_mailbox
                    .clone()
                    .unwrap_or_else(|| self.imap_mailbox.clone()),
                imap: MailServer {
                    host: account
                        .imap_host
                        .clone()
                        .unwrap_or_else(|| self.imap_host.clone()),
                    port: account.imap_port.unwrap_or(self.imap_port),
                    security: account.imap_security.unwrap_or(self.imap_security),
                    username: imap_username.clone(),
                    password: account.imap_password.clone(),
                },
                smtp: MailServer {
                    host: account
                        .smtp_host
                        .clone()
                        .unwrap_or_else(|| self.smtp_host.clone()),
                    port: account.smtp_port.unwrap_or(self.smtp_port),
                    security: account.smtp_security.unwrap_or(self.smtp_security),
                    username: or_else(&account.smtp_username, &imap_username),
                    password: or_else(&account.smtp_password, &account.imap_password),
                },
            });
        }
        accounts
    }
}

/// `value`, or `fallback` when it is empty.
fn or_else(value: &str, fallback: &str) -> String {
    if value.is_empty() { fallback } else { value }.to_owned()
}

fn default_imap_port() -> u16 {
    993
}
fn default_imap_mailbox() -> String {
    "INBOX".to_owned()
}
fn default_smtp_port() -> u16 {
    587
}
fn default_smtp_security() -> MailSecurity {
    MailSecurity::Starttls
}
fn default_email_poll_interval() -> u64 {
    60
}
fn default_max_body_chars() -> usize {
    20_000
}
fn default_email_dm_policy() -> DmPolicy {
    DmPolicy::Allowlist
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
