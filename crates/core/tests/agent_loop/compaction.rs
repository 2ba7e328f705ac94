//! Compaction: older turns summarised to fit the window.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn old_turns_are_summarised_to_fit_the_window_but_stay_in_the_transcript() {
    let setup = setup_with(
        vec![
            answer("one", StopReason::EndTurn),
            answer("two", StopReason::EndTurn),
            call("c1", json!({"text": "x"})),
            answer("three", StopReason::EndTurn),
        ],
        AgentSettings {
            max_tokens: 100,
            temperature: None,
            max_tool_iterations: 40,
            context_window_tokens: 1_200,
        },
    );
    setup.provider.usage_factor.store(1, Ordering::SeqCst);
    let first = "a".repeat(3_000);
    let second = "b".repeat(3_000);
    let (_, _) = run(&setup, &first).await;
    let (events, _) = run(&setup, &second).await;
    assert_eq!(events[0], AgentEvent::Compaction { messages: 2 });
    run(&setup, "third").await.1.unwrap();

    // Long messages are summarised in parts and the parts merged; the later compaction folds
    // the earlier summary in with the turn that followed it.
    let summaries = setup.provider.summaries.lock().unwrap().clone();
    assert!(summaries.len() >= 2, "{}", summaries.len());
    assert!(summaries[0].messages[0].text().contains(&"a".repeat(100)));
    let texts: Vec<String> = summaries.iter().map(|r| r.messages[0].text()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Summary of what came before:\nSummary "))
    );
    assert!(texts.iter().any(|t| t.contains(&"b".repeat(100))));
    assert!(
        !texts.iter().any(|t| t.contains("third")),
        "the current turn stays whole"
    );

    let requests = setup.provider.requests.lock().unwrap();
    let summary_of = |message: &LlmMessage| {
        match &message.content[0] {
        ContentBlock::Text { text }
            if text.starts_with(
                "[Summary of the earlier conversation; the whole of it is in the transcript]\nSummary ",
            ) =>
        {
            text.clone()
        }
        other => panic!("no summary first: {other:?}"),
    }
    };
    assert_eq!(requests[1].messages.len(), 1);
    let first_summary = summary_of(&requests[1].messages[0]);
    assert_eq!(
        requests[1].messages[0].content[1],
        ContentBlock::text(second.clone())
    );
    assert_eq!(requests[2].messages.len(), 1);
    assert_ne!(summary_of(&requests[2].messages[0]), first_summary);
    assert_eq!(
        requests[2].messages[0].content[1],
        ContentBlock::text("third")
    );
    assert_eq!(requests[3].messages[0], requests[2].messages[0]);
    assert_eq!(
        requests[3].messages.len(),
        3,
        "the call and its result stay together"
    );
    // Every message is still in the file.
    let session = setup.agent.store().load(&setup.key).unwrap();
    assert_eq!(session.entries.len(), 8);
    assert_eq!(session.entries[0].message(), LlmMessage::user(first));
    assert_eq!(session.compaction.as_ref().unwrap().through, 4);
}

#[tokio::test]
async fn a_context_overflow_compacts_and_asks_once_more() {
    let too_long = || ProviderError::Status {
        provider: "scripted".into(),
        status: 400,
        message: "prompt is too long: 208310 tokens > 200000 maximum".into(),
        kind: Some("invalid_request_error".into()),
        hint: String::new(),
        attempts: 1,
        retry_after: None,
    };
    let setup = setup(
        vec![
            answer("one", StopReason::EndTurn),
            Err(too_long()),
            answer("fits now", StopReason::EndTurn),
            Err(too_long()),
            Err(too_long()),
        ],
        40,
    );
    run(&setup, "first question").await.1.unwrap();
    let (events, outcome) = run(&setup, "second").await;
    assert_eq!(outcome, Ok("fits now".to_owned()));
    assert!(events.contains(&AgentEvent::Compaction { messages: 2 }));
    let requests = setup.provider.requests.lock().unwrap().clone();
    assert_eq!(
        requests[2].messages[0].content.len(),
        2,
        "summary, then the question"
    );
    // A second overflow in the same turn is reported, not retried forever.
    let (_, outcome) = run(&setup, "third").await;
    assert_eq!(outcome, Err(too_long().to_string()));
}
