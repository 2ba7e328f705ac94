//! The agent's `message` tool end to end: the real gateway between the fake Telegram Bot API
//! and the mock LLM, scripted to call `message`.

use nanocrab_testkit::Reply;
use nanocrab_testkit::telegram::{self, FakeTelegram};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, Wire, tool_results};

const TOKEN: &str = "123456:fake-telegram-5ecret";
/// The sender of the recorded private message (`update-private-text.json`).
const OWNER: &str = "218485655";

fn telegram_home(fake: &FakeTelegram) -> Home {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["agents"]["defaults"]["heartbeat"] = json!({ "every": "0" });
    config["channels"] = json!({ "telegram": {
        "token": TOKEN,
        "apiBase": fake.api_base(),
        "pollTimeout": 1,
        "allowFrom": [OWNER],
    }});
    config["gateway"] = json!({ "port": 0 });
    home.write_config(config);
    home
}

#[test]
fn the_chat_gets_the_message_once_and_the_duplicate_reply_is_left_out() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = telegram_home(&fake);
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("report.txt"), "Q3: all fine.\n").unwrap();
    // The model sends the report with the tool, then repeats itself as its reply.
    home.mock.push(Reply::tool_call(
        "call_1",
        "message",
        json!({"content": "Here is the report.", "file": "report.txt"}),
    ));
    home.mock.push(Reply::text("Here is the report."));
    fake.push_update(telegram::private_text("send me the report"));
    let mut gateway = home.start_gateway();
    gateway.eventually("the report", |_| {
        (!fake.sent_documents().is_empty() && home.requests().len() == 2).then_some(())
    });

    // Then it answers with the tool alone, and says NO_REPLY.
    home.mock.push(Reply::tool_call(
        "call_2",
        "message",
        json!({"content": "You're welcome!"}),
    ));
    home.mock.push(Reply::text("NO_REPLY"));
    // A message of its own: the recorded one's id again would be dropped as a redelivery.
    let mut thanks = telegram::private_text("thanks");
    thanks["message"]["message_id"] = json!(6558);
    fake.push_update(thanks);
    gateway.eventually("the second turn", |_| {
        (home.requests().len() == 4).then_some(())
    });
    // The turn is over once its last request is answered: terminating waits for it, and
    // whatever it was to send would be sent before the gateway exits.
    assert!(gateway.terminate().success());

    assert_eq!(
        fake.texts_sent_to(OWNER),
        ["Here is the report.", "You're welcome!"]
    );
    let documents = fake.sent_documents();
    assert_eq!(
        documents
            .iter()
            .map(|d| (d.chat_id.as_str(), d.file_name.as_str(), d.bytes.as_slice()))
            .collect::<Vec<_>>(),
        [(OWNER, "report.txt", b"Q3: all fine.\n".as_slice())]
    );
    // The document follows its text.
    assert!(documents[0].message_id > fake.sent_messages()[0].message_id);
    let requests = home.requests();
    let results: Vec<(String, String, bool)> = [1, 3]
        .iter()
        .flat_map(|&i| tool_results(&requests[i].body).into_iter().last())
        .collect();
    assert_eq!(
        results,
        [
            (
                "call_1".to_owned(),
                format!("sent to telegram:{OWNER}"),
                false
            ),
            (
                "call_2".to_owned(),
                format!("sent to telegram:{OWNER}"),
                false
            ),
        ]
    );
    // The model was told of the tool and of NO_REPLY.
    let tools = &requests[0].body["tools"];
    let message = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "message")
        .unwrap();
    assert!(
        message["function"]["description"]
            .as_str()
            .unwrap()
            .contains("NO_REPLY")
    );
}
