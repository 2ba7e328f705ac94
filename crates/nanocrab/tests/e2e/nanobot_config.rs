//! `--config` pointed at nanobot's own `config.json`: nanocrab runs with it unchanged and says
//! once, on stderr, what it mapped and what has no effect.

use nanocrab_testkit::Reply;
use serde_json::{Value, json};

use crate::harness::{Home, SECRET_KEY, Wire};

/// nanobot's `onboard` file (crates/config/tests/fixtures/nanobot), with the user's key and the
/// mock's address filled in as a nanobot user would fill in theirs.
fn nanobot_config(home: &Home) -> std::path::PathBuf {
    let mut config: Value = serde_json::from_str(include_str!(
        "../../../config/tests/fixtures/nanobot/config.json"
    ))
    .unwrap();
    config["agents"]["defaults"]["workspace"] = json!(home.workspace());
    config["agents"]["defaults"]["model"] = json!("anthropic/mock-model");
    config["providers"]["anthropic"]["apiKey"] = json!(SECRET_KEY);
    config["providers"]["anthropic"]["apiBase"] = json!(home.mock.anthropic_base());
    let path = home.user_home().join(".nanobot/config.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    path
}

#[test]
fn status_runs_on_a_nanobot_config_and_notes_what_was_mapped_on_stderr() {
    let home = Home::new(Wire::Anthropic);
    let path = nanobot_config(&home);

    let run = home.run(home.nanocrab().arg("--config").arg(&path).arg("status"));

    assert!(
        run.success,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    let note = format!(
        "note: {} is nanobot's: mapped agents.defaults.memoryWindow → memory.consolidateAfter, gateway.heartbeat → agents.defaults.heartbeat.every; no effect in nanocrab: channels.sendProgress (nanocrab has no such setting), audio (nanocrab does not speak its replies)\n",
        path.display()
    );
    assert_eq!(run.stderr.matches(&note).count(), 1, "{}", run.stderr);
    assert!(!run.stdout.contains("nanobot's"), "{}", run.stdout);
    assert!(run.stdout.contains("whatsapp"), "{}", run.stdout);
}

#[test]
fn the_agent_answers_with_a_nanobot_config() {
    let home = Home::new(Wire::Anthropic);
    let path = nanobot_config(&home);
    home.mock.push(Reply::text("hi from nanocrab"));

    let run = home.run(
        home.nanocrab()
            .arg("--config")
            .arg(&path)
            .args(["agent", "-m", "hello"]),
    );

    assert!(
        run.success,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    assert_eq!(run.stdout.trim(), "hi from nanocrab");
    assert_eq!(home.requests().len(), 1);
    assert!(run.stderr.contains("is nanobot's"), "{}", run.stderr);
}
