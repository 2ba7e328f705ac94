//! The real Telegram adapter against the fake Bot API, through the gateway.

use std::sync::Arc;
use std::time::Duration;

use nanocrab_channels::telegram::{TelegramChannel, TelegramSettings};
use nanocrab_config::EditedMessages;
use nanocrab_schema::LlmMessage;
use nanocrab_testkit::telegram::{self as tg, FakeTelegram, SentText};
use pretty_assertions::assert_eq;

use crate::fake_channel::FakeChannel;
use crate::harness::{Harness, until};

const TOKEN: &str = "123456:gateway-test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_message_is_answered_in_its_chat_and_then_confirmed_to_telegram() {
    let fake = FakeTelegram::start(TOKEN).await;
    let mut harness = Harness::new().await;
    // The fake channel stands aside under another name; Telegram is the real adapter.
    harness.channel = Arc::new(FakeChannel::new("fake", "default"));
    let telegram = TelegramChannel::new(TelegramSettings {
        account: "default".to_owned(),
        token: TOKEN.to_owned(),
        api_base: fake.api_base(),
        proxy: None,
        poll_timeout: Duration::from_secs(1),
        stall_grace: Duration::from_secs(5),
        retry_pause: Duration::from_millis(10),
        edited_messages: EditedMessages::Ignore,
        state_dir: harness.state_dir(),
    })
    .unwrap();
    harness.more_channels.push(Arc::new(telegram));
    let update = tg::private_text("hello there");
    let chat_id = update["message"]["chat"]["id"].to_string();
    let update_id = fake.push_update(update);

    let gateway = harness.start();
    until(|| !fake.sent_messages().is_empty()).await;
    assert_eq!(
        fake.sent_messages(),
        vec![SentText {
            message_id: fake.sent_messages()[0].message_id,
            chat_id: chat_id.clone(),
            message_thread_id: None,
            text: "echo: hello there".to_owned(),
            parse_mode: Some("HTML".to_owned()),
            reply_to_message_id: None,
        }]
    );
    // The next poll confirms the update, so Telegram forgets it.
    until(|| !fake.pending_update_ids().contains(&update_id)).await;
    gateway.stop().await;
    assert_eq!(harness.unfinished_messages(), vec![]);
    assert_eq!(
        harness.history(&format!("agent:main:telegram:dm:{chat_id}")),
        vec![
            LlmMessage::user("hello there"),
            LlmMessage::assistant("echo: hello there")
        ]
    );
}
