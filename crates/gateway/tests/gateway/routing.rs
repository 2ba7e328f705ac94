//! Which agent and session a message reaches, and who gets in at all.

use std::collections::BTreeMap;

use nanocrab_config::{Binding, BindingMatch, DmPolicy, GroupPolicy, PeerKind, PeerMatch};
use nanocrab_gateway::{Access, AccessRules, MessageCounts, PairingStore};
use nanocrab_schema::LlmMessage;
use pretty_assertions::assert_eq;

use crate::harness::{Harness, answer, dm, group};

#[tokio::test]
async fn bindings_send_a_group_to_its_agent_and_the_rest_to_main() {
    let mut harness = Harness::new().await;
    harness.agent_ids.push("team".to_owned());
    harness.config.bindings = vec![Binding {
        agent_id: "team".to_owned(),
        matches: BindingMatch {
            channel: "telegram".to_owned(),
            peer: Some(PeerMatch {
                kind: PeerKind::Group,
                id: "-100".to_owned(),
            }),
            ..BindingMatch::default()
        },
    }];
    let gateway = harness.start();
    let in_group = group("-100", None, "1", "10", "standup?");
    let elsewhere = group("-200", None, "1", "11", "lunch?");
    let direct = dm("1", "12", "hi");
    for message in [&in_group, &elsewhere, &direct] {
        harness.channel.deliver(message.clone()).await.unwrap();
    }
    harness.channel.wait_for_sent(3).await;
    gateway.stop().await;

    assert_eq!(
        harness.session_keys(),
        vec![
            "agent:main:telegram:dm:1",
            "agent:main:telegram:group:-200",
            "agent:team:telegram:group:-100",
        ]
    );
    assert_eq!(
        harness.history("agent:team:telegram:group:-100"),
        vec![
            LlmMessage::user("[User 1] standup?"),
            LlmMessage::assistant("echo: [User 1] standup?")
        ]
    );
}

#[tokio::test]
async fn a_binding_to_an_agent_the_gateway_lacks_is_refused_at_start() {
    let mut harness = Harness::new().await;
    harness.config.bindings = vec![Binding {
        agent_id: "ghost".to_owned(),
        matches: BindingMatch {
            channel: "telegram".to_owned(),
            ..BindingMatch::default()
        },
    }];
    assert_eq!(
        harness.gateway_refusal(&[]),
        "no agent `main` for the default route: the gateway was not given it"
    );
    assert_eq!(
        harness.gateway_refusal(&["main"]),
        "no agent `ghost` for bindings.0: the gateway was not given it"
    );
}

#[tokio::test]
async fn a_second_gateway_on_the_same_home_is_refused_while_the_first_runs() {
    let harness = Harness::new().await;
    let first = harness.gateway();
    assert_eq!(
        harness.gateway_refusal(&["main"]),
        format!(
            "another nanocrab gateway is running with this home (it holds {}); stop it first",
            harness.state_dir().join("gateway.lock").display()
        )
    );
    drop(first);
    drop(harness.gateway());
}

#[tokio::test]
async fn denied_and_ignored_messages_reach_no_agent_and_strangers_get_a_pairing_code() {
    let mut harness = Harness::new().await;
    harness.access = Some(Access::new(
        BTreeMap::from([(
            "telegram".to_owned(),
            AccessRules {
                allow_from: Vec::new(),
                dm_policy: DmPolicy::Pairing,
                group_policy: GroupPolicy::Open,
                groups: BTreeMap::new(),
                require_mention: true,
            },
        )]),
        PairingStore::new(&harness.state_dir()),
    ));
    let gateway = harness.start();
    // Not addressed to the bot in a group: ignored.
    harness
        .channel
        .deliver(group("-100", None, "1", "10", "chatter"))
        .await
        .unwrap();
    // Another bot: ignored.
    let mut bot = dm("2", "11", "beep");
    bot.sender.is_bot = true;
    harness.channel.deliver(bot).await.unwrap();
    // A stranger: a pairing code, once; then denied while the request is pending.
    let stranger = dm("3", "12", "hello?");
    harness.channel.deliver(stranger.clone()).await.unwrap();
    harness
        .channel
        .deliver(dm("3", "13", "hello??"))
        .await
        .unwrap();
    // Addressed in an open group: answered.
    let mut addressed = group("-100", None, "1", "14", "@bot ping");
    addressed.mentions_bot = true;
    harness.channel.deliver(addressed.clone()).await.unwrap();

    let sent = harness.channel.wait_for_sent(2).await;
    let pairing = sent
        .iter()
        .find(|m| m.chat == stranger.chat())
        .unwrap()
        .clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let pending = harness
        .access
        .as_ref()
        .unwrap()
        .pairing()
        .pending(now)
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert!(pairing.text.contains(&pending[0].code), "{}", pairing.text);
    let answered: Vec<_> = sent.into_iter().filter(|m| m != &pairing).collect();
    assert_eq!(
        answered,
        vec![answer(&addressed, "echo: [User 1] @bot ping")]
    );
    let counts = gateway.status.messages();
    gateway.stop().await;
    assert_eq!(
        counts,
        MessageCounts {
            received: 5,
            ignored: 2,
            denied: 2,
            ..MessageCounts::default()
        }
    );
    assert_eq!(
        harness.session_keys(),
        vec!["agent:main:telegram:group:-100"]
    );
}
