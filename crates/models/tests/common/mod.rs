//! Catalogue entries and servers for the model store's tests: tiny files with their real
//! digests, since the real models are 100 MB.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use nanocrab_config::ModelsConfig;
use nanocrab_models::{Catalogue, Endpoints, ModelSpec};
use nanocrab_testkit::models::sha256_hex;
use serde_json::{Value, json};

pub const REPO: &str = "acme/tiny-chat-GGUF";
pub const REVISION: &str = "ab810cf68114990406fdf996510dd3d3c6adbdf5";
pub const GGUF: &str = "tiny-chat.Q4_1.gguf";

/// 300 kB of bytes that are not all alike, so a range in the middle is a real test.
pub fn gguf_bytes() -> Vec<u8> {
    (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

pub fn file_entry(name: &str, bytes: &[u8]) -> Value {
    json!({"name": name, "size": bytes.len(), "sha256": sha256_hex(bytes)})
}

/// A catalogue with `entries` (JSON of `models.entries`) over the built-ins.
pub fn catalogue(entries: Value) -> Catalogue {
    let config: ModelsConfig = serde_json::from_value(json!({ "entries": entries })).unwrap();
    Catalogue::from_config(&config).unwrap()
}

/// `tiny-chat`: one GGUF, from the hub only unless `sources` says otherwise.
pub fn chat_spec(bytes: &[u8], sources: Value) -> ModelSpec {
    catalogue(json!({"tiny-chat": {
        "kind": "chat", "contextTokens": 2048, "licence": "Apache-2.0",
        "files": [file_entry(GGUF, bytes)],
        "sources": sources,
    }}))
    .find("tiny-chat")
    .unwrap()
    .clone()
}

pub fn hub_source() -> Value {
    json!([{"huggingFace": {"repo": REPO, "revision": REVISION}}])
}

/// A port nothing listens on: bound, then let go.
pub fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

pub fn endpoints(index_url: String, hub_url: String) -> Endpoints {
    Endpoints { index_url, hub_url }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The names in `dir`, sorted; none when it does not exist.
pub fn names(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
