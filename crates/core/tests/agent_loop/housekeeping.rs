//! The housekeeping model: titles and short consolidations.

use pretty_assertions::assert_eq;

use super::*;

/// The setup's agent with a second scripted provider as its housekeeping model, which has no
/// tool calling and the window `window`.
fn with_housekeeper(
    setup: &Setup,
    window: u32,
    replies: Vec<Result<ChatResponse, ProviderError>>,
) -> (Agent, Arc<Scripted>) {
    let housekeeper = Arc::new(Scripted {
        replies: Mutex::new(replies.into()),
        ..Scripted::default()
    });
    let agent = consolidating(setup, setup.dir.path().join("state/memory-backups"))
        .with_housekeeping(resolved(
            &housekeeper,
            "smollm2-135m",
            ModelProfile {
                tools: false,
                context_window: Some(window),
                compact_prompt: true,
                ..ModelProfile::GENERIC
            },
        ));
    (agent, housekeeper)
}

#[tokio::test]
async fn the_housekeeping_model_titles_a_session_once_its_first_question_is_answered() {
    let setup = setup(vec![answer("Lisbon in May.", StopReason::EndTurn)], 40);
    let (agent, housekeeper) = with_housekeeper(
        &setup,
        8_192,
        vec![answer("\"Planning a Lisbon trip.\"", StopReason::EndTurn)],
    );
    assert_eq!(agent.title_if_missing(&setup.key).await.unwrap(), None);
    agent
        .run_turn(&setup.key, "Where should we travel?", &mut |_| {})
        .await
        .unwrap();
    assert_eq!(
        agent.title_if_missing(&setup.key).await.unwrap(),
        Some("Planning a Lisbon trip".to_owned())
    );
    // Titled once: no second request.
    assert_eq!(agent.title_if_missing(&setup.key).await.unwrap(), None);
    let requests = housekeeper.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].messages,
        vec![nanocrab_schema::LlmMessage::user(
            "user: Where should we travel?\nassistant: Lisbon in May."
        )]
    );
    assert!(requests[0].tools.is_empty());
    let listed = agent.store().list().unwrap();
    assert_eq!(listed[0].title, "Planning a Lisbon trip");
}

#[tokio::test]
async fn short_consolidations_go_to_the_housekeeping_model_and_long_ones_to_the_agents() {
    let turns = [
        "Ada moved.",
        "Plan a trip to Lisbon in May.",
        "Book the dentist.",
    ];
    let replies = || {
        vec![
            answer("Noted.", StopReason::EndTurn),
            answer("Lisbon it is.", StopReason::EndTurn),
            answer("Booked.", StopReason::EndTurn),
        ]
    };

    // A window the part fits in: the housekeeper summarises into HISTORY.md only.
    let setup = with_memory(replies(), false);
    let workspace = setup.dir.path().join("workspace");
    let memory_before = std::fs::read_to_string(workspace.join("memory/MEMORY.md")).unwrap();
    let (agent, housekeeper) = with_housekeeper(
        &setup,
        8_192,
        vec![answer(
            "Ada moved; a Lisbon trip is planned for May.",
            StopReason::EndTurn,
        )],
    );
    let mut reports = Vec::new();
    for text in turns {
        agent.run_turn(&setup.key, text, &mut |_| {}).await.unwrap();
        reports.push(agent.consolidate_if_due(&setup.key).await.unwrap());
    }
    assert_eq!(
        reports,
        vec![
            None,
            None,
            Some(ConsolidationReport {
                entries: 4,
                memory_changed: false
            })
        ]
    );
    let summary_request = housekeeper.requests.lock().unwrap()[0].clone();
    assert!(summary_request.tools.is_empty());
    assert!(
        summary_request.messages[0]
            .text()
            .contains("] user: Plan a trip to Lisbon in May.\n"),
        "{:?}",
        summary_request.messages
    );
    let history = std::fs::read_to_string(workspace.join("memory/HISTORY.md")).unwrap();
    assert!(
        history.ends_with("] Ada moved; a Lisbon trip is planned for May.\n\n"),
        "{history}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("memory/MEMORY.md")).unwrap(),
        memory_before
    );
    // The agent's model answered the three turns and nothing else.
    assert_eq!(setup.provider.requests.lock().unwrap().len(), 3);

    // A window too small for the part: the agent's model consolidates with save_memory.
    let mut more = replies();
    more.push(save_memory("Ada moved.", ""));
    let setup = with_memory(more, false);
    let (agent, housekeeper) = with_housekeeper(&setup, 64, Vec::new());
    for text in turns {
        agent.run_turn(&setup.key, text, &mut |_| {}).await.unwrap();
        agent.consolidate_if_due(&setup.key).await.unwrap();
    }
    assert!(housekeeper.requests.lock().unwrap().is_empty());
    let requests = setup.provider.requests.lock().unwrap().clone();
    assert_eq!(requests[3].tools[0].name, "save_memory");
}

#[tokio::test]
async fn a_housekeeping_model_that_cannot_title_a_session_is_not_asked_again() {
    let setup = setup(vec![answer("Lisbon in May.", StopReason::EndTurn)], 40);
    let (agent, housekeeper) = with_housekeeper(&setup, 8_192, vec![Err(overloaded())]);
    agent
        .run_turn(&setup.key, "Where should we travel?", &mut |_| {})
        .await
        .unwrap();
    assert!(agent.title_if_missing(&setup.key).await.is_err());
    assert_eq!(agent.title_if_missing(&setup.key).await.unwrap(), None);
    assert_eq!(housekeeper.requests.lock().unwrap().len(), 1);
    assert_eq!(
        agent.store().list().unwrap()[0].title,
        "Where should we travel?"
    );
}
