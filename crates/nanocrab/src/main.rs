//! The `nanocrab` command.

/// `println!` that hands a failed write back instead of panicking, so that a command whose
/// reader has gone (`nanocrab status | head -3`) ends quietly: see `main`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)
    }};
}

/// `print!` as [`outln!`] is `println!`; flushed, as it is for a prompt.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout();
        write!(stdout, $($arg)*).and_then(|()| stdout.flush())
    }};
}

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{
    Cli, Command, ConfigCommand, HeartbeatCommand, ProvidersCommand, SecurityCommand,
};

fn main() -> ExitCode {
    // The exec sandbox's launcher restricts this very process and then execs the command, so
    // it runs before anything else exists: no clap, no logging, no tokio threads.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(nanocrab_sandbox::LAUNCHER_ARG))
    {
        return ExitCode::from(nanocrab_sandbox::launch(std::env::args_os().skip(2)));
    }
    // Everything nanocrab writes (config, transcripts, memory, the audit log, the folders
    // that hold them) is the user's alone, whatever umask the shell left: 0700 folders and
    // 0600 files. Commands the agent runs inherit it, so their files are private too.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    // Other processes of the same user, exec commands included, cannot read this one's
    // `/proc/<pid>/environ` (API keys), memory or file descriptors, nor attach a debugger.
    // Commands are exec'd, which makes them dumpable again: this process alone is covered.
    // Where the kernel refuses, the sandbox's Landlock domain still keeps commands out.
    if let Err(err) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        eprintln!(
            "nanocrab: cannot keep other processes out of /proc/{}: {err}",
            std::process::id()
        );
    }
    let cli = Cli::parse();
    init_logging();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // Whoever read the output stopped reading (`| head`): what they wanted was printed.
        Err(err)
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr so stdout carries only the answer; quiet unless `NANOCRAB_LOG` or
/// `RUST_LOG` asks for more.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NANOCRAB_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in a service's log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let env = commands::Env::from_process(cli.config.clone())?;
    match cli.command {
        Command::Onboard { model } => commands::onboard::run(&env, model),
        Command::Agent(args) => commands::agent::run(&env, args),
        Command::Gateway => commands::gateway::run(&env),
        Command::Sessions { command } => commands::sessions::run(&env, command),
        Command::Status => commands::status::run(&env),
        Command::Heartbeat {
            command: HeartbeatCommand::Run { agent },
        } => commands::heartbeat::run(&env, &agent),
        Command::Cron { command } => commands::cron::run(&env, command),
        Command::Subagents { command } => commands::subagents::run(&env, command),
        Command::Usage(args) => commands::usage::run(&env, args),
        Command::Providers {
            command: ProvidersCommand::List,
        } => commands::status::providers(&env),
        Command::Memory { command } => commands::memory::run(&env, command),
        Command::Models { command } => commands::models::run(&env, command),
        Command::Pairing { command } => commands::pairing::run(&env, command),
        Command::Security {
            command: SecurityCommand::Audit { fix },
        } => commands::security::audit(&env, fix),
        Command::Audit { command } => commands::audit::run(&env, command),
        Command::Workspace { command } => commands::workspace::run(&env, command),
        Command::Skills { command } => commands::skills::run(&env, command),
        Command::Mcp { command } => commands::mcp::run(&env, command),
        Command::Hooks { command } => commands::hooks::run(&env, command),
        Command::Config {
            command: ConfigCommand::Schema,
        } => {
            outln!(
                "{}",
                serde_json::to_string_pretty(&nanocrab_config::json_schema())?
            )?;
            Ok(())
        }
    }
}
