use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, SECRET_KEY, Wire, assert_no_secret};

#[test]
fn gemini_tool_round_trip_answers_the_call_by_name_with_the_key_only_in_a_header() {
    let home = Home::new(Wire::Gemini);
    home.mock.push(Reply::tool_call(
        "ignored-by-gemini",
        "write_file",
        json!({"path": "notes/todo.md", "content": "- [ ] call mum\n"}),
    ));
    home.mock.push(Reply::text("Written."));

    assert_eq!(home.ask("make a todo list"), "Written.\n");

    assert_eq!(
        std::fs::read_to_string(home.workspace().join("notes/todo.md")).unwrap(),
        "- [ ] call mum\n"
    );
    let requests = home.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].path,
        "/v1beta/models/mock-model:streamGenerateContent"
    );
    assert_eq!(requests[0].headers["x-goog-api-key"], SECRET_KEY);
    let contents = requests[1].body["contents"].as_array().unwrap();
    let response = &contents.last().unwrap()["parts"][0]["functionResponse"];
    assert_eq!(response["name"], "write_file");
    assert!(
        response["response"]["content"]
            .as_str()
            .unwrap()
            .contains("notes/todo.md"),
        "{response}"
    );
}

#[test]
fn a_bad_gemini_key_fails_cleanly() {
    let home = Home::new(Wire::Gemini);
    home.mock.push(Reply::unauthorized());

    let run = home.agent("hello", &[]);

    let stderr = run.stderr;
    assert!(!run.success);
    assert_no_secret(&stderr);
    assert!(
        stderr.contains("gemini: HTTP 400: API key not valid"),
        "{stderr}"
    );
    assert_eq!(home.requests().len(), 1, "a bad key is never retried");
}

#[test]
fn a_recorded_thought_signature_goes_back_on_the_call_it_came_with() {
    let home = Home::new(Wire::Gemini);
    // Real Gemini 2.5 thinking, then a call to `now` (a tool nanocrab does not have: the
    // error result still goes back, and with it the call and its signature).
    home.mock.push(Reply::fixture(
        "providers/gemini/stream-thinking-function-call.sse",
    ));
    home.mock.push(Reply::text("About a month."));

    assert_eq!(home.ask("how long until new year?"), "About a month.\n");

    let requests = home.requests();
    let contents = requests[1].body["contents"].as_array().unwrap();
    let model_turn = contents.iter().find(|c| c["role"] == "model").unwrap();
    let call = model_turn["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .unwrap();
    assert_eq!(call["functionCall"]["name"], "now");
    assert!(
        call["thoughtSignature"]
            .as_str()
            .unwrap()
            .starts_with("CiIBVKhc7vB+vaaq6rA/KC79Ts7iXagIOA4EBOyBFDpl"),
        "{call}"
    );
    let response = &contents.last().unwrap()["parts"][0]["functionResponse"];
    assert_eq!(response["name"], "now");
    assert!(response["response"].get("error").is_some(), "{response}");
}

#[test]
fn a_prompt_blocked_by_gemini_safety_filters_is_a_clear_error_and_not_retried() {
    let home = Home::new(Wire::Gemini);
    home.mock
        .push(Reply::fixture("providers/gemini/stream-prompt-blocked.sse"));

    let run = home.agent("something hateful", &[]);
    let stderr = run.stderr;
    assert!(!run.success);
    assert!(
        stderr.contains(
            "gemini: blocked: the prompt was blocked by Gemini's safety filters (SAFETY); rephrase the request"
        ),
        "{stderr}"
    );
    assert_eq!(home.requests().len(), 1);
}
