use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::ConfigError;
use crate::routing::DEFAULT_AGENT_ID;
use crate::types::{CONFIG_VERSION, Config, McpTransport, Unresolved};

/// A loaded configuration and whether it came from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub config: Config,
    /// False when the file did not exist and the defaults are in use.
    pub from_file: bool,
}

/// Loads `path`: migrates it to the current version, resolves `${VAR}` placeholders through
/// `env` (in memory only: the file is never rewritten), rejects unknown keys and bad values.
/// A placeholder whose variable is unset is no error here: its key is left out and listed in
/// [`Config::unresolved`], for the commands that need it to refuse. A missing file yields the
/// defaults.
pub fn load(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Loaded {
                config: Config::default(),
                from_file: false,
            });
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let config = parse(path, &text, env)?;
    Ok(Loaded {
        config,
        from_file: true,
    })
}

/// Parses the text of a config file; `path` is only used in error messages.
pub fn parse(
    path: &Path,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|err| ConfigError::Syntax {
        path: path.to_path_buf(),
        line: err.line(),
        column: err.column(),
        message: err.to_string(),
    })?;
    let from_nanobot = value
        .as_object()
        .is_some_and(|o| !o.contains_key("version"));
    let mut value = migrate(path, value)?;
    let nanobot = from_nanobot
        .then(|| crate::nanobot::translate(path.to_path_buf(), &mut value))
        .flatten();
    let mut unresolved = Vec::new();
    resolve_placeholders(path, &mut value, &mut Vec::new(), env, &mut unresolved);
    // serde stops at the first unknown key: each is taken out and the file read again, so
    // that all of them are reported at once.
    let mut unknown = Vec::new();
    let read = loop {
        match serde_path_to_error::deserialize::<_, Config>(&value) {
            Ok(config) => break Ok(config),
            Err(err) => match deserialize_error(path.to_path_buf(), &value, &err) {
                ConfigError::UnknownKey {
                    key,
                    suggestion,
                    expected,
                    ..
                } if remove_at(&mut value, &segments(&err)) => {
                    unknown.push(crate::UnknownKey {
                        key,
                        suggestion,
                        expected,
                    });
                }
                other => break Err(other),
            },
        }
    };
    match unknown.len() {
        0 => {}
        1 => {
            let crate::UnknownKey {
                key,
                suggestion,
                expected,
            } = unknown.remove(0);
            return Err(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                key,
                suggestion,
                expected,
            });
        }
        _ => {
            return Err(ConfigError::UnknownKeys {
                path: path.to_path_buf(),
                keys: unknown,
            });
        }
    }
    let mut config = read?;
    config.unresolved = unresolved;
    config.nanobot = nanobot;
    validate(path, &config)?;
    Ok(config)
}

/// Takes the object member at `segments` out of `value`; false if there is none.
fn remove_at(value: &mut Value, segments: &[String]) -> bool {
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let parent = parents.iter().try_fold(value, |value, key| match value {
        Value::Object(map) => map.get_mut(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => None,
    });
    parent
        .and_then(Value::as_object_mut)
        .is_some_and(|map| map.remove(last).is_some())
}

/// serde's path to the key an error is about, one segment a key or list index.
fn segments(err: &serde_path_to_error::Error<serde_json::Error>) -> Vec<String> {
    use serde_path_to_error::Segment;
    err.path()
        .iter()
        .map(|segment| match segment {
            Segment::Seq { index } => index.to_string(),
            Segment::Map { key } => key.clone(),
            Segment::Enum { variant } => variant.clone(),
            Segment::Unknown => "?".to_owned(),
        })
        .collect()
}

/// Brings an older file to [`CONFIG_VERSION`]. A file without `version` is a nanobot-era
/// file: its shape is version 1's, so it only gains the field. A key whose value is `null` is
/// dropped, in every version: nanobot writes `"proxy": null` for "not set", so `null` reads as
/// if the key were absent.
pub fn migrate(path: &Path, mut value: Value) -> Result<Value, ConfigError> {
    drop_nulls(&mut value);
    let Some(object) = value.as_object_mut() else {
        return Err(ConfigError::InvalidValue {
            path: path.to_path_buf(),
            key: "(top level)".to_owned(),
            message: "the config must be a JSON object".to_owned(),
        });
    };
    let version = match object.get("version") {
        None => 0,
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64().unwrap_or_default(),
        Some(_) => {
            return Err(ConfigError::InvalidValue {
                path: path.to_path_buf(),
                key: "version".to_owned(),
                message: format!("must be a whole number (this nanocrab writes {CONFIG_VERSION})"),
            });
        }
    };
    if version > u64::from(CONFIG_VERSION) {
        return Err(ConfigError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: CONFIG_VERSION,
        });
    }
    // Each step takes the file from one version to the next; there is one step so far.
    if version == 0 {
        object.insert("version".to_owned(), Value::from(1));
    }
    Ok(value)
}

/// Fills in every `${VAR}` below `value`. A string whose variable is not set is taken out of
/// its object or list, so its key reads as absent, and is added to `unresolved`: only a
/// command that needs it then fails.
fn resolve_placeholders(
    path: &Path,
    value: &mut Value,
    key: &mut Vec<String>,
    env: &dyn Fn(&str) -> Option<String>,
    unresolved: &mut Vec<Unresolved>,
) {
    // Whether `item` (at `key`) stays: false for a string with an unset variable.
    let mut resolve = |item: &mut Value, key: &mut Vec<String>| match item {
        Value::String(text) if text.contains('$') => match expand(text, env) {
            Ok(expanded) => {
                *text = expanded;
                true
            }
            Err(var) => {
                unresolved.push(Unresolved {
                    file: path.to_path_buf(),
                    key: key.join("."),
                    var,
                });
                false
            }
        },
        Value::Array(_) | Value::Object(_) => {
            resolve_placeholders(path, item, key, env, unresolved);
            true
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => true,
    };
    match value {
        Value::Array(items) => {
            let mut i = 0;
            items.retain_mut(|item| {
                key.push(i.to_string());
                i += 1;
                let keep = resolve(item, key);
                key.pop();
                keep
            });
        }
        Value::Object(map) => map.retain(|name, item| {
            key.push(name.clone());
            let keep = resolve(item, key);
            key.pop();
            keep
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// Replaces each `${VAR}` with its value; `$${` stands for a literal `${`. Returns the name of
/// the first unset variable as the error.
fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${")
            && let Some(end) = tail.find('}')
        {
            let var = &tail[..end];
            out.push_str(&env(var).ok_or_else(|| var.to_owned())?);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Removes every object member whose value is `null`, at any depth. A `null` inside a list
/// stays: a list item is not a key that can be absent.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, item| !item.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// The candidate closest to a mistyped `word`, if one is close enough to be what was meant.
pub fn did_you_mean<S: AsRef<str>>(word: &str, candidates: &[S]) -> Option<String> {
    candidates
        .iter()
        .map(|candidate| {
            (
                strsim::jaro_winkler(word, candidate.as_ref()),
                candidate.as_ref(),
            )
        })
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate.to_owned())
}

/// The names between backticks in serde's list of what it expected
/// (`` one of `a`, `b`, `c` ``, `` `a` or `b` ``, `` `a` ``).
fn quoted_names(expected: &str) -> Vec<String> {
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Turns serde's error into one in the user's words: the key path with dots (`safeBins.0`,
/// as validation names keys), and what the key takes instead of the Rust type serde names.
fn deserialize_error(
    path: PathBuf,
    value: &Value,
    err: &serde_path_to_error::Error<serde_json::Error>,
) -> ConfigError {
    let segments = segments(err);
    let key = if segments.is_empty() {
        "(top level)".to_owned()
    } else {
        segments.join(".")
    };
    let message = err.inner().to_string();
    // serde's wording: "unknown field `modee`, expected one of `mode`, `safeBins`, `timeout`"
    // (or "expected `x`" for a single field); the path already ends with the unknown key.
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((field, expected)) = rest.split_once('`')
    {
        let expected = quoted_names(expected);
        let suggestion = did_you_mean(field, &expected);
        return ConfigError::UnknownKey {
            path,
            key,
            suggestion,
            expected,
        };
    }
    if let Some(rest) = message.strip_prefix("missing field `")
        && let Some((field, _)) = rest.split_once('`')
    {
        return ConfigError::InvalidValue {
            path,
            key: if segments.is_empty() {
                field.to_owned()
            } else {
                format!("{key}.{field}")
            },
            message: "required, but missing".to_owned(),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((_, expected)) = rest.rsplit_once("`, expected ")
    {
        return ConfigError::InvalidValue {
            path,
            key,
            message: format!(
                "unknown value; allowed: {}",
                quoted_names(expected).join(", ")
            ),
        };
    }
    // serde quotes the offending value ("invalid type: string `sk-...`, expected u32"); a value
    // may be a secret, so only the expectation is kept, in words rather than Rust types. It is
    // the text after the last ", expected ": the value itself may contain those words.
    let Some((_, expected)) = message
        .rsplit_once(", expected ")
        .filter(|_| message.starts_with("invalid type") || message.starts_with("invalid value"))
    else {
        return ConfigError::InvalidValue { path, key, message };
    };
    let takes = match expected {
        "u16" if key == "gateway.port" => {
            "a port number from 1 to 65535 (0: any free port)".to_owned()
        }
        "u8" => format!("a whole number from 0 to {}", u8::MAX),
        "u16" => format!("a whole number from 0 to {}", u16::MAX),
        "u32" => format!("a whole number from 0 to {}", u32::MAX),
        "u64" | "u128" | "usize" => "a whole number (0 or more)".to_owned(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number".to_owned(),
        "f32" | "f64" => "a number".to_owned(),
        "a boolean" => "true or false".to_owned(),
        "a string" | "a borrowed string" | "a character" => "a string".to_owned(),
        "path string" => "a path (a string)".to_owned(),
        "a sequence" => "a list ([...])".to_owned(),
        "a map" => "an object ({...})".to_owned(),
        "map with a single key" => "an object with a single key".to_owned(),
        // An enum read from anything but a string: serde does not say which names it takes,
        // so ask again with a name no variant has, and serde lists them.
        "string or map" => {
            let pointer: String = segments
                .iter()
                .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
                .collect();
            let mut probe = value.clone();
            let again = match probe.pointer_mut(&pointer) {
                Some(slot) => {
                    *slot = Value::String(String::new());
                    serde_path_to_error::deserialize::<_, Config>(&probe).err()
                }
                None => None,
            };
            let allowed = again.and_then(|again| {
                let names = quoted_names(
                    again
                        .inner()
                        .to_string()
                        .strip_prefix("unknown variant ``")?,
                );
                (!names.is_empty()).then(|| names.join(", "))
            });
            match allowed {
                Some(names) => format!("one of: {names}"),
                None => "a name (a string)".to_owned(),
            }
        }
        other if other.starts_with("struct ") => "an object ({...})".to_owned(),
        other => other.to_owned(),
    };
    ConfigError::InvalidValue {
        path,
        key,
        message: format!("must be {takes}"),
    }
}

fn validate(path: &Path, config: &Config) -> Result<(), ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::InvalidValue {
        path: path.to_path_buf(),
        key: key.to_owned(),
        message,
    };
    let defaults = &config.agents.defaults;
    if !(0.0..=2.0).contains(&defaults.temperature) {
        return Err(invalid(
            "agents.defaults.temperature",
            format!("{} is out of range; allowed: 0 to 2", defaults.temperature),
        ));
    }
    for (key, value, min) in [
        ("agents.defaults.maxTokens", defaults.max_tokens, 1),
        (
            "agents.defaults.maxToolIterations",
            defaults.max_tool_iterations,
            1,
        ),
        (
            "agents.defaults.contextWindowTokens",
            defaults.context_window_tokens,
            1024,
        ),
    ] {
        if value < min {
            return Err(invalid(
                key,
                format!("{value} is too small; allowed: at least {min}"),
            ));
        }
    }
    // A bare name (`claude-sonnet-4-5`) is allowed: the provider registry recognises the
    // usual model families, as nanobot does.
    let entry_models = config.agents.entries.iter().flat_map(|(id, entry)| {
        let model = entry
            .model
            .iter()
            .map(move |m| (format!("agents.entries.{id}.model"), m));
        let fallbacks = entry.fallback_models.iter().flat_map(move |models| {
            models
                .iter()
                .enumerate()
                .map(move |(i, m)| (format!("agents.entries.{id}.fallbackModels.{i}"), m))
        });
        model.chain(fallbacks)
    });
    let models = std::iter::once(("agents.defaults.model".to_owned(), &defaults.model))
        .chain(
            defaults
                .fallback_models
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("agents.defaults.fallbackModels.{i}"), m)),
        )
        .chain(entry_models);
    for (key, model) in models {
        let well_formed = match model.split_once('/') {
            Some((provider, name)) => !provider.is_empty() && !name.is_empty(),
            None => !model.is_empty(),
        } && !model.contains(char::is_whitespace);
        if !well_formed {
            return Err(invalid(
                &key,
                format!(
                    "{model:?} is not a model name; use provider/model (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, custom/qwen3)"
                ),
            ));
        }
    }
    if config.memory.max_results == 0 {
        return Err(invalid(
            "memory.maxResults",
            "0 is too small; allowed: at least 1".to_owned(),
        ));
    }
    if let Some(lambda) = config.memory.mmr_lambda
        && !(0.0..=1.0).contains(&lambda)
    {
        return Err(invalid(
            "memory.mmrLambda",
            format!("{lambda} is out of range; allowed: 0 to 1"),
        ));
    }
    if let Some(days) = config.memory.recency_half_life_days
        && !(days.is_finite() && days > 0.0)
    {
        return Err(invalid(
            "memory.recencyHalfLifeDays",
            format!("{days} is not a number of days; allowed: more than 0"),
        ));
    }
    if (1..4).contains(&config.memory.consolidate_after) {
        return Err(invalid(
            "memory.consolidateAfter",
            format!(
                "{} is too small; allowed: 0 (off) or at least 4 messages",
                config.memory.consolidate_after
            ),
        ));
    }
    if !(0.0..1.0).contains(&config.memory.min_score) {
        return Err(invalid(
            "memory.minScore",
            format!(
                "{} is out of range; allowed: 0 up to (not including) 1",
                config.memory.min_score
            ),
        ));
    }
    if config.tools.exec.timeout == 0 {
        return Err(invalid(
            "tools.exec.timeout",
            "0 is too small; allowed: at least 1 (seconds)".to_owned(),
        ));
    }
    let subagents = &defaults.subagents;
    if subagents.max_iterations == 0 {
        return Err(invalid(
            "agents.defaults.subagents.maxIterations",
            "0 is too small; allowed: at least 1 (model calls)".to_owned(),
        ));
    }
    if subagents.timeout == 0 {
        return Err(invalid(
            "agents.defaults.subagents.timeout",
            "0 is too small; allowed: at least 1 (seconds)".to_owned(),
        ));
    }
    for (id, _) in config.agents.as_tools() {
        // `agent_<id>` must fit the 64 characters providers take for a tool name.
        if id.len() > 58 {
            return Err(invalid(
                &format!("agents.entries.{id}.asTool"),
                "the agent's id is too long for a tool name (agent_<id>): at most 58 characters"
                    .to_owned(),
            ));
        }
    }
    let heartbeats = std::iter::once(("agents.defaults.heartbeat".to_owned(), &defaults.heartbeat))
        .chain(config.agents.entries.iter().filter_map(|(id, entry)| {
            let heartbeat = entry.heartbeat.as_ref()?;
            Some((format!("agents.entries.{id}.heartbeat"), heartbeat))
        }));
    for (key, heartbeat) in heartbeats {
        heartbeat
            .plan()
            .map_err(|(field, message)| invalid(&format!("{key}.{field}"), message))?;
    }
    validate_routing(config).map_err(|(key, message)| invalid(&key, message))?;
    validate_mcp_servers(config).map_err(|(key, message)| invalid(&key, message))?;
    crate::hooks::validate(&config.hooks)
        .map_err(|(key, message)| invalid(&format!("hooks.{key}"), message))?;
    let tools = std::iter::once(("tools".to_owned(), &config.tools)).chain(
        config.agents.entries.iter().filter_map(|(id, entry)| {
            Some((format!("agents.entries.{id}.tools"), entry.tools.as_ref()?))
        }),
    );
    for (prefix, tools) in tools {
        tools
            .web
            .check()
            .map_err(|(key, message)| invalid(&format!("{prefix}.web.{key}"), message))?;
    }
    config
        .models
        .check()
        .map_err(|(key, message)| invalid(&key, message))?;
    for (name, provider) in &config.providers {
        if let Some(base) = &provider.api_base
            && !(base.starts_with("http://") || base.starts_with("https://"))
        {
            return Err(invalid(
                &format!("providers.{name}.apiBase"),
                "must be an http:// or https:// URL".to_owned(),
            ));
        }
        for (model, settings) in &provider.models {
            let Some(price) = &settings.price else {
                continue;
            };
            for (field, value) in [
                ("input", Some(price.input)),
                ("output", Some(price.output)),
                ("cacheRead", price.cache_read),
                ("cacheWrite", price.cache_write),
            ] {
                if let Some(value) = value
                    && !(value.is_finite() && value >= 0.0)
                {
                    return Err(invalid(
                        &format!("providers.{name}.models.{model}.price.{field}"),
                        format!(
                            "{value} is not a price; allowed: 0 or more (US$ per million tokens)"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The MCP servers of every agent; an error is the key and why.
fn validate_mcp_servers(config: &Config) -> Result<(), (String, String)> {
    if let Some(name) = config
        .mcp_servers
        .keys()
        .find(|name| config.tools.mcp_servers.contains_key(*name))
    {
        return Err((
            format!("mcpServers.{name}"),
            format!("the server `{name}` is also in tools.mcpServers; keep one of the two entries"),
        ));
    }
    let tools = std::iter::once(("tools".to_owned(), &config.tools)).chain(
        config.agents.entries.iter().filter_map(|(id, entry)| {
            Some((format!("agents.entries.{id}.tools"), entry.tools.as_ref()?))
        }),
    );
    let servers = tools
        .flat_map(|(prefix, tools)| {
            tools
                .mcp_servers
                .iter()
                .map(move |(name, server)| (format!("{prefix}.mcpServers.{name}"), name, server))
        })
        .chain(
            config
                .mcp_servers
                .iter()
                .map(|(name, server)| (format!("mcpServers.{name}"), name, server)),
        );
    // Its tools are offered as `<server>__<tool>`, in `[A-Za-z0-9_-]`: two names that read
    // the same there, or a name whose `_` could run into the separator (`a_` with tool `_x`,
    // `a__b` with tool `c`), would offer one server's tool in place of another's.
    let mut offered_as: std::collections::BTreeMap<String, &String> =
        std::collections::BTreeMap::new();
    for (key, name, server) in servers {
        if name.trim().is_empty() || name.contains(':') {
            return Err((
                key,
                "a server's name is not empty and has no `:` (its tools' capabilities are \
                 `mcp:<server>:<tool>`)"
                    .to_owned(),
            ));
        }
        let plain: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if plain.contains("__") || plain.ends_with('_') {
            return Err((
                key,
                format!(
                    "a server's name may not end in `_` nor hold `__` (its tools are offered as \
                     `{plain}__<tool>`, and another name could read the same); rename it"
                ),
            ));
        }
        match offered_as.insert(plain.clone(), name) {
            Some(other) if other != name => {
                return Err((
                    key,
                    format!(
                        "the servers `{other}` and `{name}` would both offer their tools as \
                         `{plain}__<tool>`; rename one"
                    ),
                ));
            }
            Some(_) | None => {}
        }
        // A `${VAR}` left unset takes its key out; the server then fails when it is started,
        // saying which variable, rather than every command here.
        let unset = |field: &str| {
            config
                .unresolved
                .iter()
                .any(|u| u.key == format!("{key}.{field}"))
        };
        match (server.transport, &server.command, &server.url) {
            (Some(McpTransport::Sse), _, _) => {
                return Err((
                    format!("{key}.type"),
                    "the legacy SSE transport is not supported; use the server's Streamable \
                     HTTP endpoint (often the same address ending in /mcp rather than /sse) \
                     with \"type\": \"http\""
                        .to_owned(),
                ));
            }
            (_, Some(_), Some(_)) => {
                return Err((
                    key,
                    "has both `command` and `url`: give `command` (and `args`) for a program \
                     nanocrab starts, or `url` for a Streamable HTTP server"
                        .to_owned(),
                ));
            }
            (_, None, None) if !unset("command") && !unset("url") => {
                return Err((
                    key,
                    "needs `command` (a program nanocrab starts, with `args`) or `url` (a \
                     Streamable HTTP endpoint)"
                        .to_owned(),
                ));
            }
            (Some(McpTransport::Stdio), None, Some(_)) => {
                return Err((
                    format!("{key}.type"),
                    "is `stdio`, which needs `command`, not `url`; use \"type\": \"http\" \
                     for a URL"
                        .to_owned(),
                ));
            }
            (Some(McpTransport::Http), Some(_), None) => {
                return Err((
                    format!("{key}.type"),
                    "is `http`, which needs `url`, not `command`; use \"type\": \"stdio\" \
                     for a program"
                        .to_owned(),
                ));
            }
            (_, None, Some(url))
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                return Err((
                    format!("{key}.url"),
                    "must be an http:// or https:// URL".to_owned(),
                ));
            }
            (None | Some(McpTransport::Stdio | McpTransport::Http), _, _) => {}
        }
        for (field, value) in [
            ("toolTimeout", server.tool_timeout),
            ("startupTimeout", server.startup_timeout),
        ] {
            if value == 0 {
                return Err((
                    format!("{key}.{field}"),
                    "0 is too small; allowed: at least 1 (seconds)".to_owned(),
                ));
            }
        }
    }
    Ok(())
}

/// Agents, bindings, identity links and the gateway's limits; an error is the key and why.
fn validate_routing(config: &Config) -> Result<(), (String, String)> {
    for (id, entry) in &config.agents.entries {
        let key = format!("agents.entries.{id}");
        if id == DEFAULT_AGENT_ID || id == "nanocrab" {
            return Err((
                key,
                format!("`{id}` names the default agent (agents.defaults); pick another id"),
            ));
        }
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return Err((
                key,
                "an agent id is letters, digits, `_` and `-`".to_owned(),
            ));
        }
        if let Some(t) = entry.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err((
                format!("{key}.temperature"),
                format!("{t} is out of range; allowed: 0 to 2"),
            ));
        }
    }
    for (i, binding) in config.bindings.iter().enumerate() {
        if binding.agent_id != DEFAULT_AGENT_ID
            && !config.agents.entries.contains_key(&binding.agent_id)
        {
            let known: Vec<&str> = std::iter::once(DEFAULT_AGENT_ID)
                .chain(config.agents.entries.keys().map(String::as_str))
                .collect();
            return Err((
                format!("bindings.{i}.agentId"),
                format!(
                    "no agent `{}`; known: {}",
                    binding.agent_id,
                    known.join(", ")
                ),
            ));
        }
        if binding.matches.channel.is_empty() {
            return Err((
                format!("bindings.{i}.match.channel"),
                "names the channel the binding applies to (e.g. telegram)".to_owned(),
            ));
        }
    }
    for (person, identities) in &config.session.identity_links {
        for (i, identity) in identities.iter().enumerate() {
            if !matches!(identity.split_once(':'), Some((channel, id)) if !channel.is_empty() && !id.is_empty())
            {
                return Err((
                    format!("session.identityLinks.{person}.{i}"),
                    format!("{identity:?} is not `channel:id` (e.g. telegram:123456789)"),
                ));
            }
        }
    }
    for (key, value) in [
        (
            "gateway.maxConcurrentTurns",
            config.gateway.max_concurrent_turns,
        ),
        ("gateway.queue.cap", config.gateway.queue.cap),
    ] {
        if value == 0 {
            return Err((
                key.to_owned(),
                "0 is too small; allowed: at least 1".to_owned(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeferLimits;
    use pretty_assertions::assert_eq;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn error(text: &str) -> String {
        match parse(Path::new("/h/config.json"), text, &no_env) {
            Ok(config) => panic!("accepted: {config:?}"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn unknown_keys_name_the_file_the_path_and_a_suggestion() {
        assert_eq!(
            error(r#"{"tools": {"exec": {"modee": "full"}}}"#),
            "/h/config.json: unknown key `tools.exec.modee`: did you mean `mode`?"
        );
        assert_eq!(
            error(r#"{"agents": {"defaults": {"zzz": 1}}}"#),
            "/h/config.json: unknown key `agents.defaults.zzz` (valid keys here: workspace, model, maxTokens, temperature, maxToolIterations, contextWindowTokens, fallbackModels, housekeepingModel, heartbeat, subagents)"
        );
        assert_eq!(
            error(r#"{"providers": {"openai": {"apikey": "sk-secret"}}}"#),
            "/h/config.json: unknown key `providers.openai.apikey`: did you mean `apiKey`?"
        );
    }

    #[test]
    fn defer_above_takes_limits_true_or_false_and_names_the_key_when_wrong() {
        let limits = |text: &str| {
            parse(Path::new("/h/config.json"), text, &no_env)
                .unwrap()
                .tools
                .defer_above
                .limits()
        };
        let defaults = Some(DeferLimits {
            tools: 30,
            schema_chars: 12_000,
        });
        assert_eq!(limits("{}"), defaults);
        assert_eq!(limits(r#"{"tools": {"deferAbove": true}}"#), defaults);
        assert_eq!(limits(r#"{"tools": {"deferAbove": false}}"#), None);
        assert_eq!(
            limits(r#"{"tools": {"deferAbove": {"tools": 10}}}"#),
            Some(DeferLimits {
                tools: 10,
                schema_chars: 12_000
            })
        );
        assert_eq!(
            [
                r#"{"tools": {"deferAbove": 30}}"#,
                r#"{"tools": {"deferAbove": {"tool": 30}}}"#,
            ]
            .map(error),
            [
                "/h/config.json: `tools.deferAbove`: must be false, true or { \"tools\": 30, \"schemaChars\": 12000 }",
                "/h/config.json: `tools.deferAbove`: must be false, true or { \"tools\": 30, \"schemaChars\": 12000 } (unknown field `tool`, expected `tools` or `schemaChars`)",
            ]
        );
    }

    #[test]
    fn bad_values_name_the_key_and_what_is_allowed() {
        assert_eq!(
            [
                r#"{"agents": {"defaults": {"subagents": {"timeout": 0}}}}"#,
                r#"{"agents": {"defaults": {"subagents": {"maxIterations": 0}}}}"#,
                r#"{"agents": {"entries": {"research": {"asTool": "yes"}}}}"#,
                r#"{"agents": {"entries": {"research": {"asTool": {"about": "x"}}}}}"#,
            ]
            .map(error),
            [
                "/h/config.json: `agents.defaults.subagents.timeout`: 0 is too small; allowed: at least 1 (seconds)",
                "/h/config.json: `agents.defaults.subagents.maxIterations`: 0 is too small; allowed: at least 1 (model calls)",
                "/h/config.json: `agents.entries.research.asTool`: must be true, false or { \"description\": \"what the agent is good for\" }",
                "/h/config.json: `agents.entries.research.asTool`: must be true, false or { \"description\": \"what the agent is good for\" }",
            ]
        );
        assert_eq!(
            error(r#"{"tools": {"exec": {"mode": "everything"}}}"#),
            "/h/config.json: `tools.exec.mode`: unknown value; allowed: deny, allowlist, full"
        );
        assert_eq!(
            error(r#"{"agents": {"defaults": {"temperature": 3}}}"#),
            "/h/config.json: `agents.defaults.temperature`: 3 is out of range; allowed: 0 to 2"
        );
        assert_eq!(
            error(r#"{"agents": {"defaults": {"model": "openai/"}}}"#),
            "/h/config.json: `agents.defaults.model`: \"openai/\" is not a model name; use provider/model (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, custom/qwen3)"
        );
        assert_eq!(
            error(r#"{"agents": {"defaults": {"fallbackModels": ["openai/gpt-4.1", "gpt 4"]}}}"#),
            "/h/config.json: `agents.defaults.fallbackModels.1`: \"gpt 4\" is not a model name; use provider/model (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, custom/qwen3)"
        );
        assert_eq!(
            error(
                r#"{"providers": {"openai": {"models": {"gpt-4.1": {"price": {"input": -1, "output": 8}}}}}}"#
            ),
            "/h/config.json: `providers.openai.models.gpt-4.1.price.input`: -1 is not a price; allowed: 0 or more (US$ per million tokens)"
        );
        assert_eq!(
            error(r#"{"providers": {"openai": {"api": "openai-chat"}}}"#),
            "/h/config.json: `providers.openai.api`: unknown value; allowed: anthropic-messages, openai-completions, openai-responses, google-generative-ai"
        );
        assert_eq!(
            error(r#"{"providers": {"custom": {"apiBase": "localhost:11434"}}}"#),
            "/h/config.json: `providers.custom.apiBase`: must be an http:// or https:// URL"
        );
        assert_eq!(
            error("{\"version\": 1,\n  \"agents\": }"),
            "/h/config.json:2:13: not valid JSON: expected value at line 2 column 13"
        );
        assert_eq!(
            error(r#"{"version": 9}"#),
            "/h/config.json: config version 9 is newer than this nanocrab understands (up to 1): upgrade nanocrab"
        );
    }

    #[test]
    fn wrong_types_say_what_the_key_takes_in_words() {
        let errors: Vec<String> = [
            r#"{"gateway": {"port": "eighty"}}"#,
            r#"{"gateway": {"port": 70000}}"#,
            r#"{"agents": {"defaults": {"maxTokens": -5}}}"#,
            r#"{"channels": {"telegram": {"pollTimeout": 1.5}}}"#,
            r#"{"tools": {"exec": {"timeout": "60s"}}}"#,
            r#"{"models": {"entries": {"m": {"kind": "chat", "contextTokens": -1, "files": [], "sources": []}}}}"#,
            r#"{"agents": {"defaults": {"temperature": "hot"}}}"#,
            r#"{"tools": {"restrictToWorkspace": "yes"}}"#,
            r#"{"tools": {"exec": {"safeBins": "ls"}}}"#,
            r#"{"tools": {"exec": {"safeBins": ["ls", 1]}}}"#,
            r#"{"tools": {"allowedPaths": [null]}}"#,
            r#"{"agents": {"defaults": {"workspace": 5}}}"#,
            r#"{"providers": {"openai": {"extraHeaders": ["x-a: b"]}}}"#,
            r#"{"providers": {"openai": "sk-abc"}}"#,
            r#"{"providers": []}"#,
            r#"{"tools": {"exec": {"mode": 1}}}"#,
            r#"{"memory": {"fusion": true}}"#,
            r#"{"channels": {"telegram": {"dmPolicy": ["open"]}}}"#,
            r#"{"providers": {"openai": {"api": 2}}}"#,
            r#"{"memory": {"fusion": "sum"}}"#,
            r#"{"models": {"entries": {"m": {"files": [], "sources": []}}}}"#,
            r#"{"models": {"entries": {"m": {"kind": "chat", "files": [], "sources": ["wheel"]}}}}"#,
            r#"[1, 2]"#,
            r#"{"agents": {"defaults": {"maxTokens": "sk-1, expected a secret"}}}"#,
            r#"{"tools": {"exec": {"mode": "sk-2`, expected `full"}}}"#,
        ]
        .iter()
        .map(|text| error(text))
        .collect();
        assert_eq!(
            errors,
            [
                "/h/config.json: `gateway.port`: must be a port number from 1 to 65535 (0: any free port)",
                "/h/config.json: `gateway.port`: must be a port number from 1 to 65535 (0: any free port)",
                "/h/config.json: `agents.defaults.maxTokens`: must be a whole number from 0 to 4294967295",
                "/h/config.json: `channels.telegram.pollTimeout`: must be a whole number from 0 to 4294967295",
                "/h/config.json: `tools.exec.timeout`: must be a whole number (0 or more)",
                "/h/config.json: `models.entries.m.contextTokens`: must be a whole number (0 or more)",
                "/h/config.json: `agents.defaults.temperature`: must be a number",
                "/h/config.json: `tools.restrictToWorkspace`: must be true or false",
                "/h/config.json: `tools.exec.safeBins`: must be a list ([...])",
                "/h/config.json: `tools.exec.safeBins.1`: must be a string",
                "/h/config.json: `tools.allowedPaths.0`: must be a path (a string)",
                "/h/config.json: `agents.defaults.workspace`: must be a path (a string)",
                "/h/config.json: `providers.openai.extraHeaders`: must be an object ({...})",
                "/h/config.json: `providers.openai`: must be an object ({...})",
                "/h/config.json: `providers`: must be an object ({...})",
                "/h/config.json: `tools.exec.mode`: must be one of: deny, allowlist, full",
                "/h/config.json: `memory.fusion`: must be one of: rrf, weighted",
                "/h/config.json: `channels.telegram.dmPolicy`: must be one of: pairing, allowlist, open, disabled",
                "/h/config.json: `providers.openai.api`: must be one of: anthropic-messages, openai-completions, openai-responses, google-generative-ai",
                "/h/config.json: `memory.fusion`: unknown value; allowed: rrf, weighted",
                "/h/config.json: `models.entries.m.kind`: required, but missing",
                "/h/config.json: `models.entries.m.sources.0.wheel`: must be an object ({...})",
                "/h/config.json: `(top level)`: the config must be a JSON object",
                "/h/config.json: `agents.defaults.maxTokens`: must be a whole number from 0 to 4294967295",
                "/h/config.json: `tools.exec.mode`: unknown value; allowed: deny, allowlist, full",
            ]
        );
    }

    #[test]
    fn null_reads_as_if_the_key_were_absent() {
        let parsed = |text: &str| parse(Path::new("/h/config.json"), text, &no_env).unwrap();
        assert_eq!(
            parsed(
                r#"{"version": null, "agents": {"defaults": {"model": "openai/gpt-4.1", "workspace": null}},
                    "providers": {"openai": {"apiKey": "k", "apiBase": null, "extraHeaders": null, "api": null,
                                             "models": {"gpt-4.1": {"price": null}}},
                                  "gemini": null},
                    "tools": {"exec": {"safeBins": null, "sandbox": null}},
                    "channels": {"telegram": {"token": "t", "proxy": null, "groups": {"-1": {"requireMention": null}}}},
                    "gateway": null, "memory": {"mmrLambda": null}}"#
            ),
            parsed(
                r#"{"agents": {"defaults": {"model": "openai/gpt-4.1"}},
                    "providers": {"openai": {"apiKey": "k", "models": {"gpt-4.1": {}}}},
                    "tools": {"exec": {}},
                    "channels": {"telegram": {"token": "t", "groups": {"-1": {}}}},
                    "memory": {}}"#
            )
        );
    }

    #[test]
    fn agents_bindings_and_channels_are_checked_by_key() {
        let errors: Vec<String> = [
            r#"{"agents": {"entries": {"main": {}}}}"#,
            r#"{"agents": {"entries": {"work bot": {}}}}"#,
            r#"{"agents": {"entries": {"work": {"model": "openai/"}}}}"#,
            r#"{"agents": {"entries": {"work": {}}}, "bindings": [{"agentId": "wrok", "match": {"channel": "telegram"}}]}"#,
            r#"{"bindings": [{"agentId": "main", "match": {"channel": ""}}]}"#,
            r#"{"session": {"identityLinks": {"alice": ["telegram:1", "222"]}}}"#,
            r#"{"session": {"dmScope": "per-chat"}}"#,
            r#"{"gateway": {"queue": {"cap": 0}}}"#,
            r#"{"channels": {"telegram": {"dmPolicy": "everyone"}}}"#,
            r#"{"channels": {"telegram": {"requireMentoin": false}}}"#,
        ]
        .iter()
        .map(|text| error(text))
        .collect();
        assert_eq!(
            errors,
            [
                "/h/config.json: `agents.entries.main`: `main` names the default agent (agents.defaults); pick another id",
                "/h/config.json: `agents.entries.work bot`: an agent id is letters, digits, `_` and `-`",
                "/h/config.json: `agents.entries.work.model`: \"openai/\" is not a model name; use provider/model (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, custom/qwen3)",
                "/h/config.json: `bindings.0.agentId`: no agent `wrok`; known: main, work",
                "/h/config.json: `bindings.0.match.channel`: names the channel the binding applies to (e.g. telegram)",
                "/h/config.json: `session.identityLinks.alice.1`: \"222\" is not `channel:id` (e.g. telegram:123456789)",
                "/h/config.json: `session.dmScope`: unknown value; allowed: main, per-peer, per-channel-peer",
                "/h/config.json: `gateway.queue.cap`: 0 is too small; allowed: at least 1",
                "/h/config.json: `channels.telegram.dmPolicy`: unknown value; allowed: pairing, allowlist, open, disabled",
                "/h/config.json: unknown key `channels.telegram.requireMentoin`: did you mean `requireMention`?",
            ]
        );
    }

    #[test]
    fn a_claude_desktop_mcp_servers_block_loads_at_the_top_level_and_under_tools() {
        let block = r#"{
            "filesystem": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
            },
            "github": {
                "command": "docker",
                "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_TOKEN>"}
            }
        }"#;
        let top = parse(
            Path::new("/h/config.json"),
            &format!(r#"{{"mcpServers": {block}}}"#),
            &no_env,
        )
        .unwrap();
        let under_tools = parse(
            Path::new("/h/config.json"),
            &format!(r#"{{"tools": {{"mcpServers": {block}}}}}"#),
            &no_env,
        )
        .unwrap();
        assert_eq!(top.mcp_servers, under_tools.tools.mcp_servers);
        let github = &top.mcp_servers["github"];
        assert_eq!(
            github,
            &crate::McpServerConfig {
                transport: None,
                command: Some("docker".to_owned()),
                args: [
                    "run",
                    "-i",
                    "--rm",
                    "-e",
                    "GITHUB_PERSONAL_ACCESS_TOKEN",
                    "ghcr.io/github/github-mcp-server"
                ]
                .map(str::to_owned)
                .to_vec(),
                env: [(
                    "GITHUB_PERSONAL_ACCESS_TOKEN".to_owned(),
                    "<YOUR_TOKEN>".to_owned()
                )]
                .into(),
                cwd: None,
                url: None,
                headers: std::collections::BTreeMap::new(),
                tool_timeout: 60,
                startup_timeout: 10,
                enabled_tools: None,
                disabled: false,
            }
        );
        let keys = |config: &Config| {
            config
                .mcp_servers_of("main")
                .into_iter()
                .map(|(key, name, _)| (key, name.to_owned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&top),
            [
                ("mcpServers.filesystem".to_owned(), "filesystem".to_owned()),
                ("mcpServers.github".to_owned(), "github".to_owned())
            ]
        );
        assert_eq!(
            keys(&under_tools),
            [
                (
                    "tools.mcpServers.filesystem".to_owned(),
                    "filesystem".to_owned()
                ),
                ("tools.mcpServers.github".to_owned(), "github".to_owned())
            ]
        );
    }

    #[test]
    fn mcp_servers_take_nanobot_spellings_http_headers_and_placeholders() {
        let env = |name: &str| (name == "TOKEN").then(|| "tok-123456789".to_owned());
        let config = parse(
            Path::new("/h/config.json"),
            r#"{"tools": {"mcpServers": {
                "remote": {"url": "https://mcp.example.com/mcp", "type": "streamable-http",
                           "headers": {"Authorization": "Bearer ${TOKEN}"},
                           "tool_timeout": 30, "enabled_tools": ["search"]},
                "local": {"command": "uvx", "args": ["mcp-server-time"], "type": "stdio",
                          "toolTimeout": 5, "enabledTools": ["*"], "disabled": true},
                "later": {"url": "${UNSET_URL}"}
            }},
            "agents": {"entries": {"work": {"tools": {"mcpServers": {"own": {"url": "http://127.0.0.1:1/mcp", "type": "streamableHttp"}}}}}}}"#,
            &env,
        )
        .unwrap();
        let servers = &config.tools.mcp_servers;
        let remote = &servers["remote"];
        assert_eq!(remote.transport, Some(McpTransport::Http));
        assert_eq!(
            remote.headers["Authorization"], "Bearer tok-123456789",
            "placeholders are filled in"
        );
        assert_eq!(remote.tool_timeout, 30);
        assert!(remote.offers("search") && !remote.offers("delete"));
        let local = &servers["local"];
        assert_eq!((local.tool_timeout, local.disabled), (5, true));
        assert!(local.offers("anything"));
        assert_eq!(servers["later"].url, None);
        assert_eq!(
            config
                .require("tools.mcpServers.later")
                .unwrap_err()
                .to_string(),
            "/h/config.json: `tools.mcpServers.later.url` uses ${UNSET_URL} but the environment variable UNSET_URL is not set"
        );
        assert_eq!(
            config
                .mcp_servers_of("work")
                .into_iter()
                .map(|(key, _, server)| (key, server.transport))
                .collect::<Vec<_>>(),
            [(
                "agents.entries.work.tools.mcpServers.own".to_owned(),
                Some(McpTransport::Http)
            )]
        );
    }

    #[test]
    fn mcp_server_mistakes_name_the_file_and_key() {
        let errors: Vec<String> = [
            r#"{"mcpServers": {"x": {"command": "a", "url": "http://h/mcp"}}}"#,
            r#"{"mcpServers": {"x": {"url": "http://h/sse", "type": "sse"}}}"#,
            r#"{"mcpServers": {"x": {"command": "a", "autoApprove": []}}}"#,
            r#"{"mcpServers": {"x": {}}}"#,
            r#"{"tools": {"mcpServers": {"x": {"url": "h/mcp"}}}}"#,
            r#"{"tools": {"mcpServers": {"x": {"url": "http://h/mcp", "type": "stdio"}}}}"#,
            r#"{"tools": {"mcpServers": {"x": {"command": "a", "toolTimeout": 0}}}}"#,
            r#"{"tools": {"mcpServers": {"x": {"command": "a", "type": "websocket"}}}}"#,
            r#"{"tools": {"mcpServers": {"a:b": {"command": "a"}}}}"#,
            r#"{"mcpServers": {"x": {"command": "a"}}, "tools": {"mcpServers": {"x": {"command": "b"}}}}"#,
            r#"{"agents": {"entries": {"w": {"tools": {"mcpServers": {"x": {"command": "a", "url": "http://h"}}}}}}}"#,
            r#"{"mcpServers": {"my.fs": {"command": "a"}, "my_fs": {"command": "b"}}}"#,
            r#"{"mcpServers": {"a_": {"command": "a"}}}"#,
            r#"{"mcpServers": {"a__b": {"command": "a"}}}"#,
        ]
        .iter()
        .map(|text| error(text))
        .collect();
        assert_eq!(
            errors,
            [
                "/h/config.json: `mcpServers.x`: has both `command` and `url`: give `command` (and `args`) for a program nanocrab starts, or `url` for a Streamable HTTP server",
                "/h/config.json: `mcpServers.x.type`: the legacy SSE transport is not supported; use the server's Streamable HTTP endpoint (often the same address ending in /mcp rather than /sse) with \"type\": \"http\"",
                "/h/config.json: unknown key `mcpServers.x.autoApprove` (valid keys here: type, command, args, env, cwd, url, headers, toolTimeout, tool_timeout, startupTimeout, startup_timeout, enabledTools, enabled_tools, disabled)",
                "/h/config.json: `mcpServers.x`: needs `command` (a program nanocrab starts, with `args`) or `url` (a Streamable HTTP endpoint)",
                "/h/config.json: `tools.mcpServers.x.url`: must be an http:// or https:// URL",
                "/h/config.json: `tools.mcpServers.x.type`: is `stdio`, which needs `command`, not `url`; use \"type\": \"http\" for a URL",
                "/h/config.json: `tools.mcpServers.x.toolTimeout`: 0 is too small; allowed: at least 1 (seconds)",
                "/h/config.json: `tools.mcpServers.x.type`: unknown value; allowed: stdio, http, streamable-http, streamableHttp, sse",
                "/h/config.json: `tools.mcpServers.a:b`: a server's name is not empty and has no `:` (its tools' capabilities are `mcp:<server>:<tool>`)",
                "/h/config.json: `mcpServers.x`: the server `x` is also in tools.mcpServers; keep one of the two entries",
                "/h/config.json: `agents.entries.w.tools.mcpServers.x`: has both `command` and `url`: give `command` (and `args`) for a program nanocrab starts, or `url` for a Streamable HTTP server",
                "/h/config.json: `mcpServers.my_fs`: the servers `my.fs` and `my_fs` would both offer their tools as `my_fs__<tool>`; rename one",
                "/h/config.json: `mcpServers.a_`: a server's name may not end in `_` nor hold `__` (its tools are offered as `a___<tool>`, and another name could read the same); rename it",
                "/h/config.json: `mcpServers.a__b`: a server's name may not end in `_` nor hold `__` (its tools are offered as `a__b__<tool>`, and another name could read the same); rename it",
            ]
        );
    }

    #[test]
    fn a_nanobot_channels_section_loads() {
        let text = r#"{"channels": {
            "telegram": {"enabled": true, "token": "123:abc", "allowFrom": ["42"], "proxy": null},
            "discord": {"enabled": false, "token": "", "allowFrom": []},
            "feishu": {"enabled": false, "appId": ""}
        }}"#;
        let config = parse(Path::new("/h/config.json"), text, &no_env).unwrap();
        let telegram = config.channels.telegram.unwrap();
        assert_eq!(
            (
                telegram.token.as_str(),
                telegram.allow_from,
                telegram.dm_policy
            ),
            ("123:abc", vec!["42".to_owned()], crate::DmPolicy::Pairing)
        );
        assert!(
            config
                .channels
                .discord
                .is_some_and(|discord| !discord.enabled)
        );
        assert_eq!(config.channels.other.keys().collect::<Vec<_>>(), ["feishu"]);
    }

    #[test]
    fn secrets_never_appear_in_errors() {
        let message = error(r#"{"providers": {"openai": {"apiKey": 12345678}}}"#);
        assert!(!message.contains("12345678"), "{message}");
        assert!(message.contains("providers.openai.apiKey"), "{message}");
    }

    #[test]
    fn placeholders_resolve_in_memory_and_name_missing_variables() {
        let env = |name: &str| (name == "KEY").then(|| "sk-live".to_owned());
        let config = parse(
            Path::new("c.json"),
            r#"{"providers": {"openai": {"apiKey": "${KEY}", "apiBase": "http://h/$${x}/v1"}}}"#,
            &env,
        )
        .unwrap();
        let openai = &config.providers["openai"];
        assert_eq!(openai.api_key.as_deref(), Some("sk-live"));
        assert_eq!(openai.api_base.as_deref(), Some("http://h/${x}/v1"));
    }

    #[test]
    fn an_unset_variable_leaves_its_key_out_until_a_command_needs_it() {
        let config = parse(
            Path::new("/h/config.json"),
            r#"{"providers": {"openai": {"apiKey": "${NOPE}", "apiBase": "http://h/v1"}},
                "channels": {"telegram": {"token": "${TG}", "allowFrom": ["1", "${WHO}", "3"]}}}"#,
            &no_env,
        )
        .unwrap();
        let openai = &config.providers["openai"];
        assert_eq!(openai.api_key, None);
        assert_eq!(openai.api_base.as_deref(), Some("http://h/v1"));
        let telegram = config.channels.telegram.as_ref().unwrap();
        assert_eq!(telegram.token, "");
        assert_eq!(telegram.allow_from, ["1", "3"]);
        assert_eq!(
            config
                .unresolved
                .iter()
                .map(|u| (u.key.as_str(), u.var.as_str()))
                .collect::<Vec<_>>(),
            [
                ("providers.openai.apiKey", "NOPE"),
                ("channels.telegram.token", "TG"),
                ("channels.telegram.allowFrom.1", "WHO"),
            ]
        );
        assert!(config.require("providers.anthropic").is_ok());
        assert!(config.require("providers.open").is_ok());
        assert!(config.require("gateway").is_ok());
        assert_eq!(
            config.require("providers.openai").unwrap_err().to_string(),
            "/h/config.json: `providers.openai.apiKey` uses ${NOPE} but the environment variable NOPE is not set"
        );
        assert_eq!(
            config.require("channels").unwrap_err().to_string(),
            "/h/config.json: `channels.telegram.token` uses ${TG} but the environment variable TG is not set"
        );
    }

    #[test]
    fn a_nanobot_file_without_version_is_migrated() {
        let config = parse(
            Path::new("c.json"),
            r#"{"agents": {"defaults": {"model": "openrouter/anthropic/claude-sonnet-4-5", "maxToolIterations": 20}},
                "tools": {"restrictToWorkspace": false, "exec": {"timeout": 30}}}"#,
            &no_env,
        )
        .unwrap();
        assert_eq!(config.version, 1);
        assert_eq!(config.agents.defaults.max_tool_iterations, 20);
        assert!(!config.tools.restrict_to_workspace);
        assert_eq!(config.tools.exec.timeout, 30);
    }

    #[test]
    fn a_nanobot_web_section_loads_and_picks_brave_for_its_key() {
        let config = parse(
            Path::new("c.json"),
            r#"{"tools": {"web": {"proxy": null, "search": {"apiKey": "BSA-1", "maxResults": 5}}}}"#,
            &no_env,
        )
        .unwrap();
        assert_eq!(
            config.tools.web.search.provider(),
            crate::SearchProvider::Brave
        );
        let config = parse(
            Path::new("c.json"),
            r#"{"tools": {"web": {"search": {"apiKey": "", "maxResults": 5}}}}"#,
            &no_env,
        )
        .unwrap();
        assert_eq!(
            config.tools.web.search.provider(),
            crate::SearchProvider::Duckduckgo
        );
    }

    #[test]
    fn bad_web_settings_name_their_key() {
        let errors: Vec<String> = [
            r#"{"tools": {"web": {"proxy": "http://127.0.0.1:7890"}}}"#,
            r#"{"tools": {"web": {"allowPrivate": ["localhost", "*"]}}}"#,
            r#"{"tools": {"web": {"allowPrivate": ["10.0.0.0/8"]}}}"#,
            r#"{"tools": {"web": {"fetch": {"maxRedirects": 6}}}}"#,
            r#"{"tools": {"web": {"search": {"provider": "searxng"}}}}"#,
            r#"{"tools": {"web": {"search": {"maxResults": 11}}}}"#,
            r#"{"agents": {"entries": {"w": {"tools": {"web": {"fetch": {"maxChars": 0}}}}}}}"#,
            r#"{"tools": {"web": {"search": {"provider": "google"}}}}"#,
        ]
        .iter()
        .map(|text| error(text))
        .collect();
        assert_eq!(
            errors,
            [
                "/h/config.json: `tools.web.proxy`: nanocrab's web tools connect directly: a proxy would resolve names where nanocrab cannot check the addresses (loopback, private networks) they lead to; remove the key",
                "/h/config.json: `tools.web.allowPrivate.1`: \"*\" is not a host; allowed: a host as written in URLs (127.0.0.1, localhost:8080, nas.home.arpa, *.home.arpa)",
                "/h/config.json: `tools.web.allowPrivate.0`: \"10.0.0.0/8\" is not a host; allowed: a host as written in URLs (127.0.0.1, localhost:8080, nas.home.arpa, *.home.arpa)",
                "/h/config.json: `tools.web.fetch.maxRedirects`: 6 is too many; allowed: 0 to 5",
                "/h/config.json: `tools.web.search.baseUrl`: SearXNG needs the address of your instance (e.g. http://localhost:8888)",
                "/h/config.json: `tools.web.search.maxResults`: 11 is too many; allowed: 1 to 10",
                "/h/config.json: `agents.entries.w.tools.web.fetch.maxChars`: 0 is too small; allowed: at least 1",
                "/h/config.json: `tools.web.search.provider`: unknown value; allowed: brave, tavily, searxng, duckduckgo",
            ]
        );
    }

    #[test]
    fn claude_code_hooks_paste_as_they_are() {
        let config = parse(
            Path::new("/h/config.json"),
            r#"{"hooks": {"PreToolUse": [{"matcher": "Bash|write_file", "hooks": [
                {"type": "command", "command": "./guard.sh", "timeout": 10}]}],
                "Stop": [{"hooks": [{"command": "notify-send done", "network": true,
                "workspaceAccess": "none"}]}]}}"#,
            &no_env,
        )
        .unwrap();
        assert_eq!(
            config.hooks,
            crate::HooksConfig {
                pre_tool_use: vec![crate::HookMatcher {
                    matcher: "Bash|write_file".into(),
                    hooks: vec![crate::HookCommand {
                        kind: crate::HookKind::Command,
                        command: "./guard.sh".into(),
                        timeout: Some(10),
                        workspace_access: crate::WorkspaceAccess::ReadOnly,
                        network: false,
                    }],
                }],
                stop: vec![crate::HookMatcher {
                    matcher: String::new(),
                    hooks: vec![crate::HookCommand {
                        kind: crate::HookKind::Command,
                        command: "notify-send done".into(),
                        timeout: None,
                        workspace_access: crate::WorkspaceAccess::None,
                        network: true,
                    }],
                }],
                ..crate::HooksConfig::default()
            }
        );
    }

    #[test]
    fn bad_hooks_name_their_key() {
        let errors: Vec<String> = [
            r#"{"hooks": {"PreToolUse": [{"matcher": "exec(", "hooks": [{"command": "x"}]}]}}"#,
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"command": " "}]}]}}"#,
            r#"{"hooks": {"Stop": [{"hooks": [{"command": "x", "timeout": 0}]}]}}"#,
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "command": "x"}]}]}}"#,
            r#"{"hooks": {"PreToolUsed": []}}"#,
        ]
        .iter()
        .map(|text| error(text))
        .collect();
        pretty_assertions::assert_eq!(
            errors,
            [
                "/h/config.json: `hooks.PreToolUse.0.matcher`: \"exec(\" is not a regular expression (unclosed group)",
                "/h/config.json: `hooks.PreToolUse.0.hooks.0.command`: is empty; give the program to run",
                "/h/config.json: `hooks.Stop.0.hooks.0.timeout`: 0 is too small; allowed: at least 1 (seconds)",
                "/h/config.json: `hooks.PreToolUse.0.hooks.0.type`: unknown value; allowed: command",
                "/h/config.json: unknown key `hooks.PreToolUsed`: did you mean `PreToolUse`?",
            ]
        );
    }

    #[test]
    fn a_missing_file_means_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = load(&dir.path().join("config.json"), &no_env).unwrap();
        assert_eq!(
            loaded,
            Loaded {
                config: Config::default(),
                from_file: false
            }
        );
    }
}
