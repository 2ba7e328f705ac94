//! What a fetched body says, as text: a page's main content as Markdown (readability: the
//! article kept, scripts, styles, navigation and other boilerplate dropped), a PDF's pages as
//! text (the memory crate's reader), JSON and text as they are, anything else described.

use std::path::Path;

/// Tags whose text no reader sees, left out when a page has no article to extract.
const SKIPPED_TAGS: [&str; 8] = [
    "script", "style", "noscript", "template", "svg", "nav", "header", "footer",
];

/// Elements past which readability is not run (a huge page is converted whole instead).
const MAX_ELEMENTS: usize = 100_000;

/// A body as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readable {
    /// The media type as sent (or as sniffed when none was).
    pub media_type: String,
    pub title: Option<String>,
    pub text: String,
}

/// `body` of media type `content_type` (the header, parameters and all) from `url`.
pub fn readable(content_type: Option<&str>, body: &[u8], url: &str, cut: bool) -> Readable {
    let media_type = content_type
        .and_then(|value| value.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .filter(|essence| !essence.is_empty())
        .unwrap_or_else(|| sniff(body).to_owned());
    let text_like = media_type.starts_with("text/")
        || media_type.ends_with("+json")
        || media_type.ends_with("+xml")
        || [
            "application/json",
            "application/xml",
            "application/javascript",
            "application/x-ndjson",
            "application/yaml",
            "application/toml",
        ]
        .contains(&media_type.as_str());
    let (title, text) = match media_type.as_str() {
        "text/html" | "application/xhtml+xml" => html(&String::from_utf8_lossy(body), url),
        "application/pdf" => (None, pdf(body, cut)),
        _ if text_like => (None, String::from_utf8_lossy(body).into_owned()),
        other => (
            None,
            format!(
                "({other}, {} bytes{}: web_fetch shows web pages, PDFs, JSON and text, and this \
                 is none of them)",
                body.len(),
                if cut { " or more" } else { "" }
            ),
        ),
    };
    Readable {
        media_type,
        title,
        text,
    }
}

/// The type of a body sent without one.
fn sniff(body: &[u8]) -> &'static str {
    let start = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let start = start.trim_start();
    if body.starts_with(b"%PDF-") {
        "application/pdf"
    } else if start.starts_with("<!doctype html") || start.starts_with("<html") {
        "text/html"
    } else if std::str::from_utf8(body).is_ok() && !body.contains(&0) {
        "text/plain"
    } else {
        "application/octet-stream"
    }
}

/// The page's title and its main content as Markdown (through the memory crate's converter,
/// htmd, with the `documents` feature; as plain text without it); a page readability finds no
/// article in is converted whole, without its scripts, styles and navigation.
fn html(page: &str, url: &str) -> (Option<String>, String) {
    let config = dom_smoothie::Config {
        text_mode: if cfg!(feature = "documents") {
            dom_smoothie::TextMode::Raw
        } else {
            dom_smoothie::TextMode::Formatted
        },
        max_elements_to_parse: MAX_ELEMENTS,
        ..dom_smoothie::Config::default()
    };
    let article = dom_smoothie::Readability::new(page, Some(url), Some(config))
        .and_then(|mut readability| readability.parse());
    let (title, html, text) = match article {
        Ok(article) => (
            article.title.trim().to_owned(),
            article.content.to_string(),
            article.text_content.to_string(),
        ),
        Err(_) => {
            let document = dom_query::Document::from(page);
            for tag in SKIPPED_TAGS {
                document.select(tag).remove();
            }
            let body = document.select("body");
            (
                document.select("title").text().trim().to_owned(),
                body.html().to_string(),
                body.formatted_text().to_string(),
            )
        }
    };
    let title = Some(title).filter(|title| !title.is_empty());
    #[cfg(feature = "documents")]
    let text =
        nanocrab_memory::document_text(Path::new("page.html"), html.as_bytes()).unwrap_or(text);
    #[cfg(not(feature = "documents"))]
    let _ = html;
    (title, text.trim().to_owned())
}

fn pdf(body: &[u8], cut: bool) -> String {
    if cut {
        // A PDF's index is at its end: the start of one cannot be read.
        return format!(
            "(a PDF larger than the download cap, tools.web.fetch.maxBytes: only its first {} \
             bytes were read, and a PDF cannot be read without its end)",
            body.len()
        );
    }
    match nanocrab_memory::document_text(Path::new("page.pdf"), body) {
        Ok(text) => text,
        Err(err) => format!(
            "(a PDF of {} bytes with no text to show: {err})",
            body.len()
        ),
    }
}
