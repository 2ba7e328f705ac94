//! `local/<model>` against a tiny random GGUF chat model installed in a temporary store: what
//! the agent is told about it, streaming, usage, limits, loading once and unloading when idle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use nanocrab_config::{Config, ModelsConfig};
use nanocrab_models::{Catalogue, Endpoints, ModelStore};
use nanocrab_provider::{
    ChatRequest, LocalModels, ModelProfile, ProviderDelta, ProviderError, RetryPolicy,
    resolve_model,
};
use nanocrab_schema::{LlmMessage, StopReason};
use nanocrab_testkit::gguf::TinyLlama;
use pretty_assertions::assert_eq;
use serde_json::json;

/// The store under `dir` with `model` installed as the chat model `tiny` (placed by hand in
/// the downloads folder, so nothing is fetched), and the process's local models over it.
async fn installed(
    dir: &std::path::Path,
    model: &TinyLlama,
    unload_after: Option<Duration>,
) -> LocalModels {
    let bytes = model.bytes();
    let sha256 = nanocrab_testkit::models::sha256_hex(&bytes);
    let config: ModelsConfig = serde_json::from_value(json!({
        "indexUrl": "http://127.0.0.1:9",
        "hubUrl": "http://127.0.0.1:9",
        "entries": {"tiny": {
            "kind": "chat",
            "contextTokens": 512,
            "files": [{"name": "tiny.gguf", "size": bytes.len(), "sha256": sha256}],
            "sources": [{"huggingFace": {"repo": "test/tiny", "revision": "main"}}],
        }},
    }))
    .unwrap();
    let catalogue = Catalogue::from_config(&config).unwrap();
    let store = ModelStore::new(dir.join("models"));
    std::fs::create_dir_all(store.downloads()).unwrap();
    std::fs::write(store.downloads().join("tiny.gguf"), &bytes).unwrap();
    let spec = catalogue.find("tiny").unwrap();
    nanocrab_models::pull(&store, spec, &Endpoints::from_config(&config), &mut |_| {})
        .await
        .unwrap();
    LocalModels::new(store, catalogue, unload_after)
}

fn resolve(
    model: &str,
    local: &LocalModels,
) -> Result<nanocrab_provider::ResolvedModel, ProviderError> {
    resolve_model(
        model,
        &Config::default(),
        &|_| None,
        RetryPolicy::default(),
        local,
    )
}

fn request(max_tokens: u32) -> ChatRequest<'static> {
    ChatRequest {
        model: "tiny".into(),
        system: "Be brief.".into(),
        messages: vec![LlmMessage::user("hello")].into(),
        tools: Vec::new().into(),
        max_tokens,
        temperature: Some(0.0),
    }
}

#[tokio::test]
async fn a_local_model_streams_its_answer_with_usage_and_the_agent_knows_its_limits() {
    let dir = tempfile::tempdir().unwrap();
    let local = installed(dir.path(), &TinyLlama::default(), None).await;
    let resolved = resolve("local/tiny", &local).unwrap();
    assert_eq!(resolved.label, "local/tiny");
    assert_eq!(
        resolved.profile,
        ModelProfile {
            tools: false,
            vision: false,
            prompt_caching: false,
            reasoning: false,
            stream_usage: false,
            context_window: Some(512),
            compact_prompt: true,
            ..ModelProfile::GENERIC
        }
    );
    assert!(!local.is_loaded("tiny"), "loaded on first use only");

    let mut streamed = String::new();
    let response = resolved
        .provider
        .chat(&request(8), &mut |delta| match delta {
            ProviderDelta::Text(text) => streamed.push_str(&text),
            ProviderDelta::Reasoning(_) => panic!("no reasoning from a local model"),
            ProviderDelta::Retry(notice) => panic!("a local model is not retried: {notice:?}"),
        })
        .await
        .unwrap();
    assert_eq!(response.model, "local/tiny");
    assert_eq!(response.content.len(), 1);
    let text = LlmMessage {
        role: nanocrab_schema::Role::Assistant,
        content: response.content.clone(),
    }
    .text();
    assert_eq!(streamed, text);
    assert!(response.usage.input_tokens > 0);
    assert!(response.usage.output_tokens > 0 && response.usage.output_tokens <= 8);
    assert!(local.is_loaded("tiny"));

    // Greedy: the same question, the same answer.
    let again = resolved
        .provider
        .chat(&request(8), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(again.content, response.content);
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // A model that never ends its turn.
    let chatty = TinyLlama {
        favoured_token: Some(70),
        ..TinyLlama::default()
    };
    let local = installed(dir.path(), &chatty, None).await;
    let resolved = resolve("local/tiny", &local).unwrap();
    let response = resolved
        .provider
        .chat(&request(5), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    assert_eq!(response.usage.output_tokens, 5);

    // A limit beyond what the prompt leaves of the window gets the rest of the window.
    let response = resolved
        .provider
        .chat(&request(100_000), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        response.usage.input_tokens + response.usage.output_tokens,
        512
    );
}

// On a paused clock, which jumps to the next timer only when no task can run and no blocking
// work (the model's) is under way: the idle watcher and the test sleep on the same clock,
// whatever this machine's speed.
#[tokio::test(start_paused = true)]
async fn an_idle_model_is_unloaded_and_loaded_again_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let local = installed(
        dir.path(),
        &TinyLlama::default(),
        Some(Duration::from_millis(200)),
    )
    .await;
    let resolved = resolve("local/tiny", &local).unwrap();
    let first = resolved
        .provider
        .chat(&request(4), &mut |_| {})
        .await
        .unwrap();
    assert!(local.is_loaded("tiny"));
    // Used again just before it would go: the idle time starts over.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let again = resolved
        .provider
        .chat(&request(4), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(again.content, first.content);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(local.is_loaded("tiny"), "idle for 150 ms only");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!local.is_loaded("tiny"), "idle for 250 ms");
    let second = resolved
        .provider
        .chat(&request(4), &mut |_| {})
        .await
        .unwrap();
    assert!(local.is_loaded("tiny"));
    assert_eq!(second.content, first.content);
}

#[tokio::test]
async fn missing_and_unknown_local_models_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let local = installed(dir.path(), &TinyLlama::default(), None).await;
    let unknown = resolve("local/tinny", &local).unwrap_err().to_string();
    assert!(unknown.contains("no model is called `tinny`"), "{unknown}");
    assert!(unknown.contains("tiny"), "{unknown}");

    // Known but not installed: resolving works (the agent can be built), asking says how to fix it.
    let resolved = resolve("local/smollm2-135m", &local).unwrap();
    let err = resolved
        .provider
        .chat(
            &ChatRequest {
                model: "smollm2-135m".into(),
                ..request(4)
            },
            &mut |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "local/smollm2-135m: the model `smollm2-135m` is not installed; run `nanocrab models pull smollm2-135m`"
    );
    assert!(err.warrants_fallback(), "another model can answer");

    let embedding = resolve("local/all-minilm-l6-v2", &local).unwrap_err();
    assert_eq!(
        embedding.to_string(),
        "local/all-minilm-l6-v2 is not a chat model (see `nanocrab models list`)"
    );
}

/// `nanocrab usage` once advised setting `providers.local.models.<name>.price`; doing so made
/// `local` a remote provider without an endpoint. Settings there keep it in-process; only an
/// `apiBase` makes `providers.local` an endpoint of the user's.
#[tokio::test]
async fn settings_under_providers_local_keep_the_model_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let local = installed(dir.path(), &TinyLlama::default(), None).await;
    let priced: Config = serde_json::from_value(json!({"providers": {"local": {
        "apiKey": "unused",
        "models": {"tiny": {"price": {"input": 1, "output": 2}}},
    }}}))
    .unwrap();
    let resolved = resolve_model(
        "local/tiny",
        &priced,
        &|_| None,
        RetryPolicy::default(),
        &local,
    )
    .unwrap();
    assert_eq!(
        resolved.profile.context_window,
        Some(512),
        "the catalogue's"
    );
    let response = resolved
        .provider
        .chat(&request(4), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.model, "local/tiny");

    let endpoint: Config = serde_json::from_value(
        json!({"providers": {"local": {"apiBase": "http://127.0.0.1:9/v1"}}}),
    )
    .unwrap();
    let resolved = resolve_model(
        "local/tiny",
        &endpoint,
        &|_| None,
        RetryPolicy::default(),
        &local,
    )
    .unwrap();
    assert_eq!(resolved.profile.context_window, None, "an endpoint's");
}
