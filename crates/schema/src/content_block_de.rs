//! Reading a [`ContentBlock`] without buffering it first. serde's derive for an internally
//! tagged enum copies every block into an intermediate tree before it knows the variant, which
//! doubled the cost of reading a transcript: every turn of a conversation whose transcript is
//! not cached reads all of it. Blocks written by nanocrab (and by serde) put `type` first, so
//! the variant is known at once and its fields are read straight into it; a block whose `type`
//! comes later (hand-written JSON) is read the derive's way.

use std::fmt;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::message::{ContentBlock, Image};
use crate::tool::{ToolCall, ToolResult};

#[derive(Deserialize)]
struct TextFields {
    text: String,
}

#[derive(Deserialize)]
struct ThinkingFields {
    thinking: String,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    origin: Option<String>,
}

#[derive(Deserialize)]
struct RedactedFields {
    data: String,
    #[serde(default)]
    origin: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Text,
    Thinking,
    RedactedThinking,
    Image,
    ToolUse,
    ToolResult,
}

/// The derive's reading, for a block whose `type` is not its first key.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Tagged {
    Text(TextFields),
    Thinking(ThinkingFields),
    RedactedThinking(RedactedFields),
    Image(Image),
    ToolUse(ToolCall),
    ToolResult(ToolResult),
}

impl From<Tagged> for ContentBlock {
    fn from(tagged: Tagged) -> Self {
        match tagged {
            Tagged::Text(fields) => ContentBlock::Text { text: fields.text },
            Tagged::Thinking(fields) => ContentBlock::Thinking {
                thinking: fields.thinking,
                signature: fields.signature,
                origin: fields.origin,
            },
            Tagged::RedactedThinking(fields) => ContentBlock::RedactedThinking {
                data: fields.data,
                origin: fields.origin,
            },
            Tagged::Image(image) => ContentBlock::Image(image),
            Tagged::ToolUse(call) => ContentBlock::ToolUse(call),
            Tagged::ToolResult(result) => ContentBlock::ToolResult(result),
        }
    }
}

/// A block's first key: `type`, or another one kept for the slow path.
enum FirstKey {
    Type,
    Other(String),
}

impl<'de> Deserialize<'de> for FirstKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = FirstKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<FirstKey, E> {
                Ok(match key {
                    "type" => FirstKey::Type,
                    other => FirstKey::Other(other.to_owned()),
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block (an object with a `type`)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
        let first = match map.next_key::<FirstKey>()? {
            Some(FirstKey::Type) => None,
            Some(FirstKey::Other(key)) => Some(key),
            None => return Err(de::Error::missing_field("type")),
        };
        let Some(first) = first else {
            let kind: Kind = map.next_value()?;
            let rest = MapAccessDeserializer::new(map);
            return Ok(match kind {
                Kind::Text => ContentBlock::Text {
                    text: TextFields::deserialize(rest)?.text,
                },
                Kind::Thinking => {
                    let fields = ThinkingFields::deserialize(rest)?;
                    ContentBlock::Thinking {
                        thinking: fields.thinking,
                        signature: fields.signature,
                        origin: fields.origin,
                    }
                }
                Kind::RedactedThinking => {
                    let fields = RedactedFields::deserialize(rest)?;
                    ContentBlock::RedactedThinking {
                        data: fields.data,
                        origin: fields.origin,
                    }
                }
                Kind::Image => ContentBlock::Image(Image::deserialize(rest)?),
                Kind::ToolUse => ContentBlock::ToolUse(ToolCall::deserialize(rest)?),
                Kind::ToolResult => ContentBlock::ToolResult(ToolResult::deserialize(rest)?),
            });
        };
        let mut object = serde_json::Map::new();
        object.insert(first, map.next_value()?);
        while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
            object.insert(key, value);
        }
        Tagged::deserialize(serde_json::Value::Object(object))
            .map(ContentBlock::from)
            .map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    /// Every variant reads the same whether `type` comes first (the fast way) or last (the
    /// derive's way), and writing then reading gives the block back.
    #[test]
    fn every_variant_reads_with_type_first_or_last() {
        let blocks = vec![
            ContentBlock::text("hi"),
            ContentBlock::Thinking {
                thinking: "hm".into(),
                signature: Some("sig".into()),
                origin: Some("anthropic".into()),
            },
            ContentBlock::Thinking {
                thinking: "hm".into(),
                signature: None,
                origin: None,
            },
            ContentBlock::RedactedThinking {
                data: "x".into(),
                origin: None,
            },
            ContentBlock::Image(Image {
                media_type: "image/png".into(),
                data: String::new(),
                file: Some("media/a.png".into()),
            }),
            ContentBlock::ToolUse(ToolCall {
                id: "c1".into(),
                name: "exec".into(),
                input: json!({"command": "ls", "nested": {"a": [1, 2]}}),
            }),
            ContentBlock::ToolResult(ToolResult::error("c1", "Error: denied")),
        ];
        for block in blocks {
            let written = serde_json::to_value(&block).unwrap();
            assert_eq!(written.as_object().unwrap().keys().next().unwrap(), "type");
            let text = serde_json::to_string(&block).unwrap();
            assert_eq!(serde_json::from_str::<ContentBlock>(&text).unwrap(), block);
            // The same object with `type` moved to the end.
            let mut fields = written.as_object().unwrap().clone();
            let kind = fields.remove("type").unwrap();
            let mut moved: String = serde_json::to_string(&fields).unwrap();
            moved.pop();
            let sep = if fields.is_empty() { "" } else { "," };
            moved.push_str(&format!("{sep}\"type\":{kind}}}"));
            assert_eq!(
                serde_json::from_str::<ContentBlock>(&moved).unwrap(),
                block,
                "{moved}"
            );
            assert_eq!(
                serde_json::from_value::<ContentBlock>(written).unwrap(),
                block
            );
        }
    }

    #[test]
    fn unknown_and_missing_types_are_errors_and_unknown_fields_are_ignored() {
        let read =
            |text: &str| serde_json::from_str::<ContentBlock>(text).map_err(|e| e.to_string());
        assert_eq!(
            read(r#"{"type": "text", "text": "a", "extra": [1]}"#),
            Ok(ContentBlock::text("a"))
        );
        assert_eq!(
            read(r#"{"extra": 1, "text": "a", "type": "text"}"#),
            Ok(ContentBlock::text("a"))
        );
        assert!(
            read(r#"{"type": "video", "url": "x"}"#)
                .unwrap_err()
                .contains("unknown variant `video`")
        );
        assert!(
            read(r#"{"text": "a"}"#)
                .unwrap_err()
                .contains("missing field `type`")
        );
        assert!(read(r#"{}"#).unwrap_err().contains("missing field `type`"));
        assert!(
            read(r#"{"type": "text"}"#)
                .unwrap_err()
                .contains("missing field `text`")
        );
    }
}
