#![allow(clippy::unwrap_used, clippy::expect_used)]
//! memory_search and memory_get as the agent gets them, after the built-in tools that write
//! the notes they find, against real files; memory_get's rows of issue 7's bypass table
//! (crates/tools/tests/bypass_table.rs has the other tools').

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use nanocrab_config::{MemoryConfig, ToolsConfig};
use nanocrab_memory::{EmbeddingSetup, IndexSetup, memory_tools};
use nanocrab_schema::{ToolCall, ToolResult};
use nanocrab_tools::{ToolContext, ToolPolicy, ToolRegistry, builtin_registry, wrap_untrusted};
use pretty_assertions::assert_eq;
use serde_json::json;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    tools: ToolRegistry,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/notes")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/secret"), "s").unwrap();
        let index = IndexSetup {
            database: root.join("state/memory-index.sqlite"),
            workspace: root.join("ws"),
            sessions: None,
            embeddings: EmbeddingSetup::KeywordOnly("no embedding model".to_owned()),
            watch: None,
        };
        let tools = builtin_registry(
            &ToolsConfig::default(),
            &root.join("ws"),
            Some(&root.join("home")),
            None,
            ToolPolicy::default(),
            |guard| memory_tools(&MemoryConfig::default(), &index, guard),
        )
        .unwrap();
        Self {
            _dir: dir,
            root,
            tools,
        }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    async fn call(&self, name: &str, input: serde_json::Value) -> ToolResult {
        let call = ToolCall {
            id: "call_1".into(),
            name: name.into(),
            input,
        };
        self.tools
            .execute(&call, &ToolContext::new(self.ws()))
            .await
    }

    /// What the model gets from a document: fenced as untrusted.
    fn data(&self, source: String, text: &str) -> ToolResult {
        ToolResult::ok("call_1", wrap_untrusted(&source, text))
    }

    fn outside(&self, access: &str, asked: &str, resolved: &str) -> ToolResult {
        ToolResult::error(
            "call_1",
            format!(
                "Error: cannot {access} `{asked}`: it resolves to {}, which is outside the \
                 workspace {}; no other paths are allowed (tools.allowedPaths)",
                self.root.join(resolved).display(),
                self.ws().display()
            ),
        )
    }
}

#[tokio::test]
async fn a_note_written_by_the_agent_is_found_by_memory_search_and_read_by_memory_get() {
    let fx = Fixture::new();
    assert_eq!(
        fx.call("memory_search", json!({"query": "dentist"})).await,
        ToolResult::ok(
            "call_1",
            "No memory matches \"dentist\" (keyword search only: no embedding model). Try other words, or read memory/MEMORY.md."
        )
    );
    fx.call(
        "write_file",
        json!({"path": "memory/MEMORY.md", "content": "# People\n- Ada: sister, Lisbon.\n\n# Health\n- Dentist: Dr. Okafor, every March.\n"}),
    )
    .await;
    assert_eq!(
        fx.call(
            "memory_search",
            json!({"query": "when is my dentist?", "limit": 3})
        )
        .await,
        // The agent's own note, not written from untrusted text: shown as it is.
        ToolResult::ok(
            "call_1",
            "1. memory/MEMORY.md:4-5 (score 1.00)\n# Health\n- Dentist: Dr. Okafor, every March."
        )
    );
    assert_eq!(
        fx.call(
            "memory_get",
            json!({"path": "memory/MEMORY.md", "start_line": 4, "end_line": 9})
        )
        .await,
        ToolResult::ok(
            "call_1",
            "memory/MEMORY.md:4-5\n# Health\n- Dentist: Dr. Okafor, every March."
        )
    );
    assert_eq!(
        fx.call(
            "memory_get",
            json!({"path": "memory/MEMORY.md", "end_line": 1})
        )
        .await,
        ToolResult::ok(
            "call_1",
            "memory/MEMORY.md:1-1\n# People\n[lines 2-5 not shown]"
        )
    );
}

#[tokio::test]
async fn a_pdf_is_searched_and_read_as_its_text_and_an_unreadable_one_says_why() {
    let fx = Fixture::new();
    let pdf = include_bytes!("data/boiler.pdf");
    std::fs::create_dir_all(fx.ws().join("knowledge")).unwrap();
    std::fs::write(fx.ws().join("knowledge/boiler.pdf"), pdf).unwrap();
    std::fs::write(fx.ws().join("knowledge/cut.pdf"), &pdf[..pdf.len() / 2]).unwrap();
    assert_eq!(
        fx.call("memory_search", json!({"query": "boiler pressure"}))
            .await
            .content
            .lines()
            .take(2)
            .collect::<Vec<_>>(),
        // A document comes from elsewhere: its snippet is fenced, naming it.
        vec![
            "1. knowledge/boiler.pdf:1-6 (score 1.00)",
            "<untrusted-data source=\"knowledge/boiler.pdf\">"
        ]
    );
    assert_eq!(
        fx.call(
            "memory_get",
            json!({"path": "knowledge/boiler.pdf", "start_line": 5})
        )
        .await,
        fx.data(
            "memory_get knowledge/boiler.pdf".into(),
            "knowledge/boiler.pdf:5-6\nWarranty\nThe warranty ends in March 2031. Zoë at the installer files the claims."
        )
    );
    let cut = fx
        .call("memory_get", json!({"path": "knowledge/cut.pdf"}))
        .await;
    assert!(
        cut.is_error
            && cut
                .content
                .starts_with("Error: knowledge/cut.pdf: the PDF cannot be read: "),
        "{cut:?}"
    );
}

#[tokio::test]
async fn memory_get_reads_only_memory_files_and_documents() {
    let fx = Fixture::new();
    std::fs::write(fx.ws().join("notes/plan.md"), "plan").unwrap();
    assert_eq!(
        fx.call("memory_get", json!({"path": "notes/plan.md"}))
            .await,
        ToolResult::error(
            "call_1",
            "Error: notes/plan.md is not a memory file or document: memory_get reads memory/ and knowledge/ (use read_file for other files)"
        )
    );
    // A memory path that leaves the workspace is refused by the path guard first.
    assert_eq!(
        fx.call("memory_get", json!({"path": "memory/../../outside/secret"}))
            .await,
        fx.outside("read", "memory/../../outside/secret", "outside/secret")
    );
    assert!(
        fx.call(
            "memory_get",
            json!({"path": "memory/MEMORY.md", "start_line": 0})
        )
        .await
        .is_error
    );
}

/// Issue 7's bypass table, memory_get's rows: the path guard's answer, or memory_get's own
/// refusal of what is not a memory file or document, reaches the model unchanged.
#[tokio::test]
async fn every_memory_get_bypass_attempt_is_denied() {
    let fx = Fixture::new();
    let ws = fx.ws();
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::create_dir_all(ws.join("sessions")).unwrap();
    std::fs::write(ws.join("notes/a.md"), "a\n").unwrap();
    std::fs::write(ws.join("sessions/s.jsonl"), "{}\n").unwrap();
    symlink("../../outside/secret", ws.join("memory/link_out")).unwrap();
    symlink("../sessions", ws.join("memory/to_sessions")).unwrap();
    let not_memory = |asked: &str| {
        ToolResult::error(
            "call_1",
            format!(
                "Error: {asked} is not a memory file or document: memory_get reads memory/ and \
                 knowledge/ (use read_file for other files)"
            ),
        )
    };
    let rows = vec![
        (
            "memory link out",
            json!({"path": "memory/link_out"}),
            fx.outside("read", "memory/link_out", "outside/secret"),
        ),
        (
            "memory `..` climbing",
            json!({"path": "memory/../../outside/secret"}),
            fx.outside("read", "memory/../../outside/secret", "outside/secret"),
        ),
        (
            "memory of a transcript",
            json!({"path": "sessions/s.jsonl"}),
            ToolResult::error(
                "call_1",
                "Error: transcripts are not read with memory_get: the memory_search snippet shows what was said there",
            ),
        ),
        (
            "memory of a transcript via `./`",
            json!({"path": "./sessions/s.jsonl"}),
            not_memory("./sessions/s.jsonl"),
        ),
        (
            "memory of a transcript via a link",
            json!({"path": "memory/to_sessions/s.jsonl"}),
            not_memory("memory/to_sessions/s.jsonl"),
        ),
        (
            "memory of another workspace file",
            json!({"path": "notes/a.md"}),
            not_memory("notes/a.md"),
        ),
    ];
    let mut expected = Vec::new();
    let mut got = Vec::new();
    for (name, input, outcome) in rows {
        got.push((name, fx.call("memory_get", input).await));
        expected.push((name, outcome));
    }
    assert_eq!(got, expected);
}
