//! `multipart/form-data` bodies as the fakes take files (a Telegram `sendDocument`, a Discord
//! message with attachments, audio sent to the mock's transcription endpoint).

/// One part of a `multipart/form-data` body.
pub(crate) struct Part {
    pub name: String,
    pub file_name: Option<String>,
    /// The part's own `Content-Type`, when it has one (a file's).
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// The parts of a `multipart/form-data` body; a part without a name is skipped.
pub(crate) fn multipart_parts(body: &[u8], boundary: &str) -> Vec<Part> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut parts = Vec::new();
    let mut starts = Vec::new();
    let mut at = 0;
    while let Some(found) = find(&body[at..], delimiter) {
        starts.push(at + found);
        at += found + delimiter.len();
    }
    for pair in starts.windows(2) {
        // After the delimiter's CRLF, up to the CRLF before the next one.
        let part = &body[pair[0] + delimiter.len()..pair[1]];
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let part = part.strip_suffix(b"\r\n").unwrap_or(part);
        let Some(split) = find(part, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..split]);
        let bytes = part[split + 4..].to_vec();
        let disposition = head
            .lines()
            .find(|line| {
                line.to_ascii_lowercase()
                    .starts_with("content-disposition:")
            })
            .unwrap_or_default();
        let attribute = |key: &str| {
            disposition
                .split(';')
                .map(str::trim)
                .find_map(|item| item.strip_prefix(key))
                // A quoted string: reqwest escapes a quote or backslash in it.
                .map(|value| {
                    value
                        .trim_matches('"')
                        .replace("\\\"", "\"")
                        .replace("\\\\", "\\")
                })
        };
        let content_type = head.lines().find_map(|line| {
            line.split_once(':')
                .filter(|(key, _)| key.trim().eq_ignore_ascii_case("content-type"))
                .map(|(_, value)| value.trim().to_owned())
        });
        if let Some(name) = attribute("name=") {
            parts.push(Part {
                name,
                file_name: attribute("filename="),
                content_type,
                bytes,
            });
        }
    }
    parts
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
