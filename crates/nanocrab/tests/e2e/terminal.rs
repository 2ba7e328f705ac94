//! What `nanocrab agent` shows and keeps while a conversation runs: Ctrl-C in the middle of
//! an answer, memory consolidation with a model that cannot call tools, tool results and
//! provider retries in one readable line each. Run piped, so the output is plain.

use std::io::Write as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use nanocrab_testkit::Reply;
use serde_json::json;

use crate::harness::{Home, Wire, message_texts, system_prompt};

/// What a child wrote on one of its pipes so far, read on a thread of its own.
struct Output {
    chunks: Receiver<Vec<u8>>,
    seen: String,
}

impl Output {
    fn read(mut pipe: impl std::io::Read + Send + 'static) -> Self {
        let (send, chunks) = channel();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(read @ 1..) = pipe.read(&mut buffer) {
                if send.send(buffer[..read].to_vec()).is_err() {
                    break;
                }
            }
        });
        Self {
            chunks,
            seen: String::new(),
        }
    }

    /// Waits until `text` has been written; the limit only keeps a broken build from hanging.
    fn wait_for(&mut self, text: &str) {
        while !self.seen.contains(text) {
            let chunk = self
                .chunks
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|err| panic!("no {text:?} ({err}); so far:\n{}", self.seen));
            self.seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Everything, once the child has exited.
    fn rest(mut self) -> String {
        while let Ok(chunk) = self.chunks.recv_timeout(Duration::from_secs(60)) {
            self.seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        self.seen
    }
}

/// `nanocrab agent` (the conversation, reading lines from a pipe) in `home`.
fn conversation(home: &Home) -> (Child, ChildStdin, Output, Output) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("nanocrab"))
        .arg("agent")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.user_home())
        .env("NANOCRAB_HOME", home.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = Output::read(child.stdout.take().unwrap());
    let stderr = Output::read(child.stderr.take().unwrap());
    (child, stdin, stdout, stderr)
}

#[test]
fn ctrl_c_keeps_the_streamed_answer_marked_and_the_next_question_sees_it() {
    let home = Home::new(Wire::Anthropic);
    home.mock
        .push(Reply::stall_after("Once upon a time, a crab found"));
    home.mock.push(Reply::text("a shell."));
    let (mut child, mut stdin, mut stdout, mut stderr) = conversation(&home);

    writeln!(stdin, "tell me a story").unwrap();
    stdout.wait_for("Once upon a time, a crab found");
    let interrupt = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupt.success());
    stderr.wait_for("(interrupted;");
    writeln!(stdin, "and then?").unwrap();
    stdout.wait_for("a shell.");
    drop(stdin);
    let status = child.wait().unwrap();
    let (stdout, stderr) = (stdout.rest(), stderr.rest());
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    assert!(
        stderr.contains("\n(interrupted; what was done so far is saved, marked as interrupted)\n"),
        "{stderr}"
    );

    let kept = "Once upon a time, a crab found\n\n[interrupted by the user]";
    let transcript = home.transcript();
    assert!(
        transcript.contains(&serde_json::to_string(kept).unwrap()),
        "{transcript}"
    );
    let requests = home.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        message_texts(&requests[1].body),
        vec![
            ("user".to_owned(), "tell me a story".to_owned()),
            ("assistant".to_owned(), kept.to_owned()),
            ("user".to_owned(), "and then?".to_owned()),
        ]
    );
}

#[test]
fn new_with_a_model_without_tool_calling_writes_the_history_from_a_summary() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["providers"]["anthropic"]["models"] = json!({"mock-model": {"tools": false}});
    home.write_config(config);
    home.mock.push(Reply::text("Hi! How can I help?"));
    home.mock
        .push(Reply::text("The user greeted the assistant."));

    home.ask("hello");
    let run = home.agent("/new", &[]);

    assert!(run.success, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("Started a new conversation.")
            && !run.stdout.contains("kept in the archive"),
        "the consolidation did not fail: {}",
        run.stdout
    );
    assert!(
        run.stderr.contains("⟳ consolidating memory (2 messages)…"),
        "progress is shown: {}",
        run.stderr
    );
    let requests = home.requests();
    let summary = &requests.last().unwrap().body;
    assert!(summary.get("tools").is_none(), "{summary}");
    assert!(
        system_prompt(summary).starts_with("Summarise the conversation below"),
        "{summary}"
    );
    let history = std::fs::read_to_string(home.workspace().join("memory/HISTORY.md")).unwrap();
    assert!(
        history.contains("The user greeted the assistant."),
        "{history}"
    );
}

#[test]
fn a_tool_result_is_summarised_without_the_untrusted_fence() {
    let home = Home::new(Wire::Anthropic);
    std::fs::write(home.workspace().join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    home.mock.push(Reply::tool_call(
        "call_1",
        "read_file",
        json!({"path": "notes.txt"}),
    ));
    home.mock.push(Reply::text("Three lines."));

    let run = home.agent("what is in notes.txt?", &[]);

    assert!(run.success, "{}", run.stderr);
    assert!(
        run.stderr.contains("  ✓ read_file notes.txt: 3 lines\n"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("untrusted-data"), "{}", run.stderr);
}

#[test]
fn a_retry_is_one_readable_line() {
    let home = Home::new(Wire::OpenAi);
    home.mock
        .push(Reply::rate_limited().with_header("retry-after", "0"));
    home.mock.push(Reply::text("made it"));

    let run = home.agent("hello", &[]);

    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.stdout, "made it\n");
    assert_eq!(
        run.stderr,
        "  ↻ openai: 429, retrying in 0 s (attempt 2 of 4)\n"
    );
}
