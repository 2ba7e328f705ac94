#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The tool definitions sent to the model: exact content, and small enough for a lean request.

use nanocrab_config::{MemoryConfig, ToolsConfig};
use nanocrab_tools::builtin_registry;

#[test]
fn default_definitions_are_short_and_stable() {
    let dir = tempfile::tempdir().unwrap();
    let registry = builtin_registry(
        &ToolsConfig::default(),
        &MemoryConfig::default(),
        dir.path(),
        &nanocrab_memory::IndexSetup {
            database: dir.path().join("state/memory-index.sqlite"),
            workspace: dir.path().to_path_buf(),
            sessions: None,
            embeddings: nanocrab_memory::EmbeddingSetup::KeywordOnly(String::new()),
        },
        None,
        None,
        nanocrab_tools::ToolPolicy::default(),
    )
    .unwrap();
    assert_eq!(
        registry.names(),
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "exec",
            "memory_search",
            "memory_get"
        ]
    );
    let definitions = registry.definitions();
    let serialized = serde_json::to_string(&definitions).unwrap();
    assert!(
        serialized.len() < 2600,
        "tool definitions take {} chars; keep them under 2,600",
        serialized.len()
    );
    insta::assert_json_snapshot!(definitions);
}
