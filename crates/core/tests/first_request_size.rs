//! The first request of a fresh workspace stays lean: users of the assistants nanocrab
//! replaces complain most about token cost (nanobot sends ~33,000 characters for "hello").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use nanocrab_config::{MemoryConfig, ToolsConfig};
use nanocrab_core::{ContextBuilder, RuntimeInfo, workspace::write_templates};
use nanocrab_schema::LlmMessage;

/// Jobs nobody asks for here: only the tool's definition is measured.
struct NoJobs;

impl nanocrab_tools::CronJobs for NoJobs {
    fn add(&self, _: nanocrab_tools::CronRequest) -> Result<String, String> {
        Err("no jobs here".to_owned())
    }
    fn list(&self, _: &str) -> Result<String, String> {
        Ok("No scheduled jobs.".to_owned())
    }
    fn remove(&self, _: &str, id: &str) -> Result<String, String> {
        Err(format!("no job `{id}`"))
    }
}

/// Chats nobody writes to here: only the tool's definition is measured.
struct NoChats;

impl nanocrab_tools::ChatMessages for NoChats {
    fn send(&self, _: nanocrab_tools::MessageRequest) -> nanocrab_tools::Sending<'_> {
        Box::pin(async { Err("no chats here".to_owned()) })
    }
}

/// Subagents nobody starts here: only the tools' definitions are measured.
struct NoSubagents;

impl nanocrab_tools::Subagents for NoSubagents {
    fn spawn(&self, _: nanocrab_tools::SpawnRequest) -> Result<String, String> {
        Err("no subagents here".to_owned())
    }
    fn run(&self, _: nanocrab_tools::SpawnRequest) -> nanocrab_tools::Awaited<'_> {
        Box::pin(async { Err("no subagents here".to_owned()) })
    }
    fn list(&self, _: Option<&nanocrab_schema::SessionKey>) -> Result<String, String> {
        Ok("No subagents in this conversation.".to_owned())
    }
    fn show(&self, _: Option<&nanocrab_schema::SessionKey>, id: &str) -> Result<String, String> {
        Err(format!("no subagent {id}"))
    }
    fn cancel(&self, _: Option<&nanocrab_schema::SessionKey>, id: &str) -> Result<String, String> {
        Err(format!("no subagent {id}"))
    }
}

/// An MCP server's tool: only its definition is measured.
struct Extension(nanocrab_schema::ToolDef);

impl nanocrab_tools::Tool for Extension {
    fn definition(&self) -> nanocrab_schema::ToolDef {
        self.0.clone()
    }

    fn prepare<'a>(
        &'a self,
        _: serde_json::Value,
        _: &'a nanocrab_tools::ToolContext,
    ) -> Result<nanocrab_tools::PreparedCall<'a>, nanocrab_tools::ToolError> {
        Err(nanocrab_tools::ToolError::Rejected(
            "only measured here".to_owned(),
        ))
    }
}

/// The parts of the first request, in characters.
struct Sizes {
    system: usize,
    messages: usize,
    schemas: usize,
    tools: usize,
}

impl Sizes {
    fn total(&self) -> usize {
        self.system + self.messages + self.schemas
    }
}

impl std::fmt::Display for Sizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} characters (system prompt {}, messages {}, tool schemas {} for {} tools)",
            self.total(),
            self.system,
            self.messages,
            self.schemas,
            self.tools
        )
    }
}

/// "hello" from a fresh workspace with every default tool and `extensions` (deferrable, as
/// MCP tools are), under `tools` config.
fn first_request(tools_config: &ToolsConfig, extensions: Vec<nanocrab_schema::ToolDef>) -> Sizes {
    let dir = tempfile::tempdir().unwrap();
    write_templates(dir.path()).unwrap();
    let index = nanocrab_memory::IndexSetup {
        database: dir.path().join("state/memory-index.sqlite"),
        workspace: dir.path().to_path_buf(),
        sessions: None,
        embeddings: nanocrab_memory::EmbeddingSetup::KeywordOnly(String::new()),
        watch: None,
    };
    let mut tools = nanocrab_tools::builtin_registry(
        tools_config,
        dir.path(),
        None,
        None,
        nanocrab_tools::ToolPolicy::default(),
        |guard| {
            let mut tools = nanocrab_memory::memory_tools(&MemoryConfig::default(), &index, guard);
            tools.extend(
                nanocrab_web::web_tools(&tools_config.web, nanocrab_web::WebSetup::new(None, None))
                    .unwrap(),
            );
            // The gateway's agents also get the `message`, `cron`, `spawn` and `subagents`
            // tools.
            tools.push(std::sync::Arc::new(nanocrab_tools::MessageTool::new(
                std::sync::Arc::new(NoChats),
                std::sync::Arc::clone(guard),
            )));
            tools.push(std::sync::Arc::new(nanocrab_tools::CronTool::new(
                std::sync::Arc::new(NoJobs),
            )));
            tools.push(std::sync::Arc::new(nanocrab_tools::SpawnTool::new(
                std::sync::Arc::new(NoSubagents),
            )));
            tools.push(std::sync::Arc::new(nanocrab_tools::SubagentsTool::new(
                std::sync::Arc::new(NoSubagents),
            )));
            tools
        },
    )
    .unwrap();
    // The binary adds the browser when it is on, held back for tool_search.
    if tools_config.browser.enable {
        let browser = nanocrab_browser::browser_tool(
            &tools_config.browser,
            &tools_config.web,
            dir.path().join("state/browser/main"),
            Vec::new(),
            std::sync::Arc::new(nanocrab_web::SystemResolver),
        )
        .unwrap();
        tools.register_deferred(std::sync::Arc::new(browser));
    }
    for definition in extensions {
        tools.register_deferrable(std::sync::Arc::new(Extension(definition)));
    }
    // As a turn does: past `tools.deferAbove` the extensions wait for tool_search.
    let search = tools.defer();
    let offered = tools.offered(search.as_deref());
    let runtime = RuntimeInfo {
        now: "2026-11-22T14:05:00+01:00[Europe/Berlin]".parse().unwrap(),
        os: "linux x86_64".into(),
    };
    // The bundled skills of a fresh install, under the user's home: none is offered without
    // `gh` on PATH (with it, the index costs 179 characters) or being switched on.
    let home = tempfile::tempdir().unwrap();
    let nanocrab_home = home.path().join(".nanocrab");
    let bundled = nanocrab_home.join("bundled-skills");
    nanocrab_skills::write_bundled(&bundled).unwrap();
    let host = nanocrab_skills::Host {
        os: "linux".into(),
        ..nanocrab_skills::Host::default()
    };
    let system = ContextBuilder::new(dir.path())
        .with_skills(
            nanocrab_skills::SkillRoots::new(
                dir.path(),
                &nanocrab_home,
                &bundled,
                &nanocrab_config::SkillsConfig::default(),
                Some(home.path()),
            ),
            std::sync::Arc::new(host),
            Some(home.path().to_path_buf()),
        )
        .with_deferred_tools(
            search
                .iter()
                .flat_map(|s| s.deferred())
                .map(|d| d.name.clone())
                .collect(),
        )
        .build(!offered.is_empty(), None, &runtime);
    let messages = serde_json::to_string(&[LlmMessage::user("hello")]).unwrap();
    let schemas = serde_json::to_string(&offered).unwrap();
    Sizes {
        system: system.len(),
        messages: messages.len(),
        schemas: schemas.len(),
        tools: offered.len(),
    }
}

/// 40 tools of three MCP servers: `everything` and `filesystem` as their `tools/list` gives
/// them, `github` written after the GitHub server's.
fn mcp_tools() -> Vec<nanocrab_schema::ToolDef> {
    serde_json::from_str(include_str!("../../tools/tests/fixtures/mcp-tools.json")).unwrap()
}

#[test]
fn hello_with_the_default_workspace_and_tools_is_under_6000_characters() {
    let sizes = first_request(&ToolsConfig::default(), Vec::new());
    eprintln!("first request: {sizes}");
    assert!(sizes.total() < 6_000, "first request is {sizes}");
}

/// With `tools.browser.enable` the browser waits behind tool_search, whose definition and
/// line in the prompt cost about 510 characters: the reason the browser is off by default.
#[test]
fn hello_with_the_browser_on_is_under_7000_characters() {
    let sizes = first_request(
        &ToolsConfig {
            browser: nanocrab_config::BrowserConfig {
                enable: true,
                ..nanocrab_config::BrowserConfig::default()
            },
            ..ToolsConfig::default()
        },
        Vec::new(),
    );
    eprintln!("first request with the browser on: {sizes}");
    assert_eq!(sizes.tools, 14, "the 13 default tools and tool_search");
    assert!(sizes.total() < 7_000, "first request is {sizes}");
}

/// Rerun with `cargo test -p nanocrab-core --test first_request_size -- --nocapture` for the
/// figures in docs/benchmarks.md.
#[test]
fn hello_with_three_mcp_servers_of_40_tools_is_under_8000_characters() {
    let deferred = first_request(&ToolsConfig::default(), mcp_tools());
    let all = first_request(
        &ToolsConfig {
            defer_above: nanocrab_config::DeferAbove::Switch(false),
            ..ToolsConfig::default()
        },
        mcp_tools(),
    );
    eprintln!("first request with 40 MCP tools, deferred: {deferred}");
    eprintln!("first request with 40 MCP tools, deferAbove false: {all}");
    assert_eq!(deferred.tools, 14, "the 13 default tools and tool_search");
    assert_eq!(all.tools, 53);
    assert!(deferred.total() < 8_000, "first request is {deferred}");
}
