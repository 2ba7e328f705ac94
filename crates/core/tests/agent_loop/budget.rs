//! The window budget: long conversations, learned token ratios, small models.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn a_500_turn_conversation_never_exceeds_the_window_and_never_splits_a_tool_pair() {
    let mut replies = Vec::new();
    for turn in 0..500 {
        replies.push(call(
            &format!("c{turn}"),
            json!({"text": "x".repeat(turn % 7 * 300)}),
        ));
        replies.push(answer(
            &format!("answer {turn} {}", "y".repeat(turn % 5 * 200)),
            StopReason::EndTurn,
        ));
    }
    let settings = AgentSettings {
        max_tokens: 500,
        temperature: None,
        max_tool_iterations: 40,
        context_window_tokens: 4_000,
    };
    let setup = setup_with(replies, settings);
    setup.provider.usage_factor.store(1, Ordering::SeqCst);
    for turn in 0..500 {
        let text = format!("question {turn} {}", "z".repeat(turn % 3 * 400));
        run(&setup, &text).await.1.unwrap();
    }
    let requests = setup.provider.requests.lock().unwrap();
    assert_eq!(requests.len(), 1_000);
    for (n, request) in requests.iter().enumerate() {
        let tokens = request.system.len() / 4
            + serde_json::to_string(&request.tools).unwrap().len() / 4
            + request
                .messages
                .iter()
                .map(nanocrab_sessions::estimate_tokens)
                .sum::<usize>()
            + settings.max_tokens as usize;
        assert!(tokens <= 4_000, "request {n}: about {tokens} tokens");
        // Every call is answered by the very next message, and every result has its call.
        let mut open: Vec<&str> = Vec::new();
        for message in request.messages.iter() {
            for result in message.tool_results() {
                assert_eq!(
                    open.first().copied(),
                    Some(result.tool_use_id.as_str()),
                    "request {n}"
                );
                open.remove(0);
            }
            assert!(open.is_empty(), "request {n}: a call without its result");
            open.extend(message.tool_calls().map(|c| c.id.as_str()));
        }
        assert_eq!(
            request.messages[0].role,
            Role::User,
            "request {n} starts with a question"
        );
    }
    // The transcript keeps all of it.
    assert_eq!(
        setup.agent.store().load(&setup.key).unwrap().entries.len(),
        2_000
    );
}

#[tokio::test]
async fn the_token_estimate_learns_what_the_provider_counts() {
    let setup = setup(
        vec![
            answer("ok", StopReason::EndTurn),
            answer("ok", StopReason::EndTurn),
        ],
        40,
    );
    // The provider counts three times the estimate (as for dense code or CJK text).
    setup.provider.usage_factor.store(3, Ordering::SeqCst);
    run(&setup, "hello").await.1.unwrap();
    let ratio = |setup: &Setup| {
        setup
            .agent
            .store()
            .settings(&setup.key)
            .unwrap()
            .token_ratio
            .unwrap()
    };
    assert!((ratio(&setup) - 3.0).abs() < 1e-9, "{}", ratio(&setup));
    // Then it counts as estimated: the learned ratio moves, a little at a time.
    setup.provider.usage_factor.store(1, Ordering::SeqCst);
    run(&setup, "again").await.1.unwrap();
    assert!((ratio(&setup) - 2.4).abs() < 1e-9, "{}", ratio(&setup));
}

#[tokio::test]
async fn an_openai_model_is_budgeted_in_exact_tokens_with_no_learned_ratio() {
    let settings = AgentSettings {
        max_tokens: 100,
        temperature: None,
        max_tool_iterations: 40,
        context_window_tokens: 8_000,
    };
    let replies = || {
        vec![
            answer("ok", StopReason::EndTurn),
            answer("ok", StopReason::EndTurn),
        ]
    };
    // Runs of one letter: 8 characters a token for o200k, 4 estimated. The prompt carries
    // 2,000 (o200k) or 4,000 (estimated) tokens of MEMORY.md, each question 1,000 or 2,000.
    let long = "x".repeat(8_000);
    let with_memory = |setup: &Setup| {
        let memory = setup.dir.path().join("workspace/memory");
        std::fs::create_dir_all(&memory).unwrap();
        std::fs::write(memory.join("MEMORY.md"), "x".repeat(16_000)).unwrap();
    };
    let compacted = |events: &[AgentEvent]| {
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Compaction { .. }))
    };

    // Estimated, two such questions pass the budget's compaction share...
    let estimated = setup_with(replies(), settings);
    with_memory(&estimated);
    estimated.provider.usage_factor.store(1, Ordering::SeqCst);
    run(&estimated, &long).await.1.unwrap();
    let (events, _) = run(&estimated, &long).await;
    assert!(compacted(&events));

    // ...counted exactly, prompt and questions fit (16,000 bytes each, their bounds would
    // not), and the provider's reports teach nothing.
    let exact = setup_for("openai/gpt-4o", replies(), settings);
    with_memory(&exact);
    exact.provider.usage_factor.store(3, Ordering::SeqCst);
    run(&exact, &long).await.1.unwrap();
    let store = exact.agent.store();
    let mut stored = store.settings(&exact.key).unwrap();
    assert_eq!(stored.token_ratio, None);
    // A ratio learned earlier against the estimate (another model) would shrink the budget to
    // a quarter: it is left alone, for that model.
    stored.token_ratio = Some(4.0);
    store.save_settings(&exact.key, &stored).unwrap();
    let (events, outcome) = run(&exact, &long).await;
    outcome.unwrap();
    assert!(!compacted(&events), "{events:?}");
    let requests = exact.provider.requests.lock().unwrap();
    assert!(requests[1].system.contains(&"x".repeat(16_000)));
    assert_eq!(requests[1].messages.len(), 3);
    assert_eq!(store.settings(&exact.key).unwrap().token_ratio, Some(4.0));
}

#[tokio::test]
async fn a_small_local_model_gets_the_minimal_prompt_and_an_answer_fitted_to_its_window() {
    let mut setup = setup(vec![answer("Paris.", StopReason::EndTurn)], 40);
    let workspace = setup.dir.path().join("workspace");
    nanocrab_core::workspace::write_templates(&workspace).unwrap();
    setup.agent = Agent::new(
        ModelChain::new(
            resolved(
                &setup.provider,
                "smollm2-135m",
                ModelProfile {
                    tools: false,
                    context_window: Some(8_192),
                    compact_prompt: true,
                    ..ModelProfile::GENERIC
                },
            ),
            Vec::new(),
        ),
        ToolRegistry::new(),
        SessionStore::new(setup.dir.path().join("sessions")),
        ContextBuilder::new(&workspace),
        AgentSettings {
            max_tokens: 8_192,
            temperature: None,
            max_tool_iterations: 40,
            context_window_tokens: 65_536,
        },
    );
    run(&setup, "What is the capital of France?")
        .await
        .1
        .unwrap();
    let request = &setup.provider.requests.lock().unwrap()[0];
    assert_eq!(request.max_tokens, 2_048);
    assert!(
        !request.system.contains("## AGENTS.md"),
        "{}",
        request.system
    );
    assert!(
        request
            .system
            .contains("- Tools: none (this model cannot call tools)"),
        "{}",
        request.system
    );
}
