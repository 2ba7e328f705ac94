use nanocrab_config::WriteOutcome;
use nanocrab_core::workspace::{TemplateOutcome, write_templates};

use super::Env;

pub fn run(env: &Env) -> anyhow::Result<()> {
    match nanocrab_config::write_default_config(&env.config_path)? {
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
    println!(
        "\nNext steps:\n  1. Give nanocrab a model: export ANTHROPIC_API_KEY=... (or OPENAI_API_KEY=... and \
         set agents.defaults.model to openai/gpt-4.1),\n     or point providers.custom.apiBase in {} at a local \
         OpenAI-compatible server\n     (e.g. http://localhost:11434/v1 for Ollama) and set the model to custom/<name>.\n  \
         2. Tell it about you: edit {}.\n  3. Talk: nanocrab agent -m \"hello\"   (or just `nanocrab agent`)",
        env.config_path.display(),
        workspace.join("USER.md").display()
    );
    Ok(())
}
