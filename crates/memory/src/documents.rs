//! The text of a document as the index and `memory_get` see it: markdown and plain text as
//! they are, HTML converted to markdown (scripts and styles left out), PDF as the text on its
//! pages, so that line ranges from a search point at the same lines `memory_get` shows.

use std::path::Path;

/// Tags whose content is never text a reader sees.
#[cfg(feature = "documents")]
const SKIPPED_TAGS: [&str; 5] = ["script", "style", "noscript", "template", "svg"];

/// A document with no text to give. Only PDFs fail (and HTML in a build without the
/// `documents` feature): any other file is read as text.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("the PDF is locked with a password")]
    PdfEncrypted,
    #[cfg(feature = "documents")]
    #[error("the PDF cannot be read: {source}")]
    PdfDamaged { source: lopdf::Error },
    #[error("the PDF has no text, only images (a scan?)")]
    PdfWithoutText,
    /// Rather than index markup or PDF bytes as if they were text.
    #[error(
        "this nanocrab was built without reading {kind} (cargo feature `documents`); build it with `cargo build --release -p nanocrab --features documents`"
    )]
    NotBuilt { kind: &'static str },
}

pub fn document_text(path: &Path, bytes: &[u8]) -> Result<String, DocumentError> {
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let is = |ending: &str| extension.eq_ignore_ascii_case(ending);
    if is("pdf") {
        #[cfg(feature = "documents")]
        return crate::pdf::pdf_text(bytes);
        #[cfg(not(feature = "documents"))]
        return Err(DocumentError::NotBuilt { kind: "PDF" });
    }
    let text = String::from_utf8_lossy(bytes);
    if extension == "jsonl" {
        return Ok(transcript_text(&text));
    }
    if !(is("html") || is("htm")) {
        return Ok(text.into_owned());
    }
    #[cfg(feature = "documents")]
    {
        let converter = htmd::HtmlToMarkdown::builder()
            .skip_tags(SKIPPED_TAGS.to_vec())
            .build();
        // A page htmd cannot read is still searchable by its raw text.
        Ok(converter
            .convert(&text)
            .unwrap_or_else(|_| text.into_owned()))
    }
    #[cfg(not(feature = "documents"))]
    Err(DocumentError::NotBuilt { kind: "HTML" })
}

/// A session transcript as text: for each line of the file one line, what the user or the
/// assistant said on it (the rest blank), so that line numbers are the file's.
fn transcript_text(jsonl: &str) -> String {
    jsonl
        .lines()
        .map(
            |line| match serde_json::from_str::<nanocrab_sessions::SessionEntry>(line) {
                Ok(entry) => {
                    let said = entry
                        .message()
                        .text()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ");
                    if said.is_empty() {
                        String::new()
                    } else {
                        let who = match entry.role {
                            nanocrab_schema::Role::User => "user",
                            nanocrab_schema::Role::Assistant => "assistant",
                        };
                        format!("{who}: {said}")
                    }
                }
                Err(_) => String::new(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn html_becomes_markdown_without_scripts_and_other_files_stay_as_they_are() {
        let html = b"<html><head><style>p{}</style><script>track()</script></head><body><h1>Boiler</h1><p>Serviced by <b>Ravi</b> in May.</p></body></html>";
        assert_eq!(
            document_text(Path::new("knowledge/house.HTML"), html).unwrap(),
            "# Boiler\n\nServiced by **Ravi** in May."
        );
        assert_eq!(
            document_text(Path::new("knowledge/notes.md"), b"<b>kept</b>").unwrap(),
            "<b>kept</b>"
        );
    }

    #[test]
    fn a_transcript_keeps_its_line_numbers_and_only_what_was_said() {
        let jsonl = concat!(
            r#"{"_type":"metadata","key":"cli:default","createdAt":"t","version":1}"#,
            "\n",
            r#"{"role":"user","content":[{"type":"text","text":"book the\ndentist"}],"timestamp":"t"}"#,
            "\n",
            r#"{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"exec","input":{}}],"timestamp":"t"}"#,
            "\n",
            r#"{"role":"assistant","content":[{"type":"text","text":"Booked."}],"timestamp":"t"}"#,
        );
        assert_eq!(
            document_text(Path::new("sessions/cli:default.jsonl"), jsonl.as_bytes()).unwrap(),
            "\nuser: book the dentist\n\nassistant: Booked."
        );
    }

    /// What a build without the `documents` feature says of a PDF or HTML file (that build's
    /// own tests would need a second build of the workspace, so the message is checked here).
    #[test]
    fn a_build_without_document_reading_names_the_feature() {
        assert_eq!(
            DocumentError::NotBuilt { kind: "PDF" }.to_string(),
            "this nanocrab was built without reading PDF (cargo feature `documents`); build it with `cargo build --release -p nanocrab --features documents`"
        );
    }

    #[test]
    fn a_pdf_is_read_as_the_text_on_its_pages() {
        // Made from tests/data/boiler.html by LibreOffice 7.4 (`soffice --headless
        // --convert-to pdf`): embedded TrueType subsets with ToUnicode maps, two pages.
        let pdf = include_bytes!("../tests/data/boiler.pdf");
        assert_eq!(
            document_text(Path::new("knowledge/boiler.PDF"), pdf).unwrap(),
            "Boiler manual\n\
             The boiler was serviced by Ravi in May.\n\
             Water pressure should sit near 1.5 bar; bleed the radiators in October.\n\
             \n\
             Warranty\n\
             The warranty ends in March 2031. Zoë at the installer files the claims."
        );
    }
}
