//! The real Discord adapter against the fake Discord, through the gateway, beside Telegram.

use std::sync::Arc;
use std::time::Duration;

use nanocrab_channels::discord::{DiscordChannel, DiscordSettings};
use nanocrab_channels::telegram::{TelegramChannel, TelegramSettings};
use nanocrab_config::EditedMessages;
use nanocrab_schema::LlmMessage;
use nanocrab_testkit::discord::{self as dc, FakeDiscord};
use nanocrab_testkit::telegram::{self as tg, FakeTelegram};
use pretty_assertions::assert_eq;

use crate::fake_channel::FakeChannel;
use crate::harness::{Harness, until};

const TOKEN: &str = "MTAxOTg.gateway-test";
const TELEGRAM_TOKEN: &str = "123456:gateway-test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discord_dm_is_answered_through_rest_while_telegram_runs_beside_it() {
    let discord = FakeDiscord::start(TOKEN).await;
    let telegram = FakeTelegram::start(TELEGRAM_TOKEN).await;
    let mut harness = Harness::new().await;
    harness.channel = Arc::new(FakeChannel::new("fake", "default"));
    let channel = DiscordChannel::new(DiscordSettings {
        account: "default".to_owned(),
        token: TOKEN.to_owned(),
        api_base: discord.api_base(),
        gateway_url: discord.gateway_url(),
        edited_messages: EditedMessages::Ignore,
        state_dir: harness.state_dir(),
    })
    .unwrap();
    harness.more_channels.push(Arc::new(channel));
    let telegram_channel = TelegramChannel::new(TelegramSettings {
        account: "default".to_owned(),
        token: TELEGRAM_TOKEN.to_owned(),
        api_base: telegram.api_base(),
        proxy: None,
        poll_timeout: Duration::from_secs(1),
        stall_grace: Duration::from_secs(5),
        retry_pause: Duration::from_millis(10),
        edited_messages: EditedMessages::Ignore,
        state_dir: harness.state_dir(),
    })
    .unwrap();
    harness.more_channels.push(Arc::new(telegram_channel));
    let message = dc::dm("hello from discord");
    let channel_id = message["channel_id"].as_str().unwrap().to_owned();
    let sender = message["author"]["id"].as_str().unwrap().to_owned();
    discord.push_message_create(message);
    telegram.push_update(tg::private_text("hello from telegram"));

    let gateway = harness.start();
    until(|| !discord.sent_messages().is_empty() && !telegram.sent_messages().is_empty()).await;
    let sent = discord.sent_messages();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].channel_id, channel_id);
    assert_eq!(sent[0].content, "echo: hello from discord");
    assert_eq!(
        telegram.sent_messages()[0].text,
        "echo: hello from telegram"
    );
    // "typing…" while the turn ran.
    assert!(
        discord
            .calls()
            .iter()
            .any(|call| call.route == format!("POST /channels/{channel_id}/typing"))
    );
    gateway.stop().await;
    assert_eq!(harness.unfinished_messages(), vec![]);
    assert_eq!(
        harness.history(&format!("agent:main:discord:dm:{sender}")),
        vec![
            LlmMessage::user("hello from discord"),
            LlmMessage::assistant("echo: hello from discord")
        ]
    );
}
