//! How an answer ended reaches the user on every wire: cut off at the output limit, refused,
//! and what its tokens were, prompt-cache figures included.

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire};

const CUT: &str =
    "[The answer was cut off at the output limit (agents.defaults.maxTokens = 8192).]";

/// A home whose model speaks `wire`, plus OpenAI's Responses API as a fourth wire.
fn homes() -> Vec<(&'static str, Home)> {
    let responses = Home::new(Wire::OpenAi);
    let mut config = responses.base_config();
    config["providers"]["openai"]["api"] = json!("openai-responses");
    responses.write_config(config);
    vec![
        ("anthropic", Home::new(Wire::Anthropic)),
        ("openai", Home::new(Wire::OpenAi)),
        ("gemini", Home::new(Wire::Gemini)),
        ("openai-responses", responses),
    ]
}

#[test]
fn a_truncated_answer_is_shown_with_a_note_on_every_wire() {
    for (wire, home) in homes() {
        home.mock
            .push(Reply::truncated("The three reasons are: first, the"));
        assert_eq!(
            home.ask("why?"),
            format!("The three reasons are: first, the\n\n{CUT}\n"),
            "{wire}"
        );
    }
}

#[test]
fn a_refusal_is_shown_as_the_model_worded_it() {
    // Gemini blocks an answer with no words at all: see the next test.
    for (wire, home) in homes().into_iter().filter(|(wire, _)| *wire != "gemini") {
        home.mock.push(Reply::refusal("I can't help with that."));
        assert_eq!(
            home.ask("something bad"),
            "I can't help with that.\n",
            "{wire}"
        );
        let transcript = home.transcript();
        assert!(transcript.contains("I can't help with that."), "{wire}");
    }
}

#[test]
fn gemini_blocking_an_answer_is_an_error_that_says_why() {
    let home = Home::new(Wire::Gemini);
    home.mock.push(Reply::refusal("unused"));
    let run = home.agent("something bad", &[]);
    assert!(!run.success);
    assert!(
        run.stderr.contains(
            "the answer was blocked by Gemini's safety filters (SAFETY); rephrase the request"
        ),
        "{}",
        run.stderr
    );
}

/// The usage of the transcript's only answer.
fn stored_usage(home: &Home) -> Value {
    home.transcript()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|entry| entry["role"] == "assistant")
        .unwrap()["usage"]
        .clone()
}

#[test]
fn prompt_cache_tokens_are_recorded_apart_from_the_input_on_every_wire() {
    for (wire, home) in homes() {
        home.mock.push(
            Reply::text("ok")
                .with_usage(100, 7)
                .with_cache_usage(900, 50),
        );
        home.ask("hello");
        // Only Anthropic reports cache writes; the others count cached tokens inside the
        // prompt total, which nanocrab takes out so that every figure has one price.
        let expected = match wire {
            "anthropic" => {
                json!({"input_tokens": 100, "output_tokens": 7, "cache_read_tokens": 900, "cache_write_tokens": 50})
            }
            "openai" | "gemini" | "openai-responses" => {
                json!({"input_tokens": 100, "output_tokens": 7, "cache_read_tokens": 900})
            }
            other => panic!("{other}"),
        };
        assert_eq!(stored_usage(&home), expected, "{wire}");
    }
}

#[test]
fn usage_prices_the_cache_tokens_separately() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["agents"]["defaults"]["model"] = json!("anthropic/claude-sonnet-4-5");
    home.write_config(config);
    home.mock.push(
        Reply::text("ok")
            .with_usage(1_000_000, 100_000)
            .with_cache_usage(2_000_000, 1_000_000),
    );
    home.ask("hello");

    let run = home.run(home.nanocrab().args(["usage", "--json"]));
    assert!(run.success, "{}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let model = &report["models"][0];
    assert_eq!(model["model"], "anthropic/claude-sonnet-4-5");
    assert_eq!(
        (
            &model["inputTokens"],
            &model["outputTokens"],
            &model["cacheReadTokens"],
            &model["cacheWriteTokens"]
        ),
        (
            &json!(1_000_000),
            &json!(100_000),
            &json!(2_000_000),
            &json!(1_000_000)
        )
    );
    // Sonnet 4.5: $3 in, $15 out, cache reads a tenth of the input price, writes 1.25 times.
    let cost = model["cost"].as_f64().unwrap();
    assert!((cost - (3.0 + 1.5 + 0.6 + 3.75)).abs() < 1e-9, "{cost}");
}
