use nanocrab_testkit::Reply;
use serde_json::json;

use crate::harness::{Home, Wire, assert_no_secret};

#[test]
fn unauthorized_fails_cleanly_without_printing_the_key() {
    for wire in Wire::ALL {
        let home = Home::new(wire);
        home.mock.push(Reply::unauthorized());

        let run = home.agent("hello", &[]);

        let stdout = run.stdout;
        let stderr = run.stderr;
        assert!(!run.success, "{wire:?}");
        assert_no_secret(&stdout);
        assert_no_secret(&stderr);
        assert!(stderr.contains("401"), "{wire:?}: {stderr}");
        assert!(
            stderr.contains(wire.provider()),
            "{wire:?}: names the provider: {stderr}"
        );
        assert!(
            stderr.contains("apiKey"),
            "{wire:?}: says what to do: {stderr}"
        );
        assert_eq!(home.requests().len(), 1, "{wire:?}: a 401 is never retried");
        // The failed turn's user message is kept.
        let show = home
            .nanocrab()
            .args(["sessions", "show", "cli:default"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&show.stdout).contains("hello"),
            "{wire:?}"
        );
    }
}

#[test]
fn overloaded_then_success_is_retried() {
    let home = Home::new(Wire::Anthropic);
    home.mock
        .push(Reply::overloaded().with_header("retry-after", "0"));
    home.mock.push(Reply::text("made it"));

    assert_eq!(home.ask("hello"), "made it\n");
    assert_eq!(home.requests().len(), 2);
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    // Port 9 (discard) on loopback: nothing listens there in a test environment.
    config["providers"]["openai"]["apiBase"] = json!("http://127.0.0.1:9/v1");
    home.write_config(config);

    let run = home.agent("hello", &[]);

    let stderr = run.stderr;
    assert!(!run.success);
    assert!(stderr.contains("127.0.0.1:9"), "{stderr}");
}

/// Both providers point at the same mock: OpenAI first, Anthropic as the fallback.
fn with_fallback(home: &Home) {
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {
            "model": "openai/gpt-4.1",
            "fallbackModels": ["anthropic/claude-sonnet-4-5"],
            "workspace": home.workspace(),
        }},
        "providers": {
            "openai": {"apiKey": crate::harness::SECRET_KEY, "apiBase": home.mock.openai_base()},
            "anthropic": {"apiKey": crate::harness::SECRET_KEY, "apiBase": home.mock.anthropic_base()},
        },
    }));
}

#[test]
fn an_exhausted_quota_falls_back_at_once_and_the_answering_model_is_recorded() {
    let home = Home::new(Wire::OpenAi);
    with_fallback(&home);
    // OpenAI's real "insufficient_quota" body: a 429 that waiting does not cure.
    home.mock.push(Reply::fixture(
        "providers/openai/error-429-insufficient-quota.json",
    ));
    home.mock.push(Reply::text("Answered by the fallback."));

    let run = home.agent("hello", &[]);
    let stdout = run.stdout;
    let stderr = run.stderr;
    assert!(run.success, "{stderr}");
    assert_eq!(stdout, "Answered by the fallback.\n");
    assert!(
        stderr
            .contains("↻ openai/gpt-4.1 failed (openai: HTTP 429: You exceeded your current quota"),
        "{stderr}"
    );
    assert!(
        stderr.contains("trying anthropic/claude-sonnet-4-5"),
        "{stderr}"
    );
    let paths: Vec<String> = home.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec!["/v1/chat/completions", "/v1/messages"]);
    let transcript = home.transcript();
    assert!(
        transcript.contains(r#""model":"anthropic/claude-sonnet-4-5""#),
        "{transcript}"
    );
}

#[test]
fn a_rejected_request_is_reported_not_hidden_by_the_fallback() {
    let home = Home::new(Wire::OpenAi);
    with_fallback(&home);
    home.mock.push(Reply::fixture(
        "providers/openai/chat/error-400-unsupported-parameter.json",
    ));

    let run = home.agent("hello", &[]);
    let stderr = run.stderr;
    assert!(!run.success);
    assert!(
        stderr.contains("openai: HTTP 400: Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead"),
        "{stderr}"
    );
    assert_eq!(home.requests().len(), 1);
}

#[test]
fn a_server_that_ignores_stream_and_answers_with_json_is_understood() {
    let home = Home::new(Wire::Anthropic);
    home.mock
        .push(Reply::fixture("providers/anthropic/text.json"));
    assert_eq!(
        home.ask("how are you?"),
        "Hello! I'm doing well, thanks for asking. How are you doing today? Is there anything I can help you with?\n"
    );
    let home = Home::new(Wire::OpenAi);
    home.mock
        .push(Reply::fixture("providers/openai/chat/refusal.json"));
    assert_eq!(
        home.ask("do something bad"),
        "I'm very sorry, but I can't assist with that.\n"
    );
}

#[test]
fn an_overload_in_the_middle_of_an_answer_goes_to_the_fallback_or_is_reported() {
    // Anthropic's `event: error` with `overloaded_error` after the first words: retrying would
    // repeat them, so the answer comes from the fallback, from the start.
    let home = Home::new(Wire::Anthropic);
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {
            "model": "anthropic/claude-sonnet-4-5",
            "fallbackModels": ["openai/gpt-4.1"],
            "workspace": home.workspace(),
        }},
        "providers": {
            "openai": {"apiKey": crate::harness::SECRET_KEY, "apiBase": home.mock.openai_base()},
            "anthropic": {"apiKey": crate::harness::SECRET_KEY, "apiBase": home.mock.anthropic_base()},
        },
    }));
    home.mock.push(Reply::stream_error_after("The answer is"));
    home.mock.push(Reply::text("The answer is 42."));
    let run = home.agent("what is the answer?", &[]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.stdout, "The answer is 42.\n");
    assert!(
        run.stderr.contains(
            "↻ anthropic/claude-sonnet-4-5 failed (anthropic: overloaded_error: Overloaded); trying openai/gpt-4.1"
        ),
        "{}",
        run.stderr
    );

    let home = Home::new(Wire::Anthropic);
    home.mock.push(Reply::stream_error_after("The answer is"));
    let run = home.agent("what is the answer?", &[]);
    assert!(!run.success);
    assert!(
        run.stderr
            .contains("error: anthropic: overloaded_error: Overloaded"),
        "{}",
        run.stderr
    );
    assert_eq!(
        home.requests().len(),
        1,
        "words already shown are never repeated"
    );
}
