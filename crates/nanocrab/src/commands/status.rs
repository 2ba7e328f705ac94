use nanocrab_provider::{Protocol, ProviderSpec};

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
    println!("model      {}", config.agents.defaults.model);
    println!("sessions   {}", env.paths.sessions_dir().display());
    println!("providers");
    for (spec, ready) in nanocrab_provider::configured_providers(config, &Env::var) {
        println!("  {:<11} {}", spec.name, readiness(spec, ready));
    }
    Ok(())
}

/// `nanocrab providers list`.
pub fn providers(env: &Env) -> anyhow::Result<()> {
    let loaded = env.load_config()?;
    println!(
        "{:<11} {:<18} {:<44} {:<20} state",
        "provider", "protocol", "default apiBase", "key variable"
    );
    for (spec, ready) in nanocrab_provider::configured_providers(&loaded.config, &Env::var) {
        let protocol = match spec.protocol {
            Protocol::AnthropicMessages => "anthropic-messages",
            Protocol::OpenAiChat => "openai-chat",
            Protocol::Gemini => "gemini",
        };
        println!(
            "{:<11} {protocol:<18} {:<44} {:<20} {}",
            spec.name,
            spec.default_api_base.unwrap_or("(set apiBase)"),
            spec.api_key_env.unwrap_or("-"),
            readiness(spec, ready)
        );
    }
    Ok(())
}

fn readiness(spec: &ProviderSpec, ready: bool) -> String {
    match (ready, spec.api_key_env) {
        (true, _) => "configured".to_owned(),
        (false, Some(var)) => format!("no key: set {var} or providers.{}.apiKey", spec.name),
        (false, None) => format!("needs providers.{}.apiBase", spec.name),
    }
}
