use std::io::{IsTerminal as _, Write as _};
use std::sync::Arc;

use anyhow::Context as _;
use nanocrab_core::{Agent, AgentSettings, ContextBuilder};
use nanocrab_memory::SessionStore;
use nanocrab_provider::RetryPolicy;
use nanocrab_schema::{AgentEvent, SessionKey};

use super::Env;
use crate::cli::AgentArgs;

pub fn run(env: &Env, args: AgentArgs) -> anyhow::Result<()> {
    let key = SessionKey::parse(&args.session).context("invalid --session")?;
    let agent = build_agent(env, args.model.as_deref())?;
    // One thread is plenty for one conversation, and starts faster than a thread pool.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match args.message {
        Some(message) => {
            let mut printer = EventPrinter::new(std::io::stdout().is_terminal());
            runtime.block_on(agent.run_turn(&key, &message, &mut |event| printer.print(event)))?;
            Ok(())
        }
        None => repl(env, &runtime, &agent, &key),
    }
}

fn build_agent(env: &Env, model_flag: Option<&str>) -> anyhow::Result<Agent> {
    let loaded = env.load_config()?;
    let config = loaded.config;
    let workspace = env.workspace(&config);
    std::fs::create_dir_all(&workspace)
        .with_context(|| format!("cannot create the workspace {}", workspace.display()))?;
    let model = model_flag.unwrap_or(&config.agents.defaults.model);
    let resolved =
        nanocrab_provider::resolve_model(model, &config, &Env::var, RetryPolicy::default())?;
    let tools =
        nanocrab_tools::builtin_registry(&config.tools, &workspace, env.user_home.as_deref())?;
    let defaults = &config.agents.defaults;
    Ok(Agent::new(
        Arc::clone(&resolved.provider),
        resolved.model,
        tools,
        SessionStore::new(env.paths.sessions_dir()),
        ContextBuilder::new(workspace),
        AgentSettings {
            max_tokens: defaults.max_tokens,
            temperature: Some(defaults.temperature),
            max_tool_iterations: defaults.max_tool_iterations,
            context_window_tokens: defaults.context_window_tokens,
        },
    ))
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
            Some(Ok(_)) => {}
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

fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
