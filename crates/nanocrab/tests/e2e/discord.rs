//! `nanocrab gateway` with Discord: the real binary between the fake Discord (gateway
//! WebSocket and REST) and the mock LLM. The channel is made by the binary itself, which is
//! what this covers beyond the gateway crate's test (twilight's HTTP client needs the runtime
//! when it is made).

use nanocrab_testkit::Reply;
use nanocrab_testkit::discord::{self as dc, FakeDiscord};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, Wire};

const TOKEN: &str = "MTAxOTg.e2e-test";

#[test]
fn a_discord_dm_is_answered_through_rest_by_the_gateway() {
    // The fake serves from this runtime's worker while the test waits on the binary.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let discord = runtime.block_on(FakeDiscord::start(TOKEN));
    let message = dc::dm("hello there");
    let channel_id = message["channel_id"].as_str().unwrap().to_owned();
    let sender = message["author"]["id"].as_str().unwrap().to_owned();
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["channels"] = json!({
        "discord": {
            "token": TOKEN,
            "apiBase": discord.api_base(),
            "gatewayUrl": discord.gateway_url(),
            "allowFrom": [sender],
        },
    });
    config["gateway"] = json!({ "port": 0 });
    home.write_config(config);
    home.mock.push(Reply::text("Hello from Discord."));
    discord.push_message_create(message);

    let mut gateway = home.start_gateway();
    gateway.eventually("the Discord answer", |_| {
        (!discord.sent_messages().is_empty()).then_some(())
    });
    let sent = discord.sent_messages();
    assert_eq!(
        sent.iter()
            .map(|m| (m.channel_id.as_str(), m.content.as_str()))
            .collect::<Vec<_>>(),
        [(channel_id.as_str(), "Hello from Discord.")]
    );
}
