//! The mock LLM over real HTTP: exact scripted bytes per wire format, recording, errors,
//! delays, fixture replay, and the synchronous `spawn` mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use nanocrab_testkit::{
    ApiError, MockLlm, Part, Protocol, Reply, chunks_to_sse, fixture_bytes, fixture_path,
    replay_list,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy)]
enum Wire {
    Anthropic,
    OpenAi,
    Responses,
    Gemini,
}

impl Wire {
    const ALL: [Wire; 4] = [Wire::Anthropic, Wire::OpenAi, Wire::Responses, Wire::Gemini];
    /// The wires whose streams carry a tool call's id and its arguments byte for byte, which
    /// `assemble` checks; Gemini has no call ids and sends arguments as parsed JSON.
    const CALL_IDS: [Wire; 3] = [Wire::Anthropic, Wire::OpenAi, Wire::Responses];

    /// Gemini names the streaming mode in the path; the others in the body.
    fn url(self, mock: &MockLlm, stream: bool) -> String {
        match self {
            Wire::Anthropic => format!("{}/v1/messages", mock.anthropic_base()),
            Wire::OpenAi => format!("{}/chat/completions", mock.openai_base()),
            Wire::Responses => format!("{}/responses", mock.openai_base()),
            Wire::Gemini if stream => format!(
                "{}/v1beta/models/m:streamGenerateContent?alt=sse",
                mock.anthropic_base()
            ),
            Wire::Gemini => format!("{}/v1beta/models/m:generateContent", mock.anthropic_base()),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::OpenAi => "openai",
            Wire::Responses => "responses",
            Wire::Gemini => "gemini",
        }
    }

    /// A request as the adapters send it; the Responses one is stateless and asks for the
    /// encrypted reasoning back.
    fn request(self, stream: bool) -> Value {
        match self {
            Wire::Anthropic => json!({"model": "m", "stream": stream, "max_tokens": 64,
                                      "messages": [{"role": "user", "content": "hi"}]}),
            Wire::OpenAi => json!({"model": "m", "stream": stream,
                                   "stream_options": {"include_usage": true},
                                   "messages": [{"role": "user", "content": "hi"}]}),
            Wire::Responses => json!({"model": "m", "stream": stream, "store": false,
                                      "include": ["reasoning.encrypted_content"],
                                      "input": [{"role": "user", "content": "hi"}]}),
            Wire::Gemini => json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        }
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

async fn post(url: &str, body: &Value) -> Answer {
    let response = client().post(url).json(body).send().await.unwrap();
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap(),
    }
}

/// Posts `reply`'s request to a fresh mock and returns the answer.
async fn ask(wire: Wire, reply: Reply, stream: bool) -> Answer {
    let mock = MockLlm::start().await;
    mock.push(reply);
    post(&wire.url(&mock, stream), &wire.request(stream)).await
}

/// The streamed and the non-stream answer to `reply`, both whole, for one snapshot.
async fn both_answers(wire: Wire, reply: Reply) -> String {
    let streamed = ask(wire, reply.clone(), true).await;
    assert_eq!(streamed.status, 200, "{wire:?}");
    events(&streamed.body);
    let whole = ask(wire, reply, false).await;
    assert_eq!(whole.status, 200, "{wire:?}");
    let whole: Value = serde_json::from_str(&whole.body).unwrap();
    format!(
        "{}--- non-stream ---\n{}\n",
        streamed.body,
        serde_json::to_string_pretty(&whole).unwrap()
    )
}

/// The SSE events of a body as (event name, data), checking the framing on the way: every
/// event ends with a blank line and has exactly one `data:` line. Lines may end with `\r\n`,
/// as Gemini's do.
fn events(body: &str) -> Vec<(Option<String>, String)> {
    let body = &body.replace("\r\n", "\n");
    assert!(
        body.ends_with("\n\n"),
        "the last event is terminated: {body:?}"
    );
    body.trim_end_matches('\n')
        .split("\n\n")
        .map(|event| {
            let mut name = None;
            let mut data = None;
            for line in event.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    name = Some(value.to_owned());
                } else if let Some(value) = line.strip_prefix("data: ") {
                    assert!(data.is_none(), "one data line per event: {event:?}");
                    data = Some(value.to_owned());
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            (name, data.expect("every event has data"))
        })
        .collect()
}

/// Checks the stream is well-formed for its protocol and returns the text and the tool calls
/// (id, name, raw arguments) a client would assemble from it.
fn assemble(wire: Wire, body: &str) -> (String, Vec<(String, String, String)>) {
    let mut text = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let events = events(body);
    match wire {
        Wire::Anthropic => {
            for (name, data) in &events {
                let data: Value = serde_json::from_str(data).unwrap();
                assert_eq!(name.as_deref(), data["type"].as_str(), "event name = type");
                match data["type"].as_str().unwrap() {
                    "content_block_start" if data["content_block"]["type"] == "tool_use" => {
                        let block = &data["content_block"];
                        calls.push((
                            block["id"].as_str().unwrap().into(),
                            block["name"].as_str().unwrap().into(),
                            String::new(),
                        ));
                    }
                    "content_block_delta" => match data["delta"]["type"].as_str().unwrap() {
                        "text_delta" => text.push_str(data["delta"]["text"].as_str().unwrap()),
                        "input_json_delta" => calls
                            .last_mut()
                            .unwrap()
                            .2
                            .push_str(data["delta"]["partial_json"].as_str().unwrap()),
                        _ => {}
                    },
                    _ => {}
                }
            }
            assert_eq!(events.first().unwrap().0.as_deref(), Some("message_start"));
        }
        Wire::OpenAi => {
            assert_eq!(events.last().unwrap(), &(None, "[DONE]".to_owned()));
            for (name, data) in &events[..events.len() - 1] {
                assert_eq!(name, &None);
                let data: Value = serde_json::from_str(data).unwrap();
                assert_eq!(data["object"], "chat.completion.chunk");
                let Some(delta) = data["choices"].get(0).map(|c| &c["delta"]) else {
                    continue;
                };
                text.push_str(delta["content"].as_str().unwrap_or_default());
                for call in delta["tool_calls"].as_array().into_iter().flatten() {
                    let index = call["index"].as_u64().unwrap() as usize;
                    if let Some(id) = call["id"].as_str() {
                        assert_eq!(index, calls.len(), "tool call indexes count up");
                        calls.push((
                            id.into(),
                            call["function"]["name"].as_str().unwrap().into(),
                            String::new(),
                        ));
                    }
                    calls[index]
                        .2
                        .push_str(call["function"]["arguments"].as_str().unwrap());
                }
            }
        }
        Wire::Responses => {
            for (number, (name, data)) in events.iter().enumerate() {
                let data: Value = serde_json::from_str(data).unwrap();
                assert_eq!(name.as_deref(), data["type"].as_str(), "event name = type");
                assert_eq!(data["sequence_number"], number, "sequence numbers count up");
                match data["type"].as_str().unwrap() {
                    "response.output_text.delta" => text.push_str(data["delta"].as_str().unwrap()),
                    "response.output_item.added" if data["item"]["type"] == "function_call" => {
                        let item = &data["item"];
                        calls.push((
                            item["call_id"].as_str().unwrap().into(),
                            item["name"].as_str().unwrap().into(),
                            String::new(),
                        ));
                    }
                    "response.function_call_arguments.delta" => calls
                        .last_mut()
                        .unwrap()
                        .2
                        .push_str(data["delta"].as_str().unwrap()),
                    _ => {}
                }
            }
            assert_eq!(events[0].0.as_deref(), Some("response.created"));
            assert_eq!(
                events.last().unwrap().0.as_deref(),
                Some("response.completed")
            );
        }
        Wire::Gemini => panic!("Gemini streams carry no call ids: see Wire::CALL_IDS"),
    }
    (text, calls)
}

fn call(id: &str, name: &str, arguments: &str) -> (String, String, String) {
    (id.into(), name.into(), arguments.into())
}

#[tokio::test]
async fn scripted_streams_are_well_formed_with_exact_bytes() {
    let broken = r#"{"path": "a.md", "content": "x",}"#;
    let cases = [
        (
            "text",
            Reply::text("Hello there, friend!"),
            "Hello there, friend!",
            vec![],
        ),
        (
            "tool_call",
            Reply::tool_call(
                "call_1",
                "write_file",
                json!({"path": "a.md", "content": "x"}),
            ),
            "",
            vec![call(
                "call_1",
                "write_file",
                r#"{"path":"a.md","content":"x"}"#,
            )],
        ),
        (
            "parallel_tool_calls",
            Reply::tool_calls(vec![
                ("call_1".into(), "read_file".into(), json!({"path": "a.md"})),
                ("call_2".into(), "list_dir".into(), json!({})),
            ]),
            "",
            vec![
                call("call_1", "read_file", r#"{"path":"a.md"}"#),
                call("call_2", "list_dir", "{}"),
            ],
        ),
        (
            "text_then_tool_call",
            Reply::text_then_tool_call("Let me look.", "call_1", "list_dir", json!({"path": "."})),
            "Let me look.",
            vec![call("call_1", "list_dir", r#"{"path":"."}"#)],
        ),
        (
            "raw_broken_args",
            Reply::tool_call_raw("call_1", "write_file", broken),
            "",
            vec![call("call_1", "write_file", broken)],
        ),
        (
            "thinking",
            Reply::thinking("The user greets me.", "Hi!").with_usage(30, 5),
            "Hi!",
            vec![],
        ),
    ];
    for (case, reply, text, calls) in cases {
        for wire in Wire::CALL_IDS {
            let answer = ask(wire, reply.clone(), true).await;
            assert_eq!(answer.status, 200, "{case} {wire:?}");
            assert_eq!(answer.headers["content-type"], "text/event-stream");
            assert_eq!(
                assemble(wire, &answer.body),
                (text.to_owned(), calls.clone()),
                "{case} {wire:?}"
            );
            insta::assert_snapshot!(format!("stream_{case}_{}", wire.name()), answer.body);
        }
    }
}

#[tokio::test]
async fn a_stream_can_fail_midway() {
    for wire in Wire::ALL {
        let answer = ask(wire, Reply::stream_error_after("Partial ans"), true).await;
        assert_eq!(answer.status, 200);
        let events = events(&answer.body);
        let names: Vec<Option<&str>> = events.iter().map(|(name, _)| name.as_deref()).collect();
        let (_, data) = events.last().unwrap();
        match wire {
            Wire::Anthropic | Wire::OpenAi => {
                assert_eq!(names.last().unwrap(), &Some("error"), "{wire:?}");
                assert!(data.contains("overloaded"), "{wire:?}: {data}");
            }
            Wire::Responses => {
                assert_eq!(
                    names[names.len() - 2..],
                    [Some("error"), Some("response.failed")]
                );
            }
            Wire::Gemini => assert!(data.starts_with(r#"{"error":"#), "{data}"),
        }
        for end in [
            "message_stop",
            "[DONE]",
            "response.completed",
            "finishReason",
        ] {
            assert!(!answer.body.contains(end), "{wire:?} ends properly: {end}");
        }
        insta::assert_snapshot!(format!("stream_error_after_{}", wire.name()), answer.body);
    }
}

#[tokio::test]
async fn openai_usage_chunk_only_when_asked_for() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text("hi"));
    let answer = post(
        &Wire::OpenAi.url(&mock, true),
        &json!({"model": "m", "stream": true, "messages": []}),
    )
    .await;
    assert!(!answer.body.contains("usage"), "{}", answer.body);
    assert!(answer.body.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn responses_reasoning_is_encrypted_only_when_asked_for() {
    let reply = Reply::thinking("The user greets me.", "Hi!");
    let mock = MockLlm::start().await;
    let mut bodies = String::new();
    for stream in [true, false] {
        mock.push(reply.clone());
        let mut request = Wire::Responses.request(stream);
        request.as_object_mut().unwrap().remove("include");
        let answer = post(&Wire::Responses.url(&mock, stream), &request).await;
        assert_eq!(answer.status, 200);
        assert!(
            !answer.body.contains("encrypted_content"),
            "{}",
            answer.body
        );
        bodies.push_str(&answer.body);
        bodies.push('\n');
    }
    insta::assert_snapshot!("responses_reasoning_not_included", bodies);

    // Asked for, it is the same on every item carrying it: added, done and the final output.
    let answer = ask(Wire::Responses, reply, true).await;
    let encrypted: Vec<Value> = events(&answer.body)
        .into_iter()
        .map(|(_, data)| serde_json::from_str::<Value>(&data).unwrap())
        .flat_map(|data| {
            let items = match data["type"].as_str().unwrap() {
                "response.completed" => data["response"]["output"].as_array().unwrap().clone(),
                _ => vec![data["item"].clone()],
            };
            items
                .into_iter()
                .map(|item| item["encrypted_content"].clone())
        })
        .filter(|content| !content.is_null())
        .collect();
    assert_eq!(encrypted.len(), 3, "{}", answer.body);
    assert!(encrypted.iter().all(|content| content == &encrypted[0]));
}

#[tokio::test]
async fn truncated_and_refused_answers_on_every_endpoint() {
    for (case, reply) in [
        ("truncated", Reply::truncated("The capital of France is")),
        ("refusal", Reply::refusal("I can't help with that.")),
    ] {
        for wire in Wire::ALL {
            insta::assert_snapshot!(
                format!("{case}_{}", wire.name()),
                both_answers(wire, reply.clone()).await
            );
        }
    }
}

#[tokio::test]
async fn cache_usage_on_every_endpoint() {
    // 30 uncached input tokens, 100 read from the cache, 20 written to it.
    let reply = Reply::text("Hi!")
        .with_usage(30, 5)
        .with_cache_usage(100, 20);
    for wire in Wire::ALL {
        insta::assert_snapshot!(
            format!("cache_usage_{}", wire.name()),
            both_answers(wire, reply.clone()).await
        );
    }
}

#[tokio::test]
async fn non_stream_answers_are_json() {
    let replies = [
        (
            "text_then_tool_call",
            Reply::text_then_tool_call("Let me look.", "call_1", "list_dir", json!({"path": "."})),
        ),
        ("thinking", Reply::thinking("Greeting.", "Hi!")),
        (
            "raw_broken_args",
            Reply::tool_call_raw("call_1", "write_file", r#"{"path": "a",}"#),
        ),
    ];
    for (case, reply) in replies {
        for wire in Wire::ALL {
            let answer = ask(wire, reply.clone(), false).await;
            assert_eq!(answer.status, 200);
            assert_eq!(answer.headers["content-type"], "application/json");
            assert_eq!(
                answer.headers["content-length"],
                answer.body.len().to_string().as_str()
            );
            let body: Value = serde_json::from_str(&answer.body).unwrap();
            insta::assert_json_snapshot!(format!("json_{case}_{}", wire.name()), body);
        }
    }
}

#[tokio::test]
async fn errors_use_each_providers_status_and_body() {
    let mut report = String::new();
    for error in [
        ApiError::BadRequest,
        ApiError::Unauthorized,
        ApiError::Forbidden,
        ApiError::RateLimited,
        ApiError::ServerError,
        ApiError::Overloaded,
    ] {
        for wire in Wire::ALL {
            let answer = ask(wire, Reply::error(error), false).await;
            assert_eq!(answer.headers["content-type"], "application/json");
            // Errors come before any stream starts: the same answer to a streaming request.
            let streamed = ask(wire, Reply::error(error), true).await;
            assert_eq!(
                (streamed.status, &streamed.body),
                (answer.status, &answer.body)
            );
            report.push_str(&format!(
                "{error:?} {}: {} {}\n",
                wire.name(),
                answer.status,
                answer.body
            ));
        }
    }
    insta::assert_snapshot!("errors", report);

    let answer = ask(
        Wire::Anthropic,
        Reply::overloaded().with_header("retry-after", "2"),
        true,
    )
    .await;
    assert_eq!(answer.status, 529);
    assert_eq!(answer.headers["retry-after"], "2");

    let custom = json!({"error": {"message": "nope", "type": "teapot"}});
    let answer = ask(Wire::OpenAi, Reply::status(418, custom.clone()), true).await;
    assert_eq!(answer.status, 418);
    assert_eq!(serde_json::from_str::<Value>(&answer.body).unwrap(), custom);
}

#[tokio::test]
async fn every_request_is_recorded_even_when_answered_with_an_error() {
    let mock = MockLlm::start().await;
    mock.push(Reply::unauthorized());
    mock.push(Reply::text("ok"));
    let first = client()
        .post(Wire::Anthropic.url(&mock, true))
        .header("x-api-key", "k1")
        .json(&Wire::Anthropic.request(true))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status().as_u16(), 401);
    post(
        &Wire::OpenAi.url(&mock, false),
        &Wire::OpenAi.request(false),
    )
    .await;
    let not_json = client()
        .post(format!("{}/v1/models", mock.anthropic_base()))
        .body("plain words")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status().as_u16(), 404);
    assert_eq!(
        not_json.text().await.unwrap(),
        "mock LLM: no endpoint POST /v1/models (POST /v1/messages, /v1/chat/completions, \
         /v1/responses or /v1beta/models/MODEL:streamGenerateContent)"
    );
    let empty = post(&Wire::OpenAi.url(&mock, true), &json!({})).await;
    assert_eq!(
        (empty.status, empty.body.as_str()),
        (500, "mock LLM: no scripted reply left for request 4")
    );

    let requests = mock.requests();
    let summary: Vec<(&str, &str, &Value)> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str(), &r.body))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("POST", "/v1/messages", &Wire::Anthropic.request(true)),
            ("POST", "/v1/chat/completions", &Wire::OpenAi.request(false)),
            ("POST", "/v1/models", &json!("plain words")),
            ("POST", "/v1/chat/completions", &json!({})),
        ]
    );
    assert_eq!(requests[0].headers["x-api-key"], "k1");
    assert_eq!(requests[0].headers["content-type"], "application/json");
    assert_eq!(mock.pending(), 0);
}

#[tokio::test]
async fn an_empty_script_fails_loudly() {
    let mock = MockLlm::start().await;
    let answer = post(&Wire::Anthropic.url(&mock, true), &json!({"stream": true})).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (500, "mock LLM: no scripted reply left for request 1")
    );
}

#[tokio::test]
async fn replies_are_delayed_and_paced() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text("hi").with_delay(Duration::from_millis(150)));
    let started = Instant::now();
    post(
        &Wire::Anthropic.url(&mock, false),
        &Wire::Anthropic.request(false),
    )
    .await;
    assert!(started.elapsed() >= Duration::from_millis(150));

    // "Hello world!" streams as 2 text deltas: 8 events, so 7 pauses between frames.
    mock.push(Reply::text("Hello world!").with_chunk_delay(Duration::from_millis(25)));
    let started = Instant::now();
    let response = client()
        .post(Wire::Anthropic.url(&mock, true))
        .json(&Wire::Anthropic.request(true))
        .send()
        .await
        .unwrap();
    let mut frames = 0;
    let mut stream = response.bytes_stream();
    while let Some(frame) = stream.next().await {
        frame.unwrap();
        frames += 1;
    }
    assert!(started.elapsed() >= Duration::from_millis(175));
    assert!(frames > 1, "paced frames arrive separately");
}

/// The directory of every stream fixture each endpoint can replay.
fn replayable() -> Vec<(Wire, String)> {
    let mut out = Vec::new();
    for (wire, dir) in [
        (Wire::Anthropic, "providers/anthropic"),
        (Wire::OpenAi, "providers/openai/chat"),
        (Wire::OpenAi, "providers/openai-compatible"),
        (Wire::Responses, "providers/openai/responses"),
        (Wire::Gemini, "providers/gemini"),
    ] {
        for path in replay_list(dir) {
            let wire = if path.contains("anthropic-compat") {
                Wire::Anthropic
            } else {
                wire
            };
            out.push((wire, path));
        }
    }
    out
}

#[tokio::test]
async fn fixtures_replay_unchanged_whole_and_in_awkward_pieces() {
    let mock = MockLlm::start().await;
    let fixtures: Vec<_> = replayable()
        .into_iter()
        .filter(|(_, path)| !path.ends_with(".chunks.txt"))
        .collect();
    assert!(fixtures.len() > 20, "{fixtures:?}");
    let responses: Vec<_> = replayable()
        .into_iter()
        .filter(|(wire, _)| matches!(wire, Wire::Responses))
        .map(|(_, path)| path)
        .collect();
    assert_eq!(
        responses,
        [
            "providers/openai/responses/stream-error-insufficient-quota.chunks.txt",
            "providers/openai/responses/stream-function-call.sse",
            "providers/openai/responses/stream-reasoning-encrypted.chunks.txt",
            "providers/openai/responses/stream-text.sse",
        ],
        "all four recorded Responses streams are replayed"
    );
    for (wire, path) in fixtures {
        let expected = fixture_bytes(&path);
        let stream = path.ends_with(".sse");
        for reply in [
            Reply::fixture(path.clone()),
            Reply::fixture(path.clone()).with_chunk_size(7),
        ] {
            mock.push(reply);
            let response = client()
                .post(wire.url(&mock, stream))
                .json(&wire.request(stream))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let content_type = response.headers()["content-type"].clone();
            assert_eq!(response.bytes().await.unwrap(), expected, "{path}");
            let expected_status = path
                .rsplit_once("error-")
                .and_then(|(_, rest)| rest.get(..3)?.parse().ok())
                .unwrap_or(200);
            assert_eq!(status, expected_status, "{path}");
            let expected_type = if stream {
                "text/event-stream"
            } else {
                "application/json"
            };
            assert_eq!(content_type, expected_type, "{path}");
        }
    }
}

#[tokio::test]
async fn chunk_fixtures_are_framed_for_the_endpoint_hit() {
    let mock = MockLlm::start().await;
    for (wire, path) in replayable()
        .into_iter()
        .filter(|(_, path)| path.ends_with(".chunks.txt"))
    {
        mock.push(Reply::fixture(path.clone()).with_chunk_size(5));
        let answer = post(&wire.url(&mock, true), &wire.request(true)).await;
        let chunks = String::from_utf8(fixture_bytes(&path)).unwrap();
        let protocol = match wire {
            Wire::Anthropic => Protocol::Anthropic,
            Wire::OpenAi => Protocol::OpenAiChat,
            Wire::Responses => Protocol::OpenAiResponses,
            Wire::Gemini => Protocol::Gemini,
        };
        assert_eq!(answer.body, chunks_to_sse(protocol, &chunks), "{path}");
        let lines: Vec<&str> = chunks.lines().filter(|l| !l.trim().is_empty()).collect();
        let events = events(&answer.body);
        match wire {
            Wire::Anthropic | Wire::Responses => {
                assert_eq!(events.len(), lines.len(), "{path}");
                for ((name, data), line) in events.iter().zip(&lines) {
                    let kind = serde_json::from_str::<Value>(line).unwrap()["type"].clone();
                    assert_eq!(name.as_deref(), kind.as_str(), "{path}");
                    assert_eq!(data, line, "{path}");
                }
            }
            Wire::OpenAi => {
                assert_eq!(events.len(), lines.len() + 1, "{path}");
                assert_eq!(events.last().unwrap(), &(None, "[DONE]".to_owned()));
                for ((name, data), line) in events.iter().zip(&lines) {
                    assert_eq!((name, data.as_str()), (&None, *line), "{path}");
                }
            }
            Wire::Gemini => {
                assert_eq!(events.len(), lines.len(), "{path}");
                for ((name, data), line) in events.iter().zip(&lines) {
                    assert_eq!((name, data.as_str()), (&None, *line), "{path}");
                }
            }
        }
    }
}

#[test]
fn chunks_to_sse_follows_the_readme_rules() {
    let chunks = "{\"type\":\"ping\"}\n\n{\"type\":\"message_stop\"}\n";
    assert_eq!(
        chunks_to_sse(Protocol::Anthropic, chunks),
        "event: ping\ndata: {\"type\":\"ping\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    );
    assert_eq!(
        chunks_to_sse(Protocol::OpenAiChat, "{\"a\":1}\n"),
        "data: {\"a\":1}\n\ndata: [DONE]\n\n"
    );
    assert_eq!(
        chunks_to_sse(
            Protocol::OpenAiResponses,
            "{\"type\":\"response.created\"}\n{\"type\":\"error\"}"
        ),
        "event: response.created\ndata: {\"type\":\"response.created\"}\n\n\
         event: error\ndata: {\"type\":\"error\"}\n\n"
    );
    let gemini = "providers/gemini/stream-tool-call.chunks.txt";
    let chunks = String::from_utf8(fixture_bytes(gemini)).unwrap();
    let framed = chunks_to_sse(Protocol::Gemini, &chunks);
    let expected: String = chunks
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("data: {l}\n\n"))
        .collect();
    assert_eq!(framed, expected);
}

#[test]
fn replay_list_names_every_fixture_of_a_dir() {
    let listed = replay_list("providers/openai");
    let mut expected = Vec::new();
    for sub in ["", "chat", "responses"] {
        for entry in std::fs::read_dir(fixture_path("providers/openai").join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                let name = entry.file_name().into_string().unwrap();
                expected.push(
                    ["providers/openai", sub, &name]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join("/"),
                );
            }
        }
    }
    expected.sort();
    assert_eq!(listed, expected);
    assert!(listed.contains(&"providers/openai/chat/stream-text-usage.sse".to_owned()));
}

#[test]
fn spawn_serves_synchronous_tests_and_stops_with_its_last_handle() {
    let mock = MockLlm::spawn();
    mock.push(Reply::parts(vec![Part::Text("hi".into())]));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime.block_on(post(
        &Wire::Anthropic.url(&mock, false),
        &Wire::Anthropic.request(false),
    ));
    assert_eq!(answer.status, 200);
    assert!(answer.body.contains(r#""text":"hi""#), "{}", answer.body);

    let address = format!("127.0.0.1:{}", mock.port());
    let clone = mock.clone();
    drop(mock);
    assert!(
        std::net::TcpStream::connect(&address).is_ok(),
        "a clone keeps it alive"
    );
    drop(clone);
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(&address).is_ok() {
        assert!(Instant::now() < deadline, "the server outlived its handles");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn echo_answers_the_last_user_text_on_every_endpoint() {
    let mock = MockLlm::start().await;
    mock.set_fallback(Reply::echo());
    // Each conversation ends with a tool result, which is no user text: the echo is of the
    // message before it.
    let conversations = [
        (
            Wire::Anthropic,
            json!({"model": "m", "max_tokens": 64, "messages": [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "text", "text": "second"},
                                             {"type": "text", "text": "line"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "t", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "42"}]}]}),
        ),
        (
            Wire::OpenAi,
            json!({"model": "m", "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "second"},
                                             {"type": "text", "text": "line"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"}]}),
        ),
        (
            Wire::Responses,
            json!({"model": "m", "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "second"},
                                             {"type": "input_text", "text": "line"}]},
                {"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "42"}]}),
        ),
        (
            Wire::Gemini,
            json!({"contents": [
                {"role": "user", "parts": [{"text": "second"}, {"text": "line"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "t", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "t", "response": {}}}]}]}),
        ),
    ];
    let mut answers = Vec::new();
    for (wire, request) in conversations {
        let answer = post(&wire.url(&mock, false), &request).await;
        let body: Value = serde_json::from_str(&answer.body).unwrap();
        let text = match wire {
            Wire::Anthropic => &body["content"][0]["text"],
            Wire::OpenAi => &body["choices"][0]["message"]["content"],
            Wire::Responses => &body["output"][0]["content"][0]["text"],
            Wire::Gemini => &body["candidates"][0]["content"]["parts"][0]["text"],
        };
        answers.push((wire.name(), answer.status, text.clone()));
    }
    let expected: Vec<_> = ["anthropic", "openai", "responses", "gemini"]
        .into_iter()
        .map(|name| (name, 200, json!("echo: second\nline")))
        .collect();
    assert_eq!(answers, expected);

    // A Responses input given as one string is the user's text.
    let answer = post(
        &Wire::Responses.url(&mock, true),
        &json!({"model": "m", "stream": true, "input": "just this"}),
    )
    .await;
    assert_eq!(
        assemble(Wire::Responses, &answer.body),
        ("echo: just this".to_owned(), vec![])
    );
}

#[tokio::test]
async fn peak_concurrency_counts_the_requests_open_at_once() {
    let mock = MockLlm::start().await;
    mock.set_fallback(Reply::text("hi").with_delay(Duration::from_millis(300)));
    let url = Wire::Anthropic.url(&mock, false);
    let request = Wire::Anthropic.request(false);
    tokio::join!(post(&url, &request), post(&url, &request));
    post(&url, &request).await;
    assert_eq!(mock.peak_concurrency(), 2);
}
