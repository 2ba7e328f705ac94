//! Adapters over HTTP against the loopback mock: request bodies, retries, status errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use nanocrab_config::{Config, ProviderConfig};
use nanocrab_provider::{
    ChatRequest, MaxTokensField, ModelProfile, Protocol, ReasoningEcho, RetryPolicy, Temperature,
    ToolCallContent, request_body, resolve_model,
};
use nanocrab_schema::{ContentBlock, LlmMessage, Role, ToolCall, ToolDef, ToolResult};
use nanocrab_testkit::{MockLlm, Reply};
use pretty_assertions::assert_eq;
use serde_json::json;

const KEY: &str = "sk-test-http-5ecret";

fn conversation() -> ChatRequest<'static> {
    ChatRequest {
        model: "m".into(),
        system: "You are nanocrab.".into(),
        messages: vec![
            LlmMessage::user("list my files"),
            LlmMessage {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("Looking."),
                    ContentBlock::ToolUse(ToolCall {
                        id: "call_1".into(),
                        name: "list_dir".into(),
                        input: json!({"path": "."}),
                    }),
                ],
            },
            LlmMessage {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult::error(
                    "call_1",
                    "Error: denied",
                ))],
            },
        ]
        .into(),
        tools: vec![ToolDef {
            name: "list_dir".into(),
            description: "List a directory.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
        .into(),
        max_tokens: 1024,
        temperature: Some(0.5),
    }
}

fn profile(provider: &str, model: &str) -> ModelProfile {
    nanocrab_provider::model_profile(provider, model, &Config::default())
}

#[test]
fn request_bodies() {
    insta::assert_json_snapshot!(
        "anthropic_body",
        request_body(
            Protocol::AnthropicMessages,
            &conversation(),
            &profile("anthropic", "claude-sonnet-4-5"),
            "anthropic"
        )
    );
    insta::assert_json_snapshot!(
        "openai_body",
        request_body(
            Protocol::OpenAiChat,
            &conversation(),
            &profile("openai", "gpt-4.1"),
            "openai"
        )
    );
    let mut gemini = conversation();
    // A signature Gemini attached to the call must go back on the same part.
    gemini.messages.to_mut()[1].content.insert(
        1,
        ContentBlock::Thinking {
            thinking: String::new(),
            signature: Some("sig-1".into()),
            origin: Some("gemini".into()),
        },
    );
    insta::assert_json_snapshot!(
        "gemini_body",
        request_body(
            Protocol::Gemini,
            &gemini,
            &profile("gemini", "gemini-2.5-flash"),
            "gemini"
        )
    );
    let mut responses = conversation();
    responses.messages.to_mut()[1].content.insert(
        0,
        ContentBlock::Thinking {
            thinking: "The user wants a listing.".into(),
            signature: Some("gAAAA-encrypted".into()),
            origin: Some("openai".into()),
        },
    );
    insta::assert_json_snapshot!(
        "responses_body",
        request_body(
            Protocol::OpenAiResponses,
            &responses,
            &profile("openai", "gpt-5-codex"),
            "openai"
        )
    );
}

/// Continues `conversation()` with a question that has a tool result and a picture, and an
/// answer that reasons (`thinking`) and makes a call whose arguments could not be parsed.
fn add_a_picture_and_a_broken_call(messages: &mut Vec<LlmMessage>, thinking: ContentBlock) {
    messages.push(LlmMessage {
        role: Role::User,
        content: vec![
            ContentBlock::ToolResult(ToolResult::ok("call_1", "a.txt")),
            ContentBlock::text("and this picture?"),
            ContentBlock::Image(nanocrab_schema::Image {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
                file: None,
            }),
        ],
    });
    messages.push(LlmMessage {
        role: Role::Assistant,
        content: vec![
            thinking,
            ContentBlock::ToolUse(ToolCall {
                id: "call_2".into(),
                name: "read_file".into(),
                input: json!("{\"path\": \"a.txt\""),
            }),
        ],
    });
}

/// Every shape the Anthropic Messages body takes: signed, unsigned and redacted reasoning,
/// images, failed tool results, arguments that are not an object, cache marks on the system
/// prompt, the last tool and the newest block that is not reasoning, no system prompt, and a
/// temperature the model does not take.
#[test]
fn anthropic_body_variants() {
    let mut request = conversation();
    let messages = request.messages.to_mut();
    messages[1].content.insert(
        0,
        ContentBlock::Thinking {
            thinking: "Which folder?".into(),
            signature: Some("sig-1".into()),
            origin: Some("anthropic".into()),
        },
    );
    messages[1].content.insert(
        1,
        ContentBlock::RedactedThinking {
            data: "opaque".into(),
            origin: Some("anthropic".into()),
        },
    );
    add_a_picture_and_a_broken_call(
        messages,
        ContentBlock::Thinking {
            thinking: "unsigned, from elsewhere".into(),
            signature: None,
            origin: None,
        },
    );
    let base = ModelProfile {
        vision: true,
        ..profile("anthropic", "claude-sonnet-4-5")
    };
    let variants = [
        (
            "cached",
            ModelProfile {
                prompt_caching: true,
                ..base
            },
        ),
        (
            "plain_no_temperature",
            ModelProfile {
                prompt_caching: false,
                temperature: Temperature::Omit,
                ..base
            },
        ),
    ];
    for (name, profile) in variants {
        insta::assert_json_snapshot!(
            format!("anthropic_body_{name}"),
            request_body(Protocol::AnthropicMessages, &request, &profile, "anthropic")
        );
    }
    let mut bare = conversation();
    bare.messages = vec![LlmMessage::user("hi")].into();
    bare.system = "".into();
    bare.tools = Vec::new().into();
    insta::assert_json_snapshot!(
        "anthropic_body_cached_bare",
        request_body(
            Protocol::AnthropicMessages,
            &bare,
            &ModelProfile {
                prompt_caching: true,
                ..base
            },
            "anthropic"
        )
    );
}

/// Every shape the Chat Completions body takes: images, reasoning sent back either way, a
/// tool-only answer's content, cache marks (OpenRouter), the other token limit field, and a
/// temperature the model does not take.
#[test]
fn openai_body_variants() {
    let mut request = conversation();
    let thinking = ContentBlock::Thinking {
        thinking: "Which folder?".into(),
        signature: None,
        origin: None,
    };
    let messages = request.messages.to_mut();
    messages[1].content.insert(0, thinking.clone());
    add_a_picture_and_a_broken_call(messages, thinking);
    messages.push(LlmMessage {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResult::ok("call_2", "hello"))],
    });
    let base = ModelProfile {
        vision: true,
        ..profile("openai", "gpt-4.1")
    };
    let variants = [
        ("plain", base),
        (
            "cached_reasoning_content_empty_string",
            ModelProfile {
                prompt_caching: true,
                reasoning_echo: ReasoningEcho::ReasoningContent,
                tool_call_content: ToolCallContent::EmptyString,
                max_tokens_field: MaxTokensField::MaxCompletionTokens,
                stream_usage: false,
                ..base
            },
        ),
        (
            "think_tags_no_vision_no_tools",
            ModelProfile {
                vision: false,
                tools: false,
                reasoning_echo: ReasoningEcho::ThinkTags,
                temperature: Temperature::Fixed(1.0),
                ..base
            },
        ),
    ];
    for (name, profile) in variants {
        insta::assert_json_snapshot!(
            format!("openai_body_{name}"),
            request_body(Protocol::OpenAiChat, &request, &profile, "openrouter")
        );
    }
    // Marks on a system prompt alone, and none on an empty one.
    let mut bare = conversation();
    bare.messages = vec![LlmMessage::user("hi")].into();
    let cached = ModelProfile {
        prompt_caching: true,
        ..base
    };
    insta::assert_json_snapshot!(
        "openai_body_cached_short",
        request_body(Protocol::OpenAiChat, &bare, &cached, "openrouter")
    );
    bare.system = "".into();
    insta::assert_json_snapshot!(
        "openai_body_cached_no_system",
        request_body(Protocol::OpenAiChat, &bare, &cached, "openrouter")
    );
}

fn config(provider: &str, base: String) -> Config {
    let mut config = Config::default();
    config.providers.insert(
        provider.into(),
        ProviderConfig {
            api_key: Some(KEY.into()),
            api_base: Some(base),
            ..ProviderConfig::default()
        },
    );
    config
}

fn fast() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
    }
}

async fn chat(
    provider: &str,
    mock: &MockLlm,
) -> Result<(String, nanocrab_provider::ChatResponse), nanocrab_provider::ProviderError> {
    let base = if provider == "anthropic" {
        mock.anthropic_base()
    } else {
        mock.openai_base()
    };
    let resolved = resolve_model(
        &format!("{provider}/m"),
        &config(provider, base),
        &|_| None,
        fast(),
        &no_local_models(),
    )
    .unwrap();
    let mut streamed = String::new();
    let response = resolved
        .provider
        .chat(&conversation(), &mut |delta| {
            if let nanocrab_provider::ProviderDelta::Text(t) = delta {
                streamed.push_str(&t);
            }
        })
        .await?;
    Ok((streamed, response))
}

#[tokio::test]
async fn both_adapters_stream_text_and_send_their_auth() {
    for provider in ["anthropic", "openai"] {
        let mock = MockLlm::start().await;
        mock.push(Reply::text("Hello there"));
        let (streamed, response) = chat(provider, &mock).await.unwrap();
        assert_eq!(streamed, "Hello there");
        assert_eq!(response.content, vec![ContentBlock::text("Hello there")]);
        let headers = &mock.requests()[0].headers;
        match provider {
            "anthropic" => assert_eq!(headers["x-api-key"], KEY),
            _ => assert_eq!(headers["authorization"], format!("Bearer {KEY}")),
        }
    }
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_never_shows_the_key() {
    for provider in ["anthropic", "openai"] {
        let mock = MockLlm::start().await;
        mock.push(Reply::unauthorized());
        let err = chat(provider, &mock).await.unwrap_err().to_string();
        assert_eq!(mock.requests().len(), 1);
        assert!(!err.contains("5ecret") && !err.contains("sk-test"), "{err}");
        insta::assert_snapshot!(format!("unauthorized_{provider}"), err);
    }
}

#[tokio::test]
async fn overload_and_rate_limits_are_retried() {
    let mock = MockLlm::start().await;
    mock.push(Reply::overloaded());
    mock.push(Reply::rate_limited().with_header("retry-after", "0"));
    mock.push(Reply::text("made it"));
    let (_, response) = chat("anthropic", &mock).await.unwrap();
    assert_eq!(response.content, vec![ContentBlock::text("made it")]);
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn retries_give_up_with_a_clear_error() {
    let mock = MockLlm::start().await;
    for _ in 0..4 {
        mock.push(Reply::overloaded());
    }
    let err = chat("anthropic", &mock).await.unwrap_err().to_string();
    assert_eq!(
        err,
        "anthropic: HTTP 529: Overloaded (after 4 attempts). The provider is having trouble: try again later"
    );
}

#[tokio::test]
async fn an_unreachable_server_names_the_url() {
    let config = config("openai", "http://127.0.0.1:9/v1".into());
    let resolved = resolve_model(
        "openai/m",
        &config,
        &|_| None,
        RetryPolicy {
            max_retries: 0,
            ..fast()
        },
        &no_local_models(),
    )
    .unwrap();
    let err = resolved
        .provider
        .chat(&conversation(), &mut |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("openai: cannot reach http://127.0.0.1:9/v1/chat/completions: "),
        "{err}"
    );
}

/// Local models over a store that is never read: these tests resolve HTTP providers only.
fn no_local_models() -> nanocrab_provider::LocalModels {
    nanocrab_provider::LocalModels::new(
        nanocrab_models::ModelStore::new("/nonexistent/models"),
        nanocrab_models::Catalogue::builtin(),
        None,
    )
}
