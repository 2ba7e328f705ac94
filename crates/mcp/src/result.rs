//! What an MCP tool returned, as the text of a tool result. A tool result carries text only
//! (nanocrab_schema::ToolResult), so images and audio are described, not passed on.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The most characters of one result the model is shown; the rest is cut with a note. A
/// tenth of a 100k-token context window, about.
pub const MAX_RESULT_CHARS: usize = 40_000;

/// A tool's answer as text, and whether the server said it is an error (`isError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    pub is_error: bool,
}

/// The content blocks of `result` one after another, then its structured content as pretty
/// JSON unless a text block already says the same, capped at [`MAX_RESULT_CHARS`].
pub fn render(result: &CallToolResult) -> Rendered {
    let mut parts: Vec<String> = result.content.iter().map(describe).collect();
    if let Some(structured) = &result.structured_content {
        // SDKs put a tool's plain return value in both: the text, and `{"result": ...}`.
        let said = result.content.iter().any(|block| {
            let ContentBlock::Text(text) = block else {
                return false;
            };
            let parsed = serde_json::from_str::<serde_json::Value>(&text.text).ok();
            let says = |value: &serde_json::Value| {
                value.as_str() == Some(text.text.as_str()) || parsed.as_ref() == Some(value)
            };
            says(structured)
                || structured
                    .as_object()
                    .is_some_and(|fields| fields.len() == 1 && fields.values().all(says))
        });
        if !said {
            parts.push(serde_json::to_string_pretty(structured).unwrap_or_default());
        }
    }
    let text = parts.join("\n");
    Rendered {
        text: cap(if text.trim().is_empty() {
            "(no content)".to_owned()
        } else {
            text
        }),
        is_error: result.is_error == Some(true),
    }
}

fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image: {}, {}]",
            image.mime_type,
            size_of_base64(&image.data)
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {}]",
            audio.mime_type,
            size_of_base64(&audio.data)
        ),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}: {}, {}]",
                mime_type.as_deref().unwrap_or("binary data"),
                size_of_base64(blob)
            ),
            other => serde_json::to_string(other).unwrap_or_default(),
        },
        ContentBlock::ResourceLink(link) => {
            let mut about = vec![link.name.clone()];
            about.extend(link.mime_type.clone());
            let mut line = format!("{} ({})", link.uri, about.join(", "));
            if let Some(description) = &link.description {
                line.push_str(": ");
                line.push_str(description);
            }
            line
        }
        // A kind of content newer than this nanocrab: its JSON is the best description.
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The size of the bytes `data` (base64) decodes to, for a person: `34 KB`, `812 bytes`.
fn size_of_base64(data: &str) -> String {
    let digits = data.trim_end_matches('=').len();
    let bytes = digits * 3 / 4;
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        format!("{} KB", bytes.div_ceil(1024))
    }
}

fn cap(text: String) -> String {
    let chars = text.chars().count();
    if chars <= MAX_RESULT_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MAX_RESULT_CHARS).collect();
    format!(
        "{kept}\n[... {} more characters left out: a tool result is capped at \
         {MAX_RESULT_CHARS} characters]",
        chars - MAX_RESULT_CHARS
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn result(value: serde_json::Value) -> CallToolResult {
        match serde_json::from_value(value) {
            Ok(result) => result,
            Err(err) => panic!("not a tool result: {err}"),
        }
    }

    #[test]
    fn every_kind_of_content_becomes_text() {
        let rendered = render(&result(json!({
            "content": [
                {"type": "text", "text": "Here it is:"},
                {"type": "image", "data": "A".repeat(4 * 12_000), "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "a note"}},
                {"type": "resource", "resource": {"uri": "file:///a.zip", "blob": "AAAAAAAA"}},
                {"type": "resource_link", "uri": "file:///b.md", "name": "b.md", "mimeType": "text/markdown", "description": "the other file"}
            ],
            "structuredContent": {"temperature": 33}
        })));
        assert_eq!(
            rendered,
            Rendered {
                text: "Here it is:\n[image: image/png, 36 KB]\n[audio: audio/wav, 3 bytes]\n\
                       [resource file:///notes.txt]\na note\n[resource file:///a.zip: binary data, 6 bytes]\n\
                       file:///b.md (b.md, text/markdown): the other file\n{\n  \"temperature\": 33\n}"
                    .to_owned(),
                is_error: false,
            }
        );
    }

    #[test]
    fn structured_content_already_given_as_text_is_not_repeated() {
        let rendered = render(&result(json!({
            "content": [{"type": "text", "text": "{\"temperature\":33,\"conditions\":\"Cloudy\"}"}],
            "structuredContent": {"conditions": "Cloudy", "temperature": 33}
        })));
        assert_eq!(
            rendered.text,
            "{\"temperature\":33,\"conditions\":\"Cloudy\"}"
        );
        let wrapped = render(&result(json!({
            "content": [{"type": "text", "text": "buy milk\n"}],
            "structuredContent": {"content": "buy milk\n"}
        })));
        assert_eq!(wrapped.text, "buy milk\n");
    }

    #[test]
    fn errors_empty_results_and_long_ones() {
        let rendered = render(&result(
            json!({"content": [{"type": "text", "text": "no such repo"}], "isError": true}),
        ));
        assert_eq!(
            rendered,
            Rendered {
                text: "no such repo".to_owned(),
                is_error: true
            }
        );
        assert_eq!(render(&result(json!({"content": []}))).text, "(no content)");
        let long = render(&result(
            json!({"content": [{"type": "text", "text": "x".repeat(MAX_RESULT_CHARS + 5)}]}),
        ));
        assert!(
            long.text.ends_with(
                "\n[... 5 more characters left out: a tool result is capped at 40000 characters]"
            ),
            "{}",
            &long.text[MAX_RESULT_CHARS..]
        );
    }
}
