//! Building an agent from the config: the CLI builds the default one, the gateway every one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use nanocrab_config::Config;
use nanocrab_core::{
    Agent, AgentSettings, Consolidation, ContextBuilder, IndexRetriever, MemoryRetrieval,
};
use nanocrab_memory::SearchOptions;
use nanocrab_policy::Approver;
use nanocrab_provider::DEFAULT_LOCAL_MODEL;
use nanocrab_provider::{
    LOCAL, LocalModels, ModelChain, ProviderError, ResolvedModel, RetryPolicy,
};
use nanocrab_sessions::SessionStore;
use nanocrab_tools::{
    AgentTool, ChatMessages, CronJobs, CronTool, MessageTool, SpawnTool, Subagents, SubagentsTool,
    ToolPolicy, grants_from_config,
};

use super::Env;

/// What the gateway gives its agents' tools: its scheduled jobs (the `cron` tool, when
/// `cron.enabled`), its chats (the `message` tool) and its subagents (the `spawn` and
/// `subagents` tools, and the agents offered as tools).
#[derive(Clone)]
pub struct GatewayTools {
    pub cron: Option<Arc<dyn CronJobs>>,
    pub chats: Arc<dyn ChatMessages>,
    pub subagents: Arc<dyn Subagents>,
}

/// An agent ready to run, and the workspace it works in.
pub struct BuiltAgent {
    pub agent: Agent,
    pub workspace: PathBuf,
    /// The file policy the agent's tools work under, for whatever else touches its files on
    /// the user's behalf (the web page's editor): the same, so the two cannot drift apart.
    pub guard: nanocrab_policy::PathGuard,
    /// Said once to the user: the agent answers with the local model because no provider is
    /// configured.
    pub notice: Option<String>,
}

/// Builds agent `id` (`main` or an `agents.entries` id), with `model` instead of its
/// configured one when given; creates its workspace if missing. Calls that need approval
/// ask `approver`, or are denied without one. In the gateway (`gateway`) the agent gets the
/// `message` tool, and the `cron` tool when jobs run.
pub fn build(
    env: &Env,
    config: &Config,
    id: &str,
    model: Option<&str>,
    approver: Option<Arc<dyn Approver>>,
    gateway: Option<&GatewayTools>,
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
    // What this agent reads must be there; the rest of the file may wait for its variables.
    let tools_key = if config
        .agents
        .entries
        .get(id)
        .is_some_and(|e| e.tools.is_some())
    {
        format!("agents.entries.{id}.tools")
    } else {
        "tools".to_owned()
    };
    for section in [
        "agents.defaults",
        &key_prefix,
        "models",
        "channels.telegram.grants",
        "channels.slack.grants",
        "channels.discord.grants",
        "channels.email.grants",
    ] {
        config.require(section)?;
    }
    // An MCP server whose `${VAR}` is not set fails alone, when it is started, and says so;
    // so does web_search without its key, when it is called.
    let servers_key = format!("{tools_key}.mcpServers.");
    let search_key = format!("{tools_key}.web.search.");
    if let Some(unresolved) = config
        .unresolved_under(&tools_key)
        .find(|u| !u.key.starts_with(&servers_key) && !u.key.starts_with(&search_key))
    {
        return Err(unresolved.error().into());
    }
    let search_key_problem = config
        .unresolved_under(&search_key)
        .next()
        .map(|unresolved| unresolved.error().to_string());
    let models = Models {
        env,
        config,
        local: env.local_models(config)?,
    };
    let resolve = |model: &str, source: &str| models.resolve(model, source);
    let (primary, notice) = match model {
        Some(model) => (resolve(model, "--model")?, None),
        None => models.primary(&settings.model, &key_prefix)?,
    };
    let fallbacks = settings
        .fallback_models
        .iter()
        .enumerate()
        .map(|(i, model)| resolve(model, &format!("{key_prefix}.fallbackModels.{i}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Only once a model can answer: a failed first try leaves nothing behind.
    let workspace = env.agent_workspace(config, id);
    std::fs::create_dir_all(&workspace)
        .with_context(|| format!("cannot create the workspace {}", workspace.display()))?;
    let tools_config = config
        .agents
        .entries
        .get(id)
        .and_then(|entry| entry.tools.as_ref())
        .unwrap_or(&config.tools);
    let index = env.index_setup(config, id);
    let mut channel_grants = BTreeMap::new();
    for (channel, grants) in config.channels.grants() {
        let key = format!("channels.{channel}.grants");
        let granted = grants_from_config(grants, &key, env.user_home.as_deref())
            .with_context(|| format!("channels.{channel} ({})", env.config_path.display()))?;
        channel_grants.insert(channel.to_owned(), granted);
    }
    let (skill_roots, host) = env.skills(config, id);
    // Grants of the skills the agent has now; a skill installed later gets its grants when
    // the agent is built again (the next CLI run, a gateway restart).
    let mut skill_grants = Vec::new();
    for skill in skill_roots.discover(&host) {
        let Some(entry) = config.skills.entries.get(&skill.name) else {
            continue;
        };
        if entry.grants.is_empty() || skill.status != nanocrab_skills::Status::Available {
            continue;
        }
        let key = format!("skills.entries.{}.grants", skill.name);
        skill_grants.push(nanocrab_tools::SkillGrants {
            grants: grants_from_config(&entry.grants, &key, env.user_home.as_deref())
                .with_context(|| format!("{key} ({})", env.config_path.display()))?,
            file: std::fs::canonicalize(&skill.file).unwrap_or(skill.file),
            skill: skill.name,
        });
    }
    // The process's secrets, collected once with the audit log that redacts them too.
    let audit = env.audit_log(config)?;
    let policy = ToolPolicy {
        channel_grants,
        approver,
        redactor: audit.redactor().clone(),
        audit: Some(Arc::clone(&audit)),
        workspace_history: Some(nanocrab_tools::WorkspaceHistory::new(
            env.paths.workspace_history(),
        )),
        skill_folders: skill_roots
            .folders
            .iter()
            .filter(|(source, _)| *source != nanocrab_skills::SkillSource::Workspace)
            .map(|(_, folder)| folder.clone())
            .collect(),
        skill_grants,
        ..ToolPolicy::default()
    };
    let guard = nanocrab_policy::PathGuard::new(&workspace, tools_config, env.user_home.as_deref())
        .with_context(|| format!("{tools_key} ({})", env.config_path.display()))?
        .with_skill_folders(&policy.skill_folders);
    let launcher = sandbox_launcher(env, id);
    let web_tools = nanocrab_web::web_tools(
        &tools_config.web,
        nanocrab_web::WebSetup::new(
            Some(env.paths.state_dir().join("web-cache")),
            search_key_problem,
        ),
    )
    .with_context(|| format!("{tools_key}.web ({})", env.config_path.display()))?;
    let tools = nanocrab_tools::builtin_registry(
        tools_config,
        &workspace,
        env.user_home.as_deref(),
        launcher.as_ref(),
        policy,
        |guard| {
            let mut tools = nanocrab_memory::memory_tools(&config.memory, &index, guard);
            tools.extend(web_tools);
            if let Some(gateway) = gateway {
                tools.push(Arc::new(MessageTool::new(
                    Arc::clone(&gateway.chats),
                    Arc::clone(guard),
                )));
                if let Some(jobs) = &gateway.cron {
                    tools.push(Arc::new(CronTool::new(Arc::clone(jobs))));
                }
                // Depth 0 turns subagents off: none of their tools is offered.
                if config.agents.defaults.subagents.max_spawn_depth > 0 {
                    tools.push(Arc::new(SpawnTool::new(Arc::clone(&gateway.subagents))));
                    tools.push(Arc::new(SubagentsTool::new(Arc::clone(&gateway.subagents))));
                    for (agent, description) in
                        config.agents.as_tools().filter(|(agent, _)| *agent != id)
                    {
                        tools.push(Arc::new(AgentTool::new(
                            agent,
                            description,
                            Arc::clone(&gateway.subagents),
                        )));
                    }
                }
            }
            tools
        },
    )
    .with_context(|| format!("{tools_key} ({})", env.config_path.display()))?;
    // The browser is large and few turns need it: held back for tool_search.
    #[cfg(feature = "browser")]
    let tools = {
        let mut tools = tools;
        if tools_config.browser.enable {
            let browser = nanocrab_browser::browser_tool(
                &tools_config.browser,
                &tools_config.web,
                env.paths.state_dir().join("browser").join(id),
                std::env::var_os("PATH")
                    .map(|path| std::env::split_paths(&path).collect())
                    .unwrap_or_default(),
                Arc::new(nanocrab_web::SystemResolver),
            )
            .with_context(|| format!("{tools_key}.web ({})", env.config_path.display()))?;
            tools.register_deferred(Arc::new(browser));
        }
        tools
    };
    #[cfg(not(feature = "browser"))]
    if tools_config.browser.enable {
        anyhow::bail!(
            "{tools_key}.browser.enable ({}): this nanocrab was built without the browser (cargo \
             feature `browser`)",
            env.config_path.display()
        );
    }
    let memory = MemoryRetrieval {
        retriever: Arc::new(IndexRetriever {
            index,
            search: SearchOptions::from_config(&config.memory),
        }),
        rag_by_default: config.memory.rag_mode,
    };
    let agent = Agent::new(
        ModelChain::new(primary, fallbacks),
        tools,
        SessionStore::new(env.paths.sessions_dir()),
        ContextBuilder::new(workspace.clone()).with_skills(
            skill_roots,
            Arc::new(host),
            env.user_home.clone(),
        ),
        AgentSettings {
            max_tokens: settings.max_tokens,
            temperature: Some(settings.temperature),
            max_tool_iterations: settings.max_tool_iterations,
            context_window_tokens: settings.context_window_tokens,
        },
    )
    .with_id(id)
    .with_memory(memory)
    .with_memory_provenance(env.memory_provenance(id));
    // Custom tools in workspace/tools/, (re)loaded at the start of the turn after they appear
    // or change; `secret:NAME` grants name environment variables. The WASM engine, its ticker
    // thread and its HTTP client are made only once the folder exists, so a turn without
    // custom tools pays for none of them.
    #[cfg(not(feature = "wasm"))]
    if workspace.join("tools").is_dir() {
        tracing::warn!(
            "the WASM tools in {} are off: this nanocrab was built without them (cargo feature `wasm`)",
            workspace.join("tools").display()
        );
    }
    #[cfg(feature = "wasm")]
    let agent = {
        let guard = Arc::new(
            nanocrab_policy::PathGuard::new(&workspace, tools_config, env.user_home.as_deref())
                .with_context(|| format!("{tools_key} ({})", env.config_path.display()))?,
        );
        let tools_dir = workspace.join("tools");
        let mut wasm: Option<nanocrab_tools::wasm::WasmTools> = None;
        // An engine that cannot be made (no thread for its ticker) is said once, not each turn.
        let mut failed = false;
        agent.with_tool_refresh(Box::new(move |registry| {
            if wasm.is_none() && !failed && tools_dir.is_dir() {
                match nanocrab_tools::wasm::WasmTools::new(
                    Arc::clone(&guard),
                    std::env::vars().collect(),
                ) {
                    Ok(tools) => wasm = Some(tools),
                    Err(err) => {
                        failed = true;
                        tracing::warn!("the WASM tools in {} are off: {err}", tools_dir.display())
                    }
                }
            }
            if let Some(tools) = wasm.as_mut() {
                tools.sync(registry);
            }
        }))
    };
    let agent = with_mcp_servers(agent, env, config, id);
    let hooks = hooks(
        config,
        tools_config,
        launcher.as_ref(),
        Some(Arc::clone(&audit)),
        audit.redactor().clone(),
    )
    .with_context(|| env.config_path.display().to_string())?;
    let agent = match hooks {
        Some(hooks) => agent.with_hooks(Arc::new(hooks)),
        None => agent,
    };
    let agent = match &settings.housekeeping_model {
        Some(model) => {
            agent.with_housekeeping(resolve(model, &format!("{key_prefix}.housekeepingModel"))?)
        }
        None => agent,
    };
    let agent = match config.memory.consolidate_after {
        0 => agent,
        after => agent.with_consolidation(Consolidation {
            after_messages: after as usize,
            backups: env.paths.state_dir().join("memory-backups"),
        }),
    };
    Ok(BuiltAgent {
        agent,
        guard,
        workspace,
        notice,
    })
}

/// The sandbox launcher of agent `id`'s commands and hooks: this binary (`nanocrab
/// __sandbox`, dispatched in main).
pub fn sandbox_launcher(env: &Env, id: &str) -> Option<nanocrab_tools::SandboxLauncher> {
    std::env::current_exe()
        .ok()
        .map(|program| nanocrab_tools::SandboxLauncher {
            program,
            state_dir: env.paths.state_dir(),
            agent_id: id.to_owned(),
        })
}

/// The `hooks` of config, run in `tools`' `exec` sandbox (each with its own workspace access
/// and network) and audited in `audit` when given; `None` when there are none.
pub fn hooks(
    config: &Config,
    tools: &nanocrab_config::ToolsConfig,
    launcher: Option<&nanocrab_tools::SandboxLauncher>,
    audit: Option<Arc<nanocrab_policy::AuditLog>>,
    redactor: nanocrab_policy::Redactor,
) -> anyhow::Result<Option<nanocrab_hooks::CommandHooks>> {
    if config.hooks.is_empty() {
        return Ok(None);
    }
    let hooks = nanocrab_hooks::CommandHooks::new(
        &config.hooks,
        nanocrab_hooks::HookSetup {
            sandbox: &tools.exec.sandbox,
            launcher,
            base_env: std::env::vars_os().collect(),
            audit,
            redactor,
        },
    )?;
    Ok(Some(hooks))
}

/// The MCP servers of agent `id` as config gives them; a server whose `${VAR}` is not set
/// carries that error, which it reports when it would start.
#[cfg(feature = "mcp")]
pub fn mcp_entries(config: &Config, id: &str) -> Vec<nanocrab_mcp::ServerEntry> {
    config
        .mcp_servers_of(id)
        .into_iter()
        .map(|(key, name, server)| nanocrab_mcp::ServerEntry {
            problem: config.require(&key).err().map(|err| err.to_string()),
            name: name.to_owned(),
            key,
            config: server.clone(),
        })
        .collect()
}

/// The agent with the tools of its MCP servers offered in every turn (the servers start when
/// a turn first needs them).
#[cfg(feature = "mcp")]
fn with_mcp_servers(agent: Agent, env: &Env, config: &Config, id: &str) -> Agent {
    let entries = mcp_entries(config, id);
    if entries.is_empty() {
        return agent;
    }
    agent.with_tool_source(Arc::new(env.mcp_servers(config).source(entries)))
}

/// Without the MCP client, configured servers are said once, not an error.
#[cfg(not(feature = "mcp"))]
fn with_mcp_servers(agent: Agent, _env: &Env, config: &Config, id: &str) -> Agent {
    let keys: Vec<String> = config
        .mcp_servers_of(id)
        .into_iter()
        .map(|(key, _, _)| key)
        .collect();
    if !keys.is_empty() {
        tracing::warn!(
            "the MCP servers {} are off: this nanocrab was built without MCP (cargo feature `mcp`)",
            keys.join(", ")
        );
    }
    agent
}

/// Whether the user has configured any model provider: a `providers` entry, or a key in one
/// of the environment variables the known providers read.
pub fn cloud_configured(config: &Config) -> bool {
    !config.providers.is_empty()
        || nanocrab_provider::PROVIDERS
            .iter()
            .filter_map(|spec| spec.api_key_env)
            .any(|var| Env::var(var).is_some())
}

/// Resolves the models of the config, with the local ones of the process.
pub struct Models<'a> {
    pub env: &'a Env,
    pub config: &'a Config,
    pub local: LocalModels,
}

impl Models<'_> {
    /// `model` resolved, once the placeholders of its provider's section are all set.
    fn resolve_plain(&self, model: &str) -> anyhow::Result<ResolvedModel> {
        let (provider, _) = nanocrab_provider::split_model(model, self.config)?;
        self.config.require(&format!("providers.{provider}"))?;
        Ok(nanocrab_provider::resolve_model(
            model,
            self.config,
            &Env::var,
            RetryPolicy::default(),
            &self.local,
        )?)
    }

    /// `model` resolved; an error names `source` (the key it came from) and the file.
    pub fn resolve(&self, model: &str, source: &str) -> anyhow::Result<ResolvedModel> {
        self.resolve_plain(model)
            .with_context(|| format!("{source} ({})", self.env.config_path.display()))
    }

    /// The model that answers for an agent configured with `model` at `key_prefix`, and what
    /// to tell the user once when it is another one.
    pub fn primary(
        &self,
        model: &str,
        key_prefix: &str,
    ) -> anyhow::Result<(ResolvedModel, Option<String>)> {
        let (env, config, local) = (self.env, self.config, &self.local);
        let resolve = |model: &str, source: &str| self.resolve(model, source);
        match self.resolve_plain(model) {
            Ok(resolved) => Ok((resolved, None)),
            Err(err) => {
                let Some(ProviderError::MissingKey {
                    provider, env_var, ..
                }) = err.downcast_ref::<ProviderError>()
                else {
                    return Err(err.context(format!(
                        "{key_prefix}.model ({})",
                        env.config_path.display()
                    )));
                };
                let path = env.config_path.display();
                let local_model = format!("{LOCAL}/{DEFAULT_LOCAL_MODEL}");
                let model_chosen = model != Config::default().agents.defaults.model;
                match nanocrab_provider::keyed_provider(config, &Env::var) {
                    // The built-in default was never chosen by the user: the provider whose
                    // key they set answers instead, as nanobot does.
                    Some(keyed) if !model_chosen => {
                        let notice = Some(format!(
                            "{} answers: {env_var} is not set for the default {}, and {} is. \
                             Set {key_prefix}.model in {path} to choose.",
                            keyed.model, model, keyed.key_source
                        ));
                        Ok((
                            resolve(&keyed.model, &format!("{key_prefix}.model"))?,
                            notice,
                        ))
                    }
                    Some(keyed) => anyhow::bail!(
                        "{} ({key_prefix}.model in {path}) needs {env_var}, which is not set. \
                         {} is set: run with --model {}, or make it {key_prefix}.model.",
                        model,
                        keyed.key_source,
                        keyed.model
                    ),
                    // Nothing configured at all, as on a fresh install: the local model
                    // answers, if it is there, rather than an error about a key the user
                    // never meant to set.
                    None if !cloud_configured(config)
                        && local.is_installed(DEFAULT_LOCAL_MODEL) =>
                    {
                        let notice = Some(format!(
                            "no model provider is configured, so the local model {local_model} \
                             answers (small: short answers, no tools). For a stronger model: \
                             export ANTHROPIC_API_KEY=... or see `nanocrab providers list`."
                        ));
                        Ok((
                            resolve(&local_model, &format!("{key_prefix}.model"))?,
                            notice,
                        ))
                    }
                    None => Err(NoModel {
                        model: model.to_owned(),
                        key: format!("{key_prefix}.model"),
                        path: env.config_path.clone(),
                        provider: provider.clone(),
                        env_var: env_var.clone(),
                        offline: if local.is_installed(DEFAULT_LOCAL_MODEL) {
                            format!("nanocrab agent --model {local_model}")
                        } else {
                            format!("nanocrab models pull {DEFAULT_LOCAL_MODEL}")
                        },
                    }
                    .into()),
                }
            }
        }
    }
}

/// No model can answer: the configured one has no key, no other provider has one, and the
/// local model is not what answers instead.
#[derive(Debug)]
pub struct NoModel {
    pub model: String,
    /// `agents.defaults.model`.
    pub key: String,
    pub path: PathBuf,
    pub provider: String,
    pub env_var: String,
    /// How to chat offline with the local model.
    pub offline: String,
}

impl std::fmt::Display for NoModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            model,
            key,
            path,
            provider,
            env_var,
            offline,
        } = self;
        let path = path.display();
        write!(
            f,
            "no model can answer yet: {model} ({key} in {path}) needs an API key, and {env_var} \
             is not set. Any one of these fixes it:\n  \
             - export {env_var}=... (or another provider's key and --model; \
             `nanocrab providers list` shows them all)\n  \
             - set providers.{provider}.apiKey in {path}\n  \
             - point providers.custom.apiBase at a local OpenAI-compatible server \
             (Ollama: http://localhost:11434/v1) and set {key} to custom/<model>\n  \
             - chat offline with the local model: {offline}"
        )
    }
}

impl std::error::Error for NoModel {}
