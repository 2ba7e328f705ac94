#![allow(clippy::unwrap_used, clippy::expect_used)]

use nanocrab_testkit::{MockLlm, Protocol, Reply, chunks_to_sse, fixture_bytes};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn post(url: String, body: Value) -> (u16, String) {
    let response = client().post(url).json(&body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn scripted_streams_in_both_wire_formats() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text_then_tool_call(
        "Let me look.",
        "call_1",
        "list_dir",
        json!({"path": "."}),
    ));
    mock.push(Reply::text_then_tool_call(
        "Let me look.",
        "call_1",
        "list_dir",
        json!({"path": "."}),
    ));
    let request = json!({"model": "m", "stream": true, "messages": []});

    let (status, anthropic) = post(
        format!("{}/v1/messages", mock.anthropic_base()),
        request.clone(),
    )
    .await;
    assert_eq!(status, 200);
    insta::assert_snapshot!("anthropic_text_then_tool_call", anthropic);
    let (status, openai) = post(
        format!("{}/chat/completions", mock.openai_base()),
        request.clone(),
    )
    .await;
    assert_eq!(status, 200);
    insta::assert_snapshot!("openai_text_then_tool_call", openai);

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[1].body, request);
}

#[tokio::test]
async fn non_streaming_answers_and_errors() {
    let mock = MockLlm::start().await;
    mock.push(Reply::tool_call_raw(
        "c1",
        "write_file",
        r#"{"path": "a",}"#,
    ));
    mock.push(Reply::unauthorized());
    mock.push(Reply::overloaded().with_header("retry-after", "0"));

    let (_, body) = post(
        format!("{}/chat/completions", mock.openai_base()),
        json!({"model": "m"}),
    )
    .await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"path": "a",}"#
    );
    let (status, body) = post(
        format!("{}/chat/completions", mock.openai_base()),
        json!({}),
    )
    .await;
    assert_eq!(status, 401);
    assert!(body.contains("invalid_api_key"), "{body}");
    let response = client()
        .post(format!("{}/v1/messages", mock.anthropic_base()))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 529);
    assert_eq!(response.headers()["retry-after"], "0");
    assert!(response.text().await.unwrap().contains("overloaded_error"));
}

#[tokio::test]
async fn an_empty_script_fails_loudly() {
    let mock = MockLlm::start().await;
    let (status, body) = post(format!("{}/v1/messages", mock.anthropic_base()), json!({})).await;
    assert_eq!(
        (status, body.as_str()),
        (500, "mock LLM: no scripted reply left for request 1")
    );
}

#[tokio::test]
async fn fixtures_replay_byte_for_byte() {
    let mock = MockLlm::start().await;
    mock.push(Reply::fixture("providers/anthropic/stream-text-padded.sse"));
    let (_, body) = post(
        format!("{}/v1/messages", mock.anthropic_base()),
        json!({"stream": true}),
    )
    .await;
    assert_eq!(
        body.as_bytes(),
        fixture_bytes("providers/anthropic/stream-text-padded.sse")
    );
}

#[test]
fn spawn_serves_synchronous_tests() {
    let mock = MockLlm::spawn();
    mock.push(Reply::text("hi"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, body) = runtime.block_on(post(
        format!("{}/v1/messages", mock.anthropic_base()),
        json!({"model": "m"}),
    ));
    assert_eq!(status, 200);
    assert!(body.contains(r#""text":"hi""#), "{body}");
}

#[test]
fn chunks_are_framed_per_protocol() {
    let chunks = "{\"type\":\"ping\"}\n\n{\"type\":\"message_stop\"}\n";
    assert_eq!(
        chunks_to_sse(Protocol::Anthropic, chunks),
        "event: ping\ndata: {\"type\":\"ping\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    );
    assert_eq!(
        chunks_to_sse(Protocol::OpenAiChat, "{\"a\":1}\n"),
        "data: {\"a\":1}\n\ndata: [DONE]\n\n"
    );
    assert_eq!(
        chunks_to_sse(Protocol::Gemini, "{\"a\":1}\n"),
        "data: {\"a\":1}\n\n"
    );
}
