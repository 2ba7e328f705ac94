//! Every provider of the registry, end to end: the real binary runs a tool round trip
//! (`write_file`, then an answer) against the mock, configured only as a user would
//! (`providers.<name>.apiBase`, a key in the config or the usual environment variable), and
//! each test checks what that provider needs on the wire.

use nanocrab_testkit::{MockLlm, Part, RecordedRequest, Reply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, SECRET_KEY, Wire};

/// Where the provider's SDKs put the API version: in the base URL (`/v1`) or in the path.
#[derive(Clone, Copy)]
enum Base {
    /// `http://127.0.0.1:PORT/v1`
    OpenAi,
    /// `http://127.0.0.1:PORT`
    Root,
}

/// How the key reaches nanocrab.
#[derive(Clone, Copy)]
enum Key {
    Config,
    /// The provider's usual environment variable.
    Env(&'static str),
    /// A local server: no key at all.
    None,
}

/// Runs "make a todo list" through `provider/model`: the mock answers `first` (which must
/// call `write_file` with id `call_todo_1`), then "Done.".
fn round_trip(
    provider: &str,
    model: &str,
    base: Base,
    key: Key,
    first: Reply,
) -> Vec<RecordedRequest> {
    let home = Home::new(Wire::Anthropic);
    let mock: &MockLlm = &home.mock;
    let api_base = match base {
        Base::OpenAi => mock.openai_base(),
        Base::Root => mock.anthropic_base(),
    };
    let mut settings = json!({"apiBase": api_base});
    if let Key::Config = key {
        settings["apiKey"] = json!(SECRET_KEY);
    }
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {"model": format!("{provider}/{model}"), "workspace": home.workspace()}},
        "providers": {provider: settings},
    }));
    mock.push(first);
    mock.push(Reply::text("Done."));

    let mut cmd = home.nanocrab();
    if let Key::Env(var) = key {
        cmd.env(var, SECRET_KEY);
    }
    let run = home.run(cmd.args(["agent", "-m", "make a todo list"]));
    assert!(run.success, "{provider}/{model} failed: {run:?}");
    assert_eq!(run.stdout, "Done.\n", "{provider}");
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("todo.md")).unwrap(),
        "- [ ] milk\n",
        "{provider}"
    );
    let requests = home.requests();
    assert_eq!(requests.len(), 2, "{provider}");
    requests
}

fn write_todo() -> Part {
    Part::ToolCall {
        id: "call_todo_1".into(),
        name: "write_file".into(),
        raw_arguments: json!({"path": "todo.md", "content": "- [ ] milk\n"}).to_string(),
    }
}

/// The Chat Completions round trip every OpenAI-compatible provider shares: the path, the
/// bearer key (or none), the model name, and the tool result under the call's id.
fn chat_round_trip(
    provider: &str,
    model: &str,
    key: Key,
    first: Vec<Part>,
) -> Vec<RecordedRequest> {
    let requests = round_trip(provider, model, Base::OpenAi, key, Reply::parts(first));
    for request in &requests {
        assert_eq!(request.path, "/v1/chat/completions", "{provider}");
        assert_eq!(request.body["model"], model, "{provider}");
        assert_eq!(
            request.headers.get("authorization").cloned(),
            match key {
                Key::Config | Key::Env(_) => Some(format!("Bearer {SECRET_KEY}")),
                Key::None => None,
            },
            "{provider}"
        );
    }
    let second = &requests[1].body;
    let tool = messages(second)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(
        tool["tool_call_id"],
        assistant_with_calls(second)["tool_calls"][0]["id"],
        "{provider}: the result pairs with its call"
    );
    assert!(
        tool["content"].as_str().unwrap().contains("todo.md"),
        "{tool}"
    );
    requests
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().clone()
}

fn assistant_with_calls(body: &Value) -> Value {
    messages(body)
        .into_iter()
        .find(|m| m["role"] == "assistant" && m.get("tool_calls").is_some())
        .unwrap()
}

#[test]
fn anthropic_marks_the_prompt_cacheable_and_sends_its_key_as_x_api_key() {
    let requests = round_trip(
        "anthropic",
        "claude-sonnet-4-5",
        Base::Root,
        Key::Config,
        Reply::parts(vec![write_todo()]),
    );
    let first = &requests[0];
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.headers["x-api-key"], SECRET_KEY);
    assert_eq!(first.headers["anthropic-version"], "2023-06-01");
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(first.body["system"][0]["cache_control"], ephemeral);
    let tools = first.body["tools"].as_array().unwrap();
    assert_eq!(tools.last().unwrap()["cache_control"], ephemeral);
    // The newest message is the moving breakpoint: in the second call, the tool result.
    let second = requests[1].body["messages"].as_array().unwrap().clone();
    let result = &second.last().unwrap()["content"][0];
    assert_eq!(
        (&result["type"], &result["cache_control"]),
        (&json!("tool_result"), &ephemeral)
    );
}

#[test]
fn openai_uses_max_completion_tokens_and_keeps_the_temperature_of_non_reasoning_models() {
    let requests = chat_round_trip("openai", "gpt-4.1", Key::Config, vec![write_todo()]);
    let first = &requests[0].body;
    assert_eq!(first["max_completion_tokens"], 8192);
    assert!(first.get("max_tokens").is_none());
    assert_eq!(first["stream_options"], json!({"include_usage": true}));
    assert!(first["temperature"].is_number());
    // A tool-only answer goes back with `content: null`, as the OpenAI SDKs send it.
    assert_eq!(
        assistant_with_calls(&requests[1].body)["content"],
        Value::Null
    );
}

#[test]
fn openai_reasoning_models_get_no_temperature() {
    let requests = chat_round_trip(
        "openai",
        "o3-mini",
        Key::Env("OPENAI_API_KEY"),
        vec![write_todo()],
    );
    assert!(requests[0].body.get("temperature").is_none());
}

#[test]
fn gemini_is_called_by_model_path_with_the_key_in_a_header() {
    let requests = round_trip(
        "gemini",
        "gemini-2.5-flash",
        Base::Root,
        Key::Env("GEMINI_API_KEY"),
        Reply::parts(vec![write_todo()]),
    );
    for request in &requests {
        assert_eq!(
            request.path,
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
        );
        assert_eq!(request.headers["x-goog-api-key"], SECRET_KEY);
        assert!(!request.headers.contains_key("authorization"));
    }
    let contents = requests[1].body["contents"].as_array().unwrap().clone();
    assert_eq!(
        contents.last().unwrap()["parts"][0]["functionResponse"]["name"],
        "write_file"
    );
}

#[test]
fn openrouter_passes_cache_marks_on_to_claude_models() {
    let requests = chat_round_trip(
        "openrouter",
        "anthropic/claude-sonnet-4.5",
        Key::Config,
        vec![write_todo()],
    );
    let system = &messages(&requests[0].body)[0];
    assert_eq!(system["role"], "system");
    assert_eq!(
        system["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn openrouter_leaves_other_vendors_models_unmarked() {
    let requests = chat_round_trip(
        "openrouter",
        "meta-llama/llama-3.3-70b-instruct",
        Key::Env("OPENROUTER_API_KEY"),
        vec![write_todo()],
    );
    assert!(messages(&requests[0].body)[0]["content"].is_string());
}

#[test]
fn deepseek_gets_its_reasoning_back_on_the_tool_call_message() {
    let requests = chat_round_trip(
        "deepseek",
        "deepseek-reasoner",
        Key::Config,
        vec![
            Part::Thinking("I should write the file.".into()),
            write_todo(),
        ],
    );
    assert_eq!(
        assistant_with_calls(&requests[1].body)["reasoning_content"],
        "I should write the file."
    );
}

#[test]
fn groq_round_trip() {
    chat_round_trip(
        "groq",
        "llama-3.3-70b-versatile",
        Key::Env("GROQ_API_KEY"),
        vec![write_todo()],
    );
}

#[test]
fn mistral_gets_nine_character_tool_ids_and_no_stream_options() {
    let requests = chat_round_trip(
        "mistral",
        "mistral-large-latest",
        Key::Config,
        vec![write_todo()],
    );
    for request in &requests {
        assert!(request.body.get("stream_options").is_none());
    }
    let id = assistant_with_calls(&requests[1].body)["tool_calls"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric()),
        "{id}"
    );
}

#[test]
fn xai_round_trip() {
    chat_round_trip("xai", "grok-4", Key::Env("XAI_API_KEY"), vec![write_todo()]);
}

#[test]
fn moonshot_kimi_k2_5_gets_temperature_one_and_reasoning_content() {
    let requests = chat_round_trip("moonshot", "kimi-k2.5", Key::Config, vec![write_todo()]);
    for request in &requests {
        assert_eq!(request.body["temperature"], 1.0);
    }
    // The calls came without reasoning; Kimi still wants the field on a tool-call message.
    assert_eq!(
        assistant_with_calls(&requests[1].body)["reasoning_content"],
        ""
    );
}

#[test]
fn zhipu_round_trip() {
    chat_round_trip(
        "zhipu",
        "glm-4.6",
        Key::Env("ZHIPUAI_API_KEY"),
        vec![write_todo()],
    );
}

#[test]
fn dashscope_round_trip() {
    chat_round_trip("dashscope", "qwen3-max", Key::Config, vec![write_todo()]);
}

#[test]
fn minimax_gets_its_interleaved_thinking_back_in_think_tags() {
    let requests = chat_round_trip(
        "minimax",
        "MiniMax-M2",
        Key::Config,
        vec![Part::Text("<think>Write it.</think>".into()), write_todo()],
    );
    assert_eq!(
        assistant_with_calls(&requests[1].body)["content"],
        "<think>Write it.</think>\n"
    );
}

#[test]
fn together_round_trip() {
    chat_round_trip(
        "together",
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        Key::Env("TOGETHER_API_KEY"),
        vec![write_todo()],
    );
}

#[test]
fn fireworks_round_trip() {
    chat_round_trip(
        "fireworks",
        "accounts/fireworks/models/kimi-k2-instruct",
        Key::Config,
        vec![write_todo()],
    );
}

#[test]
fn ollama_needs_no_key_and_gets_an_empty_string_for_tool_only_content() {
    let requests = chat_round_trip("ollama", "qwen3", Key::None, vec![write_todo()]);
    assert_eq!(assistant_with_calls(&requests[1].body)["content"], "");
}

#[test]
fn vllm_needs_no_key() {
    chat_round_trip("vllm", "Qwen/Qwen3-8B", Key::None, vec![write_todo()]);
}

#[test]
fn lmstudio_needs_no_key() {
    chat_round_trip("lmstudio", "qwen3-8b", Key::None, vec![write_todo()]);
}

#[test]
fn custom_is_any_openai_compatible_endpoint() {
    chat_round_trip("custom", "my-model", Key::Config, vec![write_todo()]);
}

#[test]
fn a_user_named_provider_may_speak_another_protocol() {
    let home = Home::new(Wire::Anthropic);
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {"model": "claude-proxy/claude-haiku-4-5", "workspace": home.workspace()}},
        "providers": {"claude-proxy": {
            "apiBase": home.mock.anthropic_base(),
            "apiKey": SECRET_KEY,
            "api": "anthropic-messages",
        }},
    }));
    home.mock.push(Reply::text("Hi from the proxy."));
    assert_eq!(home.ask("hello"), "Hi from the proxy.\n");
    let request = &home.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.headers["x-api-key"], SECRET_KEY);
}

#[test]
fn a_bare_model_name_finds_its_provider() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["agents"]["defaults"]["model"] = json!("gpt-4.1-mini");
    home.write_config(config);
    home.mock.push(Reply::text("Hello."));
    assert_eq!(home.ask("hello"), "Hello.\n");
    assert_eq!(home.requests()[0].body["model"], "gpt-4.1-mini");
    let transcript = home.transcript();
    assert!(
        transcript.contains(r#""model":"openai/gpt-4.1-mini""#),
        "{transcript}"
    );
}

#[test]
fn providers_list_shows_every_provider_and_warns_about_a_misplaced_key() {
    let home = Home::new(Wire::Anthropic);
    home.write_config(json!({
        "version": 1,
        "providers": {
            "openai": {"apiKey": "sk-or-v1-0123456789"},
            "myproxy": {"apiBase": "http://10.1.2.3:4000/v1"},
        },
    }));
    let run = home.run(
        home.nanocrab()
            .env("GROQ_API_KEY", "gsk_x")
            .args(["providers", "list"]),
    );
    assert!(run.success);
    let stdout = run.stdout;
    assert!(!stdout.contains("sk-or-v1-0123456789"), "{stdout}");
    // Whether a local server listens depends on the machine: its port is asked, not assumed.
    let stdout: String = stdout
        .lines()
        .map(|line| {
            match [
                "ready (local server at ",
                "not running (nothing listens at ",
            ]
            .iter()
            .find_map(|probe| line.find(probe))
            {
                Some(at) => format!("{}<whether its port answers>\n", &line[..at]),
                None => format!("{line}\n"),
            }
        })
        .collect();
    insta::assert_snapshot!(stdout);
}

#[test]
fn openai_over_the_responses_api_keeps_reasoning_encrypted_and_sends_it_back() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["agents"]["defaults"]["model"] = json!("openai/o4-mini");
    config["providers"]["openai"]["api"] = json!("openai-responses");
    home.write_config(config);
    home.mock.push(Reply::parts(vec![
        Part::Thinking("Write the list first.".into()),
        write_todo(),
    ]));
    home.mock.push(Reply::text("Done."));

    assert_eq!(home.ask("make a todo list"), "Done.\n");
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("todo.md")).unwrap(),
        "- [ ] milk\n"
    );
    let requests = home.requests();
    let first = &requests[0];
    assert_eq!(first.path, "/v1/responses");
    assert_eq!(
        first.headers["authorization"],
        format!("Bearer {SECRET_KEY}")
    );
    assert_eq!(
        (&first.body["store"], &first.body["include"]),
        (&json!(false), &json!(["reasoning.encrypted_content"]))
    );
    assert!(first.body.get("temperature").is_none(), "a reasoning model");
    // The reasoning item goes back with its encrypted content, before the call it led to, and
    // the result answers the call by its id.
    let input = requests[1].body["input"].as_array().unwrap().clone();
    let kinds: Vec<&str> = input
        .iter()
        .map(|item| item["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        vec![
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    let encrypted = first_response_encrypted(&home);
    assert_eq!(input[1]["encrypted_content"], encrypted);
    assert_eq!(input[1]["summary"][0]["text"], "Write the list first.");
    assert_eq!(input[3]["call_id"], "call_todo_1");
}

/// The encrypted reasoning of the first answer, as the transcript keeps it: the signature of
/// a thinking block that only OpenAI may get back.
fn first_response_encrypted(home: &Home) -> Value {
    let answer: Value = home
        .transcript()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|entry| entry["role"] == "assistant")
        .unwrap();
    assert_eq!(answer["content"][0]["origin"], "openai");
    answer["content"][0]["signature"].clone()
}

#[test]
fn openai_codex_models_go_over_the_responses_api_by_themselves() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["agents"]["defaults"]["model"] = json!("openai/gpt-5-codex");
    home.write_config(config);
    home.mock.push(Reply::text("Hi."));
    assert_eq!(home.ask("hello"), "Hi.\n");
    assert_eq!(home.requests()[0].path, "/v1/responses");
}
