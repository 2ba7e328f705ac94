//! Interrupted turns: what stays in the transcript, and its repair.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn an_interrupted_run_is_repaired_before_the_next_turn() {
    let setup = setup(
        vec![answer("sorry, where were we?", StopReason::EndTurn)],
        40,
    );
    let pending_call = LlmMessage {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse(ToolCall {
            id: "c0".into(),
            name: "echo".into(),
            input: json!({"text": "slow"}),
        })],
    };
    // A crash while the tool ran: the call is on disk, its result never was.
    setup
        .agent
        .store()
        .append(
            &setup.key,
            &[
                SessionEntry::now(LlmMessage::user("go")),
                SessionEntry::now(pending_call.clone()),
            ],
        )
        .unwrap();
    run(&setup, "still there?").await.1.unwrap();
    assert_eq!(
        setup.provider.requests.lock().unwrap()[0].messages,
        vec![
            LlmMessage::user("go"),
            pending_call,
            LlmMessage {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult::error(
                    "c0",
                    "Error: interrupted: no result was recorded for this call"
                ))],
            },
            LlmMessage::user("still there?"),
        ]
    );
}

/// Tells the test it started, then runs until the turn drops it.
struct Hang {
    started: Arc<tokio::sync::Notify>,
}

impl Tool for Hang {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "hang".into(),
            description: "Never finishes.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn prepare<'a>(
        &'a self,
        _: serde_json::Value,
        _: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let invocation = Invocation::new(Risk::Safe, "hang", Vec::new());
        Ok(PreparedCall::new(invocation, async move {
            self.started.notify_one();
            std::future::pending().await
        }))
    }
}

#[tokio::test]
async fn interrupted_while_tools_run_the_finished_results_stay_and_every_other_call_gets_one() {
    let dir = tempfile::tempdir().unwrap();
    let calls = ChatResponse {
        content: vec![
            ContentBlock::text("Let me look."),
            ContentBlock::ToolUse(ToolCall {
                id: "c1".into(),
                name: "echo".into(),
                input: json!({"text": "hi"}),
            }),
            ContentBlock::ToolUse(ToolCall {
                id: "c2".into(),
                name: "hang".into(),
                input: json!({}),
            }),
            ContentBlock::ToolUse(ToolCall {
                id: "c3".into(),
                name: "echo".into(),
                input: json!({"text": "never"}),
            }),
        ],
        stop_reason: StopReason::ToolUse,
        usage: usage(),
        model: "m1".into(),
    };
    let provider = Arc::new(Scripted {
        replies: Mutex::new(
            vec![
                Ok(calls.clone()),
                answer("Where were we?", StopReason::EndTurn),
            ]
            .into(),
        ),
        ..Scripted::default()
    });
    let echo = Arc::new(Echo::default());
    let started = Arc::new(tokio::sync::Notify::new());
    let mut tools = ToolRegistry::new();
    tools.register(echo.clone());
    tools.register(Arc::new(Hang {
        started: started.clone(),
    }));
    let agent = agent_for(
        &dir,
        dir.path().join("workspace"),
        ModelChain::new(resolved(&provider, "m1", ModelProfile::GENERIC), Vec::new()),
        tools,
    );
    let key = SessionKey::parse("test:1").unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut events = Vec::new();
    let mut on_event = |event| events.push(event);
    let (outcome, ()) = tokio::join!(
        agent.run_turn_until(&key, "look around", &mut on_event, &cancel),
        async {
            started.notified().await;
            cancel.cancel();
        }
    );
    let outcome = outcome.unwrap();
    assert!(outcome.interrupted);
    assert_eq!(echo.calls.load(Ordering::SeqCst), 1, "c3 never ran");
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| {
            if let AgentEvent::ToolStart { call_id, .. } = e {
                Some(call_id.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(started, ["c1", "c2"]);
    let turn = vec![
        LlmMessage::user("look around"),
        LlmMessage {
            role: Role::Assistant,
            content: calls.content,
        },
        LlmMessage {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult(ToolResult::ok("c1", "hi")),
                ContentBlock::ToolResult(ToolResult::error(
                    "c2",
                    "Error: interrupted by the user before it finished.",
                )),
                ContentBlock::ToolResult(ToolResult::error(
                    "c3",
                    "Error: interrupted by the user before it ran.",
                )),
            ],
        },
        LlmMessage::assistant("[interrupted by the user]"),
    ];
    assert_eq!(agent.store().load(&key).unwrap().messages(), turn);

    // The next turn goes on from there: every call has its result.
    agent.run_turn(&key, "go on", &mut |_| {}).await.unwrap();
    let mut expected = turn;
    expected.push(LlmMessage::user("go on"));
    assert_eq!(provider.requests.lock().unwrap()[1].messages, expected);
}
