//! A throwaway `NANOCRAB_HOME` wired to a mock LLM, and the binary run inside it.

use std::path::{Path, PathBuf};

use nanocrab_testkit::{MockLlm, RecordedRequest};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The API key every test home is configured with; no output may ever contain it.
pub const SECRET_KEY: &str = "sk-test-e2e-5ecret-do-not-print";

/// The uid and gid of `nobody`, the ordinary user root-run tests switch to.
pub const NOBODY: u32 = 65534;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
    Gemini,
}

impl Wire {
    pub const ALL: [Wire; 2] = [Wire::Anthropic, Wire::OpenAi];

    pub fn provider(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::OpenAi => "openai",
            Wire::Gemini => "gemini",
        }
    }
}

pub struct Home {
    dir: TempDir,
    pub mock: MockLlm,
    pub wire: Wire,
}

impl Home {
    /// A home whose config points `wire`'s provider at a fresh mock, with an empty workspace.
    pub fn new(wire: Wire) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mock = MockLlm::spawn();
        let home = Self { dir, mock, wire };
        std::fs::create_dir_all(home.workspace()).unwrap();
        home.write_config(home.base_config());
        home
    }

    pub fn base_config(&self) -> Value {
        let api_base = match self.wire {
            // Anthropic's and Google's SDKs both take the host root.
            Wire::Anthropic | Wire::Gemini => self.mock.anthropic_base(),
            Wire::OpenAi => self.mock.openai_base(),
        };
        json!({
            "version": 1,
            "agents": { "defaults": {
                "model": format!("{}/mock-model", self.wire.provider()),
                "workspace": self.workspace(),
            }},
            "providers": { self.wire.provider(): { "apiKey": SECRET_KEY, "apiBase": api_base } },
        })
    }

    pub fn write_config(&self, config: Value) {
        std::fs::create_dir_all(self.home()).unwrap();
        std::fs::write(
            self.config_path(),
            serde_json::to_string_pretty(&config).unwrap(),
        )
        .unwrap();
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn config_path(&self) -> PathBuf {
        self.home().join("config.json")
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    pub fn user_home(&self) -> &Path {
        self.dir.path()
    }

    /// The binary with a clean environment: only PATH, HOME and NANOCRAB_HOME, so no real
    /// credentials or config of the machine running the tests leak in.
    pub fn nanocrab(&self) -> assert_cmd::Command {
        let mut cmd = assert_cmd::Command::cargo_bin("nanocrab").unwrap();
        self.clean_env(&mut cmd);
        cmd
    }

    /// [`Self::nanocrab`] as the ordinary user `nobody` (65534), through `setpriv`, for tests
    /// that run as root: the test's directory is handed to that user first.
    pub fn nanocrab_as_nobody(&self) -> assert_cmd::Command {
        fn chown_tree(path: &Path) {
            std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
            if path.is_dir() && !path.is_symlink() {
                for entry in std::fs::read_dir(path).unwrap() {
                    chown_tree(&entry.unwrap().path());
                }
            }
        }
        chown_tree(self.user_home());
        let mut cmd = assert_cmd::Command::new("setpriv");
        cmd.args([
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".to_owned(),
            "--".to_owned(),
        ])
        .arg(assert_cmd::cargo::cargo_bin("nanocrab"));
        self.clean_env(&mut cmd);
        cmd
    }

    fn clean_env(&self, cmd: &mut assert_cmd::Command) {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.user_home())
            .env("NANOCRAB_HOME", self.home())
            .timeout(std::time::Duration::from_secs(60));
    }

    /// Runs `cmd` to the end and checks that nothing it printed contains the key.
    pub fn run(&self, cmd: &mut assert_cmd::Command) -> Run {
        let output = cmd.output().unwrap();
        let run = Run {
            success: output.status.success(),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        };
        assert_no_secret(&run.stdout);
        assert_no_secret(&run.stderr);
        run
    }

    /// Runs `agent -m message` with `args` after it, whether it succeeds or not.
    pub fn agent(&self, message: &str, args: &[&str]) -> Run {
        self.run(self.nanocrab().args(["agent", "-m", message]).args(args))
    }

    /// Runs `agent -m message`, asserting success; returns stdout.
    pub fn ask(&self, message: &str) -> String {
        let run = self.agent(message, &[]);
        assert!(
            run.success,
            "agent failed\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        run.stdout
    }

    /// The Python that scripts/test-deps installs the official OpenAI client into, with a
    /// clean environment like the binary's.
    pub fn openai_python(&self) -> std::process::Command {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-deps/venv/bin/python");
        assert!(
            python.exists(),
            "the OpenAI Python client is missing: run scripts/test-deps (the README's test command, scripts/test, does)"
        );
        let mut command = std::process::Command::new(python);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.user_home());
        command
    }

    /// The default CLI session's transcript, as stored.
    pub fn transcript(&self) -> String {
        std::fs::read_to_string(self.home().join("sessions/cli:default.jsonl")).unwrap()
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.mock.requests()
    }
}

/// What one run of the binary printed.
#[derive(Debug)]
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

pub fn assert_no_secret(text: &str) {
    assert!(!text.contains(SECRET_KEY), "the API key leaked:\n{text}");
    assert!(
        !text.contains("5ecret"),
        "part of the API key leaked:\n{text}"
    );
}

/// The system prompt of a recorded request, whichever the wire protocol.
pub fn system_prompt(body: &Value) -> String {
    if let Some(system) = body.get("system") {
        return match system {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => panic!("unexpected system field {other}"),
        };
    }
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names of the tools a recorded request (OpenAI wire) offered; none when it offered none.
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Tool results a recorded request carries, as (call id, content, is_error), in order.
pub fn tool_results(body: &Value) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for message in body["messages"].as_array().unwrap() {
        if message["role"] == "tool" {
            let content = message["content"].as_str().unwrap_or_default().to_owned();
            let is_error = content.starts_with("Error");
            out.push((
                message["tool_call_id"].as_str().unwrap().to_owned(),
                content,
                is_error,
            ));
        }
        if let Some(blocks) = message["content"].as_array() {
            for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
                let content = match &block["content"] {
                    Value::String(text) => text.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join(""),
                    other => other.to_string(),
                };
                out.push((
                    block["tool_use_id"].as_str().unwrap().to_owned(),
                    content,
                    block["is_error"].as_bool().unwrap_or(false),
                ));
            }
        }
    }
    out
}

/// The user-visible text of every message in a recorded request, in order, as (role, text).
pub fn message_texts(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system" && m["role"] != "tool")
        .map(|m| {
            let text = match &m["content"] {
                Value::String(text) => text.clone(),
                Value::Array(blocks) => blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap().to_owned(), text)
        })
        .filter(|(_, text)| !text.is_empty())
        .collect()
}
