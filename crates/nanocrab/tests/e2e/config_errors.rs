use serde_json::json;

use crate::harness::{Home, Wire};

fn failure(home: &Home) -> String {
    let run = home.agent("hello", &[]);
    assert!(!run.success);
    assert_eq!(
        home.requests().len(),
        0,
        "a bad config never reaches the model"
    );
    run.stderr
}

#[test]
fn an_unknown_key_names_the_file_the_key_path_and_a_suggestion() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["tools"] = json!({"exec": {"modee": "full"}});
    home.write_config(config);

    let stderr = failure(&home);

    assert!(
        stderr.contains(&home.config_path().display().to_string()),
        "{stderr}"
    );
    assert!(stderr.contains("tools.exec.modee"), "{stderr}");
    assert!(stderr.contains("mode"), "{stderr}");
}

#[test]
fn a_bad_value_names_the_key_and_what_is_allowed() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["tools"] = json!({"exec": {"mode": "everything"}});
    home.write_config(config);

    let stderr = failure(&home);

    assert!(stderr.contains("tools.exec.mode"), "{stderr}");
    for allowed in ["deny", "allowlist", "full"] {
        assert!(stderr.contains(allowed), "{stderr}");
    }
}

#[test]
fn a_missing_env_placeholder_names_the_variable() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["providers"]["anthropic"]["apiKey"] = json!("${NANOCRAB_TEST_UNSET_VAR}");
    home.write_config(config);

    let stderr = failure(&home);

    assert!(stderr.contains("NANOCRAB_TEST_UNSET_VAR"), "{stderr}");
    assert!(stderr.contains("providers.anthropic.apiKey"), "{stderr}");
}

#[test]
fn env_placeholders_are_resolved_but_never_written_back() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["providers"]["anthropic"]["apiKey"] = json!("${MY_KEY}");
    home.write_config(config);
    home.mock.push(nanocrab_testkit::Reply::text("hi"));

    let run = home.run(
        home.nanocrab()
            .env("MY_KEY", "sk-from-env")
            .args(["agent", "-m", "hello"]),
    );

    assert!(run.success, "{}", run.stderr);
    let request = &home.requests()[0];
    assert_eq!(
        request.headers.get("x-api-key").map(String::as_str),
        Some("sk-from-env")
    );
    let on_disk = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(on_disk.contains("${MY_KEY}") && !on_disk.contains("sk-from-env"));
}
