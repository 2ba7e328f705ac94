use std::net::ToSocketAddrs as _;

use nanocrab_config::Config;
use nanocrab_provider::{LOCAL, ProviderStatus, Readiness};

use super::Env;

pub fn run(env: &Env) -> anyhow::Result<()> {
    let loaded = env.load_config()?;
    let config = &loaded.config;
    let source = if loaded.from_file {
        "".to_owned()
    } else {
        " (not found: using defaults; run `nanocrab onboard`)".to_owned()
    };
    let workspace = env.workspace(config);
    outln!("config     {}{source}", env.config_path.display())?;
    if !config.unresolved.is_empty() {
        let unset: Vec<String> = config
            .unresolved
            .iter()
            .map(|u| format!("${{{}}} in {}", u.var, u.key))
            .collect();
        outln!(
            "unset      {} (a command that needs it refuses until it is set)",
            unset.join("; ")
        )?;
    }
    outln!(
        "workspace  {}{}",
        workspace.display(),
        if workspace.is_dir() { "" } else { " (missing)" }
    )?;
    let models = super::agents::Models {
        env,
        config,
        local: env.local_models(config)?,
    };
    let configured = &config.agents.defaults.model;
    match models.primary(configured, "agents.defaults") {
        Ok((resolved, notice)) => {
            let local = resolved.label.strip_prefix(&format!("{LOCAL}/"));
            let installed = match local {
                Some(name) if !models.local.is_installed(name) => {
                    format!(" (not installed: nanocrab models pull {name})")
                }
                Some(_) | None => String::new(),
            };
            outln!("model      {}{installed}", resolved.label)?;
            if let Some(notice) = notice {
                outln!("           {notice}")?;
            }
        }
        Err(err) => match err.downcast_ref::<super::agents::NoModel>() {
            Some(no_model) => outln!(
                "model      {configured}: cannot answer: {} is not set; or offline: {}",
                no_model.env_var,
                no_model.offline
            )?,
            None => outln!(
                "model      {configured}: cannot answer: {}",
                format!("{err:#}").lines().next().unwrap_or_default()
            )?,
        },
    }
    if let Some(model) = &config.agents.defaults.housekeeping_model {
        outln!("housekeeping {model}")?;
    }
    if !config.agents.defaults.fallback_models.is_empty() {
        outln!(
            "fallbacks  {}",
            config.agents.defaults.fallback_models.join(", ")
        )?;
    }
    if !config.agents.entries.is_empty() {
        outln!(
            "agents     {}",
            config.agents.ids().collect::<Vec<_>>().join(", ")
        )?;
    }
    outln!("sessions   {}", env.paths.sessions_dir().display())?;
    let now = jiff::Timestamp::now();
    for id in config.agents.ids() {
        let heartbeat = config.agents.settings(id).unwrap_or_default().heartbeat;
        outln!(
            "heartbeat  {id}: {}",
            heartbeat_line(&heartbeat, &env.agent_workspace(config, id), now)
        )?;
    }
    outln!("cron       {}", cron_line(env, config)?)?;
    let tools = &config.tools;
    let mode = |value: serde_json::Value| value.as_str().unwrap_or_default().to_owned();
    let sandbox = match tools.exec.sandbox.mode {
        nanocrab_config::SandboxMode::Off => "sandbox off".to_owned(),
        nanocrab_config::SandboxMode::Auto | nanocrab_config::SandboxMode::Required => {
            match nanocrab_sandbox::probe() {
                Ok(()) => format!(
                    "sandbox {} (Landlock + seccomp)",
                    mode(serde_json::to_value(tools.exec.sandbox.mode)?)
                ),
                Err(err) => format!(
                    "sandbox {} but unavailable: {err}",
                    mode(serde_json::to_value(tools.exec.sandbox.mode)?)
                ),
            }
        }
    };
    let grants = if tools.grants.is_empty() {
        "none".to_owned()
    } else {
        tools.grants.join(", ")
    };
    outln!(
        "tools      exec {}, {sandbox}; grants: {grants}; approvals wait {} s",
        mode(serde_json::to_value(tools.exec.mode)?),
        tools.approvals.timeout
    )?;
    let web = &tools.web;
    if web.enable && (web.fetch.enabled || web.search.enabled) {
        let reach = match (web.require_grant, web.allow_private.is_empty()) {
            (false, true) => "public hosts".to_owned(),
            (true, true) => "granted hosts (requireGrant)".to_owned(),
            (false, false) => format!("public hosts and {}", web.allow_private.join(", ")),
            (true, false) => format!(
                "granted hosts (requireGrant), private ones only {}",
                web.allow_private.join(", ")
            ),
        };
        let search = web.search.provider();
        let fetch = if web.fetch.enabled { "web_fetch" } else { "" };
        let search_part = if web.search.enabled {
            format!(
                "web_search by {}{}",
                search.name(),
                match (search.needs_key(), web.search.key().is_some()) {
                    (false, _) => " (no key needed)",
                    (true, true) => " (key set)",
                    (true, false) => " (no key: set tools.web.search.apiKey)",
                }
            )
        } else {
            String::new()
        };
        let offered = [fetch, search_part.as_str()]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
        outln!("web        {offered}; reaches {reach}")?;
    } else {
        outln!("web        off (tools.web)")?;
    }
    let gateway = &config.gateway;
    let token = gateway
        .auth
        .token
        .as_deref()
        .map(str::trim)
        .is_some_and(|token| !token.is_empty());
    let auth = match (token, super::security::exposed(gateway)) {
        (true, _) => "token set",
        (false, false) => "no token: loopback clients only",
        (false, true) => {
            "will not start: a host other machines can reach needs gateway.auth.token, or bind 127.0.0.1"
        }
    };
    // An IPv6 address is bracketed in a URL, as `heartbeat run` and `cron run` write it.
    let host = if gateway.host.contains(':') {
        format!("[{}]", gateway.host)
    } else {
        gateway.host.clone()
    };
    outln!("gateway    http://{host}:{} ({auth})", gateway.port)?;
    match &config.channels.telegram {
        Some(telegram) if !telegram.enabled => outln!("telegram   off (enabled: false)")?,
        Some(telegram) => {
            let token = if !telegram.token.is_empty() {
                "token in the config"
            } else if Env::var("TELEGRAM_BOT_TOKEN").is_some() {
                "token from TELEGRAM_BOT_TOKEN"
            } else {
                "no token: set channels.telegram.token or TELEGRAM_BOT_TOKEN"
            };
            outln!(
                "telegram   {token}; dmPolicy {}, allowFrom {}, groups {}",
                serde_json::to_value(telegram.dm_policy)?
                    .as_str()
                    .unwrap_or_default(),
                telegram.allow_from.len(),
                telegram.groups.len()
            )?;
        }
        None => {}
    }
    match &config.channels.slack {
        Some(slack) if !slack.enabled => outln!("slack      off (enabled: false)")?,
        Some(slack) => {
            let tokens = match (
                !slack.bot_token.is_empty()
                    || (slack.accounts.is_empty() && Env::var("SLACK_BOT_TOKEN").is_some()),
                !slack.app_token.is_empty()
                    || (slack.accounts.is_empty() && Env::var("SLACK_APP_TOKEN").is_some()),
            ) {
                (true, true) => "tokens set".to_owned(),
                (false, false) if !slack.accounts.is_empty() => String::new(),
                (bot, app) => format!(
                    "missing {}",
                    [
                        (!bot, "botToken/SLACK_BOT_TOKEN"),
                        (!app, "appToken/SLACK_APP_TOKEN")
                    ]
                    .iter()
                    .filter(|(missing, _)| *missing)
                    .map(|(_, name)| *name)
                    .collect::<Vec<_>>()
                    .join(" and ")
                ),
            };
            let accounts = match slack.accounts.len() {
                0 => String::new(),
                n => format!("{n} more account(s); "),
            };
            let built = if cfg!(feature = "slack") {
                ""
            } else {
                " (this nanocrab was built without Slack: the section is ignored)"
            };
            outln!(
                "slack      {accounts}{tokens}; dmPolicy {}, allowFrom {}, channels {}{built}",
                serde_json::to_value(slack.dm_policy)?
                    .as_str()
                    .unwrap_or_default(),
                slack.allow_from.len(),
                slack.groups.len()
            )?;
        }
        None => {}
    }
    match &config.channels.discord {
        Some(discord) if !discord.enabled => outln!("discord    off (enabled: false)")?,
        Some(discord) => {
            let token = if !discord.token.is_empty() {
                "token in the config"
            } else if !discord.accounts.is_empty() {
                "no default token"
            } else if Env::var("DISCORD_BOT_TOKEN").is_some() {
                "token from DISCORD_BOT_TOKEN"
            } else {
                "no token: set channels.discord.token or DISCORD_BOT_TOKEN"
            };
            let accounts = discord.accounts.values().filter(|a| a.enabled).count();
            outln!(
                "discord    {token}{}; dmPolicy {}, groupPolicy {}, allowFrom {}, guilds {}",
                match accounts {
                    0 => String::new(),
                    n => format!(" + {n} more account(s)"),
                },
                serde_json::to_value(discord.dm_policy)?
                    .as_str()
                    .unwrap_or_default(),
                serde_json::to_value(discord.group_policy)?
                    .as_str()
                    .unwrap_or_default(),
                discord.allow_from.len(),
                discord.guilds.len()
            )?;
        }
        None => {}
    }
    match &config.channels.email {
        Some(email) if !email.enabled => outln!("email      off (enabled: false)")?,
        Some(email) => {
            let built = if cfg!(feature = "email") {
                ""
            } else {
                " (this nanocrab was built without email: the gateway will not start with it)"
            };
            let security = |security| {
                serde_json::to_value(security)
                    .ok()
                    .and_then(|value| value.as_str().map(str::to_owned))
                    .unwrap_or_default()
            };
            for account in email.mail_accounts() {
                let missing: Vec<&str> = [
                    (account.from_address.is_empty(), "fromAddress"),
                    (account.imap.host.is_empty(), "imapHost"),
                    (account.imap.password.is_empty(), "imapPassword"),
                    (account.smtp.host.is_empty(), "smtpHost"),
                ]
                .into_iter()
                .filter(|(missing, _)| *missing)
                .map(|(_, key)| key)
                .collect();
                let servers = if missing.is_empty() {
                    format!(
                        "IMAP {}:{} {}, SMTP {}:{} {}",
                        account.imap.host,
                        account.imap.port,
                        security(account.imap.security),
                        account.smtp.host,
                        account.smtp.port,
                        security(account.smtp.security)
                    )
                } else {
                    format!("missing {} under {}", missing.join(", "), account.key)
                };
                outln!(
                    "email      {}: {servers}; dmPolicy {}, allowFrom {}, requireAuthResults {}{built}",
                    if account.from_address.is_empty() {
                        account.name.as_str()
                    } else {
                        account.from_address.as_str()
                    },
                    serde_json::to_value(email.dm_policy)?
                        .as_str()
                        .unwrap_or_default(),
                    email.allow_from.len(),
                    if email.require_auth_results {
                        "on"
                    } else {
                        "off"
                    },
                )?;
            }
        }
        None => {}
    }
    for name in config.channels.other.keys() {
        outln!("{name:<10} no {name} channel in this nanocrab yet; the section is ignored")?;
    }
    let pairing = nanocrab_gateway::PairingStore::new(&env.paths.state_dir());
    let waiting = pairing.pending(jiff::Timestamp::now().as_second())?.len();
    if waiting > 0 {
        outln!("pairing    {waiting} waiting for approval: nanocrab pairing list")?;
    }
    outln!("providers")?;
    for status in nanocrab_provider::provider_statuses(config, &Env::var) {
        outln!("  {:<11} {}", status.name, readiness(config, &status))?;
    }
    Ok(())
}

/// An agent's heartbeat as `status` shows it: off, or how often, the next tick (which only a
/// running gateway fires) and where replies go.
fn heartbeat_line(
    heartbeat: &nanocrab_config::HeartbeatConfig,
    workspace: &std::path::Path,
    now: jiff::Timestamp,
) -> String {
    let plan = match heartbeat.plan() {
        Ok(plan) => plan,
        Err((field, why)) => return format!("{field}: {why}"),
    };
    let Some(schedule) = plan.schedule else {
        return "off (every: 0)".to_owned();
    };
    let next = match schedule.next_after(now) {
        Some(next) => format!(
            "next {} (while the gateway runs)",
            next.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M %Z")
        ),
        None => "never: no tick falls inside activeHours".to_owned(),
    };
    let tasks = std::fs::read_to_string(workspace.join("HEARTBEAT.md")).unwrap_or_default();
    let cost = match nanocrab_core::heartbeat::heartbeat_tasks(&tasks) {
        Some(_) => "",
        None => "; HEARTBEAT.md holds no task, so a tick asks no model",
    };
    let target = match heartbeat.target.trim() {
        "last" => "the chat you last wrote from".to_owned(),
        "none" => "nobody (target: none; the runs are only logged)".to_owned(),
        chat => chat.to_owned(),
    };
    format!(
        "every {}, {next}, replies to {target}{cost}",
        heartbeat.every.trim()
    )
}

/// The scheduled jobs as `status` shows them: how many, and which runs next.
fn cron_line(env: &Env, config: &Config) -> anyhow::Result<String> {
    let off = if config.cron.enabled {
        ""
    } else {
        "off (cron.enabled: false); "
    };
    let path = env.paths.cron_store();
    // A home with no job has no store, and `status` creates none.
    if !path.exists() {
        return Ok(format!("{off}no jobs"));
    }
    let jobs = nanocrab_gateway::CronStore::open(&path)?.list()?;
    if jobs.is_empty() {
        return Ok(format!("{off}no jobs"));
    }
    let enabled = jobs.iter().filter(|j| j.enabled).count();
    let next = jobs
        .iter()
        .filter(|j| j.enabled)
        .filter_map(|j| j.next_run.map(|at| (at, j)))
        .min_by_key(|(at, _)| *at);
    let next = match next {
        Some((at, job)) => format!(
            ", next \"{}\" ({}) at {} (while the gateway runs)",
            job.name,
            job.id,
            at.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M:%S %Z")
        ),
        None => String::new(),
    };
    let count = match jobs.len() {
        1 => "1 job".to_owned(),
        n => format!("{n} jobs"),
    };
    Ok(format!("{off}{count} ({enabled} enabled){next}"))
}

/// `nanocrab providers list`.
pub fn providers(env: &Env) -> anyhow::Result<()> {
    let loaded = env.load_config()?;
    outln!(
        "{:<11} {:<20} {:<52} {:<18} state",
        "provider",
        "protocol",
        "apiBase",
        "key variable"
    )?;
    for status in nanocrab_provider::provider_statuses(&loaded.config, &Env::var) {
        outln!(
            "{:<11} {:<20} {:<52} {:<18} {}",
            status.name,
            status.protocol.name(),
            status.api_base.as_deref().unwrap_or("(set apiBase)"),
            status.spec.api_key_env.unwrap_or("-"),
            readiness(&loaded.config, &status)
        )?;
    }
    Ok(())
}

fn readiness(config: &Config, status: &ProviderStatus) -> String {
    let name = &status.name;
    let mut text = match (&status.readiness, status.spec.api_key_env) {
        (Readiness::Ready, _) if status.spec.local && status.spec.name == name.as_str() => {
            // Only a server that answers is ready; ask its port, briefly.
            match status.api_base.as_deref().map(listening) {
                Some(Ok(address)) => format!("ready (local server at {address}, no key needed)"),
                Some(Err(address)) => format!("not running (nothing listens at {address})"),
                None => format!("needs providers.{name}.apiBase"),
            }
        }
        (Readiness::Ready, _) => "configured".to_owned(),
        (Readiness::NoKey, Some(var)) => format!("no key: set {var} or providers.{name}.apiKey"),
        (Readiness::NoKey, None) => format!("no key: set providers.{name}.apiKey"),
        (Readiness::NoEndpoint, _) => format!("needs providers.{name}.apiBase"),
    };
    for unresolved in config.unresolved_under(&format!("providers.{name}")) {
        text.push_str(&format!(
            " ({} uses ${{{}}}, which is not set)",
            unresolved.key, unresolved.var
        ));
    }
    if let Some(other) = status.key_looks_like {
        text.push_str(&format!(
            " (warning: this key looks like one of {}'s: did you mean providers.{}?)",
            other.display_name, other.name
        ));
    }
    text
}

/// Whether something accepts connections at the host and port of `api_base`; either way, the
/// `host:port` asked.
fn listening(api_base: &str) -> Result<String, String> {
    let rest = api_base
        .split_once("://")
        .map_or(api_base, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or_default();
    let address = if authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
    {
        authority.to_owned()
    } else if api_base.starts_with("https://") {
        format!("{authority}:443")
    } else {
        format!("{authority}:80")
    };
    let reachable = address.to_socket_addrs().is_ok_and(|addresses| {
        addresses.into_iter().any(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_millis(300)).is_ok()
        })
    });
    if reachable { Ok(address) } else { Err(address) }
}
