//! The text of a document as the index and `memory_get` see it: markdown and plain text as
//! they are, HTML converted to markdown (scripts and styles left out), so that line ranges
//! from a search point at the same lines `memory_get` shows.

use std::path::Path;

/// Tags whose content is never text a reader sees.
const SKIPPED_TAGS: [&str; 5] = ["script", "style", "noscript", "template", "svg"];

pub fn document_text(path: &Path, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let is_html = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
    if !is_html {
        return text.into_owned();
    }
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    // A page htmd cannot read is still searchable by its raw text.
    converter
        .convert(&text)
        .unwrap_or_else(|_| text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn html_becomes_markdown_without_scripts_and_other_files_stay_as_they_are() {
        let html = b"<html><head><style>p{}</style><script>track()</script></head><body><h1>Boiler</h1><p>Serviced by <b>Ravi</b> in May.</p></body></html>";
        assert_eq!(
            document_text(Path::new("knowledge/house.HTML"), html),
            "# Boiler\n\nServiced by **Ravi** in May."
        );
        assert_eq!(
            document_text(Path::new("knowledge/notes.md"), b"<b>kept</b>"),
            "<b>kept</b>"
        );
    }
}
