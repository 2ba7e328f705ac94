#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The tool definitions sent to the model, the built-in tools then the memory tools as the
//! binary assembles them: exact content, and small enough for a lean request.

use nanocrab_config::{MemoryConfig, ToolsConfig};
use nanocrab_schema::ToolCall;
use nanocrab_tools::{ToolContext, ToolRegistry, builtin_registry};

fn registry(dir: &std::path::Path) -> ToolRegistry {
    let index = nanocrab_memory::IndexSetup {
        database: dir.join("state/memory-index.sqlite"),
        workspace: dir.to_path_buf(),
        sessions: None,
        embeddings: nanocrab_memory::EmbeddingSetup::KeywordOnly(String::new()),
        watch: None,
    };
    builtin_registry(
        &ToolsConfig::default(),
        dir,
        None,
        None,
        nanocrab_tools::ToolPolicy::default(),
        |guard| nanocrab_memory::memory_tools(&MemoryConfig::default(), &index, guard),
    )
    .unwrap()
}

#[test]
fn default_definitions_are_short_and_stable() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
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

/// What each built-in tool says about arguments that are not an object: derived from its
/// argument type, like its schema.
#[tokio::test]
async fn arguments_that_are_not_an_object_are_answered_with_what_each_tool_expects() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
    let mut answers = Vec::new();
    for name in registry.names() {
        let call = ToolCall {
            id: "call_1".into(),
            name: name.clone(),
            input: serde_json::json!(null),
        };
        let result = registry.execute(&call, &ToolContext::new(dir.path())).await;
        assert!(result.is_error, "{name}: {}", result.content);
        answers.push(format!("{name}: {}", result.content));
    }
    insta::assert_snapshot!(answers.join("\n"));
}
