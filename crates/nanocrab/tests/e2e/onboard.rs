use pretty_assertions::assert_eq;

use crate::harness::{Home, Wire};

const TEMPLATES: [&str; 7] = [
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "TOOLS.md",
    "IDENTITY.md",
    "HEARTBEAT.md",
    "memory/MEMORY.md",
];

#[test]
fn onboard_writes_config_and_templates_and_never_overwrites() {
    let home = Home::new(Wire::Anthropic);
    std::fs::remove_file(home.config_path()).unwrap();
    let default_workspace = home.home().join("workspace");

    let first = home
        .nanocrab()
        .args(["onboard", "--model", "openai/gpt-4.1"])
        .output()
        .unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let stdout = String::from_utf8(first.stdout).unwrap();
    assert!(stdout.contains("Next steps"), "{stdout}");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.config_path()).unwrap()).unwrap();
    assert_eq!(config["version"], 1);
    assert_eq!(config["agents"]["defaults"]["model"], "openai/gpt-4.1");
    assert_eq!(config["agents"]["defaults"]["maxToolIterations"], 40);
    for file in TEMPLATES {
        let content = std::fs::read_to_string(default_workspace.join(file)).unwrap();
        assert!(content.len() > 40, "{file} has real content");
    }

    std::fs::write(default_workspace.join("SOUL.md"), "my own soul").unwrap();
    std::fs::write(home.config_path(), "{\"version\": 1}").unwrap();
    let second = home
        .nanocrab()
        .args(["onboard", "--model", "openai/gpt-4.1"])
        .output()
        .unwrap();
    assert!(second.status.success());
    assert_eq!(
        std::fs::read_to_string(default_workspace.join("SOUL.md")).unwrap(),
        "my own soul"
    );
    assert_eq!(
        std::fs::read_to_string(home.config_path()).unwrap(),
        "{\"version\": 1}"
    );
}

#[test]
fn config_schema_is_printed() {
    let home = Home::new(Wire::Anthropic);
    let run = home.run(home.nanocrab().args(["config", "schema"]));
    assert!(run.success);
    let schema: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let text = schema.to_string();
    for key in [
        "maxToolIterations",
        "restrictToWorkspace",
        "safeBins",
        "apiBase",
    ] {
        assert!(text.contains(key), "{key} missing from the schema");
    }
}

#[test]
fn status_shows_config_workspace_model_and_providers() {
    let home = Home::new(Wire::Anthropic);
    let run = home.run(home.nanocrab().arg("status"));
    assert!(run.success, "{}", run.stderr);
    let stdout = run.stdout;
    crate::harness::assert_no_secret(&stdout);
    for needle in [
        home.config_path().display().to_string(),
        home.workspace().display().to_string(),
        "anthropic/mock-model".to_owned(),
    ] {
        assert!(stdout.contains(&needle), "{needle} missing:\n{stdout}");
    }
}

#[test]
fn status_shows_the_gateway_and_its_channels() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["channels"] = serde_json::json!({
        "telegram": {"allowFrom": ["42"], "groups": {"-100": {}}},
        "discord": {"enabled": true, "token": "", "guilds": {"81384788765712384": {}}},
        "feishu": {"enabled": true},
    });
    config["gateway"] = serde_json::json!({"auth": {"token": "gw-token"}});
    home.write_config(config);
    let run = home.run(
        home.nanocrab()
            .env("TELEGRAM_BOT_TOKEN", "123:tg-5ecret")
            .arg("status"),
    );
    assert!(run.success, "{}", run.stderr);
    assert!(!run.stdout.contains("tg-5ecret") && !run.stdout.contains("gw-token"));
    for line in [
        "gateway    http://127.0.0.1:18790 (token set)",
        "telegram   token from TELEGRAM_BOT_TOKEN; dmPolicy pairing, allowFrom 1, groups 1",
        "discord    no token: set channels.discord.token or DISCORD_BOT_TOKEN; dmPolicy pairing, groupPolicy allowlist, allowFrom 0, guilds 1",
        "feishu     no feishu channel in this nanocrab yet; the section is ignored",
        "tools      exec allowlist, sandbox auto (Landlock + seccomp); grants: none; approvals wait 120 s",
        "web        web_fetch, web_search by DuckDuckGo (no key needed); reaches public hosts",
    ] {
        assert!(run.stdout.contains(line), "{line} missing:\n{}", run.stdout);
    }
}

#[test]
fn providers_list_shows_every_provider_and_its_state() {
    let home = Home::new(Wire::OpenAi);
    let run = home.run(
        home.nanocrab()
            .env("GEMINI_API_KEY", "g-key")
            .args(["providers", "list"]),
    );
    assert!(run.success, "{}", run.stderr);
    let stdout = run.stdout;
    crate::harness::assert_no_secret(&stdout);
    assert!(!stdout.contains("g-key"));
    let state = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing:\n{stdout}"))
            .to_owned()
    };
    assert!(state("openai").ends_with("configured"), "{stdout}");
    assert!(
        state("gemini").ends_with("configured"),
        "key from GEMINI_API_KEY: {stdout}"
    );
    assert!(
        state("anthropic").ends_with("no key: set ANTHROPIC_API_KEY or providers.anthropic.apiKey"),
        "{stdout}"
    );
    assert!(
        state("custom").ends_with("needs providers.custom.apiBase"),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().count(),
        1 + nanocrab_provider::PROVIDERS.len()
    );
}
