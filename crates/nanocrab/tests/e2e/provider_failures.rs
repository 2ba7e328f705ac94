use nanocrab_testkit::Reply;
use serde_json::json;

use crate::harness::{Home, Wire, assert_no_secret};

#[test]
fn unauthorized_fails_cleanly_without_printing_the_key() {
    for wire in Wire::ALL {
        let home = Home::new(wire);
        home.mock.push(Reply::unauthorized());

        let output = home
            .nanocrab()
            .args(["agent", "-m", "hello"])
            .output()
            .unwrap();

        let stdout = String::from_utf8(output.stdout).unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(!output.status.success(), "{wire:?}");
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
fn no_provider_configured_says_how_to_configure_one() {
    let home = Home::new(Wire::Anthropic);
    home.write_config(json!({"version": 1}));

    let output = home
        .nanocrab()
        .args(["agent", "-m", "hello"])
        .output()
        .unwrap();

    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!output.status.success());
    for hint in ["ANTHROPIC_API_KEY", "onboard", "apiBase"] {
        assert!(stderr.contains(hint), "missing {hint}: {stderr}");
    }
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    // Port 9 (discard) on loopback: nothing listens there in a test environment.
    config["providers"]["openai"]["apiBase"] = json!("http://127.0.0.1:9/v1");
    home.write_config(config);

    let output = home
        .nanocrab()
        .args(["agent", "-m", "hello"])
        .output()
        .unwrap();

    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!output.status.success());
    assert!(stderr.contains("127.0.0.1:9"), "{stderr}");
}
