//! Fits a provider-neutral request to one model before an adapter writes it: what the model
//! cannot take is replaced or left out, and what its provider would reject is repaired. The
//! history may come from other providers (a fallback, a changed `model`, a hand-edited
//! transcript), so nothing here assumes it was made by this one.

use std::borrow::Cow;

use nanocrab_schema::{ContentBlock, Image, LlmMessage, Role, ToolCall, ToolResult};

use crate::profile::{ModelProfile, ToolCallIds};
use crate::provider::ChatRequest;

pub(crate) fn prepare<'a>(
    request: &'a ChatRequest<'_>,
    profile: &ModelProfile,
    provider: &str,
) -> ChatRequest<'a> {
    let model = &*request.model;
    // Most histories need nothing fitted: they are then sent as they are, not copied.
    let fits = request.messages.iter().all(|message| {
        message
            .content
            .iter()
            .all(|block| block_fits(block, profile, provider))
            && !useless(message)
    });
    let messages = if fits {
        Cow::Borrowed(&*request.messages)
    } else {
        Cow::Owned(
            request
                .messages
                .iter()
                .filter_map(|message| {
                    let message = LlmMessage {
                        role: message.role,
                        content: message
                            .content
                            .iter()
                            .filter_map(|block| fit_block(block, profile, provider, model))
                            .collect(),
                    };
                    (!useless(&message)).then_some(message)
                })
                .collect(),
        )
    };
    ChatRequest {
        model: Cow::Borrowed(model),
        system: Cow::Borrowed(&request.system),
        messages,
        tools: if profile.tools {
            Cow::Borrowed(&request.tools)
        } else {
            Cow::Borrowed(&[])
        },
        max_tokens: request.max_tokens,
        temperature: request.temperature,
    }
}

/// An answer with neither text nor tool calls (reasoning only, or nothing) is rejected by
/// Anthropic and Gemini and tells every model nothing; so is a question left with no content.
fn useless(message: &LlmMessage) -> bool {
    match message.role {
        Role::Assistant => {
            message.text().trim().is_empty() && message.tool_calls().next().is_none()
        }
        Role::User => message.content.is_empty(),
    }
}

/// Whether [`fit_block`] would give `block` back unchanged.
fn block_fits(block: &ContentBlock, profile: &ModelProfile, provider: &str) -> bool {
    let foreign = |origin: &Option<String>| origin.as_deref().is_some_and(|o| o != provider);
    match block {
        ContentBlock::Text { text } => !text.is_empty(),
        ContentBlock::Thinking { origin, .. } | ContentBlock::RedactedThinking { origin, .. } => {
            !foreign(origin)
        }
        ContentBlock::Image(_) => profile.vision,
        ContentBlock::ToolUse(call) => id_fits(&call.id, profile.tool_call_ids),
        ContentBlock::ToolResult(result) => id_fits(&result.tool_use_id, profile.tool_call_ids),
    }
}

/// Whether [`fit_id`] would give `id` back unchanged.
fn id_fits(id: &str, style: ToolCallIds) -> bool {
    match style {
        ToolCallIds::Any => id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        ToolCallIds::Alphanumeric9 => {
            id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric())
        }
    }
}

fn fit_block(
    block: &ContentBlock,
    profile: &ModelProfile,
    provider: &str,
    model: &str,
) -> Option<ContentBlock> {
    let foreign = |origin: &Option<String>| origin.as_deref().is_some_and(|o| o != provider);
    Some(match block {
        // Anthropic rejects empty text blocks; no provider needs them.
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { .. } => block.clone(),
        // Another provider's signature would be rejected; the reasoning text itself stays
        // for the providers that take it back unsigned.
        ContentBlock::Thinking {
            thinking, origin, ..
        } if foreign(origin) => ContentBlock::Thinking {
            thinking: thinking.clone(),
            signature: None,
            origin: None,
        },
        ContentBlock::Thinking { .. } => block.clone(),
        ContentBlock::RedactedThinking { origin, .. } if foreign(origin) => return None,
        ContentBlock::RedactedThinking { .. } => block.clone(),
        ContentBlock::Image(image) if profile.vision => ContentBlock::Image(image.clone()),
        ContentBlock::Image(image) => ContentBlock::text(image_note(image, provider, model)),
        ContentBlock::ToolUse(call) => ContentBlock::ToolUse(ToolCall {
            id: fit_id(&call.id, profile.tool_call_ids),
            ..call.clone()
        }),
        ContentBlock::ToolResult(result) => ContentBlock::ToolResult(ToolResult {
            tool_use_id: fit_id(&result.tool_use_id, profile.tool_call_ids),
            ..result.clone()
        }),
    })
}

/// What a model that cannot see images gets instead of one, so that it can tell the user.
/// It starts on a paragraph of its own: some wires join a message's text blocks.
fn image_note(image: &Image, provider: &str, model: &str) -> String {
    let kib = image.byte_len().div_ceil(1024);
    format!(
        "\n\n[The user sent an image ({}, {kib} KB) that was not passed on: {provider}/{model} does not accept images. Tell the user so. If the model does accept images, the user can set providers.{provider}.models.{model}.vision to true in config.json.]",
        image.media_type
    )
}

/// A tool-call id the provider accepts. The same id always maps to the same result, so a call
/// and its result still match.
fn fit_id(id: &str, style: ToolCallIds) -> String {
    match style {
        // Anthropic allows only letters, digits, `_` and `-`.
        ToolCallIds::Any => id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect(),
        ToolCallIds::Alphanumeric9
            if id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            id.to_owned()
        }
        ToolCallIds::Alphanumeric9 => {
            const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
            // FNV-1a: stable across runs and platforms, unlike std's hasher.
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for byte in id.bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
            (0..9)
                .map(|_| {
                    let digit = DIGITS[(hash % 62) as usize];
                    hash /= 62;
                    char::from(digit)
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ModelProfile;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn request(messages: Vec<LlmMessage>) -> ChatRequest<'static> {
        ChatRequest {
            model: "m".into(),
            system: "s".into(),
            messages: messages.into(),
            tools: vec![nanocrab_schema::ToolDef {
                name: "echo".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }]
            .into(),
            max_tokens: 10,
            temperature: None,
        }
    }

    fn call(id: &str) -> LlmMessage {
        LlmMessage {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse(ToolCall {
                id: id.into(),
                name: "echo".into(),
                input: json!({}),
            })],
        }
    }

    fn result(id: &str) -> LlmMessage {
        LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::ok(id, "ok"))],
        }
    }

    #[test]
    fn foreign_signatures_are_dropped_and_own_ones_kept() {
        let thinking = |origin: &str| ContentBlock::Thinking {
            thinking: "hm".into(),
            signature: Some("sig".into()),
            origin: Some(origin.into()),
        };
        let answer = LlmMessage {
            role: Role::Assistant,
            content: vec![
                thinking("gemini"),
                thinking("anthropic"),
                ContentBlock::RedactedThinking {
                    data: "x".into(),
                    origin: Some("gemini".into()),
                },
                ContentBlock::text("hi"),
            ],
        };
        let request = request(vec![LlmMessage::user("q"), answer]);
        let prepared = prepare(&request, &ModelProfile::GENERIC, "anthropic");
        assert_eq!(
            prepared.messages[1].content,
            vec![
                ContentBlock::Thinking {
                    thinking: "hm".into(),
                    signature: None,
                    origin: None
                },
                thinking("anthropic"),
                ContentBlock::text("hi"),
            ]
        );
    }

    #[test]
    fn mistral_gets_nine_character_ids_that_still_pair_up() {
        let profile = ModelProfile {
            tool_call_ids: ToolCallIds::Alphanumeric9,
            ..ModelProfile::GENERIC
        };
        let request = request(vec![
            LlmMessage::user("q"),
            call("toolu_01A09q90qw90lq917835lq9"),
            result("toolu_01A09q90qw90lq917835lq9"),
            call("abcDEF123"),
            result("abcDEF123"),
        ]);
        let prepared = prepare(&request, &profile, "mistral");
        let ids: Vec<String> = prepared
            .messages
            .iter()
            .flat_map(|m| {
                m.tool_calls()
                    .map(|c| c.id.clone())
                    .chain(m.tool_results().map(|r| r.tool_use_id.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(ids[0], ids[1]);
        assert_eq!(ids[2..], ["abcDEF123", "abcDEF123"]);
        assert!(
            ids[0].len() == 9 && ids[0].chars().all(|c| c.is_ascii_alphanumeric()),
            "{}",
            ids[0]
        );
        assert_eq!(fit_id("call:0/x", ToolCallIds::Any), "call_0_x");
    }

    #[test]
    fn images_become_a_note_for_a_model_that_cannot_see_and_tools_go_without_tool_support() {
        let photo = LlmMessage {
            role: Role::User,
            content: vec![
                ContentBlock::text("what is this?"),
                ContentBlock::Image(Image {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                    file: None,
                }),
            ],
        };
        let profile = ModelProfile {
            tools: false,
            ..ModelProfile::GENERIC
        };
        let request = request(vec![photo]);
        let prepared = prepare(&request, &profile, "ollama");
        assert_eq!(
            prepared.messages[0].content[1],
            ContentBlock::text(
                "\n\n[The user sent an image (image/png, 1 KB) that was not passed on: ollama/m does not accept images. Tell the user so. If the model does accept images, the user can set providers.ollama.models.m.vision to true in config.json.]"
            )
        );
        assert!(prepared.tools.is_empty());
    }

    #[test]
    fn empty_blocks_and_answers_without_content_are_left_out() {
        let reasoning_only = LlmMessage {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Thinking {
                    thinking: "…".into(),
                    signature: None,
                    origin: None,
                },
                ContentBlock::text(""),
            ],
        };
        let request = request(vec![
            LlmMessage::user("one"),
            reasoning_only,
            LlmMessage::user("two"),
        ]);
        let prepared = prepare(&request, &ModelProfile::GENERIC, "openai");
        assert_eq!(
            prepared.messages,
            vec![LlmMessage::user("one"), LlmMessage::user("two")]
        );
    }
}
