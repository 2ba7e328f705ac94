//! nanobot's own `config.json`, as its `onboard` writes it, loads unchanged: its keys mapped
//! onto nanocrab's or taken with a note that they have no effect; only unknown keys fail.

use std::path::Path;

use nanocrab_config::{Config, parse};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn no_env(_: &str) -> Option<String> {
    None
}

fn load(text: &str) -> Result<Config, String> {
    parse(Path::new("/h/.nanobot/config.json"), text, &no_env).map_err(|err| err.to_string())
}

const ONBOARD: &str = include_str!("fixtures/nanobot/config.json");

#[test]
fn nanobots_onboard_config_loads_as_the_same_nanocrab_config() {
    let config = load(ONBOARD).unwrap();
    insta::assert_snapshot!(
        config.nanobot.as_ref().map(ToString::to_string).unwrap_or_default(),
        @"/h/.nanobot/config.json is nanobot's: mapped agents.defaults.memoryWindow → memory.consolidateAfter, gateway.heartbeat → agents.defaults.heartbeat.every; no effect in nanocrab: channels.sendProgress (nanocrab has no such setting), audio (nanocrab does not speak its replies)"
    );
    // The same settings in nanocrab's own words; the channels nanocrab lacks stay as they are.
    let onboard: Value = serde_json::from_str(ONBOARD).unwrap();
    let mut channels = json!({
        "telegram": {"enabled": false, "token": "", "allowFrom": []},
        "discord": {"enabled": false, "token": "", "allowFrom": [],
                    "gatewayUrl": "wss://gateway.discord.gg"},
        "slack": {"enabled": false, "botToken": "", "appToken": "", "allowFrom": []},
        "email": {"enabled": false, "imapHost": "", "imapPort": 993, "imapUsername": "",
                  "imapPassword": "", "imapMailbox": "INBOX", "imapSecurity": "tls",
                  "smtpHost": "", "smtpPort": 587, "smtpUsername": "", "smtpPassword": "",
                  "smtpSecurity": "starttls", "fromAddress": "", "pollInterval": 30,
                  "markSeen": true, "maxBodyChars": 12000, "allowFrom": []}
    });
    for name in ["whatsapp", "feishu", "mochat", "dingtalk", "qq", "matrix"] {
        channels[name] = onboard["channels"][name].clone();
    }
    let providers: serde_json::Map<String, Value> = [
        "custom",
        "anthropic",
        "openai",
        "openrouter",
        "deepseek",
        "groq",
        "zhipu",
        "dashscope",
        "vllm",
        "gemini",
        "moonshot",
        "minimax",
    ]
    .into_iter()
    .map(|name| (name.to_owned(), json!({"apiKey": ""})))
    .collect();
    let native = json!({
        "version": 1,
        "agents": {"defaults": {"workspace": "~/.nanobot/workspace",
                                "model": "anthropic/claude-opus-4-5", "maxTokens": 8192,
                                "temperature": 0.1, "maxToolIterations": 40,
                                "heartbeat": {"every": "30m"}}},
        "memory": {"consolidateAfter": 100},
        "channels": channels,
        "providers": providers,
        "gateway": {"host": "0.0.0.0", "port": 18790},
        "tools": {"web": {"search": {"apiKey": "", "maxResults": 5}}, "exec": {"timeout": 60},
                  "restrictToWorkspace": false}
    });
    let expected = load(&native.to_string()).unwrap();
    assert_eq!(
        expected.nanobot, None,
        "a file with a version is nanocrab's"
    );
    assert_eq!(
        Config {
            nanobot: None,
            ..config
        },
        expected
    );
}

#[test]
fn the_keys_the_issue_names_load_and_each_is_noted() {
    let config = load(
        r#"{"agents": {"defaults": {"provider": "openrouter", "model": "anthropic/claude-sonnet-4-5",
                                    "memoryWindow": 40, "reasoningEffort": "high"}},
            "channels": {"telegram": {"enabled": true, "token": "123:secret-token", "replyToMessage": true}},
            "providers": {"openrouter": {"apiKey": "sk-or-secret", "extraHeaders": null},
                          "aihubmix": {"apiKey": "sk-aihub-secret"}},
            "gateway": {"heartbeat": {"enabled": false, "intervalS": 600}},
            "tools": {"web": {"proxy": null}, "exec": {"pathAppend": "/opt/bin"},
                      "mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"], "url": ""}}}}"#,
    )
    .unwrap();
    let note = config.nanobot.as_ref().unwrap().to_string();
    for secret in ["123:secret-token", "sk-or-secret", "sk-aihub-secret"] {
        assert!(!note.contains(secret), "{note}");
    }
    insta::assert_snapshot!(note, @"/h/.nanobot/config.json is nanobot's: mapped agents.defaults.provider → agents.defaults.model's prefix, agents.defaults.memoryWindow → memory.consolidateAfter, gateway.heartbeat → agents.defaults.heartbeat.every; no effect in nanocrab: agents.defaults.reasoningEffort (nanocrab asks models for no reasoning effort), channels.telegram.replyToMessage (nanocrab's replies do not quote the message), tools.exec.pathAppend (commands run with nanocrab's PATH), providers.aihubmix (nanocrab has no built-in provider of that name; give apiBase to use it)");
    let defaults = &config.agents.defaults;
    assert_eq!(
        (
            defaults.model.as_str(),
            defaults.heartbeat.every.as_str(),
            config.memory.consolidate_after,
            config.tools.mcp_servers["time"].url.clone(),
            config
                .providers
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ),
        (
            "openrouter/anthropic/claude-sonnet-4-5",
            "0",
            40,
            None,
            vec!["openrouter"]
        )
    );
}

#[test]
fn snake_case_keys_read_as_their_camel_case_aliases() {
    let snake = load(
        r#"{"agents": {"defaults": {"max_tokens": 4096, "max_tool_iterations": 12, "memory_window": 30}},
            "providers": {"openai": {"api_key": "k", "api_base": "http://127.0.0.1:9/v1",
                                     "extra_headers": {"X_Keep_Me": "v"}}},
            "channels": {"telegram": {"enabled": true, "token": "t", "allow_from": ["42"], "reply_to_message": false}},
            "gateway": {"heartbeat": {"interval_s": 900}},
            "tools": {"restrict_to_workspace": true, "exec": {"path_append": ""},
                      "web": {"search": {"api_key": "", "max_results": 3}},
                      "mcp_servers": {"my_server": {"command": "uvx", "tool_timeout": 5}}}}"#,
    )
    .unwrap();
    let camel = load(
        r#"{"agents": {"defaults": {"maxTokens": 4096, "maxToolIterations": 12, "memoryWindow": 30}},
            "providers": {"openai": {"apiKey": "k", "apiBase": "http://127.0.0.1:9/v1",
                                     "extraHeaders": {"X_Keep_Me": "v"}}},
            "channels": {"telegram": {"enabled": true, "token": "t", "allowFrom": ["42"], "replyToMessage": false}},
            "gateway": {"heartbeat": {"intervalS": 900}},
            "tools": {"restrictToWorkspace": true, "exec": {"pathAppend": ""},
                      "web": {"search": {"apiKey": "", "maxResults": 3}},
                      "mcpServers": {"my_server": {"command": "uvx", "toolTimeout": 5}}}}"#,
    )
    .unwrap();
    assert_eq!(snake, camel);
    assert_eq!(
        (
            snake
                .tools
                .mcp_servers
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            snake.providers["openai"]
                .extra_headers
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
        ),
        (vec!["my_server"], vec!["X_Keep_Me"]),
        "names in maps keep their spelling"
    );
}

#[test]
fn every_unknown_key_is_reported_at_once() {
    assert_eq!(
        load(
            r#"{"agents": {"defaults": {"memoryWindw": 10, "modle": "x"}}, "tools": {"exec": {"timeout": 5, "zzz": 1}}}"#
        )
        .unwrap_err(),
        "/h/.nanobot/config.json: unknown keys:\n  `agents.defaults.memoryWindw` (valid keys here: workspace, model, maxTokens, temperature, maxToolIterations, contextWindowTokens, fallbackModels, housekeepingModel, heartbeat, subagents)\n  `agents.defaults.modle`: did you mean `model`?\n  `tools.exec.zzz` (valid keys here: mode, safeBins, timeout, sandbox)"
    );
}
