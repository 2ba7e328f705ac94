//! Building an agent from the config: the CLI builds the default one, the gateway every one.

use std::path::PathBuf;

use anyhow::Context as _;
use nanocrab_config::Config;
use nanocrab_core::{Agent, AgentSettings, Consolidation, ContextBuilder, MemoryRetrieval};
use nanocrab_memory::{SearchOptions, SessionStore};
use nanocrab_provider::{ModelChain, RetryPolicy};

use super::Env;

/// An agent ready to run, and the workspace it works in.
pub struct BuiltAgent {
    pub agent: Agent,
    pub workspace: PathBuf,
}

/// Builds agent `id` (`main` or an `agents.entries` id), with `model` instead of its
/// configured one when given; creates its workspace if missing.
pub fn build(
    env: &Env,
    config: &Config,
    id: &str,
    model: Option<&str>,
) -> anyhow::Result<BuiltAgent> {
    let settings = config
        .agents
        .settings(id)
        .with_context(|| format!("no agent `{id}` in agents.entries"))?;
    let key_prefix = if id == nanocrab_config::DEFAULT_AGENT_ID {
        "agents.defaults".to_owned()
    } else {
        format!("agents.entries.{id}")
    };
    let workspace = env.agent_workspace(config, id);
    std::fs::create_dir_all(&workspace)
        .with_context(|| format!("cannot create the workspace {}", workspace.display()))?;
    let resolve = |model: &str, source: &str| {
        nanocrab_provider::resolve_model(model, config, &Env::var, RetryPolicy::default())
            .with_context(|| format!("{source} ({})", env.config_path.display()))
    };
    let primary = match model {
        Some(model) => resolve(model, "--model")?,
        None => resolve(&settings.model, &format!("{key_prefix}.model"))?,
    };
    let fallbacks = settings
        .fallback_models
        .iter()
        .enumerate()
        .map(|(i, model)| resolve(model, &format!("{key_prefix}.fallbackModels.{i}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let tools_config = config
        .agents
        .entries
        .get(id)
        .and_then(|entry| entry.tools.as_ref())
        .unwrap_or(&config.tools);
    let index = env.index_setup(config, id);
    let tools = nanocrab_tools::builtin_registry(
        tools_config,
        &config.memory,
        &workspace,
        &index,
        env.user_home.as_deref(),
    )?;
    let memory = MemoryRetrieval {
        index,
        search: SearchOptions::from_config(&config.memory),
        rag_by_default: config.memory.rag_mode,
    };
    let agent = Agent::new(
        ModelChain::new(primary, fallbacks),
        tools,
        SessionStore::new(env.paths.sessions_dir()),
        ContextBuilder::new(workspace.clone()),
        AgentSettings {
            max_tokens: settings.max_tokens,
            temperature: Some(settings.temperature),
            max_tool_iterations: settings.max_tool_iterations,
            context_window_tokens: settings.context_window_tokens,
        },
    )
    .with_memory(memory);
    let agent = match &settings.housekeeping_model {
        Some(model) => agent.with_housekeeping(resolve(
            model,
            &format!("{key_prefix}.housekeepingModel"),
        )?),
        None => agent,
    };
    let agent = match config.memory.consolidate_after {
        0 => agent,
        after => agent.with_consolidation(Consolidation {
            after_messages: after as usize,
            backups: env.paths.state_dir().join("memory-backups"),
        }),
    };
    Ok(BuiltAgent { agent, workspace })
}
