use std::io::{BufRead as _, IsTerminal as _, Write as _};

use anyhow::Context as _;
use nanocrab_config::{Config, WriteOutcome};
use nanocrab_core::workspace::{TemplateOutcome, write_templates};
use nanocrab_provider::{ChatRequest, DEFAULT_LOCAL_MODEL, LOCAL, RetryPolicy};
use nanocrab_schema::{LlmMessage, Role};

use super::Env;

/// `model`: what `--model` asked for; without it a terminal is asked, and elsewhere the local
/// model is set up when no provider is configured.
pub fn run(env: &Env, model: Option<String>) -> anyhow::Result<()> {
    let configured = super::agents::cloud_configured(&env.load_config()?.config);
    let default_local = format!("{LOCAL}/{DEFAULT_LOCAL_MODEL}");
    // `written`: a model the user chose, which goes into a new config.
    let (chosen, written) = match model {
        Some(model) => (Some(model.clone()), Some(model)),
        None if std::io::stdin().is_terminal() => {
            let model = ask(&default_local, configured)?;
            (model.clone(), model)
        }
        // Not a terminal (a script, the README's first command): with no provider the local
        // model is what will answer, so it is fetched now. The config keeps the default
        // model, so that a key set later takes over.
        None if configured => (None, None),
        None => (Some(default_local.clone()), None),
    };
    let created = !env.config_path.exists();
    let mut config = Config::default();
    if let Some(model) = written {
        config.agents.defaults.model = model;
    }
    match nanocrab_config::write_config_if_missing(&env.config_path, &config)? {
        WriteOutcome::Created => println!("created  {}", env.config_path.display()),
        WriteOutcome::AlreadyExists => println!("kept     {}", env.config_path.display()),
    }
    let loaded = env.load_config()?;
    let workspace = env.workspace(&loaded.config);
    for outcome in write_templates(&workspace)? {
        match outcome {
            TemplateOutcome::Created(path) => println!("created  {}", path.display()),
            TemplateOutcome::Kept(path) => println!("kept     {}", path.display()),
        }
    }
    let local = chosen
        .as_deref()
        .and_then(|model| model.strip_prefix(&format!("{LOCAL}/")));
    if let Some(name) = local {
        super::models::pull(env, &loaded.config, name, false)?;
        check(env, &loaded.config, &format!("{LOCAL}/{name}"))?;
        if !created
            && loaded.config.agents.defaults.model != format!("{LOCAL}/{name}")
            && super::agents::cloud_configured(&loaded.config)
        {
            println!(
                "\n{} keeps agents.defaults.model = {}; `nanocrab agent --model {LOCAL}/{name}` \
                 uses the local model, or set it there.",
                env.config_path.display(),
                loaded.config.agents.defaults.model
            );
        }
    }
    println!(
        "\nNext steps:\n  1. Give nanocrab a model: export ANTHROPIC_API_KEY=... (or OPENAI_API_KEY=... and \
         set agents.defaults.model to openai/gpt-4.1),\n     or point providers.custom.apiBase in {} at a local \
         OpenAI-compatible server\n     (e.g. http://localhost:11434/v1 for Ollama) and set the model to custom/<name>.\n     \
         With none, the local model {default_local} answers (`nanocrab models pull {DEFAULT_LOCAL_MODEL}` fetches it).\n  \
         2. Tell it about you: edit {}.\n  3. Talk: nanocrab agent -m \"hello\"   (or just `nanocrab agent`)",
        env.config_path.display(),
        workspace.join("USER.md").display()
    );
    Ok(())
}

/// Asks on the terminal which model should answer; `None` keeps what the config says.
fn ask(default_local: &str, configured: bool) -> anyhow::Result<Option<String>> {
    let default = if configured { "2" } else { "1" };
    println!(
        "Which model should answer?\n  \
         1) {default_local}: runs on this machine, no key, a 98 MB download; small: short answers, no tools\n  \
         2) the configured or default cloud model (anthropic/claude-sonnet-4-5 needs ANTHROPIC_API_KEY)\n  \
         3) openai/gpt-4.1 (needs OPENAI_API_KEY)"
    );
    print!("choice [{default}]: ");
    std::io::stdout().flush()?;
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
        model: resolved.model.clone(),
        system: "You are nanocrab, a personal AI assistant.".to_owned(),
        messages: vec![LlmMessage::user("Say hello in one short sentence.")],
        tools: Vec::new(),
        max_tokens: 32,
        temperature: Some(0.0),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let response = runtime
        .block_on(resolved.provider.chat(&request, &mut |_| {}))
        .with_context(|| format!("{model} was installed but could not answer"))?;
    let answer = LlmMessage {
        role: Role::Assistant,
        content: response.content,
    }
    .text();
    println!("\n{model} answers: {}", answer.trim());
    Ok(())
}
