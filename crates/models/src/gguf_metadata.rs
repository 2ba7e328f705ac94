//! Typed reads of a GGUF file's metadata; errors are plain details that the caller ties to
//! the file's path.

use candle_core::quantized::gguf_file::{Content, Value};

pub(crate) fn value<'a>(content: &'a Content, key: &str) -> Result<&'a Value, String> {
    content
        .metadata
        .get(key)
        .ok_or_else(|| format!("the metadata has no `{key}`"))
}

pub(crate) fn string<'a>(content: &'a Content, key: &str) -> Result<&'a str, String> {
    value(content, key)?
        .to_string()
        .map(String::as_str)
        .map_err(|err| format!("`{key}`: {err}"))
}

pub(crate) fn u32(content: &Content, key: &str) -> Result<u32, String> {
    value(content, key)?
        .to_u32()
        .map_err(|err| format!("`{key}`: {err}"))
}

pub(crate) fn optional_u32(content: &Content, key: &str) -> Result<Option<u32>, String> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(_) => u32(content, key).map(Some),
    }
}

pub(crate) fn optional_bool(content: &Content, key: &str) -> Result<Option<bool>, String> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(value) => value
            .to_bool()
            .map(Some)
            .map_err(|err| format!("`{key}`: {err}")),
    }
}

pub(crate) fn strings(content: &Content, key: &str) -> Result<Vec<String>, String> {
    let items = value(content, key)?
        .to_vec()
        .map_err(|err| format!("`{key}`: {err}"))?;
    items
        .iter()
        .map(|item| {
            item.to_string()
                .cloned()
                .map_err(|err| format!("`{key}`: {err}"))
        })
        .collect()
}

/// An absent array reads as empty: token types are optional in GGUF.
pub(crate) fn optional_i32s(content: &Content, key: &str) -> Result<Vec<i32>, String> {
    let Some(value) = content.metadata.get(key) else {
        return Ok(Vec::new());
    };
    let items = value.to_vec().map_err(|err| format!("`{key}`: {err}"))?;
    items
        .iter()
        .map(|item| item.to_i32().map_err(|err| format!("`{key}`: {err}")))
        .collect()
}
