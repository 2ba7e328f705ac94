//! Turns submitted the way the OpenAI-compatible API submits them.

use nanocrab_core::UserInput;
use nanocrab_gateway::{SubmitError, TurnError, TurnRequest};
use nanocrab_schema::{AgentEvent, SessionKey};
use pretty_assertions::assert_eq;

use crate::harness::{HELD_NOTE, Harness, answer, dm, held, until};

fn request(session: &str, text: &str) -> TurnRequest {
    TurnRequest {
        agent_id: "main".to_owned(),
        session: SessionKey::parse(session).unwrap(),
        input: UserInput::from(text),
        with_model: None,
        housekeeping: true,
        cancel: Default::default(),
        in_callers_slot: false,
    }
}

#[tokio::test]
async fn a_submitted_turn_streams_its_events_and_ends_with_its_outcome() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    let mut ticket = gateway.turns.submit(request("api:one", "hello")).unwrap();
    let mut events = Vec::new();
    while let Some(event) = ticket.events.recv().await {
        events.push(event);
    }
    let streamed: String = events
        .iter()
        .filter_map(|event| {
            if let AgentEvent::Token { text } = event {
                Some(text.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(streamed, "echo: hello");
    assert_eq!(
        events.last(),
        Some(&AgentEvent::Done {
            text: "echo: hello".to_owned()
        })
    );
    assert_eq!(ticket.outcome.await.unwrap().text, "echo: hello");
    assert_eq!(gateway.status.turns_done(), (1, 0));
    gateway.stop().await;
}

#[tokio::test]
async fn a_submitted_turn_waits_behind_its_session_and_is_refused_when_the_queue_is_full() {
    let mut harness = Harness::new().await;
    harness.config.gateway.queue.cap = 2;
    let gateway = harness.start();
    let chat = held(dm("1", "10", "from the chat"));
    harness.channel.deliver(chat.clone()).await.unwrap();
    harness.channel.wait_for_held(1).await;

    let session = "agent:main:telegram:dm:1";
    let abandoned = gateway.turns.submit(request(session, "first")).unwrap();
    let second = gateway.turns.submit(request(session, "second")).unwrap();
    assert_eq!(
        gateway.turns.submit(request(session, "third")).err(),
        Some(SubmitError::QueueFull { waiting: 2 })
    );
    // Its caller went away before it started: it never runs.
    drop(abandoned);
    harness.channel.release(1);

    assert_eq!(second.outcome.await.unwrap().text, "echo: second");
    assert_eq!(
        harness.channel.sent(),
        vec![answer(&chat, &format!("echo: from the chat\n{HELD_NOTE}"))]
    );
    assert_eq!(harness.mock.requests().len(), 2);
    gateway.stop().await;
}

#[tokio::test]
async fn a_turn_for_an_unknown_agent_is_refused() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    let mut ghost = request("api:one", "boo");
    ghost.agent_id = "ghost".to_owned();
    assert_eq!(
        gateway.turns.submit(ghost).err(),
        Some(SubmitError::UnknownAgent("ghost".to_owned()))
    );
    gateway.stop().await;
}

#[tokio::test]
async fn a_shutdown_abandons_submitted_turns_that_have_not_started() {
    let harness = Harness::new().await;
    let gateway = harness.start();
    harness
        .channel
        .deliver(held(dm("1", "10", "hi")))
        .await
        .unwrap();
    harness.channel.wait_for_held(1).await;
    let waiting = gateway
        .turns
        .submit(request("agent:main:telegram:dm:1", "later"))
        .unwrap();

    gateway.shutdown.cancel();
    let turns = gateway.turns.clone();
    until(|| turns.is_stopping()).await;
    assert_eq!(
        turns.submit(request("api:two", "too late")).err(),
        Some(SubmitError::ShuttingDown)
    );
    harness.channel.release(1);
    gateway.stopped().await;
    assert!(matches!(waiting.outcome.await, Err(TurnError::Abandoned)));
}
