//! The tool-calling loop: events, tool results, limits, repeats and how answers end.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn a_tool_round_trip_emits_every_event_in_order() {
    let mut first = call("c1", json!({"text": "hi"})).unwrap();
    first.content.insert(
        0,
        ContentBlock::Thinking {
            thinking: "use echo".into(),
            signature: Some("sig".into()),
            origin: Some("scripted".into()),
        },
    );
    let setup = setup(
        vec![Ok(first.clone()), answer("done", StopReason::EndTurn)],
        40,
    );
    let (events, outcome) = run(&setup, "say hi").await;
    assert_eq!(outcome, Ok("done".to_owned()));
    assert_eq!(
        events,
        vec![
            AgentEvent::Reasoning {
                text: "use echo".into()
            },
            AgentEvent::Usage {
                model: "scripted/m1".into(),
                usage: usage()
            },
            AgentEvent::ToolStart {
                call_id: "c1".into(),
                name: "echo".into(),
                input: json!({"text": "hi"})
            },
            AgentEvent::ToolEnd {
                call_id: "c1".into(),
                name: "echo".into(),
                output: "hi".into(),
                is_error: false
            },
            AgentEvent::NewResponse { iteration: 2 },
            AgentEvent::Token {
                text: "done".into()
            },
            AgentEvent::Usage {
                model: "scripted/m1".into(),
                usage: usage()
            },
            AgentEvent::Done {
                text: "done".into()
            },
        ]
    );
    // The follow-up carries the call (with its reasoning and signature) and the result under
    // the same call id; the transcript holds the same four messages.
    let turn = vec![
        LlmMessage::user("say hi"),
        LlmMessage {
            role: Role::Assistant,
            content: first.content,
        },
        LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::ok("c1", "hi"))],
        },
    ];
    let requests = setup.provider.requests.lock().unwrap();
    assert_eq!(requests[1].messages, turn);
    let mut stored = turn;
    stored.push(LlmMessage::assistant("done"));
    assert_eq!(
        setup.agent.store().load(&setup.key).unwrap().messages(),
        stored
    );
    assert_eq!(requests[0].tools[0].name, "echo");
    // The names are in the request's tools: the prompt does not repeat them.
    assert!(
        !requests[0].system.contains("echo"),
        "{}",
        requests[0].system
    );
}

#[tokio::test]
async fn tool_failures_go_back_to_the_model_as_error_results() {
    let setup = setup(
        vec![call("c1", json!({})), answer("sorry", StopReason::EndTurn)],
        40,
    );
    run(&setup, "go").await.1.unwrap();
    let second = &setup.provider.requests.lock().unwrap()[1];
    assert_eq!(
        second.messages[2].content,
        vec![ContentBlock::ToolResult(ToolResult::error(
            "c1",
            "Error: text is required"
        ))]
    );
}

#[tokio::test]
async fn a_provider_error_is_reported_and_the_work_done_kept() {
    let broken = || ProviderError::Stream {
        provider: "scripted".into(),
        detail: "gone".into(),
    };
    let setup = setup(vec![call("c1", json!({"text": "hi"})), Err(broken())], 40);
    let (events, outcome) = run(&setup, "hello?").await;
    let message = broken().to_string();
    assert_eq!(outcome, Err(message.clone()));
    assert_eq!(
        events[3..],
        [
            AgentEvent::NewResponse { iteration: 2 },
            AgentEvent::Error { message }
        ]
    );
    let stored = setup.agent.store().load(&setup.key).unwrap().messages();
    assert_eq!(
        stored,
        vec![
            LlmMessage::user("hello?"),
            setup.provider.requests.lock().unwrap()[1].messages[1].clone(),
            LlmMessage {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult::ok("c1", "hi"))],
            },
        ]
    );
}

#[tokio::test]
async fn a_truncated_answer_says_so() {
    let setup = setup(vec![answer("The first half", StopReason::MaxTokens)], 40);
    let (_, outcome) = run(&setup, "long story").await;
    assert_eq!(
        outcome,
        Ok("The first half\n\n[The answer was cut off at the output limit (agents.defaults.maxTokens = 100).]".to_owned())
    );
}

#[tokio::test]
async fn history_carries_over_and_new_starts_fresh() {
    let setup = setup(
        vec![
            answer("one", StopReason::EndTurn),
            answer("two", StopReason::EndTurn),
            answer("three", StopReason::EndTurn),
        ],
        40,
    );
    run(&setup, "first").await.1.unwrap();
    run(&setup, "second").await.1.unwrap();
    assert_eq!(setup.provider.requests.lock().unwrap()[1].messages.len(), 3);
    let (_, outcome) = run(&setup, "/new").await;
    assert!(
        outcome
            .unwrap()
            .starts_with("Started a new conversation. The previous one is archived at ")
    );
    run(&setup, "third").await.1.unwrap();
    let requests = setup.provider.requests.lock().unwrap();
    assert_eq!(requests.len(), 3, "/new never reaches the model");
    assert_eq!(requests[2].messages, vec![LlmMessage::user("third")]);
}

#[tokio::test]
async fn the_iteration_limit_stops_the_turn_with_a_message() {
    let setup = setup(
        vec![
            call("c1", json!({"text": "a"})),
            call("c2", json!({"text": "b"})),
        ],
        2,
    );
    let (_, outcome) = run(&setup, "loop").await;
    assert_eq!(
        outcome,
        Ok("I stopped after 2 tool iterations (agents.defaults.maxToolIterations = 2) without finishing. Tell me how to continue, or raise the limit.".to_owned())
    );
    let stored = setup.agent.store().load(&setup.key).unwrap().messages();
    assert_eq!(stored.last().unwrap().text(), outcome.unwrap());
}

#[tokio::test]
async fn a_repeated_identical_call_is_refused_then_the_turn_stopped() {
    let same = || call("c", json!({"text": "again"}));
    let setup = setup(
        vec![
            same(),
            same(),
            same(),
            call("c4", json!({"text": "other"})),
            same(),
            same(),
        ],
        40,
    );
    let (events, outcome) = run(&setup, "loop").await;
    let stop = "I stopped because I kept repeating the same tool call without making progress. Tell me how you'd like to continue.";
    assert_eq!(outcome, Ok(stop.to_owned()));
    // Two identical calls and the different one ran; the three later repeats did not.
    assert_eq!(setup.echo.calls.load(Ordering::SeqCst), 3);
    let refusal = "Error: you are repeating yourself: echo was already called 2 times in this turn with these exact arguments. Use what it returned, try something different, or answer the user.";
    let ends: Vec<(String, bool)> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolEnd {
                output, is_error, ..
            } => Some((output.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        vec![
            ("again".to_owned(), false),
            ("again".to_owned(), false),
            (refusal.to_owned(), true),
            ("other".to_owned(), false),
            (refusal.replace("2 times", "3 times"), true),
            (refusal.replace("2 times", "4 times"), true),
        ]
    );
    assert_eq!(
        events[events.len() - 2..],
        [
            AgentEvent::Token { text: stop.into() },
            AgentEvent::Done { text: stop.into() }
        ]
    );
    let stored = setup.agent.store().load(&setup.key).unwrap().messages();
    assert_eq!(stored.last().unwrap(), &LlmMessage::assistant(stop));
    assert_eq!(setup.provider.requests.lock().unwrap().len(), 6);
}

#[tokio::test]
async fn slash_commands_are_answered_without_the_model() {
    let setup = setup(vec![answer("one", StopReason::EndTurn)], 40);
    run(&setup, "first").await.1.unwrap();
    let transcript = setup.agent.store().path(&setup.key);
    let before = std::fs::read_to_string(&transcript).unwrap();

    let (events, outcome) = run(&setup, "  /reset ").await;
    let text = outcome.unwrap();
    let archived = text
        .strip_prefix("Started a new conversation. The previous one is archived at ")
        .and_then(|rest| rest.strip_suffix('.'))
        .unwrap();
    assert_eq!(std::fs::read_to_string(archived).unwrap(), before);
    assert!(!transcript.exists());
    assert_eq!(
        events,
        vec![
            AgentEvent::Token { text: text.clone() },
            AgentEvent::Done { text }
        ]
    );

    let (_, outcome) = run(&setup, "/clear").await;
    assert_eq!(outcome, Ok("Started a new conversation.".to_owned()));
    let (_, help) = run(&setup, "/help").await;
    let help = help.unwrap();
    for command in ["/new", "/reset", "/clear", "/help"] {
        assert!(help.contains(command), "{help}");
    }
    assert_eq!(setup.provider.requests.lock().unwrap().len(), 1);
    assert!(
        !transcript.exists(),
        "commands are not part of the conversation"
    );
}

#[tokio::test]
async fn an_empty_answer_is_explained_and_never_stored_empty() {
    let setup = setup(
        vec![Ok(ChatResponse {
            content: vec![],
            stop_reason: StopReason::EndTurn,
            usage: usage(),
            model: "m1".into(),
        })],
        40,
    );
    let (_, outcome) = run(&setup, "hm").await;
    let note = "[The model returned an empty answer. Try rephrasing the request.]";
    assert_eq!(outcome, Ok(note.to_owned()));
    assert_eq!(
        setup.agent.store().load(&setup.key).unwrap().messages(),
        vec![LlmMessage::user("hm"), LlmMessage::assistant(note)]
    );
}

#[tokio::test]
async fn a_transcript_that_cannot_be_written_fails_the_turn_before_the_model() {
    let setup = setup(vec![answer("unseen", StopReason::EndTurn)], 40);
    let sessions = setup.dir.path().join("sessions");
    std::fs::write(&sessions, "a file where the directory should be").unwrap();
    let (events, outcome) = run(&setup, "hello").await;
    let message = outcome.unwrap_err();
    assert!(message.starts_with("cannot read "), "{message}");
    assert_eq!(events, vec![AgentEvent::Error { message }]);
    assert_eq!(setup.provider.requests.lock().unwrap().len(), 0);
}

#[tokio::test]
async fn a_model_without_tool_calling_gets_no_tools_and_is_told_so() {
    let mut setup = setup(
        vec![answer("I can't run commands.", StopReason::EndTurn)],
        40,
    );
    let mut tools = ToolRegistry::new();
    tools.register(setup.echo.clone());
    setup.agent = agent_for(
        &setup.dir,
        setup.dir.path().join("workspace"),
        ModelChain::new(
            resolved(
                &setup.provider,
                "m1",
                ModelProfile {
                    tools: false,
                    ..ModelProfile::GENERIC
                },
            ),
            Vec::new(),
        ),
        tools,
    );
    run(&setup, "list my files").await.1.unwrap();
    let request = &setup.provider.requests.lock().unwrap()[0];
    assert!(request.tools.is_empty());
    assert!(
        request
            .system
            .contains("- Tools: none (this model cannot call tools)"),
        "{}",
        request.system
    );
}

/// A tool from outside the registry, as an MCP server's is.
fn sourced() -> Arc<dyn Tool> {
    Arc::new(Extension(ToolDef {
        name: "sourced".into(),
        description: "From a tool source.".into(),
        parameters: json!({"type": "object"}),
    }))
}

/// Offers [`sourced`]; counts how often a turn asked.
#[derive(Default)]
struct Source {
    asked: AtomicUsize,
}

impl nanocrab_tools::ToolSource for Source {
    fn tools(&self) -> nanocrab_tools::SourcedTools<'_> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { vec![sourced()] })
    }

    fn known_tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![sourced()]
    }
}

#[tokio::test]
async fn a_tool_source_is_asked_each_turn_and_a_runs_subset_applies_to_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(Scripted {
        replies: Mutex::new(
            vec![
                answer("one", StopReason::EndTurn),
                answer("two", StopReason::EndTurn),
            ]
            .into(),
        ),
        ..Scripted::default()
    });
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Echo::default()));
    let source = Arc::new(Source::default());
    let agent = agent_for(
        &dir,
        dir.path().join("workspace"),
        ModelChain::new(resolved(&provider, "m1", ModelProfile::GENERIC), Vec::new()),
        tools,
    )
    .with_tool_source(source.clone());
    let key = SessionKey::parse("test:1").unwrap();
    assert_eq!(agent.tool_names(), ["echo", "sourced"]);
    agent.run_turn(&key, "hi", &mut |_| {}).await.unwrap();
    let only_sourced = nanocrab_core::UserInput {
        tools: Some(vec!["sourced".to_owned()]),
        ..nanocrab_core::UserInput::from("just that one")
    };
    agent
        .run_turn(&key, only_sourced, &mut |_| {})
        .await
        .unwrap();
    let requests = provider.requests.lock().unwrap();
    assert_eq!(tool_names(&requests[0]), ["echo", "sourced"]);
    assert_eq!(tool_names(&requests[1]), ["sourced"]);
    assert_eq!(source.asked.load(Ordering::SeqCst), 2);
}
