//! The agent loop against a scripted in-process provider and a fake tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nanocrab_core::{Agent, AgentSettings, ContextBuilder};
use nanocrab_memory::SessionStore;
use nanocrab_provider::{
    ChatRequest, ChatResponse, DeltaSink, LlmProvider, ProviderDelta, ProviderError,
};
use nanocrab_schema::{
    AgentEvent, ContentBlock, LlmMessage, Role, SessionKey, StopReason, ToolCall, ToolDef,
    ToolResult, Usage,
};
use nanocrab_tools::{Tool, ToolContext, ToolError, ToolRegistry};
use pretty_assertions::assert_eq;
use serde_json::json;

/// Answers with queued responses (or errors) and records every request.
#[derive(Default)]
struct Scripted {
    replies: Mutex<VecDeque<Result<ChatResponse, ProviderError>>>,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl LlmProvider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        let reply = self
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .expect("a scripted reply");
        if let Ok(response) = &reply {
            for block in &response.content {
                if let ContentBlock::Text { text } = block {
                    on_delta(ProviderDelta::Text(text.clone()));
                }
            }
        }
        reply
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 10,
        output_tokens: 5,
        ..Usage::default()
    }
}

fn answer(text: &str, stop_reason: StopReason) -> Result<ChatResponse, ProviderError> {
    Ok(ChatResponse {
        content: vec![ContentBlock::text(text)],
        stop_reason,
        usage: usage(),
        model: "m1".into(),
    })
}

fn call(id: &str, input: serde_json::Value) -> Result<ChatResponse, ProviderError> {
    Ok(ChatResponse {
        content: vec![ContentBlock::ToolUse(ToolCall {
            id: id.into(),
            name: "echo".into(),
            input,
        })],
        stop_reason: StopReason::ToolUse,
        usage: usage(),
        model: "m1".into(),
    })
}

/// Returns its `text` argument; fails when there is none.
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "echo".into(),
            description: "Echo text.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    async fn call(&self, input: serde_json::Value, _: &ToolContext) -> Result<String, ToolError> {
        input["text"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ToolError::InvalidArguments("text is required".into()))
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    provider: Arc<Scripted>,
    agent: Agent,
    key: SessionKey,
}

fn setup(replies: Vec<Result<ChatResponse, ProviderError>>, max_tool_iterations: u32) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(Scripted {
        replies: Mutex::new(replies.into()),
        ..Scripted::default()
    });
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Echo));
    let agent = Agent::new(
        provider.clone(),
        "m1".into(),
        tools,
        SessionStore::new(dir.path().join("sessions")),
        ContextBuilder::new(dir.path().join("workspace")),
        AgentSettings {
            max_tokens: 100,
            temperature: None,
            max_tool_iterations,
            context_window_tokens: 65_536,
        },
    );
    Setup {
        _dir: dir,
        provider,
        agent,
        key: SessionKey::parse("test:1").unwrap(),
    }
}

async fn run(setup: &Setup, text: &str) -> (Vec<AgentEvent>, Result<String, String>) {
    let mut events = Vec::new();
    let outcome = setup
        .agent
        .run_turn(&setup.key, text, &mut |event| events.push(event))
        .await;
    (events, outcome.map(|o| o.text).map_err(|e| e.to_string()))
}

#[tokio::test]
async fn a_tool_round_trip_emits_every_event_in_order() {
    let setup = setup(
        vec![
            call("c1", json!({"text": "hi"})),
            answer("done", StopReason::EndTurn),
        ],
        40,
    );
    let (events, outcome) = run(&setup, "say hi").await;
    assert_eq!(outcome, Ok("done".to_owned()));
    assert_eq!(
        events,
        vec![
            AgentEvent::Usage {
                model: "m1".into(),
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
                model: "m1".into(),
                usage: usage()
            },
            AgentEvent::Done {
                text: "done".into()
            },
        ]
    );
    let second = &setup.provider.requests.lock().unwrap()[1];
    assert_eq!(
        second.messages[2],
        LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::ok("c1", "hi"))]
        }
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
async fn a_provider_error_is_reported_and_the_question_kept() {
    let setup = setup(
        vec![Err(ProviderError::Stream {
            provider: "scripted".into(),
            detail: "gone".into(),
        })],
        40,
    );
    let (events, outcome) = run(&setup, "hello?").await;
    let message = "scripted: the response stream broke off: gone".to_owned();
    assert_eq!(outcome, Err(message.clone()));
    assert_eq!(events, vec![AgentEvent::Error { message }]);
    let stored = setup.agent.store().load(&setup.key).unwrap().messages();
    assert_eq!(stored, vec![LlmMessage::user("hello?")]);
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
