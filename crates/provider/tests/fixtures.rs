//! Every recorded real provider response in `shared/fixtures/providers/` replayed through the
//! adapters: streams whole and split at awkward byte boundaries, whole JSON answers as a
//! server that ignores `"stream": true` sends them, and error bodies as HTTP errors. Each
//! parsed result (text, reasoning, tool calls, stop reason, usage, or the error and how it is
//! handled) is a snapshot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use nanocrab_provider::{Protocol, ProviderDelta, error_from_body, replay_stream, replay_whole};
use nanocrab_testkit::{chunks_to_sse, fixture_bytes, replay_list};

/// The protocol a fixture directory records.
fn protocol_of(path: &str) -> Protocol {
    match path.split('/').nth(1).unwrap() {
        "anthropic" => Protocol::AnthropicMessages,
        "gemini" => Protocol::Gemini,
        "openai" if path.contains("/responses/") => Protocol::OpenAiResponses,
        "openai" | "openai-compatible" => Protocol::OpenAiChat,
        other => panic!("no protocol for fixture directory {other}"),
    }
}

fn framing(protocol: Protocol) -> nanocrab_testkit::Protocol {
    match protocol {
        Protocol::AnthropicMessages => nanocrab_testkit::Protocol::Anthropic,
        Protocol::OpenAiChat => nanocrab_testkit::Protocol::OpenAiChat,
        Protocol::OpenAiResponses => nanocrab_testkit::Protocol::OpenAiResponses,
        Protocol::Gemini => nanocrab_testkit::Protocol::Gemini,
    }
}

/// The SSE bodies a stream fixture holds: usually one; a `.chunks.txt` of the Responses API
/// may hold several recorded responses one after another (each starts with
/// `response.created`).
fn stream_bodies(path: &str, protocol: Protocol) -> Vec<Vec<u8>> {
    let bytes = fixture_bytes(path);
    if !path.ends_with(".chunks.txt") {
        return vec![bytes];
    }
    let text = String::from_utf8(bytes).unwrap();
    let mut responses: Vec<String> = Vec::new();
    for line in text.lines() {
        if responses.is_empty() || line.starts_with(r#"{"type":"response.created""#) {
            responses.push(String::new());
        }
        let current = responses.last_mut().unwrap();
        current.push_str(line);
        current.push('\n');
    }
    responses
        .iter()
        .map(|chunks| chunks_to_sse(framing(protocol), chunks).into_bytes())
        .collect()
}

fn render(text: &str, reasoning: &str, result: impl std::fmt::Debug) -> String {
    format!("streamed text: {text:?}\nstreamed reasoning: {reasoning:?}\n{result:#?}")
}

async fn replay(protocol: Protocol, bytes: &[u8], chunk: usize) -> String {
    let chunks = bytes
        .chunks(chunk)
        .map(bytes::Bytes::copy_from_slice)
        .collect();
    let mut text = String::new();
    let mut reasoning = String::new();
    let result = replay_stream(protocol, chunks, &mut |delta| match delta {
        ProviderDelta::Text(t) => text.push_str(&t),
        ProviderDelta::Reasoning(r) => reasoning.push_str(&r),
        ProviderDelta::Retry(notice) => panic!("a replay never retries: {notice:?}"),
    })
    .await;
    render(&text, &reasoning, result)
}

fn snapshot_name(path: &str) -> String {
    path.replace('/', "__")
}

fn is_error_body(path: &str) -> bool {
    path.rsplit('/').next().unwrap().contains("error-") && path.ends_with(".json")
}

async fn check_streams(paths: &[String]) {
    for path in paths.iter().filter(|p| !p.ends_with(".json")) {
        let protocol = protocol_of(path);
        let mut results = Vec::new();
        for bytes in stream_bodies(path, protocol) {
            let whole = replay(protocol, &bytes, bytes.len().max(1)).await;
            for chunk in [1, 7, 64] {
                assert_eq!(
                    replay(protocol, &bytes, chunk).await,
                    whole,
                    "{path} split every {chunk} bytes"
                );
            }
            results.push(whole);
        }
        insta::assert_snapshot!(snapshot_name(path), results.join("\n\n"));
    }
}

async fn check_whole_answers(paths: &[String]) {
    for path in paths
        .iter()
        .filter(|p| p.ends_with(".json") && !is_error_body(p))
    {
        let body: serde_json::Value = serde_json::from_slice(&fixture_bytes(path)).unwrap();
        let mut text = String::new();
        let mut reasoning = String::new();
        let result = replay_whole(protocol_of(path), body, &mut |delta| match delta {
            ProviderDelta::Text(t) => text.push_str(&t),
            ProviderDelta::Reasoning(r) => reasoning.push_str(&r),
            ProviderDelta::Retry(notice) => panic!("a replay never retries: {notice:?}"),
        })
        .await;
        insta::assert_snapshot!(snapshot_name(path), render(&text, &reasoning, result));
    }
}

fn check_error_bodies(paths: &[String]) {
    for path in paths.iter().filter(|p| is_error_body(p)) {
        let name = path.rsplit('/').next().unwrap();
        let status: u16 = name.split("error-").nth(1).unwrap()[..3].parse().unwrap();
        let body = String::from_utf8(fixture_bytes(path)).unwrap();
        let error = error_from_body(protocol_of(path), status, &body);
        let handling = format!(
            "{error}\nretried: {}\nfalls back to another model: {}\n{error:#?}",
            error.is_retriable(),
            error.warrants_fallback()
        );
        insta::assert_snapshot!(snapshot_name(path), handling);
    }
}

async fn check_dir(dir: &str) {
    let paths = replay_list(dir);
    assert!(!paths.is_empty(), "no fixtures under {dir}");
    check_streams(&paths).await;
    check_whole_answers(&paths).await;
    check_error_bodies(&paths);
}

#[tokio::test]
async fn anthropic_fixtures() {
    check_dir("providers/anthropic").await;
}

#[tokio::test]
async fn openai_chat_fixtures() {
    check_dir("providers/openai/chat").await;
}

#[tokio::test]
async fn openai_responses_fixtures() {
    check_dir("providers/openai/responses").await;
}

#[tokio::test]
async fn openai_account_error_fixtures() {
    // Errors shared by both OpenAI APIs sit directly under `openai/`.
    let paths: Vec<String> = replay_list("providers/openai")
        .into_iter()
        .filter(|p| p.matches('/').count() == 2)
        .collect();
    assert!(!paths.is_empty());
    check_error_bodies(&paths);
}

#[tokio::test]
async fn openai_compatible_fixtures() {
    // Chat Completions from DeepSeek, xAI, Groq, GLM, OpenRouter, and a gateway serving Claude.
    check_dir("providers/openai-compatible").await;
}

#[tokio::test]
async fn gemini_fixtures() {
    check_dir("providers/gemini").await;
}

/// Each fixture file is a stream, a whole answer or an error body, so the tests above
/// replay every one of them; a file of another kind would be skipped silently.
#[test]
fn every_provider_fixture_is_of_a_replayed_kind() {
    for path in replay_list("providers") {
        assert!(
            path.ends_with(".sse") || path.ends_with(".chunks.txt") || path.ends_with(".json"),
            "{path} is not replayed by any test"
        );
        protocol_of(&path);
    }
}
