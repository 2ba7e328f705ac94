//! Model fallback within a turn.

use pretty_assertions::assert_eq;

use super::*;

/// An agent whose primary model is `scripted/primary` and whose fallback is
/// `scripted/backup`, each with its own script.
fn with_fallback(
    primary: Vec<Result<ChatResponse, ProviderError>>,
    backup: Vec<Result<ChatResponse, ProviderError>>,
) -> (Setup, Arc<Scripted>) {
    let mut setup = setup(primary, 40);
    let backup = Arc::new(Scripted {
        replies: Mutex::new(backup.into()),
        ..Scripted::default()
    });
    let mut tools = ToolRegistry::new();
    tools.register(setup.echo.clone());
    setup.agent = agent_for(
        &setup.dir,
        setup.dir.path().join("workspace"),
        ModelChain::new(
            resolved(&setup.provider, "primary", ModelProfile::GENERIC),
            vec![resolved(&backup, "backup", ModelProfile::GENERIC)],
        ),
        tools,
    );
    (setup, backup)
}

#[tokio::test]
async fn an_overloaded_primary_falls_back_for_the_rest_of_the_turn_and_is_tried_again_next_turn() {
    let (setup, backup) = with_fallback(
        vec![
            Err(overloaded()),
            answer("primary again", StopReason::EndTurn),
        ],
        vec![
            call("c1", json!({"text": "hi"})),
            answer("backup answered", StopReason::EndTurn),
        ],
    );
    let (events, outcome) = run(&setup, "hello").await;
    assert_eq!(outcome, Ok("backup answered".to_owned()));
    assert_eq!(
        events[0],
        AgentEvent::ModelFallback {
            from: "scripted/primary".into(),
            to: "scripted/backup".into(),
            reason: overloaded().to_string(),
        }
    );
    let answered_by: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::Usage { model, .. } => Some(model.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answered_by, vec!["scripted/backup", "scripted/backup"]);
    // Each model got its own name; the backup's second call went straight to it.
    assert_eq!(setup.provider.requests.lock().unwrap()[0].model, "primary");
    let backup_models: Vec<String> = backup
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.model.to_string())
        .collect();
    assert_eq!(backup_models, vec!["backup", "backup"]);
    let stored: Vec<Option<String>> = setup
        .agent
        .store()
        .load(&setup.key)
        .unwrap()
        .entries
        .iter()
        .map(|e| e.model.clone())
        .collect();
    assert_eq!(
        stored,
        vec![
            None,
            Some("scripted/backup".into()),
            None,
            Some("scripted/backup".into())
        ]
    );

    let (_, outcome) = run(&setup, "and now?").await;
    assert_eq!(outcome, Ok("primary again".to_owned()));
}

#[tokio::test]
async fn a_request_error_is_not_hidden_by_a_fallback_and_exhausted_fallbacks_say_what_was_tried() {
    let bad_request = || ProviderError::Status {
        provider: "scripted".into(),
        status: 400,
        message: "messages: text content blocks must be non-empty".into(),
        kind: Some("invalid_request_error".into()),
        hint: "The provider rejected the request".into(),
        attempts: 1,
        retry_after: None,
    };
    let (setup, backup) = with_fallback(vec![Err(bad_request())], Vec::new());
    let (events, outcome) = run(&setup, "hello").await;
    assert_eq!(outcome, Err(bad_request().to_string()));
    assert_eq!(
        events,
        vec![AgentEvent::Error {
            message: bad_request().to_string()
        }]
    );
    assert!(backup.requests.lock().unwrap().is_empty());

    let (setup, _) = with_fallback(vec![Err(overloaded())], vec![Err(overloaded())]);
    let (_, outcome) = run(&setup, "hello").await;
    assert_eq!(
        outcome,
        Err(format!(
            "every model failed (scripted/primary, scripted/backup); the last error: {}",
            overloaded()
        ))
    );
}

#[tokio::test]
async fn a_refusal_without_words_is_explained() {
    let setup = setup(
        vec![Ok(ChatResponse {
            content: vec![],
            stop_reason: StopReason::Refusal,
            usage: usage(),
            model: "m1".into(),
        })],
        40,
    );
    let (_, outcome) = run(&setup, "do something bad").await;
    assert_eq!(
        outcome,
        Ok("[The model declined to answer this request.]".to_owned())
    );
}
