#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Writes to the instruction files (bootstrap files, skills) through the registry: refused
//! without a grant or a human, however the path is spelled; with a grant they land, the
//! previous content is kept as a version and the change is reported.

use std::path::{Path, PathBuf};

use nanocrab_config::ToolsConfig;
use nanocrab_schema::{InstructionsChange, ToolCall};
use nanocrab_tools::{ToolContext, ToolPolicy, ToolRegistry, WorkspaceHistory, builtin_registry};
use pretty_assertions::assert_eq;
use serde_json::json;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    tools: ToolRegistry,
    history: WorkspaceHistory,
}

impl Fixture {
    /// A workspace with SOUL.md, a skill, and `linked.md`, a symlink to SOUL.md, under the
    /// grants `grants` gives for the workspace.
    fn new(grants: impl Fn(&Path) -> Vec<String>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("skills/weather")).unwrap();
        std::fs::write(ws.join("SOUL.md"), "be kind\n").unwrap();
        std::fs::write(ws.join("skills/weather/SKILL.md"), "use wttr.in\n").unwrap();
        std::os::unix::fs::symlink(ws.join("SOUL.md"), ws.join("linked.md")).unwrap();
        let history = WorkspaceHistory::new(root.join("state/workspace-history"));
        let tools = builtin_registry(
            &ToolsConfig {
                grants: grants(&ws),
                ..ToolsConfig::default()
            },
            &ws,
            None,
            None,
            ToolPolicy {
                workspace_history: Some(history.clone()),
                ..ToolPolicy::default()
            },
            |_| Vec::new(),
        )
        .unwrap();
        Self {
            _dir: dir,
            root,
            tools,
            history,
        }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    async fn call(
        &self,
        name: &str,
        input: serde_json::Value,
    ) -> (String, bool, Option<InstructionsChange>) {
        let call = ToolCall {
            id: "call_1".into(),
            name: name.into(),
            input,
        };
        let nanocrab_tools::Executed { result, change, .. } = self
            .tools
            .execute_reporting(&call, &ToolContext::new(self.ws()))
            .await;
        (result.content, result.is_error, change)
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test]
async fn without_a_grant_or_a_human_every_spelling_is_refused() {
    let fixture = Fixture::new(|_| Vec::new());
    let ws = fixture.ws();
    let soul = ws.join("SOUL.md");
    let spellings = [
        "SOUL.md".to_owned(),
        "./SOUL.md".to_owned(),
        "notes/../SOUL.md".to_owned(),
        soul.display().to_string(),
        "linked.md".to_owned(),
        "AGENTS.md".to_owned(),
        "skills/weather/SKILL.md".to_owned(),
        "skills/new/SKILL.md".to_owned(),
    ];
    for path in &spellings {
        let (text, is_error, change) = fixture
            .call(
                "write_file",
                json!({"path": path, "content": "obey evil\n"}),
            )
            .await;
        assert!(is_error, "{path}: {text}");
        assert!(
            text.starts_with("Error: write_file needs approval (guarded) for fs.write:"),
            "{path}: {text}"
        );
        assert_eq!(change, None);
    }
    let (text, is_error, _) = fixture
        .call(
            "edit_file",
            json!({"path": "SOUL.md", "old_text": "kind", "new_text": "evil"}),
        )
        .await;
    assert!(is_error, "{text}");
    assert_eq!(read(&soul), "be kind\n");
    assert!(!ws.join("AGENTS.md").exists());
    assert!(!ws.join("skills/new").exists());
    assert_eq!(fixture.history.paths("main").unwrap(), Vec::<String>::new());

    let (text, is_error, change) = fixture
        .call(
            "write_file",
            json!({"path": "notes/SOUL.md", "content": "just a note\n"}),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(change, None, "a note is not an instruction file");
}

#[tokio::test]
async fn with_a_grant_the_change_lands_is_kept_and_is_reported() {
    let fixture = Fixture::new(|ws| vec![format!("fs.write:{}", ws.join("SOUL.md").display())]);
    let soul = fixture.ws().join("SOUL.md");
    let (text, is_error, change) = fixture
        .call(
            "edit_file",
            json!({"path": "linked.md", "old_text": "kind", "new_text": "brief"}),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(read(&soul), "be brief\n");
    assert_eq!(
        change,
        Some(InstructionsChange {
            agent: "main".into(),
            path: "SOUL.md".into(),
            version: 1,
            tool: "edit_file".into(),
        })
    );
    let (kept, before) = fixture.history.content("main", "SOUL.md", 1).unwrap();
    assert_eq!(before.as_deref(), Some("be kind\n".as_bytes()));
    assert_eq!(kept.tool, "edit_file");

    // The grant names SOUL.md only: the skills stay guarded.
    let (_, is_error, _) = fixture
        .call(
            "write_file",
            json!({"path": "skills/weather/SKILL.md", "content": "obey evil\n"}),
        )
        .await;
    assert!(is_error);
}
