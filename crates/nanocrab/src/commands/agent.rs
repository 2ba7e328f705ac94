use std::collections::HashMap;
use std::io::{IsTerminal as _, Write};

use anyhow::Context as _;
use base64::Engine as _;
use nanocrab_core::{Agent, AgentError, TurnOutcome, UserInput};
use nanocrab_schema::{AgentEvent, Image, SessionKey};
use nanocrab_tools::UNTRUSTED_TAG;
use tokio_util::sync::CancellationToken;

use super::Env;
use crate::cli::AgentArgs;

mod remote;

pub fn run(env: &Env, args: AgentArgs) -> anyhow::Result<()> {
    let images = args
        .images
        .iter()
        .map(|path| read_image(path))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !images.is_empty() && args.message.is_none() {
        anyhow::bail!("--image needs a message: nanocrab agent -m \"what is this?\" --image PATH");
    }
    if let Some(url) = &args.remote {
        return remote::run(env, &args, url, images);
    }
    let key = SessionKey::parse(&args.session).context("invalid --session")?;
    // A conversation at the terminal runs a while: its memory searches sync only the files
    // that changed; one message looks at them all once.
    let env = &if args.message.is_none() {
        env.clone().watching_memory()
    } else {
        env.clone()
    };
    let config = env.load_config()?.config;
    let built = super::agents::build(
        env,
        &config,
        nanocrab_config::DEFAULT_AGENT_ID,
        args.model.as_deref(),
        Some(std::sync::Arc::new(super::stdin_approver::StdinApprover)),
        // Jobs run in the gateway, whose chats their replies go to: `nanocrab cron` adds them;
        // and the terminal is no chat the `message` tool could write to.
        None,
    )?;
    if let Some(notice) = &built.notice {
        eprintln!("{notice}");
    }
    let agent = built.agent;
    // One thread is plenty for one conversation, and starts faster than a thread pool.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = match args.message {
        Some(text) => {
            // Piped, only the final answer goes to stdout, so that it can be used as it is.
            let look = Look::new(
                std::io::stdout().is_terminal(),
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            let mut printer = EventPrinter::new(look, std::io::stdout(), std::io::stderr());
            let input = UserInput {
                text,
                images,
                channel: None,
                trace_id: None,
                prompt_mode: nanocrab_core::PromptMode::Full,
                source: nanocrab_schema::RunSource::Chat,
                max_iterations: None,
                tools: None,
            };
            match runtime.block_on(interruptible_turn(&agent, &key, input, &mut printer)) {
                Err(err) => Err(err.into()),
                Ok(outcome) if outcome.interrupted => {
                    printer.line(DIM, INTERRUPTED);
                    Ok(())
                }
                Ok(_) => {
                    // Ctrl-C now stops the memory work instead of waiting for it (the local
                    // model may take a while); it is tried again after a later turn.
                    runtime.block_on(async {
                        tokio::select! {
                            () = after_turn(&agent, &key, &mut printer) => {}
                            Ok(()) = tokio::signal::ctrl_c() => {}
                        }
                    });
                    Ok(())
                }
            }
        }
        None => repl(env, &runtime, &agent, &key),
    };
    // The conversation's SessionEnd hooks; nothing runs when no turn started it.
    runtime.block_on(agent.end_session(&key, "prompt_input_exit"));
    // The MCP servers a turn started end with the command.
    runtime.block_on(env.shutdown_mcp());
    outcome
}

/// What is said when Ctrl-C stops a turn; true because the agent keeps the partial answer
/// and the finished tool calls (see `Agent::run_turn_until`).
const INTERRUPTED: &str = "(interrupted; what was done so far is saved, marked as interrupted)";

/// Runs one turn, shown by `printer`, that Ctrl-C interrupts without losing what was done.
async fn interruptible_turn<O: Write + Send, E: Write + Send>(
    agent: &Agent,
    key: &SessionKey,
    input: UserInput,
    printer: &mut EventPrinter<O, E>,
) -> Result<TurnOutcome, AgentError> {
    let cancel = CancellationToken::new();
    printer.thinking();
    let mut on_event = |event| printer.print(event);
    let turn = agent.run_turn_until(key, input, &mut on_event, &cancel);
    tokio::pin!(turn);
    tokio::select! {
        outcome = &mut turn => return outcome,
        // Without a signal handler (it could not be installed) Ctrl-C ends the process.
        Ok(()) = tokio::signal::ctrl_c() => cancel.cancel(),
    }
    turn.await
}

/// Once the answer is out: a due consolidation, and a title from the housekeeping model for a
/// new conversation, saying on stderr what was done; a failure leaves the conversation as it
/// was, to be tried after the next turn.
async fn after_turn<O: Write + Send, E: Write + Send>(
    agent: &Agent,
    key: &SessionKey,
    printer: &mut EventPrinter<O, E>,
) {
    if let Err(err) = agent.title_if_missing(key).await {
        printer.line(RED, &format!("  ✗ {err}"));
    }
    let consolidated = agent
        .consolidate_if_due_with(key, &mut |event| printer.print(event))
        .await;
    match consolidated {
        Ok(Some(report)) => printer.line(
            DIM,
            &format!(
                "  ⟳ memory: {} messages consolidated into memory/HISTORY.md{}",
                report.entries,
                if report.memory_changed {
                    " and memory/MEMORY.md"
                } else {
                    ""
                }
            ),
        ),
        Ok(None) => {}
        Err(err) => printer.line(RED, &format!("  ✗ {err}")),
    }
}

fn repl(
    env: &Env,
    runtime: &tokio::runtime::Runtime,
    agent: &Agent,
    key: &SessionKey,
) -> anyhow::Result<()> {
    conversation(env, &format!("session {key}"), |message, printer| {
        let turn = runtime.block_on(interruptible_turn(
            agent,
            key,
            UserInput::from(message),
            printer,
        ));
        match turn {
            Ok(outcome) if outcome.interrupted => printer.line(DIM, INTERRUPTED),
            Ok(_) => runtime.block_on(after_turn(agent, key, printer)),
            Err(err) => printer.line(RED, &format!("error: {err:#}")),
        }
    })
}

type TerminalPrinter = EventPrinter<std::io::Stdout, std::io::Stderr>;

/// The interactive conversation at the terminal, local or remote (`what` says with whom):
/// each line typed is a message for `turn`, shown by the printer it is given; the line
/// history is kept in `state/cli_history.txt`.
fn conversation(
    env: &Env,
    what: &str,
    mut turn: impl FnMut(&str, &mut TerminalPrinter),
) -> anyhow::Result<()> {
    use rustyline::error::ReadlineError;

    let mut editor = rustyline::DefaultEditor::new()?;
    let history = env.paths.state_dir().join("cli_history.txt");
    // A missing history file is the normal first run.
    let _ = editor.load_history(&history);
    eprintln!("nanocrab · {what} · /help for commands · Ctrl-D to quit");
    // A conversation streams its answers wherever stdout goes.
    let look = Look::new(
        true,
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    loop {
        let line = match editor.readline("› ") {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(err) => return Err(err.into()),
        };
        let message = line.trim();
        if message.is_empty() {
            continue;
        }
        if matches!(message, "/exit" | "/quit") {
            break;
        }
        editor.add_history_entry(message)?;
        let mut printer = EventPrinter::new(look, std::io::stdout(), std::io::stderr());
        turn(message, &mut printer);
    }
    if let Some(dir) = history.parent() {
        std::fs::create_dir_all(dir)?;
    }
    editor.save_history(&history)?;
    Ok(())
}

/// How a run is shown, decided once from where stdout and stderr go and from `NO_COLOR`
/// (<https://no-color.org>); tests make one for the terminal without having one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Look {
    /// The answer streams as it comes, with the text the model writes before each tool
    /// call; otherwise only the final answer is printed, once.
    stream: bool,
    /// Tool calls, results, notices and errors on stderr in colour.
    colour: bool,
    /// A spinner on stderr while the model has not said anything yet.
    spinner: bool,
}

impl Look {
    fn new(stream: bool, stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> Self {
        Self {
            stream,
            colour: stderr_is_terminal && no_color.is_none_or(std::ffi::OsStr::is_empty),
            spinner: stderr_is_terminal,
        }
    }
}

/// SGR colours of the lines on stderr.
const CYAN: &str = "36";
const GREEN: &str = "32";
const RED: &str = "31";
const YELLOW: &str = "33";
const DIM: &str = "2";

/// Shows a run as it happens: the answer on stdout, everything else on stderr so that
/// `nanocrab agent -m ... > answer.txt` captures only the answer.
struct EventPrinter<O: Write, E: Write> {
    look: Look,
    out: O,
    err: E,
    at_line_start: bool,
    spinner: Option<indicatif::ProgressBar>,
    /// What each running tool call works on (its first text argument), for its result line.
    subjects: HashMap<String, String>,
}

impl<O: Write, E: Write> EventPrinter<O, E> {
    fn new(look: Look, out: O, err: E) -> Self {
        Self {
            look,
            out,
            err,
            at_line_start: true,
            spinner: None,
            subjects: HashMap::new(),
        }
    }

    /// Until the model's first word (a local model takes seconds), a spinner says it is at it.
    fn thinking(&mut self) {
        if self.look.spinner && self.spinner.is_none() {
            let spinner = indicatif::ProgressBar::new_spinner();
            spinner.set_message("thinking…");
            spinner.enable_steady_tick(std::time::Duration::from_millis(100));
            self.spinner = Some(spinner);
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    /// One line on stderr, coloured `colour` on a terminal; the answer's line is ended first.
    fn line(&mut self, colour: &str, text: &str) {
        self.stop_spinner();
        self.end_line();
        // Write errors (a closed pipe) must not abort the run: it is still persisted.
        let _ = if self.look.colour {
            writeln!(self.err, "\x1b[{colour}m{text}\x1b[0m")
        } else {
            writeln!(self.err, "{text}")
        };
    }

    fn print(&mut self, event: AgentEvent) {
        // Write errors on stdout (a closed pipe) must not abort the run: the turn is still
        // persisted and can be read with `nanocrab sessions show`.
        match event {
            AgentEvent::Token { text } => {
                self.stop_spinner();
                if self.look.stream {
                    let _ = self.out.write_all(text.as_bytes());
                    let _ = self.out.flush();
                    if !text.is_empty() {
                        self.at_line_start = text.ends_with('\n');
                    }
                }
            }
            AgentEvent::Reasoning { .. } | AgentEvent::Usage { .. } => {}
            AgentEvent::Compaction { messages } => self.line(
                DIM,
                &format!("  ⟳ {messages} earlier messages summarised to fit the context window"),
            ),
            AgentEvent::Consolidating { messages } => {
                self.line(
                    DIM,
                    &format!("  ⟳ consolidating memory ({messages} messages)…"),
                );
                self.thinking();
            }
            AgentEvent::Retrieval { sources } => {
                let found: Vec<String> = sources
                    .iter()
                    .map(|s| format!("{}:{}-{}", s.path, s.start_line, s.end_line))
                    .collect();
                self.line(DIM, &format!("  ⌕ memory: {}", found.join(", ")));
            }
            AgentEvent::ToolStart {
                call_id,
                name,
                input,
            } => {
                let shown = input.to_string();
                self.line(CYAN, &format!("  → {name} {}", truncate_chars(&shown, 160)));
                // What the call works on, for its result line: the command of `exec`, the
                // path of the file tools, a search's query, or else its first text argument.
                let subject = input.as_object().and_then(|fields| {
                    ["command", "path", "query", "url"]
                        .iter()
                        .find_map(|key| fields.get(*key).and_then(serde_json::Value::as_str))
                        .or_else(|| fields.values().find_map(serde_json::Value::as_str))
                });
                let subject = subject
                    .map(|text| truncate_chars(&text.replace('\n', " "), 60))
                    .unwrap_or_default();
                self.subjects.insert(call_id, subject);
            }
            AgentEvent::ToolEnd {
                call_id,
                name,
                output,
                is_error,
            } => {
                let subject = self.subjects.remove(&call_id).unwrap_or_default();
                let (mark, colour) = if is_error {
                    ("✗", RED)
                } else {
                    ("✓", GREEN)
                };
                // The output in a few words: how many lines, the line itself when there is
                // one, an error's first line; without the fence that marks it untrusted for
                // the model.
                let body = output
                    .strip_prefix(&format!("<{UNTRUSTED_TAG} "))
                    .and_then(|rest| rest.split_once(">\n"))
                    .map_or(output.as_str(), |(_, rest)| {
                        rest.strip_suffix(&format!("</{UNTRUSTED_TAG}>"))
                            .unwrap_or(rest)
                    });
                let lines: Vec<&str> = body.lines().filter(|l| !l.trim().is_empty()).collect();
                let summary = match lines.as_slice() {
                    [] => "no output".to_owned(),
                    [first, ..] if is_error => truncate_chars(first.trim(), 160),
                    [only] => truncate_chars(only.trim(), 100),
                    several => format!("{} lines", several.len()),
                };
                let line = if subject.is_empty() {
                    format!("  {mark} {name}: {summary}")
                } else {
                    format!("  {mark} {name} {subject}: {summary}")
                };
                self.line(colour, &line);
            }
            AgentEvent::InstructionsChanged(change) => {
                let agent = if change.agent == nanocrab_config::DEFAULT_AGENT_ID {
                    String::new()
                } else {
                    format!(" --agent {}", change.agent)
                };
                self.line(
                    YELLOW,
                    &format!(
                        "  ✎ {path} changed (version {version}) — nanocrab workspace diff{agent} \
                         {path} {version}",
                        path = change.path,
                        version = change.version,
                    ),
                );
            }
            AgentEvent::NewResponse { .. } => {
                self.stop_spinner();
                self.end_line();
                self.thinking();
            }
            AgentEvent::Retry {
                provider,
                reason,
                delay_ms,
                attempt,
                attempts,
            } => {
                self.line(
                    YELLOW,
                    &format!(
                        "  ↻ {provider}: {}, retrying in {} s (attempt {attempt} of {attempts})",
                        truncate_chars(&reason, 160),
                        delay_ms.div_ceil(1000)
                    ),
                );
                self.thinking();
            }
            AgentEvent::ModelFallback { from, to, reason } => {
                self.line(
                    YELLOW,
                    &format!(
                        "  ↻ {from} failed ({}); trying {to}",
                        truncate_chars(&reason, 160)
                    ),
                );
                self.thinking();
            }
            AgentEvent::Done { text } => {
                self.stop_spinner();
                if self.look.stream {
                    self.end_line();
                } else {
                    let _ = writeln!(self.out, "{text}");
                }
            }
            // The failed turn's error is returned to the caller, which reports it once.
            AgentEvent::Error { .. } => {
                self.stop_spinner();
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        if !self.at_line_start {
            let _ = writeln!(self.out);
            let _ = self.out.flush();
            self.at_line_start = true;
        }
    }
}

impl<O: Write, E: Write> Drop for EventPrinter<O, E> {
    fn drop(&mut self) {
        self.stop_spinner();
    }
}

/// The largest image accepted; providers' own limits are lower still (Anthropic: 5 MB).
const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

fn read_image(path: &std::path::Path) -> anyhow::Result<Image> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let media_type = match ext.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some(_) | None => anyhow::bail!(
            "--image {}: not a PNG, JPEG, GIF or WebP file (by its extension)",
            path.display()
        ),
    };
    let size = std::fs::metadata(path)
        .with_context(|| format!("--image {}", path.display()))?
        .len();
    if size > MAX_IMAGE_BYTES {
        anyhow::bail!(
            "--image {}: {} MB is too large (at most {} MB)",
            path.display(),
            size / (1024 * 1024),
            MAX_IMAGE_BYTES / (1024 * 1024)
        );
    }
    let bytes = std::fs::read(path).with_context(|| format!("--image {}", path.display()))?;
    Ok(Image {
        media_type: media_type.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
        file: None,
    })
}

fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    /// A run in which the model says something, reads a file, then answers.
    fn a_run_with_a_tool_call() -> Vec<AgentEvent> {
        vec![
            AgentEvent::Token {
                text: "Let me look at your notes.".into(),
            },
            AgentEvent::ToolStart {
                call_id: "c1".into(),
                name: "read_file".into(),
                input: json!({"path": "notes.txt"}),
            },
            AgentEvent::ToolEnd {
                call_id: "c1".into(),
                name: "read_file".into(),
                output: "<untrusted-data source=\"read_file: notes.txt\">\none\ntwo\nthree\n</untrusted-data>".into(),
                is_error: false,
            },
            AgentEvent::NewResponse { iteration: 2 },
            AgentEvent::Token {
                text: "They list three things.".into(),
            },
            AgentEvent::Done {
                text: "They list three things.".into(),
            },
        ]
    }

    /// What `look` prints of `events`: (stdout, stderr).
    fn printed(look: Look, events: Vec<AgentEvent>) -> (String, String) {
        let mut printer = EventPrinter::new(
            Look {
                // A spinner draws on the real stderr: never in a test.
                spinner: false,
                ..look
            },
            Vec::new(),
            Vec::new(),
        );
        printer.thinking();
        for event in events {
            printer.print(event);
        }
        let out = String::from_utf8(std::mem::take(&mut printer.out)).unwrap();
        let err = String::from_utf8(std::mem::take(&mut printer.err)).unwrap();
        (out, err)
    }

    #[test]
    fn on_a_terminal_the_text_before_a_tool_call_is_shown_and_piped_only_the_answer() {
        let terminal = Look::new(true, true, None);
        let (out, err) = printed(terminal, a_run_with_a_tool_call());
        assert_eq!(out, "Let me look at your notes.\nThey list three things.\n");
        assert_eq!(
            err,
            "\x1b[36m  → read_file {\"path\":\"notes.txt\"}\x1b[0m\n\x1b[32m  ✓ read_file notes.txt: 3 lines\x1b[0m\n"
        );

        let piped = Look::new(false, false, None);
        let (out, err) = printed(piped, a_run_with_a_tool_call());
        assert_eq!(out, "They list three things.\n");
        assert_eq!(
            err,
            "  → read_file {\"path\":\"notes.txt\"}\n  ✓ read_file notes.txt: 3 lines\n"
        );
    }

    #[test]
    fn colour_and_the_spinner_need_a_terminal_and_no_color_turns_colour_off() {
        let no_color = std::ffi::OsStr::new("1");
        let empty = std::ffi::OsStr::new("");
        assert_eq!(
            Look::new(true, true, None),
            Look {
                stream: true,
                colour: true,
                spinner: true
            }
        );
        assert_eq!(
            Look::new(true, true, Some(no_color)),
            Look {
                stream: true,
                colour: false,
                spinner: true
            }
        );
        // NO_COLOR set but empty does not count (no-color.org).
        assert!(Look::new(true, true, Some(empty)).colour);
        assert_eq!(
            Look::new(false, false, None),
            Look {
                stream: false,
                colour: false,
                spinner: false
            }
        );
    }

    #[test]
    fn results_errors_and_retries_read_as_one_line_each() {
        let piped = Look::new(false, false, None);
        let (_, err) = printed(
            piped,
            vec![
                AgentEvent::Retry {
                    provider: "openai".into(),
                    reason: "429".into(),
                    delay_ms: 1_500,
                    attempt: 2,
                    attempts: 4,
                },
                AgentEvent::ToolStart {
                    call_id: "c1".into(),
                    name: "exec".into(),
                    input: json!({"command": "ls -la"}),
                },
                AgentEvent::ToolEnd {
                    call_id: "c1".into(),
                    name: "exec".into(),
                    output: format!(
                        "<untrusted-data source=\"exec: ls -la\">\n{}</untrusted-data>",
                        "file\n".repeat(12)
                    ),
                    is_error: false,
                },
                AgentEvent::ToolStart {
                    call_id: "c2".into(),
                    name: "write_file".into(),
                    input: json!({"path": "a.md", "content": "x"}),
                },
                AgentEvent::ToolEnd {
                    call_id: "c2".into(),
                    name: "write_file".into(),
                    output: "Wrote 1 byte to a.md".into(),
                    is_error: false,
                },
                AgentEvent::ToolStart {
                    call_id: "c3".into(),
                    name: "exec".into(),
                    input: json!({"command": "rm -rf /"}),
                },
                AgentEvent::ToolEnd {
                    call_id: "c3".into(),
                    name: "exec".into(),
                    output: "Error: denied: rm is not allowed\nmore detail".into(),
                    is_error: true,
                },
                AgentEvent::Consolidating { messages: 12 },
            ],
        );
        let lines: Vec<&str> = err.lines().filter(|l| !l.contains('→')).collect();
        assert_eq!(
            lines,
            [
                "  ↻ openai: 429, retrying in 2 s (attempt 2 of 4)",
                "  ✓ exec ls -la: 12 lines",
                "  ✓ write_file a.md: Wrote 1 byte to a.md",
                "  ✗ exec rm -rf /: Error: denied: rm is not allowed",
                "  ⟳ consolidating memory (12 messages)…",
            ]
        );
    }

    #[test]
    fn a_changed_instruction_file_names_the_command_that_shows_the_change() {
        let change = |agent: &str| {
            AgentEvent::InstructionsChanged(nanocrab_schema::InstructionsChange {
                agent: agent.into(),
                path: "SOUL.md".into(),
                version: 3,
                tool: "write_file".into(),
            })
        };
        let (out, err) = printed(
            Look::new(false, false, None),
            vec![change("main"), change("work")],
        );
        assert_eq!(out, "");
        assert_eq!(
            err,
            "  ✎ SOUL.md changed (version 3) — nanocrab workspace diff SOUL.md 3\n  ✎ SOUL.md \
             changed (version 3) — nanocrab workspace diff --agent work SOUL.md 3\n"
        );
    }
}
