//! One module per subcommand, plus what they share: where things are on disk and how the
//! config is loaded.

pub mod agent;
pub mod agents;
pub mod audit;
pub mod cron;
pub mod embedding_progress;
pub mod gateway;
pub mod gateway_api;
pub mod heartbeat;
pub mod hooks;
pub mod mcp;
pub mod memory;
pub mod models;
pub mod onboard;
pub mod pairing;
pub mod security;
pub mod sessions;
pub mod skills;
pub mod status;
pub mod stdin_approver;
pub mod subagents;
pub mod usage;
pub mod web_reports;
pub mod workspace;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use nanocrab_config::{Config, DEFAULT_AGENT_ID, Paths};
use std::sync::Arc;

use nanocrab_memory::{ChangeWatch, EmbeddingSetup, IndexSetup};
use nanocrab_policy::{AuditLog, Redactor};
use nanocrab_provider::LocalModels;
use nanocrab_skills::{Host, SkillRoots};
use nanocrab_tools::MemoryProvenance;

/// Where this invocation reads and writes, resolved once from flags and the environment.
#[derive(Clone)]
pub struct Env {
    pub paths: Paths,
    pub config_path: PathBuf,
    pub user_home: Option<PathBuf>,
    /// The local chat models, shared by every agent of the process so each loads once.
    local_models: std::sync::OnceLock<LocalModels>,
    /// The audit log, opened once and shared by every agent of the process.
    audit: std::sync::OnceLock<Arc<AuditLog>>,
    /// The MCP servers, shared by every agent of the process; none starts before a turn needs
    /// its tools.
    #[cfg(feature = "mcp")]
    mcp: std::sync::OnceLock<nanocrab_mcp::McpServers>,
    /// In a long-running process, each workspace's memory folders watched for changes (so a
    /// search syncs only what changed), by workspace; `None` in a one-shot command.
    memory_watches: Option<Arc<std::sync::Mutex<MemoryWatches>>>,
}

/// Each workspace's watch, or `None` where the system refused one.
type MemoryWatches = HashMap<PathBuf, Option<ChangeWatch>>;

/// A local model unused this long is dropped from memory, and loaded again when next asked.
const LOCAL_MODEL_UNLOAD_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

impl Env {
    pub fn from_process(config_flag: Option<PathBuf>) -> anyhow::Result<Self> {
        let paths = Paths::from_env()?;
        let config_path = config_flag.unwrap_or_else(|| paths.config_file());
        Ok(Self {
            paths,
            config_path,
            user_home: std::env::home_dir(),
            local_models: std::sync::OnceLock::new(),
            audit: std::sync::OnceLock::new(),
            #[cfg(feature = "mcp")]
            mcp: std::sync::OnceLock::new(),
            memory_watches: None,
        })
    }

    /// This environment for a process that runs a while (the gateway, an interactive agent):
    /// the memory folders are watched, so a search syncs only the files that changed.
    pub fn watching_memory(mut self) -> Self {
        self.memory_watches = Some(Arc::default());
        self
    }

    /// The watch of `workspace`'s memory folders, started on first use; `None` in a one-shot
    /// command, or when the system refuses a watch (said once: searches then look at every
    /// file, as a one-shot command's do).
    fn memory_watch(&self, workspace: &Path, sessions: Option<&Path>) -> Option<ChangeWatch> {
        let watches = self.memory_watches.as_ref()?;
        let mut watches = watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        watches
            .entry(workspace.to_path_buf())
            .or_insert_with(|| match ChangeWatch::start(workspace, sessions) {
                Ok(watch) => Some(watch),
                Err(err) => {
                    tracing::warn!("{err}; memory searches look at every file instead");
                    None
                }
            })
            .clone()
    }

    /// The process's MCP servers: stdio servers get the plain variables of this environment
    /// and their own `env`; what they print is redacted with the secrets of `config`.
    #[cfg(feature = "mcp")]
    pub fn mcp_servers(&self, config: &Config) -> nanocrab_mcp::McpServers {
        self.mcp
            .get_or_init(|| {
                nanocrab_mcp::McpServers::new(nanocrab_mcp::McpOptions::new(
                    std::env::vars().collect(),
                    self.user_home.clone(),
                    redactor(config),
                ))
            })
            .clone()
    }

    /// Stops the MCP servers this process started (sessions closed, programs and what they
    /// started ended); the CLI and the gateway do on their way out.
    pub async fn shutdown_mcp(&self) {
        #[cfg(feature = "mcp")]
        if let Some(servers) = self.mcp.get() {
            servers.shutdown().await;
        }
    }

    /// The process's local chat models, over the catalogue `config` extends.
    pub fn local_models(&self, config: &Config) -> anyhow::Result<LocalModels> {
        if let Some(models) = self.local_models.get() {
            return Ok(models.clone());
        }
        let catalogue = nanocrab_models::Catalogue::from_config(&config.models)
            .with_context(|| format!("models.entries ({})", self.config_path.display()))?;
        let models = LocalModels::new(
            nanocrab_models::ModelStore::new(self.paths.models_dir()),
            catalogue,
            Some(LOCAL_MODEL_UNLOAD_AFTER),
        );
        Ok(self.local_models.get_or_init(|| models).clone())
    }

    /// The audit log at `state/audit.sqlite`, secrets of `config` and the environment
    /// redacted from what it keeps.
    pub fn audit_log(&self, config: &Config) -> anyhow::Result<Arc<AuditLog>> {
        if let Some(log) = self.audit.get() {
            return Ok(Arc::clone(log));
        }
        let log = Arc::new(AuditLog::open(&self.paths.audit_log(), redactor(config))?);
        Ok(Arc::clone(self.audit.get_or_init(|| log)))
    }

    /// Environment variables as the config and providers see them (`${VAR}` placeholders,
    /// API-key fallbacks).
    pub fn var(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|value| !value.is_empty())
    }

    /// Loads the config file; a nanobot file's note (what was mapped, what has no effect) goes
    /// to stderr, where scripts reading stdout do not see it.
    pub fn load_config(&self) -> anyhow::Result<nanocrab_config::Loaded> {
        let loaded = nanocrab_config::load(&self.config_path, &Self::var)
            .and_then(|loaded| {
                nanocrab_provider::check_config(&loaded.config, &self.config_path).map(|()| loaded)
            })
            .with_context(|| "cannot load the configuration")?;
        if let Some(note) = &loaded.config.nanobot {
            eprintln!("note: {note}");
        }
        Ok(loaded)
    }

    /// The default agent's workspace, `~` expanded.
    pub fn workspace(&self, config: &Config) -> PathBuf {
        self.agent_workspace(config, DEFAULT_AGENT_ID)
    }

    /// Where agent `id` keeps its files: the configured path, `~` expanded, or
    /// `workspace/` (the default agent) or `workspace-<id>/` under the home.
    pub fn agent_workspace(&self, config: &Config, id: &str) -> PathBuf {
        let configured = if id == DEFAULT_AGENT_ID {
            config.agents.defaults.workspace.as_ref()
        } else {
            config
                .agents
                .entries
                .get(id)
                .and_then(|e| e.workspace.as_ref())
        };
        match configured {
            Some(path) => nanocrab_config::expand_home(path, self.user_home.as_deref()),
            None if id == DEFAULT_AGENT_ID => self.paths.workspace(),
            None => self.paths.home().join(format!("workspace-{id}")),
        }
    }

    /// Where agent `id`'s skills come from (the bundled ones written out first, when they
    /// changed), and what their requirements are checked against.
    pub fn skills(&self, config: &Config, id: &str) -> (SkillRoots, Host) {
        let bundled = self.paths.bundled_skills_dir();
        if let Err(err) = nanocrab_skills::write_bundled(&bundled) {
            tracing::warn!(
                "cannot write the bundled skills to {}: {err}",
                bundled.display()
            );
        }
        let roots = SkillRoots::new(
            &self.agent_workspace(config, id),
            self.paths.home(),
            &bundled,
            &config.skills,
            self.user_home.as_deref(),
        );
        let host = Host::from_process(&serde_json::to_value(config).unwrap_or_default());
        (roots, host)
    }

    /// Where agent `id`'s memory notes written from untrusted content are marked, beside its
    /// index.
    pub fn memory_provenance(&self, id: &str) -> MemoryProvenance {
        MemoryProvenance::new(if id == DEFAULT_AGENT_ID {
            self.paths.state_dir().join("memory-provenance.jsonl")
        } else {
            self.paths
                .state_dir()
                .join(format!("memory-provenance-{id}.jsonl"))
        })
    }

    /// How agent `id`'s memory is searched, as the config says; each agent has an index of
    /// its own workspace.
    pub fn index_setup(&self, config: &Config, id: &str) -> IndexSetup {
        let workspace = self.agent_workspace(config, id);
        let sessions = config
            .memory
            .index_sessions
            .then(|| self.paths.sessions_dir());
        IndexSetup {
            watch: self.memory_watch(&workspace, sessions.as_deref()),
            database: if id == DEFAULT_AGENT_ID {
                self.paths.memory_index()
            } else {
                self.paths
                    .state_dir()
                    .join(format!("memory-index-{id}.sqlite"))
            },
            workspace,
            sessions,
            // Search by keyword still works without a remote endpoint's variables, and says
            // why.
            embeddings: match config.unresolved_under("memory.embeddings").next() {
                Some(unresolved)
                    if config.memory.embeddings.provider
                        == nanocrab_config::EmbeddingBackend::OpenAi =>
                {
                    EmbeddingSetup::KeywordOnly(unresolved.error().to_string())
                }
                Some(_) | None => EmbeddingSetup::from_config(
                    &config.memory,
                    &config.models,
                    self.paths.models_dir(),
                    &Self::var,
                ),
            },
        }
    }
}

/// Every secret value this process knows, named by where it came from: the keys and tokens
/// in `config` (placeholders already filled in) and environment variables whose names say
/// they hold one.
pub fn redactor(config: &Config) -> Redactor {
    let mut secrets: Vec<(String, String)> = Vec::new();
    for (name, provider) in &config.providers {
        if let Some(key) = &provider.api_key {
            secrets.push((format!("providers.{name}.apiKey"), key.clone()));
        }
    }
    if let Some(telegram) = &config.channels.telegram {
        secrets.push(("channels.telegram.token".into(), telegram.token.clone()));
    }
    if let Some(slack) = &config.channels.slack {
        secrets.push(("channels.slack.botToken".into(), slack.bot_token.clone()));
        secrets.push(("channels.slack.appToken".into(), slack.app_token.clone()));
        for (name, account) in &slack.accounts {
            let key = format!("channels.slack.accounts.{name}");
            secrets.push((format!("{key}.botToken"), account.bot_token.clone()));
            secrets.push((format!("{key}.appToken"), account.app_token.clone()));
        }
    }
    if let Some(email) = &config.channels.email {
        secrets.push((
            "channels.email.imapPassword".into(),
            email.imap_password.clone(),
        ));
        secrets.push((
            "channels.email.smtpPassword".into(),
            email.smtp_password.clone(),
        ));
        for (name, account) in &email.accounts {
            let key = format!("channels.email.accounts.{name}");
            secrets.push((format!("{key}.imapPassword"), account.imap_password.clone()));
            secrets.push((format!("{key}.smtpPassword"), account.smtp_password.clone()));
        }
    }
    if let Some(discord) = &config.channels.discord {
        secrets.push(("channels.discord.token".into(), discord.token.clone()));
        for (name, account) in &discord.accounts {
            secrets.push((
                format!("channels.discord.accounts.{name}.token"),
                account.token.clone(),
            ));
        }
    }
    if let Some(token) = &config.gateway.auth.token {
        secrets.push(("gateway.auth.token".into(), token.clone()));
    }
    // The search provider's key, from each agent's tools.web.
    for (key, tools) in std::iter::once(("tools".to_owned(), &config.tools)).chain(
        config.agents.entries.iter().filter_map(|(id, entry)| {
            Some((format!("agents.entries.{id}.tools"), entry.tools.as_ref()?))
        }),
    ) {
        if let Some(search_key) = tools.web.search.key() {
            secrets.push((format!("{key}.web.search.apiKey"), search_key.to_owned()));
        }
    }
    if let Some(key) = &config.memory.embeddings.api_key {
        secrets.push(("memory.embeddings.apiKey".into(), key.clone()));
    }
    if let Some(key) = config
        .tools
        .transcription
        .as_ref()
        .and_then(|t| t.api_key.as_ref())
    {
        secrets.push(("tools.transcription.apiKey".into(), key.clone()));
    }
    // What MCP servers are given: tokens in `env`, `Authorization` in `headers`.
    for id in config.agents.ids() {
        for (key, _, server) in config.mcp_servers_of(id) {
            for (name, value) in &server.env {
                secrets.push((format!("{key}.env.{name}"), value.clone()));
            }
            for (name, value) in &server.headers {
                secrets.push((format!("{key}.headers.{name}"), value.clone()));
                // `Bearer <token>`: the token alone, as a server might echo it.
                if let Some((_, credential)) = value.split_once(' ') {
                    secrets.push((
                        format!("{key}.headers.{name}"),
                        credential.trim().to_owned(),
                    ));
                }
            }
            // A key in the address (`?api_key=…`, `https://user:key@…`), and the value of an
            // argument named as one (`--api-key X`, `--token=X`): shown by `mcp list`, and in
            // errors.
            if let Some(url) = server
                .url
                .as_deref()
                .and_then(|url| reqwest::Url::parse(url).ok())
            {
                secrets.extend(url.password().map(|p| (format!("{key}.url"), p.to_owned())));
                for (_, value) in url.query_pairs() {
                    secrets.push((format!("{key}.url"), value.into_owned()));
                }
            }
            let secret_name = |arg: &str| {
                let arg = arg.to_ascii_lowercase();
                ["key", "token", "secret", "password"]
                    .iter()
                    .any(|word| arg.starts_with('-') && arg.contains(word))
            };
            for (i, arg) in server.args.iter().enumerate() {
                let value = match arg.split_once('=') {
                    Some((name, value)) if secret_name(name) => Some(value),
                    Some(_) | None if i > 0 && secret_name(&server.args[i - 1]) => {
                        Some(arg.as_str())
                    }
                    Some(_) | None => None,
                };
                secrets.extend(value.map(|v| (format!("{key}.args.{i}"), v.to_owned())));
            }
        }
    }
    // Secrets granted to tools by name (`secret:NAME`) are environment variables too.
    let granted: Vec<&str> = std::iter::once(&config.tools)
        .chain(
            config
                .agents
                .entries
                .values()
                .filter_map(|e| e.tools.as_ref()),
        )
        .flat_map(|tools| &tools.grants)
        .filter_map(|grant| grant.strip_prefix("secret:"))
        .collect();
    for (name, value) in std::env::vars() {
        let upper = name.to_ascii_uppercase();
        if ["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_ACCESS_KEY"]
            .iter()
            .any(|suffix| upper.ends_with(suffix))
            || granted.contains(&name.as_str())
        {
            secrets.push((name, value));
        }
    }
    Redactor::new(secrets)
}
