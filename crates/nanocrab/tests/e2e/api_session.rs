//! Which session an OpenAI-compatible API request continues when it names none.

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, message_texts};

#[test]
fn requests_without_user_or_header_continue_the_clients_one_session() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["gateway"] = json!({ "port": 0 });
    home.write_config(config);
    for answer in ["First answer.", "Second answer.", "Bob's answer."] {
        home.mock.push(Reply::text(answer));
    }
    let gateway = home.start_gateway();
    let answers = gateway.run_python(
        &home,
        "api_session_client.py",
        &[&format!("{}/v1", gateway.base)],
    );
    assert_eq!(
        answers,
        json!(["First answer.", "Second answer.", "Bob's answer."])
    );

    // The second request carried the first exchange; `user` still names a session of its own.
    let requests = home.requests();
    assert_eq!(
        message_texts(&requests[1].body),
        [
            ("user".to_owned(), "first question".to_owned()),
            ("assistant".to_owned(), "First answer.".to_owned()),
            ("user".to_owned(), "second question".to_owned()),
        ]
    );
    assert_eq!(
        message_texts(&requests[2].body),
        [("user".to_owned(), "bob's question".to_owned())]
    );
    let run = home.run(home.nanocrab().args(["sessions", "list", "--json"]));
    assert!(run.success, "{}", run.stderr);
    let listed: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let mut sessions: Vec<(&str, u64)> = listed
        .iter()
        .map(|s| (s["key"].as_str().unwrap(), s["messages"].as_u64().unwrap()))
        .collect();
    sessions.sort();
    assert_eq!(
        sessions,
        [
            ("agent:main:openai:bob", 2),
            ("agent:main:openai:default", 4)
        ]
    );
}
