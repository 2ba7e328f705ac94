//! Which agent answers an inbound message, and in which conversation (session).
//!
//! **Agent.** `bindings` send messages to agents. A binding matches when every condition it
//! sets holds, and the most specific matching binding wins, in this order:
//!
//! 1. peer: `match.peer` names the chat — for `dm` the sender's id, for `group` and `channel`
//!    the chat's id;
//! 2. guild (Discord server), then team (Slack workspace, `T…`), as the adapters report
//!    them (Telegram has neither): `match.guildId` holds for every message of that
//!    server, `match.teamId` for every message of that workspace;
//! 3. account: `match.accountId` names the bot account;
//! 4. channel: `match.accountId` absent or `*`.
//!
//! Because a binding must meet all of its conditions, one with a peer never applies to the
//! rest of its channel. Equally specific matches go to the first in the file. Without a match
//! the default agent (`main`) answers.
//!
//! **Session.** `agent:<agentId>:<channel>:<peerKind>:<peerId>`, with direct messages keyed by
//! `session.dmScope`:
//!
//! - `main`: `agent:<id>:main`, one conversation for all direct messages;
//! - `per-peer`: `agent:<id>:dm:<peer>`; `<peer>` is the person's name from
//!   `session.identityLinks`, or `<channel>:<senderId>` when they are not linked (a bare id is
//!   unique only on its own platform);
//! - `per-channel-peer` (default): `agent:<id>:<channel>:dm:<peer>`, `<peer>` the linked name
//!   or the sender's id.
//!
//! On email, where every mail belongs to a thread of mails, each thread is a conversation of
//! its own: a direct message's key adds `:topic:<thread>` (the thread's first message id), as
//! a mail client shows threads apart, except under `main`, which asks for one conversation.
//!
//! Groups are `agent:<id>:<channel>:group:<chatId>`, a forum topic, a Discord thread or a
//! Slack thread adds `:topic:<threadId>` (each thread is its own conversation); the guild
//! or team is left out, since the channel ids of both are unique across servers and
//! workspaces and a key has room for four parts;
//! broadcast channels are `agent:<id>:<channel>:channel:<chatId>`.
//!
//! Every part comes from a platform or the config and may hold anything, while a key is also a
//! file name; see [`key_part`] for how parts are made safe without two ids meeting on one key.

use std::collections::BTreeMap;

use nanocrab_config::{Binding, BindingMatch, DEFAULT_AGENT_ID, DmScope, PeerKind, SessionConfig};
use nanocrab_schema::{ChatType, InboundMessage, SessionKey, SessionKeyError};
use sha2::{Digest as _, Sha256};

/// Channels whose direct messages come in threads that are conversations of their own.
const THREADED_DIRECT_MESSAGES: [&str; 1] = ["email"];

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub agent_id: String,
    pub session: SessionKey,
}

/// Routes messages by the config's `bindings` and `session`.
#[derive(Debug, Clone)]
pub struct Router {
    bindings: Vec<Binding>,
    dm_scope: DmScope,
    /// `channel:id` → the person's name, inverted from `session.identityLinks`.
    identities: BTreeMap<String, String>,
}

/// How specific a binding is; a more specific level wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Channel,
    Account,
    Team,
    Guild,
    Peer,
}

impl Router {
    pub fn new(bindings: &[Binding], session: &SessionConfig) -> Self {
        let mut identities = BTreeMap::new();
        for (name, ids) in &session.identity_links {
            for id in ids {
                // The config is read in name order, so the same name wins on every start.
                if let Some(first) = identities.get(id) {
                    tracing::warn!(
                        "session.identityLinks lists {id} under both {first} and {name}; {first} is used"
                    );
                    continue;
                }
                identities.insert(id.clone(), name.clone());
            }
        }
        Self {
            bindings: bindings.to_vec(),
            dm_scope: session.dm_scope,
            identities,
        }
    }

    pub fn route(&self, message: &InboundMessage) -> Result<Route, SessionKeyError> {
        let agent_id = self.agent_for(message);
        let session = self.session_key(agent_id, message)?;
        Ok(Route {
            agent_id: agent_id.to_owned(),
            session,
        })
    }

    fn agent_for(&self, message: &InboundMessage) -> &str {
        let mut best: Option<(Level, &Binding)> = None;
        for binding in &self.bindings {
            if !matches(&binding.matches, message) {
                continue;
            }
            let level = level(&binding.matches);
            // Strictly greater: among equals the first binding stays.
            if best.is_none_or(|(best_level, _)| level > best_level) {
                best = Some((level, binding));
            }
        }
        best.map_or(DEFAULT_AGENT_ID, |(_, binding)| binding.agent_id.as_str())
    }

    fn session_key(
        &self,
        agent_id: &str,
        message: &InboundMessage,
    ) -> Result<SessionKey, SessionKeyError> {
        let agent = key_part(agent_id);
        let channel = key_part(&message.channel);
        let key = match message.chat_type {
            ChatType::Dm => {
                let linked = self
                    .identities
                    .get(&format!("{}:{}", message.channel, message.sender.id));
                let thread = message
                    .thread_id
                    .as_ref()
                    .filter(|_| THREADED_DIRECT_MESSAGES.contains(&message.channel.as_str()))
                    .map(|thread| format!(":topic:{}", key_part(thread)))
                    .unwrap_or_default();
                let peer = match (self.dm_scope, linked) {
                    (DmScope::Main, _) => format!("agent:{agent}:main"),
                    (DmScope::PerPeer, Some(name)) => {
                        format!("agent:{agent}:dm:{}", key_part(name))
                    }
                    (DmScope::PerPeer, None) => format!(
                        "agent:{agent}:dm:{channel}:{}",
                        key_part(&message.sender.id)
                    ),
                    (DmScope::PerChannelPeer, linked) => format!(
                        "agent:{agent}:{channel}:dm:{}",
                        key_part(linked.unwrap_or(&message.sender.id))
                    ),
                };
                match self.dm_scope {
                    DmScope::Main => peer,
                    DmScope::PerPeer | DmScope::PerChannelPeer => peer + &thread,
                }
            }
            ChatType::Group | ChatType::Channel => {
                let mut key = format!(
                    "agent:{agent}:{channel}:{}:{}",
                    message.chat_type.as_str(),
                    key_part(&message.chat_id)
                );
                if let Some(thread) = &message.thread_id {
                    key.push_str(":topic:");
                    key.push_str(&key_part(thread));
                }
                key
            }
        };
        SessionKey::parse(&key)
    }
}

/// How specific `conditions` are: the most specific condition they set.
fn level(conditions: &BindingMatch) -> Level {
    if conditions.peer.is_some() {
        Level::Peer
    } else if conditions.guild_id.is_some() {
        Level::Guild
    } else if conditions.team_id.is_some() {
        Level::Team
    } else if any_account(conditions) {
        Level::Channel
    } else {
        Level::Account
    }
}

fn any_account(conditions: &BindingMatch) -> bool {
    conditions
        .account_id
        .as_deref()
        .is_none_or(|account| account.trim() == "*")
}

/// Whether every condition of `conditions` holds for `message`.
fn matches(conditions: &BindingMatch, message: &InboundMessage) -> bool {
    if conditions.channel != message.channel {
        return false;
    }
    if !any_account(conditions) && conditions.account_id.as_deref() != Some(&message.account) {
        return false;
    }
    if let Some(guild) = &conditions.guild_id
        && message.guild_id.as_ref() != Some(guild)
    {
        return false;
    }
    if let Some(team) = &conditions.team_id
        && message.team_id.as_deref() != Some(team.as_str())
    {
        return false;
    }
    let Some(peer) = &conditions.peer else {
        return true;
    };
    let (kind, id) = match message.chat_type {
        ChatType::Dm => (PeerKind::Dm, &message.sender.id),
        ChatType::Group => (PeerKind::Group, &message.chat_id),
        ChatType::Channel => (PeerKind::Channel, &message.chat_id),
    };
    peer.kind == kind && peer.id == *id
}

/// Parts of at most this many characters; with four of them and the fixed words a key stays
/// within [`SessionKey`]'s 200 characters.
const MAX_PART: usize = 42;

/// `part` as a piece of a session key. Ids made of letters, digits and `_ - . @` (Telegram's
/// numeric ids, usernames, email addresses) stay as they are; anything else becomes `+` and the
/// hex of its UTF-8 bytes, or `++` and the first 40 hex digits of its SHA-256 when that would
/// be too long. A plain part never holds `+` and hex never holds a second `+`, so the three
/// forms cannot meet, and `:` never survives, so a part cannot pose as two.
pub(crate) fn key_part(part: &str) -> String {
    let plain = part
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'));
    if plain && !part.is_empty() && part.len() <= MAX_PART {
        return part.to_owned();
    }
    // `+` and two hex digits a byte.
    if 2 * part.len() < MAX_PART {
        return format!("+{}", hex(part.as_bytes()));
    }
    let digest = hex(&Sha256::digest(part.as_bytes()));
    format!("++{}", &digest[..MAX_PART - 2])
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use nanocrab_config::PeerMatch;
    use pretty_assertions::assert_eq;

    fn message(chat_type: ChatType, chat_id: &str, sender: &str) -> InboundMessage {
        InboundMessage {
            chat_id: chat_id.to_owned(),
            chat_type,
            ..nanocrab_testkit::inbound_dm(sender, "1", "hi")
        }
    }

    fn dm(sender: &str) -> InboundMessage {
        message(ChatType::Dm, sender, sender)
    }

    fn route(agent_id: &str, key: &str) -> Route {
        Route {
            agent_id: agent_id.to_owned(),
            session: SessionKey::parse(key).unwrap(),
        }
    }

    fn binding(agent_id: &str, matches: BindingMatch) -> Binding {
        Binding {
            agent_id: agent_id.to_owned(),
            matches,
        }
    }

    fn on_channel(channel: &str) -> BindingMatch {
        BindingMatch {
            channel: channel.to_owned(),
            ..BindingMatch::default()
        }
    }

    fn peer(kind: PeerKind, id: &str) -> BindingMatch {
        BindingMatch {
            peer: Some(PeerMatch {
                kind,
                id: id.to_owned(),
            }),
            ..on_channel("telegram")
        }
    }

    fn account(id: &str) -> BindingMatch {
        BindingMatch {
            account_id: Some(id.to_owned()),
            ..on_channel("telegram")
        }
    }

    fn scoped(dm_scope: DmScope, links: &[(&str, &[&str])]) -> Router {
        Router::new(
            &[],
            &SessionConfig {
                dm_scope,
                identity_links: links
                    .iter()
                    .map(|(name, ids)| {
                        (
                            (*name).to_owned(),
                            ids.iter().map(|id| (*id).to_owned()).collect(),
                        )
                    })
                    .collect(),
            },
        )
    }

    #[test]
    fn without_bindings_the_default_agent_answers_per_channel_and_peer() {
        let router = Router::new(&[], &SessionConfig::default());
        assert_eq!(
            router.route(&dm("42")).unwrap(),
            route("main", "agent:main:telegram:dm:42")
        );
    }

    #[test]
    fn each_thread_of_mails_is_a_conversation_of_its_own() {
        let mail = |thread: &str| InboundMessage {
            channel: "email".to_owned(),
            thread_id: Some(thread.to_owned()),
            ..dm("alice@example.com")
        };
        let router = Router::new(&[], &SessionConfig::default());
        assert_eq!(
            router.route(&mail("plan-1@example.com")).unwrap(),
            route(
                "main",
                "agent:main:email:dm:alice@example.com:topic:plan-1@example.com"
            )
        );
        // A message id with characters a key cannot hold is made safe like any part.
        let gmail = router.route(&mail("CAF=xyz+1@mail.gmail.com")).unwrap();
        let digest = hex(&Sha256::digest(b"CAF=xyz+1@mail.gmail.com"));
        assert_eq!(
            gmail.session.as_str(),
            format!(
                "agent:main:email:dm:alice@example.com:topic:++{}",
                &digest[..40]
            )
        );
        // One conversation for all direct messages stays one.
        assert_eq!(
            scoped(DmScope::Main, &[])
                .route(&mail("plan-1@example.com"))
                .unwrap(),
            route("main", "agent:main:main")
        );
        // Threads of other channels' direct messages are not conversations of their own.
        let slack = InboundMessage {
            channel: "slack".to_owned(),
            thread_id: Some("1610241741.000200".to_owned()),
            ..dm("U1")
        };
        assert_eq!(
            router.route(&slack).unwrap(),
            route("main", "agent:main:slack:dm:U1")
        );
    }

    #[test]
    fn dm_scope_main_shares_one_conversation() {
        let router = scoped(DmScope::Main, &[]);
        assert_eq!(
            router.route(&dm("42")).unwrap(),
            route("main", "agent:main:main")
        );
        let mut discord = dm("7");
        discord.channel = "discord".to_owned();
        assert_eq!(
            router.route(&discord).unwrap(),
            route("main", "agent:main:main")
        );
    }

    #[test]
    fn dm_scope_per_peer_merges_linked_identities_across_channels() {
        let router = scoped(
            DmScope::PerPeer,
            &[("alice", &["telegram:111", "discord:222"])],
        );
        let mut discord = dm("222");
        discord.channel = "discord".to_owned();
        assert_eq!(
            router.route(&dm("111")).unwrap(),
            route("main", "agent:main:dm:alice")
        );
        assert_eq!(
            router.route(&discord).unwrap(),
            route("main", "agent:main:dm:alice")
        );
    }

    #[test]
    fn dm_scope_per_peer_keeps_unlinked_ids_apart_by_channel() {
        let router = scoped(DmScope::PerPeer, &[]);
        let mut discord = dm("42");
        discord.channel = "discord".to_owned();
        assert_eq!(
            router.route(&dm("42")).unwrap(),
            route("main", "agent:main:dm:telegram:42")
        );
        assert_eq!(
            router.route(&discord).unwrap(),
            route("main", "agent:main:dm:discord:42")
        );
    }

    #[test]
    fn dm_scope_per_channel_peer_uses_the_linked_name_on_its_channel() {
        let router = scoped(
            DmScope::PerChannelPeer,
            &[("alice", &["telegram:111", "telegram:112"])],
        );
        assert_eq!(
            router.route(&dm("111")).unwrap(),
            route("main", "agent:main:telegram:dm:alice")
        );
        assert_eq!(
            router.route(&dm("112")).unwrap(),
            route("main", "agent:main:telegram:dm:alice")
        );
        assert_eq!(
            router.route(&dm("113")).unwrap(),
            route("main", "agent:main:telegram:dm:113")
        );
    }

    #[test]
    fn an_identity_under_two_names_goes_to_the_first_name() {
        let router = scoped(
            DmScope::PerPeer,
            &[("bob", &["telegram:111"]), ("alice", &["telegram:111"])],
        );
        assert_eq!(
            router.route(&dm("111")).unwrap(),
            route("main", "agent:main:dm:alice")
        );
    }

    #[test]
    fn groups_topics_and_broadcast_channels_are_keyed_by_chat() {
        let router = scoped(DmScope::Main, &[]);
        let group = message(ChatType::Group, "-100123", "42");
        assert_eq!(
            router.route(&group).unwrap(),
            route("main", "agent:main:telegram:group:-100123")
        );
        let topic = InboundMessage {
            thread_id: Some("7".to_owned()),
            ..group
        };
        assert_eq!(
            router.route(&topic).unwrap(),
            route("main", "agent:main:telegram:group:-100123:topic:7")
        );
        let channel = message(ChatType::Channel, "-100999", "-100999");
        assert_eq!(
            router.route(&channel).unwrap(),
            route("main", "agent:main:telegram:channel:-100999")
        );
    }

    #[test]
    fn unsafe_ids_are_encoded_and_never_meet() {
        let router = Router::new(&[], &SessionConfig::default());
        let keys: Vec<String> = ["a:b", "a/b", "+61", "", "ü", "a b", &"x".repeat(300)]
            .iter()
            .map(|id| router.route(&dm(id)).unwrap().session.to_string())
            .collect();
        assert_eq!(
            keys,
            vec![
                "agent:main:telegram:dm:+613a62".to_owned(),
                "agent:main:telegram:dm:+612f62".to_owned(),
                "agent:main:telegram:dm:+2b3631".to_owned(),
                "agent:main:telegram:dm:+".to_owned(),
                "agent:main:telegram:dm:+c3bc".to_owned(),
                "agent:main:telegram:dm:+612062".to_owned(),
                format!(
                    "agent:main:telegram:dm:++{}",
                    &hex(&Sha256::digest("x".repeat(300)))[..40]
                ),
            ]
        );
        // A plain id that looks like an encoded one stays plain and distinct.
        assert_eq!(
            router.route(&dm("613a62")).unwrap().session.as_str(),
            "agent:main:telegram:dm:613a62"
        );
    }

    #[test]
    fn the_longest_parts_still_make_a_valid_key() {
        let long = "y".repeat(500);
        let router = Router::new(
            &[binding(&long, on_channel(&long))],
            &SessionConfig::default(),
        );
        let mut topic = message(ChatType::Group, &long, "1");
        topic.channel = long.clone();
        topic.thread_id = Some(long.clone());
        let part = format!("++{}", &hex(&Sha256::digest(&long))[..40]);
        let expected = route(
            &long,
            &format!("agent:{part}:{part}:group:{part}:topic:{part}"),
        );
        assert_eq!(router.route(&topic).unwrap(), expected);
        assert_eq!(expected.session.as_str().len(), 189);
    }

    #[test]
    fn a_peer_binding_beats_account_and_channel_bindings_in_any_order() {
        let bindings = vec![
            binding("by-channel", on_channel("telegram")),
            binding("by-account", account("default")),
            binding("by-peer", peer(PeerKind::Dm, "42")),
        ];
        for order in [bindings.clone(), bindings.iter().rev().cloned().collect()] {
            let router = Router::new(&order, &SessionConfig::default());
            assert_eq!(
                router.route(&dm("42")).unwrap(),
                route("by-peer", "agent:by-peer:telegram:dm:42")
            );
            assert_eq!(
                router.route(&dm("43")).unwrap(),
                route("by-account", "agent:by-account:telegram:dm:43")
            );
        }
    }

    #[test]
    fn a_group_peer_is_the_chat_and_a_dm_peer_is_the_sender() {
        let router = Router::new(
            &[
                binding("team", peer(PeerKind::Group, "-100123")),
                binding("alice", peer(PeerKind::Dm, "42")),
            ],
            &SessionConfig::default(),
        );
        assert_eq!(
            router
                .route(&message(ChatType::Group, "-100123", "42"))
                .unwrap()
                .agent_id,
            "team"
        );
        // Alice writing in another group is not Alice's DM.
        assert_eq!(
            router
                .route(&message(ChatType::Group, "-100999", "42"))
                .unwrap()
                .agent_id,
            "main"
        );
        assert_eq!(router.route(&dm("42")).unwrap().agent_id, "alice");
        // A group binding never matches a broadcast channel with the same id.
        assert_eq!(
            router
                .route(&message(ChatType::Channel, "-100123", "-100123"))
                .unwrap()
                .agent_id,
            "main"
        );
    }

    #[test]
    fn an_account_binding_beats_a_channel_binding_and_star_means_any_account() {
        let router = Router::new(
            &[
                binding("any", account("*")),
                binding("work", account("work")),
            ],
            &SessionConfig::default(),
        );
        let mut work = dm("42");
        work.account = "work".to_owned();
        assert_eq!(router.route(&work).unwrap().agent_id, "work");
        assert_eq!(router.route(&dm("42")).unwrap().agent_id, "any");
    }

    #[test]
    fn a_more_specific_binding_never_applies_at_a_lower_level() {
        let router = Router::new(
            &[
                binding("vip", peer(PeerKind::Dm, "1")),
                binding(
                    "work-vip",
                    BindingMatch {
                        account_id: Some("work".to_owned()),
                        ..peer(PeerKind::Dm, "42")
                    },
                ),
                binding(
                    "server",
                    BindingMatch {
                        guild_id: Some("g1".to_owned()),
                        ..on_channel("telegram")
                    },
                ),
                binding(
                    "workspace",
                    BindingMatch {
                        team_id: Some("t1".to_owned()),
                        ..on_channel("telegram")
                    },
                ),
            ],
            &SessionConfig::default(),
        );
        // Same channel, other peer; and the right peer on the wrong account.
        assert_eq!(router.route(&dm("2")).unwrap().agent_id, "main");
        assert_eq!(router.route(&dm("42")).unwrap().agent_id, "main");
        let mut work = dm("42");
        work.account = "work".to_owned();
        assert_eq!(router.route(&work).unwrap().agent_id, "work-vip");
    }

    #[test]
    fn slack_keys_a_dm_a_channel_and_each_thread_and_a_team_binding_picks_the_workspace() {
        let slack = |chat_type, chat_id: &str, thread: Option<&str>, team: &str| InboundMessage {
            channel: "slack".to_owned(),
            thread_id: thread.map(str::to_owned),
            team_id: Some(team.to_owned()),
            ..message(chat_type, chat_id, "U222")
        };
        let router = Router::new(
            &[
                binding(
                    "work",
                    BindingMatch {
                        team_id: Some("T111".to_owned()),
                        ..on_channel("slack")
                    },
                ),
                binding("slack", on_channel("slack")),
            ],
            &SessionConfig::default(),
        );
        assert_eq!(
            router
                .route(&slack(ChatType::Dm, "D111", None, "T111"))
                .unwrap(),
            route("work", "agent:work:slack:dm:U222")
        );
        assert_eq!(
            router
                .route(&slack(ChatType::Group, "C111", None, "T222"))
                .unwrap(),
            route("slack", "agent:slack:slack:group:C111")
        );
        assert_eq!(
            router
                .route(&slack(
                    ChatType::Group,
                    "C111",
                    Some("1610241741.000200"),
                    "T111"
                ))
                .unwrap(),
            route(
                "work",
                "agent:work:slack:group:C111:topic:1610241741.000200"
            )
        );
    }

    #[test]
    fn a_guild_binding_takes_that_discord_server_and_its_threads_keep_their_own_session() {
        let router = Router::new(
            &[
                binding("discord", on_channel("discord")),
                binding(
                    "server",
                    BindingMatch {
                        guild_id: Some("81384788765712384".to_owned()),
                        ..on_channel("discord")
                    },
                ),
                binding(
                    "room",
                    BindingMatch {
                        channel: "discord".to_owned(),
                        ..peer(PeerKind::Group, "381870553235193857")
                    },
                ),
            ],
            &SessionConfig::default(),
        );
        let in_guild = |guild: &str, chat: &str, thread: Option<&str>| InboundMessage {
            channel: "discord".to_owned(),
            guild_id: Some(guild.to_owned()),
            thread_id: thread.map(str::to_owned),
            ..message(ChatType::Group, chat, "53908232506183680")
        };
        assert_eq!(
            router
                .route(&in_guild("81384788765712384", "290926798999357250", None))
                .unwrap(),
            route("server", "agent:server:discord:group:290926798999357250")
        );
        assert_eq!(
            router
                .route(&in_guild(
                    "81384788765712384",
                    "290926798999357250",
                    Some("1017189520441458748")
                ))
                .unwrap(),
            route(
                "server",
                "agent:server:discord:group:290926798999357250:topic:1017189520441458748"
            )
        );
        // Another server: the channel-wide binding; a peer still beats the guild.
        assert_eq!(
            router
                .route(&in_guild("1", "290926798999357250", None))
                .unwrap()
                .agent_id,
            "discord"
        );
        assert_eq!(
            router
                .route(&in_guild("81384788765712384", "381870553235193857", None))
                .unwrap()
                .agent_id,
            "room"
        );
    }

    #[test]
    fn equally_specific_bindings_go_to_the_first() {
        let router = Router::new(
            &[
                binding("first", on_channel("telegram")),
                binding("second", on_channel("telegram")),
                binding("elsewhere", on_channel("discord")),
            ],
            &SessionConfig::default(),
        );
        assert_eq!(router.route(&dm("42")).unwrap().agent_id, "first");
    }
}
