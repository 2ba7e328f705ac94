//! RAG mode: memory retrieved with each message.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn in_rag_mode_matching_memory_is_attached_to_the_message_for_this_turn_only() {
    let setup = with_memory(
        vec![
            call("c1", json!({"text": "checking"})),
            answer("Dr. Okafor.", StopReason::EndTurn),
        ],
        true,
    );
    let (events, outcome) = run(&setup, "who is my dentist?").await;
    assert_eq!(outcome, Ok("Dr. Okafor.".to_owned()));
    assert_eq!(
        events[0],
        AgentEvent::Retrieval {
            sources: vec![RetrievedSource {
                path: "memory/MEMORY.md".into(),
                start_line: 4,
                end_line: 5,
                score: 1.0
            }]
        }
    );
    let attached = ContentBlock::text(
        "\n\n[Memory retrieved for this message; not written by the user. Use memory_get for more of a file.]\n\nmemory/MEMORY.md:4-5\n# Health\n- Dentist: Dr. Okafor, every March.",
    );
    let requests = setup.provider.requests.lock().unwrap();
    // Both calls of the turn carry it, on the user's message.
    for request in requests.iter() {
        assert_eq!(
            request.messages[0].content,
            vec![ContentBlock::text("who is my dentist?"), attached.clone()]
        );
        assert!(!request.system.contains("Lisbon"), "{}", request.system);
        assert!(
            request
                .system
                .contains("memory/MEMORY.md is not in this prompt"),
            "{}",
            request.system
        );
    }
    // Never stored: the transcript holds what the user wrote.
    assert_eq!(
        setup.agent.store().load(&setup.key).unwrap().messages()[0],
        LlmMessage::user("who is my dentist?")
    );
}

#[tokio::test]
async fn rag_mode_is_switched_per_conversation_and_off_puts_memory_back_in_the_prompt() {
    let setup = with_memory(
        vec![
            answer("one", StopReason::EndTurn),
            answer("two", StopReason::EndTurn),
        ],
        false,
    );
    assert_eq!(
        run(&setup, "/rag").await.1,
        Ok("RAG mode is off for this conversation.".to_owned())
    );
    run(&setup, "where does Ada live?").await.1.unwrap();
    assert_eq!(
        run(&setup, "/rag on").await.1,
        Ok("RAG mode on: memory now arrives by search with each message instead of whole in the prompt.".to_owned())
    );
    run(&setup, "where does Ada live?").await.1.unwrap();

    let requests = setup.provider.requests.lock().unwrap().clone();
    assert!(requests[0].system.contains("she lives in Lisbon"));
    assert_eq!(requests[0].messages.last().unwrap().content.len(), 1);
    assert!(!requests[1].system.contains("she lives in Lisbon"));
    assert!(
        requests[1]
            .messages
            .last()
            .unwrap()
            .text()
            .contains("memory/MEMORY.md:1-2"),
        "{:?}",
        requests[1].messages
    );
    // The choice outlives /new: it belongs to the conversation.
    run(&setup, "/new").await.1.unwrap();
    assert_eq!(
        run(&setup, "/rag").await.1,
        Ok("RAG mode is on for this conversation.".to_owned())
    );
}
