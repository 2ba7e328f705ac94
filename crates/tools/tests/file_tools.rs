#![allow(clippy::unwrap_used, clippy::expect_used)]
//! read_file, write_file, edit_file and list_dir against real files, denials included.

use std::path::PathBuf;

use nanocrab_config::ToolsConfig;
use nanocrab_schema::{ToolCall, ToolResult};
use nanocrab_tools::{ToolContext, ToolRegistry, builtin_registry, wrap_untrusted};
use pretty_assertions::assert_eq;
use serde_json::json;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    tools: ToolRegistry,
}

impl Fixture {
    fn new(config: ToolsConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/notes")).unwrap();
        std::fs::create_dir_all(root.join("ws/secrets")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/secret"), "s").unwrap();
        std::os::unix::fs::symlink(root.join("outside"), root.join("ws/link_dir")).unwrap();
        let tools = builtin_registry(
            &config,
            &root.join("ws"),
            Some(&root.join("home")),
            None,
            nanocrab_tools::ToolPolicy::default(),
            |_| Vec::new(),
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

    /// What the model gets from a file listing: fenced as untrusted.
    fn data(&self, source: String, text: &str) -> ToolResult {
        ToolResult::ok("call_1", wrap_untrusted(&source, text))
    }

    fn read(&self, path: &str, text: &str) -> ToolResult {
        self.data(
            format!("read_file {}", self.ws().join(path).display()),
            text,
        )
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
async fn write_then_read_then_edit_then_list() {
    let fx = Fixture::new(ToolsConfig::default());
    let file = fx.ws().join("notes/todo/list.md");
    assert_eq!(
        fx.call(
            "write_file",
            json!({"path": "notes/todo/list.md", "content": "- a\n- b\n"})
        )
        .await,
        ToolResult::ok("call_1", format!("Wrote 8 bytes to {}", file.display()))
    );
    assert_eq!(
        fx.call("read_file", json!({"path": "notes/todo/list.md"}))
            .await,
        fx.read("notes/todo/list.md", "- a\n- b\n")
    );
    assert_eq!(
        fx.call(
            "edit_file",
            json!({"path": "notes/todo/list.md", "old_text": "- b", "new_text": "- c"})
        )
        .await,
        ToolResult::ok("call_1", format!("Edited {}", file.display()))
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "- a\n- c\n");
    assert_eq!(
        fx.call("list_dir", json!({"path": "."})).await,
        fx.data(
            format!("list_dir {}", fx.ws().display()),
            "link_dir/\nnotes/\nsecrets/"
        )
    );
    assert_eq!(
        fx.call("list_dir", json!({"path": "notes/todo"})).await,
        fx.data(
            format!("list_dir {}", fx.ws().join("notes/todo").display()),
            "list.md"
        )
    );
    // No temporary files are left behind by the atomic writes.
    assert_eq!(
        std::fs::read_dir(fx.ws().join("notes/todo"))
            .unwrap()
            .count(),
        1
    );
}

#[tokio::test]
async fn read_file_pages_by_lines_and_says_how_to_continue() {
    let fx = Fixture::new(ToolsConfig::default());
    let content: String = (1..=3000).map(|n| format!("line {n}\n")).collect();
    std::fs::write(fx.ws().join("big.txt"), &content).unwrap();
    let first = fx.call("read_file", json!({"path": "big.txt"})).await;
    assert!(!first.is_error);
    let expected: String = (1..=2000).map(|n| format!("line {n}\n")).collect();
    assert_eq!(
        first,
        fx.read(
            "big.txt",
            &format!(
                "{expected}\n[Showing lines 1-2000 of 3000 (limit 2000). Call read_file with \
                 offset=2001 to read more.]"
            )
        )
    );
    assert_eq!(
        fx.call(
            "read_file",
            json!({"path": "big.txt", "offset": 2999, "limit": 5})
        )
        .await,
        fx.read("big.txt", "line 2999\nline 3000\n")
    );
    assert_eq!(
        fx.call(
            "read_file",
            json!({"path": "big.txt", "offset": 10, "limit": 2})
        )
        .await,
        fx.read(
            "big.txt",
            "line 10\nline 11\n\n[Showing lines 10-11 of 3000 (limit 2). Call read_file with \
             offset=12 to read more.]"
        )
    );
    assert_eq!(
        fx.call("read_file", json!({"path": "big.txt", "offset": 4000}))
            .await,
        ToolResult::error(
            "call_1",
            format!(
                "Error: offset 4000 is past the end of {} (3000 lines)",
                fx.ws().join("big.txt").display()
            )
        )
    );
}

#[tokio::test]
async fn read_file_caps_bytes_and_refuses_binary_files() {
    let fx = Fixture::new(ToolsConfig::default());
    let long_line = format!("{}\n", "x".repeat(1000));
    std::fs::write(fx.ws().join("wide.txt"), long_line.repeat(300)).unwrap();
    let result = fx.call("read_file", json!({"path": "wide.txt"})).await;
    assert!(result.content.len() < 205 * 1024);
    assert!(
        result.content.ends_with(
            "[Showing lines 1-204 of 300 (output is capped at 200 KB). Call read_file with \
         offset=205 to read more.]\n</untrusted-data>"
        ),
        "{}",
        &result.content[result.content.len() - 200..]
    );
    std::fs::write(fx.ws().join("image.png"), b"\x89PNG\r\n\x1a\n\0\0\0").unwrap();
    assert_eq!(
        fx.call("read_file", json!({"path": "image.png"})).await,
        ToolResult::error(
            "call_1",
            format!(
                "Error: {} is a binary file; read_file only reads text",
                fx.ws().join("image.png").display()
            )
        )
    );
}

#[tokio::test]
async fn edit_file_explains_zero_and_several_matches() {
    let fx = Fixture::new(ToolsConfig::default());
    let path = fx.ws().join("code.py");
    std::fs::write(&path, "def f():\n    return 1\n\nx = 1\ny = 1\n").unwrap();
    assert_eq!(
        fx.call(
            "edit_file",
            json!({"path": "code.py", "old_text": "def f():\n  return 1", "new_text": ""})
        )
        .await,
        ToolResult::error(
            "call_1",
            format!(
                "Error: old_text was not found in {}. It does match if whitespace is ignored: \
                 copy the exact indentation and line breaks from read_file.",
                path.display()
            )
        )
    );
    assert_eq!(
        fx.call(
            "edit_file",
            json!({"path": "code.py", "old_text": "nope", "new_text": ""})
        )
        .await,
        ToolResult::error(
            "call_1",
            format!(
                "Error: old_text was not found in {}. Read the file again and copy the text \
                 exactly.",
                path.display()
            )
        )
    );
    assert_eq!(
        fx.call(
            "edit_file",
            json!({"path": "code.py", "old_text": " = 1", "new_text": " = 2"})
        )
        .await,
        ToolResult::error(
            "call_1",
            format!(
                "Error: old_text appears 2 times in {}; include more surrounding text so it \
                 matches exactly once",
                path.display()
            )
        )
    );
}

#[tokio::test]
async fn every_path_escape_is_an_error_result_with_the_reason() {
    let fx = Fixture::new(ToolsConfig::default());
    assert_eq!(
        fx.call("read_file", json!({"path": "../outside/secret"}))
            .await,
        fx.outside("read", "../outside/secret", "outside/secret")
    );
    assert_eq!(
        fx.call("read_file", json!({"path": "link_dir/secret"}))
            .await,
        fx.outside("read", "link_dir/secret", "outside/secret")
    );
    assert_eq!(
        fx.call(
            "write_file",
            json!({"path": "link_dir/new.txt", "content": "x"})
        )
        .await,
        fx.outside("write", "link_dir/new.txt", "outside/new.txt")
    );
    assert!(!fx.root.join("outside/new.txt").exists());
    assert_eq!(
        fx.call(
            "edit_file",
            json!({"path": "~/x", "old_text": "a", "new_text": "b"})
        )
        .await,
        fx.outside("write", "~/x", "home/x")
    );
    assert_eq!(
        fx.call("list_dir", json!({"path": fx.root.join("outside")}))
            .await,
        fx.outside(
            "read",
            &fx.root.join("outside").display().to_string(),
            "outside"
        )
    );
}

#[tokio::test]
async fn protected_paths_can_be_read_but_not_written() {
    let fx = Fixture::new(ToolsConfig {
        protected_paths: vec!["secrets".into()],
        ..ToolsConfig::default()
    });
    std::fs::write(fx.ws().join("secrets/key"), "k").unwrap();
    assert_eq!(
        fx.call("read_file", json!({"path": "secrets/key"})).await,
        fx.read("secrets/key", "k")
    );
    let result = fx
        .call("write_file", json!({"path": "secrets/key", "content": "x"}))
        .await;
    assert!(result.is_error);
    assert!(
        result
            .content
            .contains("which is read-only (tools.protectedPaths)")
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws().join("secrets/key")).unwrap(),
        "k"
    );
}

#[tokio::test]
async fn malformed_arguments_get_a_clear_message() {
    let fx = Fixture::new(ToolsConfig::default());
    assert_eq!(
        fx.call("read_file", json!("{\"path\": \"a")).await,
        ToolResult::error(
            "call_1",
            "Error: arguments must be a JSON object with `path` (string) and optional `offset`, \
             `limit` (positive integers); got a string (unparsable JSON?)"
        )
    );
    assert_eq!(
        fx.call("write_file", json!({"path": "a", "content": 3}))
            .await,
        ToolResult::error(
            "call_1",
            "Error: invalid arguments for write_file: invalid type: integer `3`, expected a \
             string; expected a JSON object with `path` and `content` (strings)"
        )
    );
    let result = fx
        .call(
            "edit_file",
            json!({"path": "a", "oldText": "x", "new_text": "y"}),
        )
        .await;
    assert!(
        result.content.contains("unknown field `oldText`"),
        "{}",
        result.content
    );
    assert_eq!(
        fx.call("read_file", json!({"path": "a", "offset": 0}))
            .await,
        ToolResult::error(
            "call_1",
            "Error: offset and limit must be at least 1 (offset is the 1-based first line)"
        )
    );
}

#[tokio::test]
async fn list_dir_caps_long_listings() {
    let fx = Fixture::new(ToolsConfig::default());
    std::fs::create_dir(fx.ws().join("many")).unwrap();
    for n in 0..510 {
        std::fs::write(fx.ws().join(format!("many/f{n:04}")), "").unwrap();
    }
    let names: Vec<String> = (0..500).map(|n| format!("f{n:04}")).collect();
    assert_eq!(
        fx.call("list_dir", json!({"path": "many"})).await,
        fx.data(
            format!("list_dir {}", fx.ws().join("many").display()),
            &format!(
                "{}\n[... 10 more entries; showing the first 500 of 510. Use exec with ls or grep \
                 to narrow it down.]",
                names.join("\n")
            )
        )
    );
}
