#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Past `tools.deferAbove` the deferrable tools are held back: only the built-in ones and
//! `tool_search` are offered, and what `tool_search` finds is loaded for the rest of the turn.

use std::sync::Arc;

use nanocrab_config::DeferLimits;
use nanocrab_policy::{Invocation, Risk};
use nanocrab_schema::{ToolCall, ToolDef};
use nanocrab_tools::{
    PreparedCall, TOOL_SEARCH, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use pretty_assertions::assert_eq;
use serde_json::json;

/// A tool with a given definition that answers with its name.
struct Fixed(ToolDef);

impl Tool for Fixed {
    fn definition(&self) -> ToolDef {
        self.0.clone()
    }

    fn prepare<'a>(
        &'a self,
        _: serde_json::Value,
        _: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let invocation = Invocation::new(Risk::Safe, &self.0.name, Vec::new());
        Ok(PreparedCall::new(invocation, async move {
            Ok(ToolOutput::trusted(format!("{} ran", self.0.name)))
        }))
    }
}

fn tool(name: &str) -> Arc<Fixed> {
    Arc::new(Fixed(ToolDef {
        name: name.into(),
        description: "A tool.".into(),
        parameters: json!({"type": "object"}),
    }))
}

/// `core` built-in tools, then `deferrable` extension ones.
fn registry(core: usize, deferrable: usize) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for n in 0..core {
        registry.register(tool(&format!("core_{n}")));
    }
    for n in 0..deferrable {
        registry.register_deferrable(tool(&format!("ext__tool_{n}")));
    }
    registry
}

fn names(definitions: &[ToolDef]) -> Vec<&str> {
    definitions.iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn tools_are_deferred_only_past_the_tool_count() {
    let deferred = |total: usize| registry(5, total - 5).defer().is_some();
    assert_eq!([29, 30, 31].map(deferred), [false, false, true]);
}

#[test]
fn tools_are_deferred_only_past_the_schema_characters() {
    // Two tools, as one JSON list of definitions exactly `chars` long.
    let sized = |chars: usize| {
        let mut registry = registry(1, 1);
        let sent = serde_json::to_string(registry.definitions()).unwrap().len();
        let padding = "x".repeat(chars - sent);
        registry.register_deferrable(Arc::new(Fixed(ToolDef {
            name: "ext__tool_0".into(),
            description: format!("A tool.{padding}"),
            parameters: json!({"type": "object"}),
        })));
        assert_eq!(
            serde_json::to_string(registry.definitions()).unwrap().len(),
            chars
        );
        registry.defer().is_some()
    };
    assert_eq!([11_999, 12_000, 12_001].map(sized), [false, false, true]);
}

#[test]
fn other_limits_switched_off_or_nothing_deferrable_send_every_tool() {
    let limits = DeferLimits {
        tools: 3,
        schema_chars: 100_000,
    };
    assert!(
        registry(2, 2)
            .with_defer_above(Some(limits))
            .defer()
            .is_some()
    );
    assert!(
        registry(2, 1)
            .with_defer_above(Some(limits))
            .defer()
            .is_none()
    );
    assert!(registry(2, 100).with_defer_above(None).defer().is_none());
    // Built-in tools are never held back: with none deferrable there is nothing to search.
    let mut registry = registry(40, 0);
    assert!(registry.defer().is_none());
    assert_eq!(registry.offered(None).len(), 40);
}

#[tokio::test]
async fn tool_search_loads_what_it_finds_for_the_rest_of_the_turn() {
    let mut registry = registry(2, 0);
    let mcp: Vec<ToolDef> = serde_json::from_str(include_str!("fixtures/mcp-tools.json")).unwrap();
    for definition in mcp {
        registry.register_deferrable(Arc::new(Fixed(definition)));
    }
    let everything = registry.offered(None).len();
    assert_eq!(everything, 42);

    let mut turn = registry.clone();
    let search = turn.defer().unwrap();
    assert_eq!(search.deferred().len(), 40);
    assert_eq!(
        names(&turn.offered(Some(&search))),
        ["core_0", "core_1", TOOL_SEARCH]
    );
    // The agent's own registry is as it was: the next turn defers again.
    assert_eq!(registry.offered(None).len(), everything);

    let ctx = ToolContext::new("/ws");
    let call = |id: &str, name: &str, input: serde_json::Value| ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    };
    let found = turn
        .execute(
            &call(
                "s1",
                TOOL_SEARCH,
                json!({"query": "create a github issue", "limit": 2}),
            ),
            &ctx,
        )
        .await;
    assert!(!found.is_error, "{}", found.content);
    insta::assert_snapshot!("search_result", found.content);
    let by_name = turn
        .execute(
            &call(
                "s2",
                TOOL_SEARCH,
                json!({"names": ["filesystem__directory_tree", "github__create_issue", "nope"]}),
            ),
            &ctx,
        )
        .await;
    insta::assert_snapshot!("load_by_name", by_name.content);
    let nothing = turn
        .execute(
            &call("s3", TOOL_SEARCH, json!({"query": "weather forecast"})),
            &ctx,
        )
        .await;
    insta::assert_snapshot!("no_match", nothing.content);
    let empty = turn
        .execute(&call("s4", TOOL_SEARCH, json!({})), &ctx)
        .await;
    assert!(empty.is_error);
    assert_eq!(
        empty.content,
        "Error: give `query` (words for what the tool should do) or `names` (exact tool names)"
    );
    // Each loaded once, in the order loaded, after the built-in ones.
    assert_eq!(
        names(&turn.offered(Some(&search))),
        [
            "core_0",
            "core_1",
            TOOL_SEARCH,
            "github__create_issue",
            "github__get_issue",
            "filesystem__directory_tree"
        ]
    );

    // A held-back tool the model calls without loading it still runs.
    let direct = turn
        .execute(&call("d1", "everything__get-sum", json!({})), &ctx)
        .await;
    assert_eq!(direct.content, "everything__get-sum ran");
}
