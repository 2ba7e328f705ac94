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

#[test]
fn hello_with_the_default_workspace_and_tools_is_under_6000_characters() {
    let dir = tempfile::tempdir().unwrap();
    write_templates(dir.path()).unwrap();
    let index = nanocrab_memory::IndexSetup {
        database: dir.path().join("state/memory-index.sqlite"),
        workspace: dir.path().to_path_buf(),
        sessions: None,
        embeddings: nanocrab_memory::EmbeddingSetup::KeywordOnly(String::new()),
    };
    let tools = nanocrab_tools::builtin_registry(
        &ToolsConfig::default(),
        dir.path(),
        None,
        None,
        nanocrab_tools::ToolPolicy::default(),
        |guard| {
            let mut tools = nanocrab_memory::memory_tools(&MemoryConfig::default(), &index, guard);
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
        .build(&tools.names(), None, &runtime);
    let messages = serde_json::to_string(&[LlmMessage::user("hello")]).unwrap();
    let schemas = serde_json::to_string(&tools.definitions()).unwrap();

    let total = system.len() + messages.len() + schemas.len();
    eprintln!(
        "first request: {total} characters (system prompt {}, messages {}, tool schemas {})",
        system.len(),
        messages.len(),
        schemas.len()
    );
    assert!(
        total < 6_000,
        "first request is {total} characters: system prompt {}, messages {}, tool schemas {}",
        system.len(),
        messages.len(),
        schemas.len()
    );
}
