use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire};

/// `nanocrab usage ARGS` in `home`, in UTC so local times read the same on every machine.
fn usage(home: &Home, args: &[&str]) -> std::process::Output {
    home.nanocrab()
        .env("TZ", "UTC")
        .arg("usage")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(home: &Home, args: &[&str]) -> String {
    let output = usage(home, args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "usage {args:?} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn json_out(home: &Home, args: &[&str]) -> Value {
    serde_json::from_str(&stdout(home, args)).unwrap()
}

/// A transcript line: a user message, or with `model` an answer recording its usage.
fn line(timestamp: &str, text: &str, model: Option<&str>, usage: Value) -> String {
    let role = if model.is_some() { "assistant" } else { "user" };
    let mut entry = json!({
        "role": role,
        "content": [{"type": "text", "text": text}],
        "timestamp": timestamp,
    });
    if let Some(model) = model {
        entry["model"] = json!(model);
        entry["usage"] = usage;
    }
    entry.to_string()
}

/// `line` as the question of a turn `source` started (a scheduled job, a heartbeat).
fn started_by(line: String, source: Value) -> String {
    let mut entry: Value = serde_json::from_str(&line).unwrap();
    entry["source"] = source;
    entry.to_string()
}

fn write_transcript(home: &Home, file: &str, key: &str, lines: &[String]) {
    let path = home.home().join("sessions").join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let metadata =
        json!({"_type": "metadata", "key": key, "createdAt": "2025-03-01T00:00:00Z", "version": 1});
    let mut text = format!("{metadata}\n");
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Four sessions with fixed times: labelled and bare model names, cache traffic, a local
/// model, a user-priced one, an unpriced one and an archived transcript.
fn written_home() -> Home {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["providers"]["custom"] = json!({
        "apiBase": "http://127.0.0.1:9/v1",
        "models": {"qwen3-coder": {"price": {"input": 0.2, "output": 0.6}}},
    });
    home.write_config(config);
    let sonnet = Some("anthropic/claude-sonnet-4-5");
    let none = Value::Null;
    write_transcript(
        &home,
        "archive/cli:default.20250301T120000Z.jsonl",
        "cli:default",
        &[
            line("2025-03-01T09:00:00Z", "hello", None, none.clone()),
            line(
                "2025-03-01T09:00:02Z",
                "hi",
                Some("claude-sonnet-4-5-20250929"),
                json!({"input_tokens": 2500, "output_tokens": 400}),
            ),
        ],
    );
    write_transcript(
        &home,
        "cli:default.jsonl",
        "cli:default",
        &[
            line("2025-03-02T10:00:00Z", "plan my week", None, none.clone()),
            line(
                "2025-03-02T10:00:04Z",
                "looking",
                sonnet,
                json!({"input_tokens": 1200, "output_tokens": 350,
                       "cache_read_tokens": 8000, "cache_write_tokens": 2000}),
            ),
            line(
                "2025-03-02T10:00:09Z",
                "done",
                sonnet,
                json!({"input_tokens": 300, "output_tokens": 120, "cache_read_tokens": 10000}),
            ),
            line("2025-03-02T10:05:00Z", "and next week?", None, none.clone()),
            line(
                "2025-03-02T10:05:03Z",
                "same",
                Some("mock-model"),
                json!({"input_tokens": 24, "output_tokens": 14}),
            ),
        ],
    );
    write_transcript(
        &home,
        "telegram:42.jsonl",
        "telegram:42",
        &[
            line("2025-03-03T08:00:00Z", "translate", None, none.clone()),
            line(
                "2025-03-03T08:00:03Z",
                "translated",
                Some("openai/gpt-4.1-mini"),
                json!({"input_tokens": 15000, "output_tokens": 1200, "cache_read_tokens": 30000}),
            ),
            line("2025-03-03T08:10:00Z", "summarise", None, none.clone()),
            line(
                "2025-03-03T08:10:05Z",
                "summary",
                Some("ollama/qwen3"),
                json!({"input_tokens": 4000, "output_tokens": 800}),
            ),
        ],
    );
    write_transcript(
        &home,
        "cron:daily.jsonl",
        "cron:daily",
        &[
            started_by(
                line("2025-03-04T06:00:00Z", "news", None, none.clone()),
                json!({"kind": "cron", "job": "daily"}),
            ),
            line(
                "2025-03-04T06:00:10Z",
                "news",
                Some("custom/qwen3-coder"),
                json!({"input_tokens": 100000, "output_tokens": 5000}),
            ),
            started_by(
                line("2025-03-04T06:30:00Z", "review", None, none),
                json!({"kind": "cron", "job": "daily"}),
            ),
            line(
                "2025-03-04T06:31:00Z",
                "reviewed",
                Some("anthropic/claude-opus-4-1"),
                json!({"input_tokens": 60000, "output_tokens": 8000}),
            ),
        ],
    );
    home
}

#[test]
fn usage_tables_per_model_and_per_session() {
    let home = written_home();
    insta::assert_snapshot!(stdout(&home, &[]));
}

#[test]
fn usage_as_json() {
    let home = written_home();
    insta::assert_json_snapshot!(json_out(&home, &["--json"]));
}

#[test]
fn one_sessions_turns_archive_included() {
    let home = written_home();
    insta::assert_snapshot!(
        "session_table",
        stdout(&home, &["--session", "cli:default"])
    );
    insta::assert_json_snapshot!(
        "session_json",
        json_out(&home, &["--session", "cli:default", "--json"])
    );
}

#[test]
fn since_filters_model_calls_by_time() {
    let home = written_home();
    let figures = |args: &[&str]| {
        let out = json_out(&home, args);
        (
            out["since"].clone(),
            out["total"]["calls"].clone(),
            out["total"]["turns"].clone(),
        )
    };
    assert_eq!(figures(&["--json"]), (Value::Null, json!(8), json!(7)));
    // Local midnight; TZ is UTC here.
    assert_eq!(
        figures(&["--json", "--since", "2025-03-03"]),
        (json!("2025-03-03T00:00:00Z"), json!(4), json!(4))
    );
    // Mid-turn: the turn counts with only its later calls.
    assert_eq!(
        figures(&["--json", "--since", "2025-03-02T11:00:04+01:00"]),
        (json!("2025-03-02T10:00:04Z"), json!(7), json!(6))
    );
    assert_eq!(
        figures(&["--json", "--since", "2999-01-01"]),
        (json!("2999-01-01T00:00:00Z"), json!(0), json!(0))
    );
    let nothing = stdout(&home, &["--since", "2999-01-01"]);
    assert!(
        nothing.starts_with("no usage recorded in ")
            && nothing.ends_with(" since 2999-01-01 00:00\n"),
        "{nothing}"
    );
    assert_eq!(
        stdout(
            &home,
            &["--session", "telegram:42", "--since", "2999-01-01"]
        ),
        "no usage recorded in session telegram:42 since 2999-01-01 00:00\n"
    );
}

#[test]
fn bad_arguments_are_clear_errors() {
    let home = written_home();
    for (args, needle) in [
        (&["--since", "last tuesday"][..], "--since"),
        (&["--since", "2025-13-01"][..], "--since"),
        (&["--session", "cli:nope"][..], "no session cli:nope"),
        (&["--session", "../etc"][..], "session key"),
    ] {
        let output = usage(&home, args);
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn an_empty_home_has_no_usage() {
    let home = Home::new(Wire::Anthropic);
    let out = stdout(&home, &[]);
    assert!(out.starts_with("no usage recorded in "), "{out}");
    assert_eq!(
        json_out(&home, &["--json"]),
        json!({
            "since": null,
            "pricesAsOf": nanocrab_provider::PRICES_AS_OF,
            "models": [],
            "sources": [],
            "sessions": [],
            "total": {
                "sessions": 0, "turns": 0, "calls": 0, "inputTokens": 0, "outputTokens": 0,
                "cacheReadTokens": 0, "cacheWriteTokens": 0, "tokens": 0, "cost": 0.0,
                "knownCost": 0.0, "unpricedCalls": 0,
            },
        })
    );
}

/// Real turns through the binary and the mock LLM: what the agent records is what `usage`
/// reads back, the archive of a reset session included.
#[test]
fn usage_of_real_turns_through_the_mock() {
    let home = Home::new(Wire::Anthropic);
    home.mock
        .push(Reply::tool_call("call_ls", "list_dir", json!({"path": "."})).with_usage(1000, 50));
    home.mock
        .push(Reply::text("The workspace is empty.").with_usage(1200, 80));
    home.ask("what is in my workspace?");
    home.mock.push(Reply::text("Yes.").with_usage(500, 20));
    home.ask("sure?");
    let reset = home
        .nanocrab()
        .args(["sessions", "reset", "cli:default"])
        .output()
        .unwrap();
    assert!(reset.status.success());
    home.mock
        .push(Reply::text("Hello again.").with_usage(300, 10));
    home.ask("hello");

    // No price for the mock's model: the cost is unknown and the footnote says where to set one.
    let table = stdout(&home, &[]);
    assert!(
        table.contains("set providers.anthropic.models.mock-model.price in config.json"),
        "{table}"
    );
    assert!(
        table.contains("total: 1 session, 3 turns, 4 calls, 3,160 tokens (3,000 input, 160 output, 0 cache read, 0 cache write), est. cost ?"),
        "{table}"
    );

    let mut config = home.base_config();
    config["providers"]["anthropic"]["models"] =
        json!({"mock-model": {"price": {"input": 3, "output": 15}}});
    home.write_config(config);
    let mut out = json_out(&home, &["--json"]);
    // Transcripts record the model as `anthropic/mock-model` or, before labels, as the
    // provider reported it; both are priced from the same key.
    for model in out["models"].as_array_mut().unwrap() {
        model["model"] = json!("mock-model");
    }
    out["sessions"][0]["lastActivity"] = json!("[time]");
    assert_eq!(
        out,
        json!({
            "since": null,
            "pricesAsOf": nanocrab_provider::PRICES_AS_OF,
            "models": [{
                "model": "mock-model",
                "priceSource": "config",
                "price": {"input": 3.0, "output": 15.0, "cacheRead": 3.0, "cacheWrite": 3.0},
                "priceKey": "providers.anthropic.models.mock-model.price",
                "calls": 4, "inputTokens": 3000, "outputTokens": 160, "cacheReadTokens": 0,
                "cacheWriteTokens": 0, "tokens": 3160, "cost": 0.0114, "knownCost": 0.0114,
                "unpricedCalls": 0,
            }],
            "sources": [{
                "source": "chat", "turns": 3,
                "calls": 4, "inputTokens": 3000, "outputTokens": 160, "cacheReadTokens": 0,
                "cacheWriteTokens": 0, "tokens": 3160, "cost": 0.0114, "knownCost": 0.0114,
                "unpricedCalls": 0,
            }],
            "sessions": [{
                "key": "cli:default", "turns": 3, "lastActivity": "[time]",
                "calls": 4, "inputTokens": 3000, "outputTokens": 160, "cacheReadTokens": 0,
                "cacheWriteTokens": 0, "tokens": 3160, "cost": 0.0114, "knownCost": 0.0114,
                "unpricedCalls": 0,
            }],
            "total": {
                "sessions": 1, "turns": 3,
                "calls": 4, "inputTokens": 3000, "outputTokens": 160, "cacheReadTokens": 0,
                "cacheWriteTokens": 0, "tokens": 3160, "cost": 0.0114, "knownCost": 0.0114,
                "unpricedCalls": 0,
            },
        })
    );

    let session = json_out(&home, &["--session", "cli:default", "--json"]);
    let turns: Vec<(bool, u64, u64)> = session["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| {
            (
                turn["archived"].as_bool().unwrap(),
                turn["calls"].as_u64().unwrap(),
                turn["inputTokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        turns,
        vec![(true, 2, 2200), (true, 1, 500), (false, 1, 300)]
    );

    let table = stdout(&home, &["--session", "cli:default"]);
    assert!(table.starts_with("session cli:default\n"), "{table}");
    assert!(table.contains("archived: archive/cli:default."), "{table}");
    assert!(table.contains("current: cli:default.jsonl"), "{table}");
}

/// The in-process model costs nothing: its calls are priced at zero, with no advice to set a
/// price (setting one used to turn `local` into a provider without an endpoint).
#[test]
fn the_local_model_costs_nothing_and_needs_no_price() {
    let home = Home::new(Wire::Anthropic);
    write_transcript(
        &home,
        "cli:default.jsonl",
        "cli:default",
        &[
            line("2025-03-05T09:00:00Z", "hi", None, Value::Null),
            line(
                "2025-03-05T09:00:02Z",
                "hello",
                Some("local/smollm2-135m"),
                json!({"input_tokens": 900, "output_tokens": 40}),
            ),
        ],
    );

    let table = stdout(&home, &[]);

    assert!(!table.contains("no price known"), "{table}");
    assert!(!table.contains("providers.local"), "{table}");
    assert!(
        table.contains("total: 1 session, 1 turn, 1 call, 940 tokens (900 input, 40 output, 0 cache read, 0 cache write), est. cost $0.0000"),
        "{table}"
    );
    let out = json_out(&home, &["--json"]);
    assert_eq!(
        (
            &out["models"][0]["priceSource"],
            &out["models"][0]["cost"],
            &out["total"]["unpricedCalls"]
        ),
        (&json!("local"), &json!(0.0), &json!(0))
    );
}

/// A price under `providers.local` (as `usage` once advised) leaves `local/<model>` the
/// in-process model: here, one not installed, rather than a provider needing an endpoint.
#[test]
fn a_price_for_the_local_model_keeps_it_in_process() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["providers"]["local"] =
        json!({"models": {"smollm2-135m": {"price": {"input": 0, "output": 0}}}});
    home.write_config(config);

    let run = home.agent("hello", &["--model", "local/smollm2-135m"]);

    assert!(!run.success);
    assert!(!run.stderr.contains("needs an endpoint"), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "the model `smollm2-135m` is not installed; run `nanocrab models pull smollm2-135m`"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(home.requests().len(), 0);
}
