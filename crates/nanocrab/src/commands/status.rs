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
        let state = match (ready, spec.api_key_env) {
            (true, _) => "configured".to_owned(),
            (false, Some(var)) => format!("no key: set {var} or providers.{}.apiKey", spec.name),
            (false, None) => format!("needs providers.{}.apiBase", spec.name),
        };
        println!("  {:<11} {state}", spec.name);
    }
    Ok(())
}
