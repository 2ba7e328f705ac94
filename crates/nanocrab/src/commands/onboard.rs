use std::io::{BufRead as _, IsTerminal as _};

use anyhow::Context as _;
use nanocrab_config::{Config, ProviderConfig, WriteOutcome};
use nanocrab_core::workspace::{TemplateOutcome, write_templates};
use nanocrab_provider::{
    ChatRequest, DEFAULT_LOCAL_MODEL, LOCAL, ProviderDelta, ProviderSpec, RetryPolicy,
};
use nanocrab_schema::{LlmMessage, Role};

use super::Env;

/// `model`: what `--model` asked for; without it a terminal is asked, and elsewhere the local
/// model is set up when no provider is configured.
pub fn run(env: &Env, model: Option<String>) -> anyhow::Result<()> {
    let configured = super::agents::cloud_configured(&env.load_config()?.config);
    let default_local = format!("{LOCAL}/{DEFAULT_LOCAL_MODEL}");
    let created = !env.config_path.exists();
    let terminal = std::io::stdin().is_terminal();
    // `written`: a model the user chose, which goes into a new config.
    let (chosen, written) = match model {
        Some(model) => (Some(model.clone()), Some(model)),
        None if terminal => {
            let model = ask(&default_local, configured)?;
            (model.clone(), model)
        }
        // Not a terminal (a script, the README's first command): with no provider the local
        // model is what will answer, so it is fetched now. The config keeps the default
        // model, so that a key set later takes over.
        None if configured => (None, None),
        None => (Some(default_local.clone()), None),
    };
    let mut config = Config::default();
    if let Some(model) = written {
        config.agents.defaults.model = model;
    }
    // A cloud model chosen at the terminal for a new config: its key and endpoint, now,
    // rather than a step to find later.
    let cloud = nanocrab_provider::split_model(&config.agents.defaults.model, &config)
        .ok()
        .map(|(provider, _)| provider.to_owned())
        .filter(|provider| provider != LOCAL);
    if let Some(provider) = cloud.as_deref()
        && terminal
        && created
        && chosen
            .as_deref()
            .is_none_or(|model| !model.starts_with(&format!("{LOCAL}/")))
        && let Some(spec) = nanocrab_provider::spec(provider)
    {
        let entry = ask_provider(spec)?;
        if entry != ProviderConfig::default() {
            config.providers.insert(provider.to_owned(), entry);
        }
    }
    match nanocrab_config::write_config_if_missing(&env.config_path, &config)? {
        WriteOutcome::Created => outln!("created  {}", env.config_path.display())?,
        WriteOutcome::AlreadyExists => outln!("kept     {}", env.config_path.display())?,
    }
    let loaded = env.load_config()?;
    let workspace = env.workspace(&loaded.config);
    for outcome in write_templates(&workspace)? {
        match outcome {
            TemplateOutcome::Created(path) => outln!("created  {}", path.display())?,
            TemplateOutcome::Kept(path) => outln!("kept     {}", path.display())?,
        }
    }
    let local = chosen
        .as_deref()
        .and_then(|model| model.strip_prefix(&format!("{LOCAL}/")));
    // The model that said hello here, if one did.
    let mut checked = None;
    if let Some(name) = local {
        super::models::pull(env, &loaded.config, name, false)?;
        check(env, &loaded.config, &format!("{LOCAL}/{name}"))?;
        checked = Some(format!("{LOCAL}/{name}"));
        if !created
            && loaded.config.agents.defaults.model != format!("{LOCAL}/{name}")
            && super::agents::cloud_configured(&loaded.config)
        {
            outln!(
                "\n{} keeps agents.defaults.model = {}; `nanocrab agent --model {LOCAL}/{name}` \
                 uses the local model, or set it there.",
                env.config_path.display(),
                loaded.config.agents.defaults.model
            )?;
        }
    }
    let models = super::agents::Models {
        env,
        config: &loaded.config,
        local: env.local_models(&loaded.config)?,
    };
    let answering = models.primary(&loaded.config.agents.defaults.model, "agents.defaults");
    // A cloud model the user just gave a key for says hello now, so a wrong key or endpoint
    // shows here and not at the first real message.
    if let Ok((resolved, _)) = &answering
        && local.is_none()
        && terminal
        && created
        && cloud.is_some()
    {
        check(env, &loaded.config, &resolved.label)?;
        checked = Some(resolved.label.clone());
    }
    let mut steps = Vec::new();
    match &answering {
        // Its hello is on the screen already.
        Ok((resolved, _)) if checked.as_deref() == Some(resolved.label.as_str()) => {}
        Ok((resolved, notice)) => {
            outln!(
                "\n{} answers{}.",
                resolved.label,
                notice
                    .as_deref()
                    .map(|notice| format!(" ({notice})"))
                    .unwrap_or_default()
            )?;
        }
        // The model chosen only lacks its key: that is the step, not a choice made again.
        Err(err) if let Some(no_model) = err.downcast_ref::<super::agents::NoModel>()
            && no_model.model != Config::default().agents.defaults.model =>
        {
            steps.push(format!(
                "Give {} its key: export {}=... (or set providers.{}.apiKey in {}).",
                no_model.model,
                no_model.env_var,
                no_model.provider,
                env.config_path.display()
            ))
        }
        Err(_) => steps.push(format!(
            "Give nanocrab a model: export ANTHROPIC_API_KEY=... (or OPENAI_API_KEY=... and set \
             agents.defaults.model to openai/gpt-4.1),\n     or point providers.custom.apiBase in {} \
             at a local OpenAI-compatible server\n     (e.g. http://localhost:11434/v1 for Ollama) \
             and set the model to custom/<name>.\n     Or chat offline with the local model \
             {default_local}: nanocrab models pull {DEFAULT_LOCAL_MODEL}",
            env.config_path.display()
        )),
    }
    steps.push(format!(
        "Tell it about you: edit {}.",
        workspace.join("USER.md").display()
    ));
    steps.push("Talk: nanocrab agent -m \"hello\"   (or just `nanocrab agent`)".to_owned());
    steps.push(format!(
        "Or in the browser: nanocrab gateway, then open http://127.0.0.1:{}/",
        loaded.config.gateway.port
    ));
    outln!("\nNext steps:")?;
    for (i, step) in steps.iter().enumerate() {
        outln!("  {}. {step}", i + 1)?;
    }
    Ok(())
}

/// Asks on the terminal for `spec`'s key (not echoed) and endpoint; what the user leaves
/// empty is left out, so the provider's environment variable and usual endpoint apply.
fn ask_provider(spec: &ProviderSpec) -> anyhow::Result<ProviderConfig> {
    let mut entry = ProviderConfig::default();
    let var = spec.api_key_env.unwrap_or("its key variable");
    let from_env = spec.api_key_env.and_then(Env::var).is_some();
    if spec.requires_key {
        let prompt = if from_env {
            format!(
                "{var} is set and will be used; or paste another {} API key (hidden): ",
                spec.display_name
            )
        } else {
            format!(
                "{} API key (hidden; Enter to skip and export {var}=... later): ",
                spec.display_name
            )
        };
        let key = read_hidden(&prompt).context("cannot read the key from the terminal")?;
        if !key.is_empty() {
            entry.api_key = Some(key);
        }
    }
    let usual = spec.default_api_base.unwrap_or("none");
    out!("Endpoint [{usual}] (Enter keeps it; or a proxy or compatible server's URL): ")?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let base = line.trim();
    if !base.is_empty() {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            anyhow::bail!(
                "{base:?} is not an http:// or https:// URL: run `nanocrab onboard` again"
            );
        }
        entry.api_base = Some(base.to_owned());
    }
    if entry.api_key.is_none() && !from_env && spec.requires_key {
        outln!(
            "  without a key {} cannot answer: export {var}=... before `nanocrab agent`",
            spec.display_name
        )?;
    }
    Ok(entry)
}

/// A line from the terminal with echo off, so a key never shows on the screen or in its
/// scrollback. `prompt` is shown once echo is off: a key pasted the moment the question appears
/// would otherwise be echoed before the terminal is told not to.
fn read_hidden(prompt: &str) -> std::io::Result<String> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let original = tcgetattr(&stdin)?;
    let mut silent = original.clone();
    silent.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Now, &silent)?;
    if let Err(err) = out!("{prompt}") {
        tcsetattr(&stdin, OptionalActions::Now, &original)?;
        return Err(err);
    }
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    tcsetattr(&stdin, OptionalActions::Now, &original)?;
    // The Enter the user typed was not echoed either.
    outln!()?;
    read?;
    Ok(line.trim().to_owned())
}

/// Asks on the terminal which model should answer; `None` keeps what the config says.
fn ask(default_local: &str, configured: bool) -> anyhow::Result<Option<String>> {
    let default = if configured { "2" } else { "1" };
    outln!(
        "Which model should answer?\n  \
         1) {default_local}: runs on this machine, no key, a 98 MB download (243 MB on disk once loaded); small: short answers, no tools\n  \
         2) the configured or default cloud model (anthropic/claude-sonnet-4-5 needs ANTHROPIC_API_KEY)\n  \
         3) openai/gpt-4.1 (needs OPENAI_API_KEY)"
    )?;
    out!("choice [{default}]: ")?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let choice = match line.trim() {
        "" => default,
        other => other,
    };
    match choice {
        "1" => Ok(Some(default_local.to_owned())),
        "2" => Ok(None),
        "3" => Ok(Some("openai/gpt-4.1".to_owned())),
        other => {
            anyhow::bail!("no choice {other:?}: run `nanocrab onboard` again and answer 1, 2 or 3")
        }
    }
}

/// Asks `model` one question, so that a setup that cannot answer says so now, not at the
/// first real message.
fn check(env: &Env, config: &Config, model: &str) -> anyhow::Result<()> {
    let local = env.local_models(config)?;
    let resolved =
        nanocrab_provider::resolve_model(model, config, &Env::var, RetryPolicy::default(), &local)?;
    let request = ChatRequest {
        model: resolved.model.as_str().into(),
        system: "You are nanocrab, a personal AI assistant.".into(),
        messages: vec![LlmMessage::user("Say hello in one short sentence.")].into(),
        tools: Vec::new().into(),
        max_tokens: 32,
        temperature: Some(0.0),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let response = runtime
        .block_on(resolved.provider.chat(&request, &mut |delta| {
            // A wrong endpoint is retried for seconds: say so, rather than seem to hang.
            if let ProviderDelta::Retry(retry) = delta {
                eprintln!(
                    "  ↻ {}: {}, retrying in {} s (attempt {} of {})",
                    retry.provider,
                    retry.reason,
                    retry.delay.as_millis().div_ceil(1000),
                    retry.attempt,
                    retry.attempts
                );
            }
        }))
        .with_context(|| format!("{model} was installed but could not answer"))?;
    let answer = LlmMessage {
        role: Role::Assistant,
        content: response.content,
    }
    .text();
    outln!("\n{model} answers: {}", answer.trim())?;
    Ok(())
}
