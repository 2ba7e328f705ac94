use nanocrab_provider::{DEFAULT_LOCAL_MODEL, LOCAL, ProviderStatus, Readiness};

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
    println!("config     {}{source}", env.config_path.display());
    println!(
        "workspace  {}{}",
        workspace.display(),
        if workspace.is_dir() { "" } else { " (missing)" }
    );
    let instead = if super::agents::cloud_configured(config) {
        String::new()
    } else {
        let local = env.local_models(config)?;
        let installed = if local.is_installed(DEFAULT_LOCAL_MODEL) {
            "".to_owned()
        } else {
            format!("; not installed: nanocrab models pull {DEFAULT_LOCAL_MODEL}")
        };
        format!(
            " (no provider configured: {LOCAL}/{DEFAULT_LOCAL_MODEL} answers instead{installed})"
        )
    };
    println!("model      {}{instead}", config.agents.defaults.model);
    if let Some(model) = &config.agents.defaults.housekeeping_model {
        println!("housekeeping {model}");
    }
    if !config.agents.defaults.fallback_models.is_empty() {
        println!(
            "fallbacks  {}",
            config.agents.defaults.fallback_models.join(", ")
        );
    }
    if !config.agents.entries.is_empty() {
        println!(
            "agents     {}",
            config.agents.ids().collect::<Vec<_>>().join(", ")
        );
    }
    println!("sessions   {}", env.paths.sessions_dir().display());
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
    println!(
        "tools      exec {}, {sandbox}; grants: {grants}; approvals wait {} s",
        mode(serde_json::to_value(tools.exec.mode)?),
        tools.approvals.timeout
    );
    let gateway = &config.gateway;
    let auth = match gateway.auth.token.as_deref().map(str::trim) {
        Some(token) if !token.is_empty() => "token set",
        Some(_) | None => "no token: loopback clients only",
    };
    println!(
        "gateway    http://{}:{} ({auth})",
        gateway.host, gateway.port
    );
    match &config.channels.telegram {
        Some(telegram) if !telegram.enabled => println!("telegram   off (enabled: false)"),
        Some(telegram) => {
            let token = if !telegram.token.is_empty() {
                "token in the config"
            } else if Env::var("TELEGRAM_BOT_TOKEN").is_some() {
                "token from TELEGRAM_BOT_TOKEN"
            } else {
                "no token: set channels.telegram.token or TELEGRAM_BOT_TOKEN"
            };
            println!(
                "telegram   {token}; dmPolicy {}, allowFrom {}, groups {}",
                serde_json::to_value(telegram.dm_policy)?
                    .as_str()
                    .unwrap_or_default(),
                telegram.allow_from.len(),
                telegram.groups.len()
            );
        }
        None => {}
    }
    for name in config.channels.other.keys() {
        println!("{name:<10} no {name} channel in this nanocrab yet; the section is ignored");
    }
    let pairing = nanocrab_gateway::PairingStore::new(&env.paths.state_dir());
    let waiting = pairing.pending(jiff::Timestamp::now().as_second())?.len();
    if waiting > 0 {
        println!("pairing    {waiting} waiting for approval: nanocrab pairing list");
    }
    println!("providers");
    for status in nanocrab_provider::provider_statuses(config, &Env::var) {
        println!("  {:<11} {}", status.name, readiness(&status));
    }
    Ok(())
}

/// `nanocrab providers list`.
pub fn providers(env: &Env) -> anyhow::Result<()> {
    let loaded = env.load_config()?;
    println!(
        "{:<11} {:<20} {:<52} {:<18} state",
        "provider", "protocol", "apiBase", "key variable"
    );
    for status in nanocrab_provider::provider_statuses(&loaded.config, &Env::var) {
        println!(
            "{:<11} {:<20} {:<52} {:<18} {}",
            status.name,
            status.protocol.name(),
            status.api_base.as_deref().unwrap_or("(set apiBase)"),
            status.spec.api_key_env.unwrap_or("-"),
            readiness(&status)
        );
    }
    Ok(())
}

fn readiness(status: &ProviderStatus) -> String {
    let name = &status.name;
    let mut text = match (&status.readiness, status.spec.api_key_env) {
        (Readiness::Ready, _) if status.spec.local && status.spec.name == name.as_str() => {
            "ready (local server, no key needed)".to_owned()
        }
        (Readiness::Ready, _) => "configured".to_owned(),
        (Readiness::NoKey, Some(var)) => format!("no key: set {var} or providers.{name}.apiKey"),
        (Readiness::NoKey, None) => format!("no key: set providers.{name}.apiKey"),
        (Readiness::NoEndpoint, _) => format!("needs providers.{name}.apiBase"),
    };
    if let Some(other) = status.key_looks_like {
        text.push_str(&format!(
            " (warning: this key looks like one of {}'s: did you mean providers.{}?)",
            other.display_name, other.name
        ));
    }
    text
}
