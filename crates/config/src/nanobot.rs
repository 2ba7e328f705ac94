//! A nanobot `config.json` read as it is: nanobot's spellings (camelCase and snake_case), its
//! keys mapped onto nanocrab's, and the keys nanocrab has no use for taken out with a note
//! saying so. nanobot's schema is `nanobot/config/schema.py` (pydantic, camelCase aliases,
//! snake_case accepted too); the keys here are those of its version with `provider`,
//! `reasoningEffort` and `gateway.heartbeat`. A file without `version` is read this way.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

/// What reading a nanobot file changed, by key path only: a value may be a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NanobotNote {
    pub file: PathBuf,
    /// nanobot's key and the nanocrab key it now sets.
    pub mapped: Vec<(String, String)>,
    /// nanobot's keys that nanocrab reads but has no use for, each with why.
    pub no_effect: Vec<(String, &'static str)>,
}

impl std::fmt::Display for NanobotNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is nanobot's", self.file.display())?;
        let mut sep = ": ";
        if !self.mapped.is_empty() {
            let mapped: Vec<String> = self
                .mapped
                .iter()
                .map(|(from, to)| format!("{from} → {to}"))
                .collect();
            write!(f, "{sep}mapped {}", mapped.join(", "))?;
            sep = "; ";
        }
        if !self.no_effect.is_empty() {
            let keys: Vec<String> = self
                .no_effect
                .iter()
                .map(|(key, why)| format!("{key} ({why})"))
                .collect();
            write!(f, "{sep}no effect in nanocrab: {}", keys.join(", "))?;
        }
        Ok(())
    }
}

/// nanobot's channels; those nanocrab lacks stay under `channels` as they are, for `status`
/// and the gateway to report.
const CHANNELS: [&str; 10] = [
    "whatsapp", "telegram", "discord", "feishu", "mochat", "dingtalk", "email", "slack", "qq",
    "matrix",
];

/// nanobot's providers that nanocrab has no built-in entry for (both spellings).
const PROVIDERS_NANOCRAB_LACKS: [&str; 10] = [
    "kilo",
    "dashscopeCodingPlan",
    "dashscope_coding_plan",
    "aihubmix",
    "siliconflow",
    "volcengine",
    "openaiCodex",
    "openai_codex",
    "githubCopilot",
    "github_copilot",
];

const NO_SETTING: &str = "nanocrab has no such setting";

/// Keys taken out with a note, by section: the key, the value at which nanocrab behaves as
/// nanobot did (then no note), and why it has no effect.
fn no_effect_keys() -> Vec<(
    &'static [&'static str],
    &'static str,
    Option<Value>,
    &'static str,
)> {
    vec![
        (
            &["agents", "defaults"],
            "reasoningEffort",
            None,
            "nanocrab asks models for no reasoning effort",
        ),
        (&["channels"], "sendProgress", None, NO_SETTING),
        (
            &["channels"],
            "sendToolHints",
            Some(json!(false)),
            NO_SETTING,
        ),
        (
            &["channels", "telegram"],
            "replyToMessage",
            Some(json!(false)),
            "nanocrab's replies do not quote the message",
        ),
        (
            &["channels", "discord"],
            "intents",
            Some(json!(37377)),
            "nanocrab asks Discord for the intents it needs",
        ),
        (
            &["channels", "slack"],
            "mode",
            Some(json!("socket")),
            "nanocrab speaks Socket Mode",
        ),
        (
            &["channels", "slack"],
            "webhookPath",
            Some(json!("/slack/events")),
            "nanocrab speaks Socket Mode",
        ),
        (
            &["channels", "slack"],
            "userTokenReadOnly",
            Some(json!(true)),
            NO_SETTING,
        ),
        (&["channels", "slack"], "replyInThread", None, NO_SETTING),
        (&["channels", "slack"], "reactEmoji", None, NO_SETTING),
        (
            &["channels", "slack"],
            "groupAllowFrom",
            Some(json!([])),
            "list the channels under `groups`",
        ),
        (
            &["channels", "email"],
            "consentGranted",
            None,
            "nanocrab reads the mailbox when the channel is enabled",
        ),
        (
            &["channels", "email"],
            "autoReplyEnabled",
            Some(json!(true)),
            NO_SETTING,
        ),
        (
            &["channels", "email"],
            "subjectPrefix",
            Some(json!("Re: ")),
            NO_SETTING,
        ),
        (
            &["tools", "exec"],
            "pathAppend",
            Some(json!("")),
            "commands run with nanocrab's PATH",
        ),
        (&[], "audio", None, "nanocrab does not speak its replies"),
        (&[], "speech", None, "nanocrab does not speak its replies"),
    ]
}

/// The steps from nanobot's keys to nanocrab's, in order: spellings first.
const STEPS: [fn(&mut Value, &mut NanobotNote); 11] = [
    camel_case_keys,
    drop_no_effect_keys,
    drop_mention_policies,
    map_provider,
    map_memory_window,
    map_heartbeat,
    map_slack_dm,
    map_email_security,
    drop_providers_nanocrab_lacks,
    drop_empty_mcp_fields,
    trim_discord_gateway_url,
];

/// Rewrites a nanobot file (already without its `null`s) into nanocrab's keys; `None` when
/// nothing needed saying.
pub(crate) fn translate(file: PathBuf, value: &mut Value) -> Option<NanobotNote> {
    let mut note = NanobotNote {
        file,
        mapped: Vec::new(),
        no_effect: Vec::new(),
    };
    for step in STEPS {
        step(value, &mut note);
    }
    (!note.mapped.is_empty() || !note.no_effect.is_empty()).then_some(note)
}

/// Whether `path` is a nanobot channel that is off: its keys then say nothing about what
/// they would do, and go without a note.
fn channel_off(value: &mut Value, path: &[&str]) -> bool {
    matches!(path, ["channels", name, ..] if CHANNELS.contains(name))
        && section(value, &path[..2])
            .and_then(|channel| channel.get("enabled"))
            .is_some_and(|enabled| enabled == &json!(false))
}

fn drop_no_effect_keys(value: &mut Value, note: &mut NanobotNote) {
    for (path, key, harmless, why) in no_effect_keys() {
        let quiet = channel_off(value, path);
        let Some(taken) = section(value, path).and_then(|s| s.remove(key)) else {
            continue;
        };
        if !quiet && harmless.as_ref() != Some(&taken) {
            note.no_effect.push((dotted(path, key), why));
        }
    }
}

/// nanobot's `groupPolicy: mention` (Discord, Slack) is no policy of nanocrab's.
fn drop_mention_policies(value: &mut Value, note: &mut NanobotNote) {
    for path in [&["channels", "discord"][..], &["channels", "slack"]] {
        let quiet = channel_off(value, path);
        if let Some(channel) = section(value, path)
            && channel.get("groupPolicy") == Some(&json!("mention"))
        {
            channel.remove("groupPolicy");
            if !quiet {
                note.no_effect.push((
                    dotted(path, "groupPolicy"),
                    "`mention` is nanocrab's requireMention; groupPolicy is allowlist (default), open or disabled",
                ));
            }
        }
    }
}

/// nanobot writes every provider it knows; one nanocrab lacks goes without a note while it
/// holds no key, and with one when it does (unless it has `apiBase`: then it works as a
/// provider of the user's own).
fn drop_providers_nanocrab_lacks(value: &mut Value, note: &mut NanobotNote) {
    let Some(providers) = section(value, &["providers"]) else {
        return;
    };
    for name in PROVIDERS_NANOCRAB_LACKS {
        let Some(provider) = providers.get(name) else {
            continue;
        };
        let has = |key: &str| {
            provider
                .get(key)
                .is_some_and(|v| v.as_str().is_none_or(|s| !s.is_empty()))
        };
        if has("apiBase") {
            continue;
        }
        let keyed = has("apiKey");
        providers.remove(name);
        if keyed {
            note.no_effect.push((
                format!("providers.{name}"),
                "nanocrab has no built-in provider of that name; give apiBase to use it",
            ));
        }
    }
}

/// nanobot's Discord `gatewayUrl` carries the query (`/?v=10&encoding=json`) that nanocrab's
/// Discord client adds to the address itself.
fn trim_discord_gateway_url(value: &mut Value, _: &mut NanobotNote) {
    if let Some(Value::String(url)) =
        section(value, &["channels", "discord"]).and_then(|d| d.get_mut("gatewayUrl"))
        && let Some((address, _query)) = url.split_once('?')
    {
        *url = address.trim_end_matches('/').to_owned();
    }
}

/// nanobot writes `""` for an MCP server's unset `command` or `url`.
fn drop_empty_mcp_fields(value: &mut Value, _: &mut NanobotNote) {
    if let Some(servers) = section(value, &["tools", "mcpServers"]) {
        for server in servers.values_mut().filter_map(Value::as_object_mut) {
            server.retain(|key, v| !(matches!(key.as_str(), "command" | "url") && v == ""));
        }
    }
}

/// `agents.defaults.provider`: `auto` is what nanocrab does (the provider comes from the
/// model's name); a forced provider becomes the model's prefix.
fn map_provider(value: &mut Value, note: &mut NanobotNote) {
    let Some(defaults) = section(value, &["agents", "defaults"]) else {
        return;
    };
    let Some(provider) = defaults.remove("provider") else {
        return;
    };
    match provider.as_str() {
        Some("auto") => {}
        Some(name) => {
            let model = defaults
                .get("model")
                .and_then(Value::as_str)
                .map_or_else(crate::types::default_model, str::to_owned);
            if !model.starts_with(&format!("{name}/")) {
                defaults.insert("model".to_owned(), Value::from(format!("{name}/{model}")));
            }
            note.mapped.push((
                "agents.defaults.provider".to_owned(),
                "agents.defaults.model's prefix".to_owned(),
            ));
        }
        // Not a name: left for the type check to name the key.
        None => {
            defaults.insert("provider".to_owned(), provider);
        }
    }
}

/// `memoryWindow`: the messages after which nanobot consolidates, nanocrab's
/// `memory.consolidateAfter`.
fn map_memory_window(value: &mut Value, note: &mut NanobotNote) {
    let Some(window) =
        section(value, &["agents", "defaults"]).and_then(|d| d.remove("memoryWindow"))
    else {
        return;
    };
    let Some(root) = value.as_object_mut() else {
        return;
    };
    let memory = root
        .entry("memory")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(memory) = memory.as_object_mut() {
        memory.entry("consolidateAfter").or_insert(window);
    }
    note.mapped.push((
        "agents.defaults.memoryWindow".to_owned(),
        "memory.consolidateAfter".to_owned(),
    ));
}

/// `gateway.heartbeat {enabled, intervalS}` → `agents.defaults.heartbeat.every`; keys it does
/// not know stay for the check of unknown keys.
fn map_heartbeat(value: &mut Value, note: &mut NanobotNote) {
    let Some(heartbeat) = section(value, &["gateway", "heartbeat"]) else {
        return;
    };
    let enabled = heartbeat.remove("enabled");
    let interval = heartbeat.remove("intervalS");
    let every = match (&enabled, &interval) {
        (None, None) => return,
        (Some(Value::Bool(false)), _) => "0".to_owned(),
        // Written as nanocrab's own users write it (`30m`), which `status` then shows.
        (_, Some(Value::Number(seconds))) => match seconds.as_u64() {
            Some(0) => "0".to_owned(),
            Some(s) if s % 3_600 == 0 => format!("{}h", s / 3_600),
            Some(s) if s % 60 == 0 => format!("{}m", s / 60),
            Some(s) => format!("{s}s"),
            None => seconds.to_string(),
        },
        (_, None) => "30m".to_owned(),
        // Not a switch or a number: left for the type check to name the key.
        (_, Some(_)) => {
            if let Some(enabled) = enabled {
                heartbeat.insert("enabled".to_owned(), enabled);
            }
            if let Some(interval) = interval {
                heartbeat.insert("intervalS".to_owned(), interval);
            }
            return;
        }
    };
    if heartbeat.is_empty()
        && let Some(gateway) = section(value, &["gateway"])
    {
        gateway.remove("heartbeat");
    }
    let Some(agents) = value.as_object_mut().map(|root| {
        root.entry("agents")
            .or_insert_with(|| Value::Object(Map::new()))
    }) else {
        return;
    };
    if let Some(defaults) = agents
        .as_object_mut()
        .map(|a| {
            a.entry("defaults")
                .or_insert_with(|| Value::Object(Map::new()))
        })
        .and_then(Value::as_object_mut)
    {
        let beat = defaults
            .entry("heartbeat")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(beat) = beat.as_object_mut() {
            beat.entry("every").or_insert(Value::from(every));
        }
    }
    note.mapped.push((
        "gateway.heartbeat".to_owned(),
        "agents.defaults.heartbeat.every".to_owned(),
    ));
}

/// `channels.slack.dm {enabled, policy, allowFrom}` → `dmPolicy` and `allowFrom`. nanobot's
/// default (open to everyone) is not carried over: nanocrab asks unknown senders to pair.
fn map_slack_dm(value: &mut Value, note: &mut NanobotNote) {
    let quiet = channel_off(value, &["channels", "slack"]);
    let Some(slack) = section(value, &["channels", "slack"]) else {
        return;
    };
    let Some(Value::Object(dm)) = slack.remove("dm") else {
        return;
    };
    let policy = match (dm.get("enabled"), dm.get("policy").and_then(Value::as_str)) {
        (Some(Value::Bool(false)), _) => Some("disabled"),
        (_, Some("allowlist")) => Some("allowlist"),
        _ => None,
    };
    if let Some(policy) = policy {
        slack.entry("dmPolicy").or_insert(Value::from(policy));
        note.mapped.push((
            "channels.slack.dm".to_owned(),
            "channels.slack.dmPolicy".to_owned(),
        ));
    } else if !quiet {
        note.no_effect.push((
            "channels.slack.dm.policy".to_owned(),
            "nanocrab asks unknown senders to pair (dmPolicy pairing); set dmPolicy open to answer everyone",
        ));
    }
    if let Some(Value::Array(senders)) = dm.get("allowFrom")
        && !senders.is_empty()
    {
        let allow = slack
            .entry("allowFrom")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(allow) = allow.as_array_mut() {
            allow.extend(
                senders
                    .iter()
                    .filter(|s| !allow.contains(s))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
        note.mapped.push((
            "channels.slack.dm.allowFrom".to_owned(),
            "channels.slack.allowFrom".to_owned(),
        ));
    }
}

/// `imapUseSsl`, `smtpUseSsl` and `smtpUseTls` → `imapSecurity` and `smtpSecurity`. A plain
/// connection nanobot allowed anywhere is nanocrab's `plain`, which it takes only to this
/// machine: not carried over, and said.
fn map_email_security(value: &mut Value, note: &mut NanobotNote) {
    let quiet = channel_off(value, &["channels", "email"]);
    let Some(email) = section(value, &["channels", "email"]) else {
        return;
    };
    let imap_ssl = email.remove("imapUseSsl");
    let smtp_ssl = email.remove("smtpUseSsl");
    let smtp_tls = email.remove("smtpUseTls");
    let imap = match imap_ssl {
        None => None,
        Some(Value::Bool(true)) => Some(Some("tls")),
        Some(_) => Some(None),
    };
    let smtp = match (smtp_ssl, smtp_tls) {
        (None, None) => None,
        (Some(Value::Bool(true)), _) => Some(Some("tls")),
        (_, Some(Value::Bool(true))) => Some(Some("starttls")),
        (_, _) => Some(None),
    };
    for (from, to, security) in [
        ("imapUseSsl", "imapSecurity", imap),
        ("smtpUseSsl/smtpUseTls", "smtpSecurity", smtp),
    ] {
        match security {
            None => {}
            Some(Some(security)) => {
                email.entry(to).or_insert(Value::from(security));
                if !quiet {
                    note.mapped.push((
                        format!("channels.email.{from}"),
                        format!("channels.email.{to}"),
                    ));
                }
            }
            Some(None) if !quiet => {
                note.no_effect.push((
                    format!("channels.email.{from}"),
                    "nanocrab connects with TLS or STARTTLS; set imapSecurity/smtpSecurity",
                ));
            }
            Some(None) => {}
        }
    }
}

/// nanobot takes `snake_case` for every field: each becomes its camelCase alias, in the
/// objects whose keys are fields (not in maps of names such as `extraHeaders`, `env` or
/// `mcpServers`).
fn camel_case_keys(value: &mut Value, _: &mut NanobotNote) {
    let fields: Vec<Vec<String>> = [
        &[][..],
        &["agents"],
        &["agents", "defaults"],
        &["channels"],
        &["channels", "slack", "dm"],
        &["channels", "mochat", "mention"],
        &["gateway"],
        &["gateway", "heartbeat"],
        &["tools"],
        &["tools", "web"],
        &["tools", "web", "search"],
        &["tools", "exec"],
        &["audio"],
        &["audio", "tts"],
    ]
    .iter()
    .map(|path| path.iter().map(|s| (*s).to_owned()).collect())
    .chain(
        CHANNELS
            .iter()
            .map(|name| vec!["channels".to_owned(), (*name).to_owned()]),
    )
    .collect();
    // Done in order, so that a section is found by its camelCase name (`mcp_servers`).
    for path in &fields {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        if let Some(object) = section(value, &path) {
            rename_to_camel(object);
        }
    }
    for parent in [&["providers"][..], &["tools", "mcpServers"]] {
        if let Some(entries) = section(value, parent) {
            entries
                .values_mut()
                .filter_map(Value::as_object_mut)
                .for_each(rename_to_camel);
        }
    }
}

fn rename_to_camel(object: &mut Map<String, Value>) {
    let snake: Vec<String> = object
        .keys()
        .filter(|key| key.contains('_'))
        .cloned()
        .collect();
    for key in snake {
        let mut camel = String::with_capacity(key.len());
        let mut upper = false;
        for c in key.chars() {
            match (c, upper) {
                ('_', _) => upper = !camel.is_empty(),
                (c, true) => {
                    camel.extend(c.to_uppercase());
                    upper = false;
                }
                (c, false) => camel.push(c),
            }
        }
        if !object.contains_key(&camel)
            && let Some(item) = object.remove(&key)
        {
            object.insert(camel, item);
        }
    }
}

/// The object at `path` below `value`, if there is one.
fn section<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    path.iter()
        .try_fold(value, |value, key| value.get_mut(*key))?
        .as_object_mut()
}

fn dotted(path: &[&str], key: &str) -> String {
    path.iter()
        .chain([&key])
        .copied()
        .collect::<Vec<_>>()
        .join(".")
}
