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

#[test]
fn wrong_types_are_told_in_words_not_rust_types() {
    let home = Home::new(Wire::Anthropic);
    for (key, value, expected) in [
        (
            "/agents/defaults/maxTokens",
            json!("lots"),
            "`agents.defaults.maxTokens`: must be a whole number from 0 to 4294967295",
        ),
        (
            "/gateway/port",
            json!(99999),
            "`gateway.port`: must be a port number from 1 to 65535 (0: any free port)",
        ),
        (
            "/tools/exec/safeBins",
            json!("ls"),
            "`tools.exec.safeBins`: must be a list ([...])",
        ),
        (
            "/tools/exec/mode",
            json!(true),
            "`tools.exec.mode`: must be one of: deny, allowlist, full",
        ),
    ] {
        let mut config = home.base_config();
        let (parent, name) = key.rsplit_once('/').unwrap();
        let mut slot = &mut config;
        for part in parent.split('/').skip(1) {
            slot = slot
                .as_object_mut()
                .unwrap()
                .entry(part)
                .or_insert_with(|| json!({}));
        }
        slot[name] = value;
        home.write_config(config);

        let stderr = failure(&home);

        let line = format!("{}: {expected}", home.config_path().display());
        assert!(stderr.contains(&line), "{key}: {stderr}");
        for rust in ["u16", "u32", "sequence", "string or map"] {
            assert!(!stderr.contains(rust), "{key}: {stderr}");
        }
    }
}

#[test]
fn null_is_as_if_the_key_were_absent() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["providers"]["anthropic"]["extraHeaders"] = json!(null);
    config["providers"]["anthropic"]["models"] = json!(null);
    config["channels"] = json!({"telegram": {"enabled": false, "proxy": null}});
    config["gateway"] = json!(null);
    home.write_config(config);
    home.mock.push(nanocrab_testkit::Reply::text("hi"));

    let run = home.agent("hello", &[]);

    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "hi");
}

#[test]
fn a_misspelt_provider_is_an_error_with_a_suggestion() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["providers"]["opnai"] = json!({"apiKey": "sk-proj-abc"});
    home.write_config(config);

    let stderr = failure(&home);

    assert!(
        stderr.contains(&format!(
            "{}: `providers.opnai`: unknown provider; did you mean `openai`? (a provider of your own needs apiBase)",
            home.config_path().display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-proj-abc"), "{stderr}");

    // With an endpoint, any name is a provider of the user's own.
    let mut config = home.base_config();
    config["providers"]["opnai"] = json!({"apiBase": "http://127.0.0.1:9/v1"});
    home.write_config(config);
    home.mock.push(nanocrab_testkit::Reply::text("hi"));
    let run = home.agent("hello", &[]);
    assert!(run.success, "{}", run.stderr);
}

#[test]
fn known_providers_are_listed_once() {
    let home = Home::new(Wire::OpenAi);

    let run = home.agent("hello", &["--model", "opnai/gpt-4.1"]);

    assert!(!run.success);
    let (_, known) = run
        .stderr
        .split_once("known providers: ")
        .unwrap_or_else(|| panic!("{}", run.stderr));
    let names: Vec<&str> = known.lines().next().unwrap().split(", ").collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    assert!(
        names.contains(&"openai") && names.contains(&"local"),
        "{names:?}"
    );
}
