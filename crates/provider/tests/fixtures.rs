//! Every recorded real stream of the Anthropic and OpenAI-style wire formats, replayed through
//! the adapters' parsers whole and split at awkward byte boundaries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use nanocrab_provider::{Protocol, ProviderDelta, replay_stream};
use nanocrab_testkit::{chunks_to_sse, fixture_bytes, replay_list};

fn body(path: &str, protocol: Protocol) -> Vec<u8> {
    let bytes = fixture_bytes(path);
    if path.ends_with(".json") {
        // A whole Gemini response has the shape of one stream chunk.
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        format!("data: {json}\n\n").into_bytes()
    } else if path.ends_with(".chunks.txt") {
        let framing = match protocol {
            Protocol::AnthropicMessages => nanocrab_testkit::Protocol::Anthropic,
            Protocol::OpenAiChat => nanocrab_testkit::Protocol::OpenAiChat,
            Protocol::Gemini => nanocrab_testkit::Protocol::Gemini,
            Protocol::OpenAiResponses => unreachable!(),
        };
        chunks_to_sse(framing, &String::from_utf8(bytes).unwrap()).into_bytes()
    } else {
        bytes
    }
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
    })
    .await;
    format!("streamed text: {text:?}\nstreamed reasoning: {reasoning:?}\n{result:#?}")
}

fn streams(dir: &str) -> Vec<String> {
    replay_list(dir)
        .into_iter()
        .filter(|p| p.ends_with(".sse") || p.ends_with(".chunks.txt"))
        .collect()
}

async fn check_all(protocol: Protocol, paths: Vec<String>) {
    assert!(!paths.is_empty());
    for path in paths {
        let bytes = body(&path, protocol);
        let whole = replay(protocol, &bytes, bytes.len().max(1)).await;
        for chunk in [1, 7, 64] {
            assert_eq!(
                replay(protocol, &bytes, chunk).await,
                whole,
                "{path} split every {chunk} bytes"
            );
        }
        let name = path.replace('/', "__");
        insta::assert_snapshot!(name, whole);
    }
}

#[tokio::test]
async fn anthropic_fixtures() {
    check_all(Protocol::AnthropicMessages, streams("providers/anthropic")).await;
}

#[tokio::test]
async fn openai_chat_fixtures() {
    check_all(Protocol::OpenAiChat, streams("providers/openai/chat")).await;
}

#[tokio::test]
async fn openai_compatible_fixtures() {
    // All Chat Completions streams, including one a gateway served for a Claude model.
    check_all(Protocol::OpenAiChat, streams("providers/openai-compatible")).await;
}

#[tokio::test]
async fn gemini_fixtures() {
    // Every stream, and every whole (non-error) response replayed as a one-chunk stream.
    let paths = replay_list("providers/gemini")
        .into_iter()
        .filter(|p| !p.contains("/error-"))
        .collect();
    check_all(Protocol::Gemini, paths).await;
}
