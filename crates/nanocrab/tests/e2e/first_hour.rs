//! What a new user hit in their first hour, through the real binary: unset `${VAR}`s that
//! stopped every command, errors that spliced three sentences, a status that contradicted
//! itself, files others could read, and an onboarding that forgot to ask for the key.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, SECRET_KEY, Wire};

#[test]
fn an_unset_variable_stops_only_the_commands_that_need_it() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["providers"]["openai"] = json!({"apiKey": "${OPENAI_API_KEY}"});
    config["channels"] =
        json!({"telegram": {"token": "${TELEGRAM_BOT_TOKEN}", "allowFrom": ["1"]}});
    home.write_config(config);

    for args in [
        &["providers", "list"][..],
        &["usage"],
        &["memory", "status"],
        &["models", "list"],
    ] {
        let run = home.run(home.nanocrab().args(args));
        assert!(run.success, "{args:?}: {}", run.stderr);
    }
    let status = home.run(home.nanocrab().arg("status"));
    assert!(status.success, "{}", status.stderr);
    assert!(
        status.stdout.contains(
            "unset      ${OPENAI_API_KEY} in providers.openai.apiKey; ${TELEGRAM_BOT_TOKEN} in channels.telegram.token"
        ),
        "{}",
        status.stdout
    );
    let providers = home.run(home.nanocrab().args(["providers", "list"]));
    assert!(
        providers
            .stdout
            .contains("(providers.openai.apiKey uses ${OPENAI_API_KEY}, which is not set)"),
        "{}",
        providers.stdout
    );
    let audit = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(
        audit
            .stdout
            .contains("warning  providers.openai.apiKey: uses ${OPENAI_API_KEY}, which is not set"),
        "{}",
        audit.stdout
    );

    // The agent uses neither OpenAI nor Telegram.
    home.mock.push(Reply::text("hi"));
    assert_eq!(home.ask("hello"), "hi\n");
    // A command that needs the value names it.
    let openai = home.agent("hello", &["--model", "openai/gpt-4.1"]);
    assert!(!openai.success);
    assert!(
        openai.stderr.contains(&format!(
            "{}: `providers.openai.apiKey` uses ${{OPENAI_API_KEY}} but the environment variable OPENAI_API_KEY is not set",
            home.config_path().display()
        )),
        "{}",
        openai.stderr
    );
    let gateway = home.run(home.nanocrab().arg("gateway"));
    assert!(!gateway.success);
    assert!(
        gateway
            .stderr
            .contains("`channels.telegram.token` uses ${TELEGRAM_BOT_TOKEN}"),
        "{}",
        gateway.stderr
    );
}

#[test]
fn with_no_key_and_no_local_model_the_error_says_what_to_do_in_whole_sentences() {
    let home = Home::new(Wire::Anthropic);
    home.write_config(json!({"version": 1}));

    let run = home.agent("hello", &[]);

    assert!(!run.success);
    let path = home.config_path().display().to_string();
    assert_eq!(
        run.stderr.replace(&path, "<config>"),
        "error: no model can answer yet: anthropic/claude-sonnet-4-5 (agents.defaults.model in <config>) needs an API key, and ANTHROPIC_API_KEY is not set. Any one of these fixes it:
  - export ANTHROPIC_API_KEY=... (or another provider's key and --model; `nanocrab providers list` shows them all)
  - set providers.anthropic.apiKey in <config>
  - point providers.custom.apiBase at a local OpenAI-compatible server (Ollama: http://localhost:11434/v1) and set agents.defaults.model to custom/<model>
  - chat offline with the local model: nanocrab models pull smollm2-135m
"
    );
}

#[test]
fn with_only_an_openai_key_and_no_model_chosen_openai_answers() {
    let home = Home::new(Wire::OpenAi);
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {"workspace": home.workspace()}},
        "providers": {"openai": {"apiBase": home.mock.openai_base()}},
    }));
    home.mock.push(Reply::text("hello from openai"));

    let run = home.run(
        home.nanocrab()
            .args(["agent", "-m", "hello"])
            .env("OPENAI_API_KEY", SECRET_KEY),
    );

    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.stdout, "hello from openai\n");
    assert!(
        run.stderr.contains(&format!(
            "openai/gpt-4.1 answers: ANTHROPIC_API_KEY is not set for the default anthropic/claude-sonnet-4-5, and OPENAI_API_KEY is. Set agents.defaults.model in {} to choose.",
            home.config_path().display()
        )),
        "{}",
        run.stderr
    );
    assert_eq!(home.requests()[0].body["model"], "gpt-4.1");

    // A model the user chose is not swapped behind their back: they are told what would work.
    let mut config = home.base_config();
    config["agents"]["defaults"]["model"] = json!("anthropic/claude-opus-4-5");
    config["providers"] = json!({"openai": {"apiBase": home.mock.openai_base()}});
    home.write_config(config);
    let chosen = home.run(
        home.nanocrab()
            .args(["agent", "-m", "hello"])
            .env("OPENAI_API_KEY", SECRET_KEY),
    );
    assert!(!chosen.success);
    assert!(
        chosen.stderr.contains(
            "needs ANTHROPIC_API_KEY, which is not set. OPENAI_API_KEY is set: run with --model openai/gpt-4.1, or make it agents.defaults.model."
        ),
        "{}",
        chosen.stderr
    );
}

#[test]
fn status_tells_what_will_answer_what_listens_and_whether_the_gateway_starts() {
    let home = Home::new(Wire::Anthropic);
    let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = listening.local_addr().unwrap().port();
    let closed_port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {"model": "local/smollm2-135m", "workspace": home.workspace()}},
        "providers": {
            "vllm": {"apiBase": format!("http://127.0.0.1:{open_port}/v1")},
            "ollama": {"apiBase": format!("http://127.0.0.1:{closed_port}/v1")},
        },
        "gateway": {"host": "::"},
    }));

    let status = home.run(home.nanocrab().arg("status"));

    assert!(status.success, "{}", status.stderr);
    let line = |name: &str| {
        status
            .stdout
            .lines()
            .find(|line| line.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in\n{}", status.stdout))
            .trim()
            .to_owned()
    };
    assert_eq!(
        [line("model"), line("gateway"), line("vllm"), line("ollama")],
        [
            "model      local/smollm2-135m (not installed: nanocrab models pull smollm2-135m)"
                .to_owned(),
            "gateway    http://[::]:18790 (will not start: a host other machines can reach needs gateway.auth.token, or bind 127.0.0.1)".to_owned(),
            format!("vllm        ready (local server at 127.0.0.1:{open_port}, no key needed)"),
            format!("ollama      not running (nothing listens at 127.0.0.1:{closed_port})"),
        ]
    );
    drop(listening);
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn everything_nanocrab_creates_is_the_owners_alone_whatever_the_umask() {
    let home = Home::new(Wire::Anthropic);
    // The workspace is nanocrab's to create, under the home.
    let mut config = home.base_config();
    config["agents"]["defaults"]
        .as_object_mut()
        .unwrap()
        .remove("workspace");
    home.write_config(config);
    // What the test itself made is the user's doing.
    std::fs::set_permissions(home.home(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(home.config_path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    home.mock.push(Reply::tool_call(
        "call_1",
        "write_file",
        json!({"path": "memory/notes.md", "content": "likes tea"}),
    ));
    home.mock.push(Reply::text("noted"));
    // Run as from a shell whose umask lets everyone read and write.
    let permissive = |args: &[&str]| {
        let mut cmd = assert_cmd::Command::new("sh");
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.user_home())
            .env("NANOCRAB_HOME", home.home())
            .arg("-c")
            .arg("umask 000; exec \"$0\" \"$@\"")
            .arg(assert_cmd::cargo::cargo_bin("nanocrab"))
            .args(args)
            .timeout(std::time::Duration::from_secs(60));
        cmd
    };
    let onboard = home.run(&mut permissive(&["onboard"]));
    assert!(onboard.success, "{}", onboard.stderr);
    let mut agent = permissive(&["agent", "-m", "remember that I like tea"]);
    let agent = home.run(&mut agent);
    assert!(agent.success, "{}", agent.stderr);

    let mut open = Vec::new();
    let mut stack = vec![home.home()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            if !meta.file_type().is_symlink() && mode(&path) & 0o077 != 0 {
                open.push(format!("{} {:o}", path.display(), mode(&path)));
            }
        }
    }
    assert_eq!(open, Vec::<String>::new());
    assert!(home.home().join("workspace/memory/notes.md").exists());
    let audit = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(audit.success, "{}\n{}", audit.stdout, audit.stderr);
}

/// `nanocrab onboard` on a real terminal (a pseudo-terminal made by `script`): each answer is
/// typed once its question is on the screen.
struct Terminal {
    child: std::process::Child,
    screen: std::sync::mpsc::Receiver<u8>,
    /// Since the last answer.
    seen: String,
    /// Everything.
    all: String,
}

impl Terminal {
    fn onboard(home: &Home) -> Self {
        let binary = assert_cmd::cargo::cargo_bin("nanocrab");
        let mut child = std::process::Command::new("script")
            .args([
                "-qec",
                &format!("{} onboard", binary.display()),
                "/dev/null",
            ])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.user_home())
            .env("NANOCRAB_HOME", home.home())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (send, screen) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            while stdout.read(&mut byte).is_ok_and(|n| n == 1) {
                if send.send(byte[0]).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            screen,
            seen: String::new(),
            all: String::new(),
        }
    }

    /// Waits for `prompt` on the screen, then types `answer` and Enter.
    fn answer(&mut self, prompt: &str, answer: &str) {
        while !self.seen.contains(prompt) {
            let byte = self
                .screen
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no {prompt:?} on the screen:\n{}", self.seen));
            self.seen.push(char::from(byte));
            self.all.push(char::from(byte));
        }
        self.seen.clear();
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{answer}\r").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Whether the program succeeded, and everything on the screen, once it has ended.
    fn finish(mut self) -> (bool, String) {
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        while let Ok(byte) = self.screen.recv_timeout(std::time::Duration::from_secs(5)) {
            self.all.push(char::from(byte));
        }
        (status.success(), self.all)
    }
}

#[test]
fn onboard_asks_for_the_key_of_the_cloud_model_chosen_without_echoing_it_and_checks_it() {
    let home = Home::new(Wire::OpenAi);
    std::fs::remove_file(home.config_path()).unwrap();
    home.mock.push(Reply::text("Hello there!"));

    let mut terminal = Terminal::onboard(&home);
    terminal.answer("choice [1]: ", "3");
    terminal.answer("OpenAI API key (hidden", SECRET_KEY);
    terminal.answer(
        "Endpoint [https://api.openai.com/v1]",
        &home.mock.openai_base(),
    );
    let (success, screen) = terminal.finish();

    assert!(success, "{screen}");
    crate::harness::assert_no_secret(&screen);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.config_path()).unwrap()).unwrap();
    assert_eq!(
        (
            &config["agents"]["defaults"]["model"],
            &config["providers"]["openai"]
        ),
        (
            &json!("openai/gpt-4.1"),
            &json!({"apiKey": SECRET_KEY, "apiBase": home.mock.openai_base()})
        )
    );
    assert!(
        screen.contains("openai/gpt-4.1 answers: Hello there!"),
        "{screen}"
    );
    assert!(!screen.contains("Give nanocrab a model"), "{screen}");
    assert!(screen.contains("1. Tell it about you"), "{screen}");
    assert_eq!(home.requests().len(), 1);
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let home = Home::new(Wire::Anthropic);
    home.mock.push(Reply::text("hi"));
    assert_eq!(home.ask("hello"), "hi\n");
    for args in [
        &["status"][..],
        &["providers", "list"],
        &["models", "list"],
        &["models", "info", "smollm2-135m"],
        &["memory", "status"],
        &["memory", "search", "hello"],
        &["audit", "list"],
        &["security", "audit"],
        &["pairing", "list"],
        &["config", "schema"],
        &["sessions", "list"],
        &["sessions", "show", "cli:default"],
        &["usage"],
        &["onboard"],
    ] {
        // The reader is gone before the command starts: its first line finds the pipe closed.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("nanocrab"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.user_home())
            .env("NANOCRAB_HOME", home.home())
            .args(args)
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.code() == Some(0)
                && !stderr.contains("panicked")
                && !stderr.contains("error"),
            "{args:?}: {:?}\n{stderr}",
            output.status
        );
    }
}

#[test]
fn onboard_with_a_chosen_model_and_no_key_asks_only_for_its_key() {
    let home = Home::new(Wire::OpenAi);
    std::fs::remove_file(home.config_path()).unwrap();

    let run = home.run(
        home.nanocrab()
            .args(["onboard", "--model", "openai/gpt-4.1"]),
    );

    assert!(run.success, "{}", run.stderr);
    assert!(
        run.stdout.contains(&format!(
            "Next steps:\n  1. Give openai/gpt-4.1 its key: export OPENAI_API_KEY=... (or set providers.openai.apiKey in {}).\n  2. Tell it about you",
            home.config_path().display()
        )),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("Give nanocrab a model"),
        "{}",
        run.stdout
    );
}
