//! Consolidation of older turns into the memory files.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn older_turns_are_consolidated_into_the_memory_files_and_new_folds_in_the_rest() {
    let setup = with_memory(
        vec![
            answer("Noted.", StopReason::EndTurn),
            answer("Lisbon it is.", StopReason::EndTurn),
            answer("Booked.", StopReason::EndTurn),
            save_memory(
                "Ada moved; trip to Lisbon planned.",
                "# People\n- Ada is my sister; she lives in Lisbon.\n- Trip to Lisbon in May.\n",
            ),
            save_memory("Dentist booked for Tuesday.", ""),
        ],
        false,
    );
    let workspace = setup.dir.path().join("workspace");
    let backups = setup.dir.path().join("state/memory-backups");
    let agent = consolidating(&setup, backups.clone());
    let turn = |text: &'static str| {
        let agent = &agent;
        let key = &setup.key;
        async move {
            agent.run_turn(key, text, &mut |_| {}).await.unwrap();
            agent.consolidate_if_due(key).await.unwrap()
        }
    };
    assert_eq!(turn("Ada moved.").await, None);
    assert_eq!(turn("Plan a trip to Lisbon in May.").await, None);
    // Six messages, more than four: the first two turns go, the newest stays out.
    assert_eq!(
        turn("Book the dentist.").await,
        Some(ConsolidationReport {
            entries: 4,
            memory_changed: true
        })
    );
    let requests = setup.provider.requests.lock().unwrap().clone();
    let consolidation = &requests[3];
    assert_eq!(consolidation.tools[0].name, "save_memory");
    let prompt = consolidation.messages[0].text();
    assert!(
        prompt.contains("## Current memory/MEMORY.md\n# People\n- Ada is my sister"),
        "{prompt}"
    );
    assert!(
        prompt.contains("] user: Plan a trip to Lisbon in May.\n"),
        "{prompt}"
    );
    assert!(!prompt.contains("Book the dentist"), "{prompt}");

    let history = std::fs::read_to_string(workspace.join("memory/HISTORY.md")).unwrap();
    assert!(
        history.ends_with("] Ada moved; trip to Lisbon planned.\n\n") && history.starts_with('['),
        "{history}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("memory/MEMORY.md")).unwrap(),
        "# People\n- Ada is my sister; she lives in Lisbon.\n- Trip to Lisbon in May.\n"
    );
    // The replaced MEMORY.md is kept.
    let kept: Vec<String> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(kept.len(), 1);
    assert!(kept[0].contains("Dr. Okafor"));
    assert_eq!(
        agent.consolidate_if_due(&setup.key).await.unwrap(),
        None,
        "nothing new"
    );

    // /new folds in what is left; an empty memory_update leaves MEMORY.md alone.
    agent
        .run_turn(&setup.key, "/new", &mut |_| {})
        .await
        .unwrap();
    let history = std::fs::read_to_string(workspace.join("memory/HISTORY.md")).unwrap();
    assert!(
        history.ends_with("] Dentist booked for Tuesday.\n\n"),
        "{history}"
    );
    assert!(
        std::fs::read_to_string(workspace.join("memory/MEMORY.md"))
            .unwrap()
            .contains("Trip to Lisbon")
    );
    let last = &setup.provider.requests.lock().unwrap()[4];
    assert!(last.messages[0].text().contains("Book the dentist"));
    assert!(!last.messages[0].text().contains("Ada moved."));
    assert_eq!(
        setup
            .agent
            .store()
            .settings(&setup.key)
            .unwrap()
            .consolidated_entries,
        0
    );
}

#[tokio::test]
async fn a_consolidation_without_save_memory_changes_nothing_and_is_tried_again_later() {
    let setup = setup(
        vec![
            answer("one", StopReason::EndTurn),
            answer("two", StopReason::EndTurn),
            answer("three", StopReason::EndTurn),
            answer("I'd rather chat.", StopReason::EndTurn),
            answer("four", StopReason::EndTurn),
            answer("five", StopReason::EndTurn),
            save_memory("Talked a to e.", "# Memory\n"),
        ],
        40,
    );
    let workspace = setup.dir.path().join("workspace");
    let agent = consolidating(&setup, setup.dir.path().join("backups"));
    for text in ["a", "b", "c"] {
        agent.run_turn(&setup.key, text, &mut |_| {}).await.unwrap();
    }
    let err = agent.consolidate_if_due(&setup.key).await.unwrap_err();
    // What the model said stays out of the error, which is logged.
    assert_eq!(
        err.to_string(),
        "memory consolidation: the model answered (16 characters) without calling save_memory"
    );
    assert!(!workspace.join("memory/HISTORY.md").exists());
    assert_eq!(
        agent
            .store()
            .settings(&setup.key)
            .unwrap()
            .consolidated_entries,
        0
    );
    // Not after the very next turn (more than half a window, two messages, has to come
    // first)...
    agent.run_turn(&setup.key, "d", &mut |_| {}).await.unwrap();
    let requests = setup.provider.requests.lock().unwrap().len();
    assert!(
        agent
            .consolidate_if_due(&setup.key)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(setup.provider.requests.lock().unwrap().len(), requests);
    // ...but once it has.
    agent.run_turn(&setup.key, "e", &mut |_| {}).await.unwrap();
    assert!(
        agent
            .consolidate_if_due(&setup.key)
            .await
            .unwrap()
            .is_some()
    );
    assert!(workspace.join("memory/HISTORY.md").exists());
}
