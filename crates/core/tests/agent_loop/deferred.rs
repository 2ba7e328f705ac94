//! Deferred tools: past `tools.deferAbove` a turn sends the built-in tools and `tool_search`;
//! what the model finds with it is sent from the next request of the turn on.

use nanocrab_core::UserInput;
use pretty_assertions::assert_eq;

use super::*;

/// The scripted agent with `echo` built in and the 40 tools of three MCP servers
/// (`everything`, `filesystem`, `github`) as deferrable ones.
fn with_mcp_tools(replies: Vec<Result<ChatResponse, ProviderError>>) -> Setup {
    let setup = setup(replies, 40);
    let mut tools = ToolRegistry::new();
    tools.register(setup.echo.clone());
    let mcp: Vec<ToolDef> =
        serde_json::from_str(include_str!("../../../tools/tests/fixtures/mcp-tools.json")).unwrap();
    for definition in mcp {
        tools.register_deferrable(Arc::new(Extension(definition)));
    }
    Setup {
        agent: agent_for(
            &setup.dir,
            setup.dir.path().join("workspace"),
            ModelChain::new(
                resolved(&setup.provider, "m1", ModelProfile::GENERIC),
                Vec::new(),
            ),
            tools,
        ),
        ..setup
    }
}

#[tokio::test]
async fn a_turn_searches_loads_and_calls_a_deferred_tool() {
    let issue = json!({"owner": "ada", "repo": "notes", "title": "Sync fails"});
    let setup = with_mcp_tools(vec![
        calls(&[(
            "s1",
            "tool_search",
            json!({"query": "create a github issue", "limit": 2}),
        )]),
        calls(&[("c1", "github__create_issue", issue.clone())]),
        answer("Opened.", StopReason::EndTurn),
        answer("Hello.", StopReason::EndTurn),
    ]);
    let (_, outcome) = run(&setup, "file a bug about sync").await;
    assert_eq!(outcome, Ok("Opened.".to_owned()));
    let (_, outcome) = run(&setup, "hello").await;
    assert_eq!(outcome, Ok("Hello.".to_owned()));

    let requests = setup.provider.requests.lock().unwrap();
    let loaded = [
        "echo",
        "tool_search",
        "github__create_issue",
        "github__get_issue",
    ];
    assert_eq!(
        requests.iter().map(tool_names).collect::<Vec<_>>(),
        [
            // The first request holds the 40 back; the prompt says where they come from.
            vec!["echo", "tool_search"],
            // Then the two found are sent too, for the rest of the turn.
            loaded.to_vec(),
            loaded.to_vec(),
            // The next turn starts with them held back again.
            vec!["echo", "tool_search"],
        ]
    );
    assert!(
        requests[0].system.contains(
            "- 40 more tools (from: everything, filesystem, github) are found with tool_search\n"
        ),
        "{}",
        requests[0].system
    );
    // The definitions sent are the servers' own, whole.
    let create_issue = requests[1]
        .tools
        .iter()
        .find(|t| t.name == "github__create_issue")
        .unwrap();
    assert_eq!(
        create_issue.parameters["required"],
        json!(["owner", "repo", "title"])
    );
    let result = |request: &ChatRequest<'_>| match request.messages.last().unwrap().content[..] {
        [ContentBlock::ToolResult(ref result)] => result.clone(),
        ref other => panic!("not one tool result: {other:?}"),
    };
    insta::assert_snapshot!(result(&requests[1]).content);
    assert_eq!(
        result(&requests[2]),
        ToolResult::ok("c1", format!("github__create_issue ran with {issue}"))
    );
}

#[tokio::test]
async fn a_deferred_tool_called_without_a_search_still_runs_and_a_subset_comes_first() {
    let setup = with_mcp_tools(vec![
        calls(&[("c1", "everything__get-sum", json!({"a": 1, "b": 2}))]),
        answer("3", StopReason::EndTurn),
        answer("done", StopReason::EndTurn),
    ]);
    let (_, outcome) = run(&setup, "add 1 and 2").await;
    assert_eq!(outcome, Ok("3".to_owned()));
    // A subagent given three tools has nothing to defer: all three are sent.
    setup
        .agent
        .run_turn(
            &setup.key,
            UserInput {
                tools: Some(vec![
                    "echo".into(),
                    "github__get_issue".into(),
                    "filesystem__read_text_file".into(),
                ]),
                ..UserInput::from("look")
            },
            &mut |_| {},
        )
        .await
        .unwrap();
    let requests = setup.provider.requests.lock().unwrap();
    assert_eq!(
        requests[1].messages.last().unwrap().content,
        [ContentBlock::ToolResult(ToolResult::ok(
            "c1",
            "everything__get-sum ran with {\"a\":1,\"b\":2}"
        ))]
    );
    assert_eq!(tool_names(&requests[1]), ["echo", "tool_search"]);
    assert_eq!(
        tool_names(&requests[2]),
        ["echo", "filesystem__read_text_file", "github__get_issue"]
    );
}
