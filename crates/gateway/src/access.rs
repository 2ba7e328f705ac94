//! Who may reach the model: `allowFrom`, `dmPolicy`, `groupPolicy`, `groups` and
//! `requireMention`, checked for every inbound message before anything else happens to it.
//!
//! Deny by default: a channel without a config section lets nobody in, and a group is closed
//! unless listed. A message that is not let in never reaches the model, the journal or a
//! session; the gateway logs that it happened and why, never what it said.

use std::collections::BTreeMap;

use nanocrab_config::{ChannelsConfig, DmPolicy, GroupConfig, GroupPolicy};
use nanocrab_schema::{ChatType, InboundMessage, Sender};

use crate::pairing::{PairingError, PairingOutcome, PairingStore};

/// What to do with one inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessDecision {
    Allow,
    /// Not meant for the bot (a group message that does not address it, another bot): dropped
    /// without a word.
    Ignore(&'static str),
    /// Meant for the bot but not allowed: dropped without a word, logged as a refusal.
    Deny(&'static str),
    /// An unknown sender under `dmPolicy: pairing` who gets `reply`, which holds their code.
    Pair {
        reply: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(transparent)]
    Pairing(#[from] PairingError),
}

/// One channel's rules, as its config section gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessRules {
    pub allow_from: Vec<String>,
    pub dm_policy: DmPolicy,
    pub group_policy: GroupPolicy,
    pub groups: BTreeMap<String, GroupConfig>,
    pub require_mention: bool,
}

/// The access rules of every channel, and the pairings the owner approved.
#[derive(Debug, Clone)]
pub struct Access {
    channels: BTreeMap<String, AccessRules>,
    pairing: PairingStore,
}

impl Access {
    pub fn new(channels: BTreeMap<String, AccessRules>, pairing: PairingStore) -> Self {
        Self { channels, pairing }
    }

    /// The rules of the channels this build has adapters for.
    pub fn from_config(channels: &ChannelsConfig, pairing: PairingStore) -> Self {
        let mut rules = BTreeMap::new();
        if let Some(telegram) = &channels.telegram {
            rules.insert(
                "telegram".to_owned(),
                AccessRules {
                    allow_from: telegram.allow_from.clone(),
                    dm_policy: telegram.dm_policy,
                    group_policy: telegram.group_policy,
                    groups: telegram.groups.clone(),
                    require_mention: telegram.require_mention,
                },
            );
        }
        if let Some(slack) = &channels.slack {
            rules.insert(
                "slack".to_owned(),
                AccessRules {
                    allow_from: slack.allow_from.clone(),
                    dm_policy: slack.dm_policy,
                    group_policy: slack.group_policy,
                    groups: slack.groups.clone(),
                    require_mention: slack.require_mention,
                },
            );
        }
        if let Some(discord) = &channels.discord {
            rules.insert(
                "discord".to_owned(),
                AccessRules {
                    allow_from: discord.allow_from.clone(),
                    dm_policy: discord.dm_policy,
                    group_policy: discord.group_policy,
                    groups: discord.guilds.clone(),
                    require_mention: discord.require_mention,
                },
            );
        }
        if let Some(email) = &channels.email {
            rules.insert(
                "email".to_owned(),
                AccessRules {
                    // Addresses are compared without case, as mail servers treat them; the
                    // adapter gives senders' addresses in lowercase.
                    allow_from: email
                        .allow_from
                        .iter()
                        .map(|address| address.trim().to_lowercase())
                        .collect(),
                    dm_policy: email.dm_policy,
                    // Every mail is a direct conversation with its sender.
                    group_policy: GroupPolicy::Disabled,
                    groups: BTreeMap::new(),
                    require_mention: false,
                },
            );
        }
        Self::new(rules, pairing)
    }

    pub fn pairing(&self) -> &PairingStore {
        &self.pairing
    }

    /// Decides whether `message` may reach the model. Under `dmPolicy: pairing` this may
    /// create a pairing request.
    pub fn check(&self, message: &InboundMessage) -> Result<AccessDecision, AccessError> {
        let Some(rules) = self.channels.get(&message.channel) else {
            return Ok(AccessDecision::Deny("channel has no access rules"));
        };
        if message.sender.is_bot {
            return Ok(AccessDecision::Ignore("sent by a bot"));
        }
        match message.chat_type {
            ChatType::Dm => self.check_dm(rules, message),
            ChatType::Group | ChatType::Channel => Ok(check_group(rules, message)),
        }
    }

    fn check_dm(
        &self,
        rules: &AccessRules,
        message: &InboundMessage,
    ) -> Result<AccessDecision, AccessError> {
        let sender = &message.sender;
        if listed(&rules.allow_from, sender) {
            return Ok(AccessDecision::Allow);
        }
        match (rules.dm_policy, rules.allow_from.is_empty()) {
            (DmPolicy::Disabled, _) => {
                return Ok(AccessDecision::Deny("direct messages are disabled"));
            }
            // Anyone may talk: the pairing file need not be read for every message.
            (DmPolicy::Open, true) => return Ok(AccessDecision::Allow),
            (DmPolicy::Open, false) | (DmPolicy::Pairing | DmPolicy::Allowlist, _) => {}
        }
        if self.pairing.is_approved(&message.channel, &sender.id)? {
            return Ok(AccessDecision::Allow);
        }
        if !rules.allow_from.is_empty() {
            return Ok(AccessDecision::Deny("sender not in allowFrom"));
        }
        match rules.dm_policy {
            DmPolicy::Open => Ok(AccessDecision::Allow),
            DmPolicy::Allowlist => Ok(AccessDecision::Deny("sender not allowed")),
            DmPolicy::Disabled => Ok(AccessDecision::Deny("direct messages are disabled")),
            DmPolicy::Pairing => {
                let now = jiff::Timestamp::now().as_second();
                match self.pairing.request(&message.channel, sender, now)? {
                    PairingOutcome::Created(request) => Ok(AccessDecision::Pair {
                        reply: format!(
                            "I don't know you yet, so I can't answer. Your {channel} user id: {id}\n\nPairing code: {code}\n\nAsk my owner to approve it with:\nnanocrab pairing approve {code}\n\nThe code is valid for one hour.",
                            channel = message.channel,
                            id = sender.id,
                            code = request.code,
                        ),
                    }),
                    PairingOutcome::Pending(_) => {
                        Ok(AccessDecision::Deny("pairing request pending"))
                    }
                    PairingOutcome::Full => Ok(AccessDecision::Deny(
                        "too many pairing requests pending on this channel",
                    )),
                }
            }
        }
    }
}

fn check_group(rules: &AccessRules, message: &InboundMessage) -> AccessDecision {
    // A chat listed on its own, else its Discord server, else `*`.
    let group = rules
        .groups
        .get(&message.chat_id)
        .or_else(|| {
            message
                .guild_id
                .as_ref()
                .and_then(|guild| rules.groups.get(guild))
        })
        .or_else(|| rules.groups.get("*"));
    match rules.group_policy {
        GroupPolicy::Disabled => return AccessDecision::Deny("group messages are disabled"),
        GroupPolicy::Allowlist if group.is_none() => {
            return AccessDecision::Deny("group not in groups");
        }
        GroupPolicy::Allowlist | GroupPolicy::Open => {}
    }
    if let Some(group) = group
        && !group.allow_from.is_empty()
        && !listed(&group.allow_from, &message.sender)
    {
        return AccessDecision::Deny("sender not in the group's allowFrom");
    }
    let require_mention = group
        .and_then(|g| g.require_mention)
        .unwrap_or(rules.require_mention);
    let addressed = message.mentions_bot || message.reply_to.as_ref().is_some_and(|r| r.to_bot);
    if require_mention && !addressed {
        return AccessDecision::Ignore("does not mention the bot");
    }
    AccessDecision::Allow
}

/// Whether `sender` is in `list`: by id, or by `@username` (case-insensitive, as Telegram
/// treats usernames). A bare name that is not an id counts as a username, as nanobot reads it.
fn listed(list: &[String], sender: &Sender) -> bool {
    list.iter().any(|entry| {
        let entry = entry.trim();
        entry == sender.id
            || sender.username.as_deref().is_some_and(|name| {
                entry
                    .strip_prefix('@')
                    .unwrap_or(entry)
                    .eq_ignore_ascii_case(name)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nanocrab_schema::ReplyTo;
    use pretty_assertions::assert_eq;

    fn rules() -> AccessRules {
        AccessRules {
            allow_from: Vec::new(),
            dm_policy: DmPolicy::Pairing,
            group_policy: GroupPolicy::Allowlist,
            groups: BTreeMap::new(),
            require_mention: true,
        }
    }

    fn access(rules: AccessRules, dir: &std::path::Path) -> Access {
        Access::new(
            BTreeMap::from([("telegram".to_owned(), rules)]),
            PairingStore::new(dir),
        )
    }

    fn dm(sender_id: &str) -> InboundMessage {
        let message = nanocrab_testkit::inbound_dm(sender_id, "1", "hello");
        InboundMessage {
            sender: Sender {
                username: Some("Alice_W".to_owned()),
                display_name: Some("Alice".to_owned()),
                ..message.sender.clone()
            },
            ..message
        }
    }

    fn group(chat_id: &str, mentions_bot: bool) -> InboundMessage {
        InboundMessage {
            chat_id: chat_id.to_owned(),
            chat_type: ChatType::Group,
            mentions_bot,
            ..dm("7")
        }
    }

    #[test]
    fn allow_from_lets_in_by_id_or_username_and_keeps_everyone_else_out() {
        let dir = tempfile::tempdir().unwrap();
        let by_id = access(
            AccessRules {
                allow_from: vec!["7".to_owned()],
                ..rules()
            },
            dir.path(),
        );
        assert_eq!(by_id.check(&dm("7")).unwrap(), AccessDecision::Allow);
        assert_eq!(
            by_id.check(&dm("8")).unwrap(),
            AccessDecision::Deny("sender not in allowFrom")
        );
        let by_name = access(
            AccessRules {
                allow_from: vec!["@alice_w".to_owned()],
                ..rules()
            },
            dir.path(),
        );
        assert_eq!(by_name.check(&dm("8")).unwrap(), AccessDecision::Allow);
        // allowFrom set: no pairing codes for strangers.
        assert_eq!(
            PairingStore::new(dir.path()).pending(0).unwrap(),
            Vec::new()
        );
    }

    #[test]
    fn dm_policies_decide_for_senders_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        let decide = |dm_policy| {
            access(
                AccessRules {
                    dm_policy,
                    ..rules()
                },
                dir.path(),
            )
            .check(&dm("9"))
            .unwrap()
        };
        assert_eq!(decide(DmPolicy::Open), AccessDecision::Allow);
        assert_eq!(
            decide(DmPolicy::Allowlist),
            AccessDecision::Deny("sender not allowed")
        );
        assert_eq!(
            decide(DmPolicy::Disabled),
            AccessDecision::Deny("direct messages are disabled")
        );
    }

    #[test]
    fn pairing_answers_a_stranger_once_and_lets_them_in_after_approval() {
        let dir = tempfile::tempdir().unwrap();
        let access = access(rules(), dir.path());
        let AccessDecision::Pair { reply } = access.check(&dm("9")).unwrap() else {
            panic!("expected a pairing reply");
        };
        let code = access
            .pairing()
            .pending(jiff::Timestamp::now().as_second())
            .unwrap()[0]
            .code
            .clone();
        assert!(
            reply.contains(&format!("nanocrab pairing approve {code}")),
            "{reply}"
        );
        assert!(reply.contains("user id: 9"), "{reply}");
        assert_eq!(
            access.check(&dm("9")).unwrap(),
            AccessDecision::Deny("pairing request pending")
        );
        access
            .pairing()
            .approve(&code, jiff::Timestamp::now().as_second())
            .unwrap();
        assert_eq!(access.check(&dm("9")).unwrap(), AccessDecision::Allow);
    }

    #[test]
    fn groups_need_listing_and_a_mention_by_default() {
        let dir = tempfile::tempdir().unwrap();
        let closed = access(rules(), dir.path());
        assert_eq!(
            closed.check(&group("-100", true)).unwrap(),
            AccessDecision::Deny("group not in groups")
        );
        let listed = access(
            AccessRules {
                groups: BTreeMap::from([("-100".to_owned(), GroupConfig::default())]),
                ..rules()
            },
            dir.path(),
        );
        assert_eq!(
            listed.check(&group("-100", false)).unwrap(),
            AccessDecision::Ignore("does not mention the bot")
        );
        assert_eq!(
            listed.check(&group("-100", true)).unwrap(),
            AccessDecision::Allow
        );
        let reply_to_bot = InboundMessage {
            reply_to: Some(ReplyTo {
                message_id: "5".to_owned(),
                sender_id: None,
                to_bot: true,
                text: None,
                quoted: false,
            }),
            ..group("-100", false)
        };
        assert_eq!(listed.check(&reply_to_bot).unwrap(), AccessDecision::Allow);
        assert_eq!(
            listed.check(&group("-200", true)).unwrap(),
            AccessDecision::Deny("group not in groups")
        );
    }

    #[test]
    fn a_listed_discord_server_opens_its_channels_and_a_listed_channel_overrides_it() {
        let dir = tempfile::tempdir().unwrap();
        let listed = access(
            AccessRules {
                groups: BTreeMap::from([
                    ("81384788765712384".to_owned(), GroupConfig::default()),
                    (
                        "290926798999357250".to_owned(),
                        GroupConfig {
                            require_mention: Some(false),
                            allow_from: Vec::new(),
                        },
                    ),
                ]),
                ..rules()
            },
            dir.path(),
        );
        let in_guild = |chat: &str, guild: &str| InboundMessage {
            guild_id: Some(guild.to_owned()),
            ..group(chat, false)
        };
        assert_eq!(
            listed.check(&in_guild("1", "81384788765712384")).unwrap(),
            AccessDecision::Ignore("does not mention the bot")
        );
        assert_eq!(
            listed
                .check(&in_guild("290926798999357250", "81384788765712384"))
                .unwrap(),
            AccessDecision::Allow
        );
        assert_eq!(
            listed.check(&in_guild("1", "2")).unwrap(),
            AccessDecision::Deny("group not in groups")
        );
    }

    #[test]
    fn group_settings_override_the_channel_and_open_groups_take_any_chat() {
        let dir = tempfile::tempdir().unwrap();
        let open = access(
            AccessRules {
                group_policy: GroupPolicy::Open,
                groups: BTreeMap::from([
                    (
                        "-100".to_owned(),
                        GroupConfig {
                            require_mention: Some(false),
                            allow_from: vec!["8".to_owned()],
                        },
                    ),
                    (
                        "*".to_owned(),
                        GroupConfig {
                            require_mention: Some(false),
                            allow_from: Vec::new(),
                        },
                    ),
                ]),
                ..rules()
            },
            dir.path(),
        );
        assert_eq!(
            open.check(&group("-300", false)).unwrap(),
            AccessDecision::Allow
        );
        assert_eq!(
            open.check(&group("-100", false)).unwrap(),
            AccessDecision::Deny("sender not in the group's allowFrom")
        );
        let disabled = access(
            AccessRules {
                group_policy: GroupPolicy::Disabled,
                ..rules()
            },
            dir.path(),
        );
        assert_eq!(
            disabled.check(&group("-100", true)).unwrap(),
            AccessDecision::Deny("group messages are disabled")
        );
    }

    #[test]
    fn email_answers_the_listed_addresses_whatever_their_case_and_nobody_else_by_default() {
        let dir = tempfile::tempdir().unwrap();
        let config: ChannelsConfig = serde_json::from_value(serde_json::json!({
            "email": {"fromAddress": "bot@example.test", "allowFrom": [" Alice@Example.com "]},
        }))
        .unwrap();
        let access = Access::from_config(&config, PairingStore::new(dir.path()));
        let mail = |from: &str| {
            let mut message = nanocrab_testkit::inbound_dm(from, "m1@example.com", "hi");
            message.channel = "email".to_owned();
            message
        };
        assert_eq!(
            access.check(&mail("alice@example.com")).unwrap(),
            AccessDecision::Allow
        );
        assert_eq!(
            access.check(&mail("mallory@example.com")).unwrap(),
            AccessDecision::Deny("sender not in allowFrom")
        );
        let nobody: ChannelsConfig = serde_json::from_value(serde_json::json!({
            "email": {"fromAddress": "bot@example.test"},
        }))
        .unwrap();
        let closed = Access::from_config(&nobody, PairingStore::new(dir.path()));
        assert_eq!(
            closed.check(&mail("alice@example.com")).unwrap(),
            AccessDecision::Deny("sender not allowed")
        );
    }

    #[test]
    fn bots_and_unconfigured_channels_never_get_in() {
        let dir = tempfile::tempdir().unwrap();
        let open = access(
            AccessRules {
                dm_policy: DmPolicy::Open,
                ..rules()
            },
            dir.path(),
        );
        let mut bot = dm("9");
        bot.sender.is_bot = true;
        assert_eq!(
            open.check(&bot).unwrap(),
            AccessDecision::Ignore("sent by a bot")
        );
        let mut discord = dm("9");
        discord.channel = "discord".to_owned();
        assert_eq!(
            open.check(&discord).unwrap(),
            AccessDecision::Deny("channel has no access rules")
        );
    }
}
