//! The recorded real wire data in `shared/fixtures/` (beside the repository).

use std::path::PathBuf;

/// A provider wire protocol, for framing `.chunks.txt` fixtures as SSE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Anthropic,
    OpenAiChat,
    OpenAiResponses,
    Gemini,
}

/// `shared/fixtures/`: the repository is cloned with `shared/` beside it.
pub fn fixtures_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
    assert!(
        dir.is_dir(),
        "fixtures not found at {}: clone the repository with shared/ beside it",
        dir.display()
    );
    dir
}

/// A fixture by its path relative to `shared/fixtures/`, e.g.
/// `providers/anthropic/stream-text.chunks.txt`.
pub fn fixture_path(relative: &str) -> PathBuf {
    fixtures_dir().join(relative)
}

/// The bytes of a fixture, exactly as recorded.
pub fn fixture_bytes(relative: &str) -> Vec<u8> {
    let path = fixture_path(relative);
    std::fs::read(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// Every fixture file under `relative_dir` (recursively), as paths relative to the fixtures
/// dir, sorted, so a test can assert that it covers them all.
pub fn replay_list(relative_dir: &str) -> Vec<String> {
    let root = fixtures_dir();
    let mut out = Vec::new();
    let mut stack = vec![root.join(relative_dir)];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(relative) = path.strip_prefix(&root) {
                out.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

/// Frames a `.chunks.txt` fixture (one event JSON per line, no SSE framing) as an SSE body,
/// following the fixtures README: each non-empty line becomes `data: <line>\n\n`; Anthropic
/// and the OpenAI Responses API put `event: <json.type>` before each; OpenAI Chat appends
/// `data: [DONE]`; Gemini neither.
pub fn chunks_to_sse(protocol: Protocol, chunks: &str) -> String {
    let mut out = String::new();
    for line in chunks.lines().filter(|l| !l.trim().is_empty()) {
        match protocol {
            Protocol::Anthropic | Protocol::OpenAiResponses => {
                let event: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|err| panic!("chunk is not JSON ({err}): {line}"));
                let kind = event["type"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{protocol:?} chunk without a \"type\": {line}"));
                out.push_str("event: ");
                out.push_str(kind);
                out.push('\n');
            }
            Protocol::OpenAiChat | Protocol::Gemini => {}
        }
        out.push_str("data: ");
        out.push_str(line);
        out.push_str("\n\n");
    }
    match protocol {
        Protocol::OpenAiChat => out.push_str("data: [DONE]\n\n"),
        Protocol::Anthropic | Protocol::OpenAiResponses | Protocol::Gemini => {}
    }
    out
}
