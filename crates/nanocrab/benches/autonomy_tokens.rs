//! What nanocrab's autonomous runs cost in model requests and tokens: `nanocrab gateway` on a
//! freshly onboarded home, the model `openai/gpt-4.1-mini` served by the mock LLM in this
//! process on 127.0.0.1.
//!
//!     cargo test -p nanocrab --bench autonomy_tokens   (or: python3 scripts/bench.py --autonomy)
//!     cargo bench -p nanocrab --bench autonomy_tokens [-- --gateway BIN]
//!
//! The figures are counts, the same for a debug and a release build: `cargo test` builds
//! faster.
//!
//! 1. A day of heartbeats with the `HEARTBEAT.md` onboarding writes: 48 ticks (every 30
//!    minutes, the default), each fired at once with `nanocrab heartbeat run`, which goes the
//!    way a timed tick goes.
//! 2. One tick with one task in `HEARTBEAT.md`.
//! 3. One run of a scheduled job (`nanocrab cron add` then `cron run`).
//! 4. For comparison, the first "hello" of a chat (`nanocrab agent -m hello`).
//!
//! For each: the model requests made, their characters (system prompt, messages, tool schemas)
//! and their prompt tokens as gpt-4.1-mini's vocabulary (o200k_base) counts that text, exactly
//! (the few tokens a provider adds per message for the chat format are not in it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::clean_command;
use nanocrab_sessions::TokenCounter;
use nanocrab_testkit::{MockLlm, Reply};
use serde_json::{Value, json};

const MODEL: &str = "gpt-4.1-mini";
const PATIENCE: Duration = Duration::from_secs(60);

fn run(bin: &Path, dir: &Path, args: &[&str]) -> String {
    let out = clean_command(bin, dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "nanocrab {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Characters and o200k tokens of what the requests bill as input.
#[derive(Default)]
struct Size {
    requests: usize,
    system: usize,
    messages: usize,
    tools: usize,
    tokens: usize,
}

impl Size {
    fn of(bodies: &[Value]) -> Self {
        let counter = TokenCounter::for_model(MODEL);
        let mut size = Self::default();
        for body in bodies {
            size.requests += 1;
            for message in body["messages"].as_array().into_iter().flatten() {
                let text = match &message["content"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                size.tokens += counter.count_text(&text);
                if message["role"] == "system" {
                    size.system += text.len();
                } else {
                    size.messages += text.len();
                }
            }
            let tools = body.get("tools").map(Value::to_string).unwrap_or_default();
            size.tools += tools.len();
            size.tokens += counter.count_text(&tools);
        }
        size
    }

    fn row(&self, what: &str) {
        println!(
            "| {what} | {} | {} | {} | {} | {} |",
            self.requests, self.system, self.messages, self.tools, self.tokens
        );
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut bin = PathBuf::from(env!("CARGO_BIN_EXE_nanocrab"));
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--gateway" => bin = PathBuf::from(args.next().expect("--gateway BIN")),
            // cargo bench passes --bench.
            "--bench" => {}
            other => panic!("unknown argument {other}; usage: autonomy_tokens [--gateway BIN]"),
        }
    }
    let mock = MockLlm::spawn();
    mock.set_fallback(Reply::text("HEARTBEAT_OK"));
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    run(
        &bin,
        dir,
        &["onboard", "--model", &format!("openai/{MODEL}")],
    );
    // A port the CLI can be told: the gateway's own `port: 0` would hide it from `heartbeat
    // run` and `cron run`.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = dir.join("home/config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["providers"] = json!({"openai": {"apiKey": "bench-key", "apiBase": mock.openai_base()}});
    config["gateway"] = json!({"port": port});
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();

    let mut gateway: Child = clean_command(&bin, dir)
        .arg("gateway")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(gateway.stderr.take().unwrap());
    let started = Instant::now();
    let mut line = String::new();
    while !line.contains("listening on") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the gateway exited before it listened"
        );
        assert!(started.elapsed() < PATIENCE, "the gateway did not listen");
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let taken = |mock: &MockLlm| -> Vec<Value> {
        mock.take_requests().into_iter().map(|r| r.body).collect()
    };

    for _ in 0..48 {
        run(&bin, dir, &["heartbeat", "run"]);
    }
    let idle_day = Size::of(&taken(&mock));

    std::fs::write(
        dir.join("home/workspace/HEARTBEAT.md"),
        "# Heartbeat\n\n- Check whether the nightly backup in ~/backups finished; tell me only if it did not.\n",
    )
    .unwrap();
    run(&bin, dir, &["heartbeat", "run"]);
    let one_task = Size::of(&taken(&mock));

    mock.set_fallback(Reply::text("Nothing new in your notes today."));
    run(
        &bin,
        dir,
        &[
            "cron",
            "add",
            "--name",
            "digest",
            "--message",
            "Summarise what changed in my notes since yesterday.",
            "--every",
            "1d",
        ],
    );
    let jobs: Value = serde_json::from_str(&run(&bin, dir, &["cron", "list", "--json"])).unwrap();
    let id = jobs[0]["id"].as_str().expect("the job's id").to_owned();
    run(&bin, dir, &["cron", "run", &id]);
    let cron = Size::of(&taken(&mock));

    mock.set_fallback(Reply::text("Hello! How can I help?"));
    run(
        &bin,
        dir,
        &["agent", "-m", "hello", "--session", "bench:hello"],
    );
    let hello = Size::of(&taken(&mock));

    let _ = Command::new("kill")
        .args(["-TERM", &gateway.id().to_string()])
        .status();
    let _ = gateway.wait();

    println!(
        "| run | model requests | system prompt (chars) | messages (chars) | tool schemas (chars) | prompt tokens (o200k) |"
    );
    println!("|---|---|---|---|---|---|");
    idle_day.row("a day of heartbeats (48 ticks), onboarded HEARTBEAT.md");
    one_task.row("one heartbeat tick, one task");
    cron.row("one scheduled job run");
    hello.row("first \"hello\" of a chat, for comparison");
}
