use std::io::{IsTerminal as _, Write as _};

use anyhow::Context as _;
use base64::Engine as _;
use nanocrab_core::{Agent, UserInput};
use nanocrab_schema::{AgentEvent, Image, SessionKey};

use super::Env;
use crate::cli::AgentArgs;

pub fn run(env: &Env, args: AgentArgs) -> anyhow::Result<()> {
    let key = SessionKey::parse(&args.session).context("invalid --session")?;
    let images = args
        .images
        .iter()
        .map(|path| read_image(path))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !images.is_empty() && args.message.is_none() {
        anyhow::bail!("--image needs a message: nanocrab agent -m \"what is this?\" --image PATH");
    }
    let config = env.load_config()?.config;
    let built = super::agents::build(
        env,
        &config,
        nanocrab_config::DEFAULT_AGENT_ID,
        args.model.as_deref(),
        Some(std::sync::Arc::new(super::stdin_approver::StdinApprover)),
    )?;
    if let Some(notice) = &built.notice {
        eprintln!("{notice}");
    }
    let agent = built.agent;
    // One thread is plenty for one conversation, and starts faster than a thread pool.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match args.message {
        Some(text) => {
            let mut printer = EventPrinter::new(std::io::stdout().is_terminal());
            let input = UserInput {
                text,
                images,
                channel: None,
                trace_id: None,
            };
            runtime.block_on(agent.run_turn(&key, input, &mut |event| printer.print(event)))?;
            runtime.block_on(after_turn(&agent, &key));
            Ok(())
        }
        None => repl(env, &runtime, &agent, &key),
    }
}

/// Once the answer is out: a due consolidation, and a title from the housekeeping model for a
/// new conversation, saying on stderr what was done; a failure leaves the conversation as it
/// was, to be tried after the next turn.
async fn after_turn(agent: &Agent, key: &SessionKey) {
    if let Err(err) = agent.title_if_missing(key).await {
        eprintln!("  ✗ {err}");
    }
    match agent.consolidate_if_due(key).await {
        Ok(Some(report)) => eprintln!(
            "  ⟳ memory: {} messages consolidated into memory/HISTORY.md{}",
            report.entries,
            if report.memory_changed {
                " and memory/MEMORY.md"
            } else {
                ""
            }
        ),
        Ok(None) => {}
        Err(err) => eprintln!("  ✗ {err}"),
    }
}

fn repl(
    env: &Env,
    runtime: &tokio::runtime::Runtime,
    agent: &Agent,
    key: &SessionKey,
) -> anyhow::Result<()> {
    use rustyline::error::ReadlineError;

    let mut editor = rustyline::DefaultEditor::new()?;
    let history = env.paths.state_dir().join("cli_history.txt");
    // A missing history file is the normal first run.
    let _ = editor.load_history(&history);
    eprintln!("nanocrab · session {key} · /help for commands · Ctrl-D to quit");
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
        let mut printer = EventPrinter::new(true);
        let mut on_event = |event| printer.print(event);
        let turn = runtime.block_on(async {
            tokio::select! {
                outcome = agent.run_turn(key, message, &mut on_event) => Some(outcome),
                _ = tokio::signal::ctrl_c() => None,
            }
        });
        match turn {
            Some(Ok(_)) => runtime.block_on(after_turn(agent, key)),
            Some(Err(err)) => eprintln!("error: {err:#}"),
            None => eprintln!("\n(interrupted; what was done so far is saved)"),
        }
    }
    if let Some(dir) = history.parent() {
        std::fs::create_dir_all(dir)?;
    }
    editor.save_history(&history)?;
    Ok(())
}

/// Shows a run as it happens: the answer on stdout, everything else on stderr so that
/// `nanocrab agent -m ... > answer.txt` captures only the answer.
struct EventPrinter {
    /// Stream tokens as they arrive (a terminal); otherwise print the final answer once.
    stream: bool,
    at_line_start: bool,
}

impl EventPrinter {
    fn new(stream: bool) -> Self {
        Self {
            stream,
            at_line_start: true,
        }
    }

    fn print(&mut self, event: AgentEvent) {
        let mut out = std::io::stdout().lock();
        // Write errors on stdout (a closed pipe) must not abort the run: the turn is still
        // persisted and can be read with `nanocrab sessions show`.
        match event {
            AgentEvent::Token { text } => {
                if self.stream {
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                    self.at_line_start = text.ends_with('\n');
                }
            }
            AgentEvent::Reasoning { .. } | AgentEvent::Usage { .. } => {}
            AgentEvent::Compaction { messages } => {
                self.end_line(&mut out);
                eprintln!("  ⟳ {messages} earlier messages summarised to fit the context window");
            }
            AgentEvent::Retrieval { sources } => {
                let found: Vec<String> = sources
                    .iter()
                    .map(|s| format!("{}:{}-{}", s.path, s.start_line, s.end_line))
                    .collect();
                eprintln!("  ⌕ memory: {}", found.join(", "));
            }
            AgentEvent::ToolStart { name, input, .. } => {
                self.end_line(&mut out);
                let input = input.to_string();
                eprintln!("  → {name} {}", truncate_chars(&input, 160));
            }
            AgentEvent::ToolEnd {
                name,
                output,
                is_error,
                ..
            } => {
                let first = output.lines().next().unwrap_or("");
                let mark = if is_error { "✗" } else { "✓" };
                eprintln!("  {mark} {name}: {}", truncate_chars(first, 160));
            }
            AgentEvent::NewResponse { .. } => self.end_line(&mut out),
            AgentEvent::ModelFallback { from, to, reason } => {
                self.end_line(&mut out);
                eprintln!(
                    "  ↻ {from} failed ({}); trying {to}",
                    truncate_chars(&reason, 160)
                );
            }
            AgentEvent::Done { text } => {
                if self.stream {
                    self.end_line(&mut out);
                } else {
                    let _ = writeln!(out, "{text}");
                }
            }
            // The failed turn's error is returned to the caller, which reports it once.
            AgentEvent::Error { .. } => self.end_line(&mut out),
        }
    }

    fn end_line(&mut self, out: &mut impl std::io::Write) {
        if !self.at_line_start {
            let _ = writeln!(out);
            let _ = out.flush();
            self.at_line_start = true;
        }
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
