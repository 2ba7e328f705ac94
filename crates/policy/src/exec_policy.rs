//! Whether `exec` may run a command, decided on bash's own syntax tree (brush-parser), never on
//! regexes or shlex-style splitting, which read `|`, `&&` and `$(...)` as plain words.
//!
//! In allowlist mode the analysis yields the exact argv of every pipeline segment, and `exec`
//! runs those argv lists itself with no shell, so what runs is exactly what was checked.

use std::path::Path;

use brush_parser::ast::{
    AndOr, Command, CommandPrefixOrSuffixItem, CompoundCommand, IoRedirect, SeparatorOperator,
};
use brush_parser::{Parser, ParserOptions};
use nanocrab_config::{ExecConfig, ExecMode};

use crate::path_guard::PathGuard;
use crate::program_rules::{refused_arguments, refused_program};
use crate::shell_word::literal_value;

/// OpenClaw's safe bins plus a few read-only ones; docs/security.md justifies each.
pub const DEFAULT_SAFE_BINS: &[&str] = &[
    "jq", "grep", "cut", "sort", "uniq", "head", "tail", "tr", "wc", "echo", "cat", "ls", "pwd",
    "date", "true", "basename", "dirname", "nl", "rev",
];

/// Why the exec policy could not be built from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ExecPolicyError {
    #[error(
        "tools.exec.safeBins: `{0}` is not a program name; list bare names such as `jq` (no \
         paths, no spaces)"
    )]
    BadSafeBin(String),
}

/// A refused command and exactly why, worded for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Denial {
    message: String,
}

impl Denial {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// What `exec` will run once a command is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecPlan {
    /// Allowlist mode: the argv of each segment of a pipeline, run directly, no shell.
    Pipeline(Vec<Vec<String>>),
    /// Full mode: the command as given, for `sh -c`.
    Shell(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecPolicy {
    mode: ExecMode,
    safe_bins: Vec<String>,
    /// How long allowlist mode waits for the parse ([`ANALYSIS_DEADLINE`] unless a test
    /// shortens it).
    analysis_limit: std::time::Duration,
}

impl ExecPolicy {
    pub fn new(config: &ExecConfig) -> Result<Self, ExecPolicyError> {
        let safe_bins = match &config.safe_bins {
            Some(configured) => configured.clone(),
            None => DEFAULT_SAFE_BINS.iter().map(|b| (*b).to_owned()).collect(),
        };
        if let Some(bad) = safe_bins
            .iter()
            .find(|b| b.is_empty() || b.contains('/') || b.contains(char::is_whitespace))
        {
            return Err(ExecPolicyError::BadSafeBin(bad.clone()));
        }
        Ok(Self {
            mode: config.mode,
            safe_bins,
            analysis_limit: ANALYSIS_DEADLINE,
        })
    }

    /// The same policy waiting at most `limit` for a command's parse, so that a test can
    /// reach the refusal without depending on how fast this machine parses.
    pub fn with_analysis_limit(self, limit: std::time::Duration) -> Self {
        Self {
            analysis_limit: limit,
            ..self
        }
    }

    pub fn mode(&self) -> ExecMode {
        self.mode
    }

    pub fn safe_bins(&self) -> &[String] {
        &self.safe_bins
    }

    /// Decides whether `command` may run in `cwd` (already checked by the guard). With
    /// `restrictToWorkspace` on, every argument that names a path must pass `guard`.
    pub fn analyze(
        &self,
        command: &str,
        cwd: &Path,
        guard: &PathGuard,
    ) -> Result<ExecPlan, Denial> {
        if command.trim().is_empty() {
            return Err(Denial::new("the command is empty"));
        }
        match self.mode {
            ExecMode::Deny => Err(Denial::new(
                "exec is disabled by configuration (tools.exec.mode is \"deny\"); no command \
                 can run",
            )),
            ExecMode::Full => Ok(ExecPlan::Shell(command.to_owned())),
            ExecMode::Allowlist => {
                if command.len() > MAX_COMMAND_BYTES {
                    return Err(Denial::new(format!(
                        "the command is {} bytes long; allowlist mode parses at most {} KiB: \
                         put long data in a file with write_file and pass its name",
                        command.len(),
                        MAX_COMMAND_BYTES / 1024
                    )));
                }
                // Owned copies: a thread stuck in the parser is left behind, not waited for.
                let (policy, command, cwd, guard) = (
                    self.clone(),
                    command.to_owned(),
                    cwd.to_path_buf(),
                    guard.clone(),
                );
                let (sender, receiver) = std::sync::mpsc::channel();
                std::thread::Builder::new()
                    .name("exec-analysis".into())
                    .stack_size(PARSE_STACK_BYTES)
                    .spawn(move || {
                        let _ = sender.send(policy.analyze_allowlist(&command, &cwd, &guard));
                    })
                    .map_err(|err| {
                        Denial::new(format!("cannot start the command analysis: {err}"))
                    })?;
                match receiver.recv_timeout(self.analysis_limit) {
                    Ok(result) => result,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(Denial::new(format!(
                        "the command could not be analysed within {} (the shell parser \
                         backtracks on some unbalanced brackets); allowlist mode refuses it: \
                         run a simpler command",
                        if self.analysis_limit.subsec_nanos() == 0 {
                            format!("{} s", self.analysis_limit.as_secs())
                        } else {
                            format!("{:.1} s", self.analysis_limit.as_secs_f64())
                        }
                    ))),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        Err(Denial::new("the command analysis failed"))
                    }
                }
            }
        }
    }

    fn analyze_allowlist(
        &self,
        command: &str,
        cwd: &Path,
        guard: &PathGuard,
    ) -> Result<ExecPlan, Denial> {
        unparsable_safely(command)?;
        let program = Parser::new(std::io::Cursor::new(command), &ParserOptions::default())
            .parse_program()
            .map_err(|err| {
                Denial::new(format!(
                    "cannot parse the command as shell syntax ({err}); check quotes and brackets"
                ))
            })?;
        const SEVERAL: &str = "several commands (`;` or a newline) are not allowed in allowlist \
                               mode: run each command separately";
        let [list] = program.complete_commands.as_slice() else {
            return Err(match program.complete_commands.len() {
                0 => Denial::new("the command is empty (only a comment?)"),
                _ => Denial::new(SEVERAL),
            });
        };
        if let Some(item) = list
            .0
            .iter()
            .find(|item| matches!(item.1, SeparatorOperator::Async))
        {
            return Err(Denial::new(format!(
                "`&` (background) is not allowed in allowlist mode: commands run in the \
                 foreground (in `{}`)",
                item.0
            )));
        }
        let [item] = list.0.as_slice() else {
            return Err(Denial::new(SEVERAL));
        };
        let and_or = &item.0;
        if let Some(next) = and_or.additional.first() {
            return Err(Denial::new(match next {
                AndOr::And(_) => {
                    "`&&` is not allowed in allowlist mode: run each command separately"
                }
                AndOr::Or(_) => {
                    "`||` is not allowed in allowlist mode: run each command separately"
                }
            }));
        }
        let pipeline = &and_or.first;
        if pipeline.timed.is_some() {
            return Err(Denial::new(
                "`time` is not allowed in allowlist mode: run the command without it",
            ));
        }
        if pipeline.bang {
            return Err(Denial::new(
                "`!` (negation) is not allowed in allowlist mode: run the command without it",
            ));
        }
        let mut segments = Vec::with_capacity(pipeline.seq.len());
        for segment in &pipeline.seq {
            segments.push(self.check_segment(segment, cwd, guard)?);
        }
        Ok(ExecPlan::Pipeline(segments))
    }

    fn check_segment(
        &self,
        segment: &Command,
        cwd: &Path,
        guard: &PathGuard,
    ) -> Result<Vec<String>, Denial> {
        let simple = match segment {
            Command::Simple(simple) => simple,
            Command::Compound(compound, _) => {
                let what = match compound {
                    CompoundCommand::Subshell(_) => {
                        return Err(Denial::new(
                            "subshells `( ... )` are not allowed in allowlist mode: run the \
                             command directly",
                        ));
                    }
                    CompoundCommand::BraceGroup(_) => {
                        return Err(Denial::new(
                            "brace groups `{ ...; }` are not allowed in allowlist mode: run the \
                             command directly",
                        ));
                    }
                    CompoundCommand::Arithmetic(_) => "`(( ... ))`",
                    CompoundCommand::ArithmeticForClause(_) | CompoundCommand::ForClause(_) => {
                        "`for`"
                    }
                    CompoundCommand::CaseClause(_) => "`case`",
                    CompoundCommand::IfClause(_) => "`if`",
                    CompoundCommand::WhileClause(_) => "`while`",
                    CompoundCommand::UntilClause(_) => "`until`",
                    CompoundCommand::Coprocess(_) => "`coproc`",
                };
                return Err(Denial::new(format!(
                    "shell control structures ({what}) are not allowed in allowlist mode: run \
                     plain commands, one at a time"
                )));
            }
            Command::Function(_) => {
                return Err(Denial::new(
                    "function definitions are not allowed in allowlist mode: run plain commands",
                ));
            }
            Command::ExtendedTest(..) => {
                return Err(Denial::new(
                    "`[[ ... ]]` tests are not allowed in allowlist mode: run plain commands",
                ));
            }
        };
        let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
        let suffix = simple.suffix.iter().flat_map(|s| s.0.iter());
        let mut raw_words = Vec::new();
        for item in prefix {
            raw_words.push(check_item(item)?);
        }
        let Some(program_word) = &simple.word_or_name else {
            return Err(Denial::new("the command is empty"));
        };
        raw_words.push(program_word.value.as_str());
        for item in suffix {
            raw_words.push(check_item(item)?);
        }
        let mut argv = Vec::with_capacity(raw_words.len());
        for raw in raw_words {
            argv.push(literal_value(raw, guard.home()).map_err(Denial::new)?);
        }
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| Denial::new("the command is empty"))?;
        if program.contains('/') {
            return Err(Denial::new(format!(
                "`{program}`: programs must be named without a path in allowlist mode (`cat`, \
                 not `/bin/cat` or `./cat`); safe bins are looked up in PATH"
            )));
        }
        if let Some(reason) = refused_program(program) {
            return Err(Denial::new(reason));
        }
        if !self.safe_bins.iter().any(|bin| bin == program) {
            return Err(Denial::new(format!(
                "`{program}` is not a safe bin; allowlist mode runs only: {} (tools.exec.safeBins \
                 and tools.exec.mode change this)",
                self.safe_bins.join(", ")
            )));
        }
        if let Some(reason) = refused_arguments(program, args) {
            return Err(Denial::new(reason));
        }
        if guard.restricts_to_workspace() {
            let mut options_ended = false;
            for arg in args {
                let named_paths: Vec<&str> = if options_ended || !arg.starts_with('-') || arg == "-"
                {
                    vec![arg.as_str()]
                } else if arg == "--" {
                    options_ended = true;
                    Vec::new()
                } else if let Some(long) = arg.strip_prefix("--") {
                    long.split_once('=')
                        .map(|(_, value)| value)
                        .into_iter()
                        .collect()
                } else {
                    short_option_values(arg, cwd)
                };
                for named_path in named_paths {
                    if named_path.is_empty() || named_path == "-" {
                        continue;
                    }
                    let looks_like_path = named_path.starts_with(['/', '~', '.'])
                        || named_path.contains('/')
                        // A bare name is still checked when it exists: it may be a symlink out.
                        || std::fs::symlink_metadata(cwd.join(named_path)).is_ok();
                    if looks_like_path {
                        guard
                            .check_argument(cwd, named_path)
                            .map_err(|denial| Denial::new(format!("`{program}`: {denial}")))?;
                    }
                }
            }
        }
        Ok(argv)
    }
}

/// Bytes of command allowlist mode parses; longer ones are refused unparsed.
const MAX_COMMAND_BYTES: usize = 16 * 1024;
/// Stack of the thread that parses a command. brush-parser recurses per nesting level (`if`
/// in `if`, `[[ ! ! ...`), up to ~10 KiB of stack per byte of input in a debug build, so a
/// few hundred bytes overflow a 2 MiB tokio worker and abort the process; this covers
/// `MAX_COMMAND_BYTES`. Reserved, not committed: only what the recursion touches is used.
const PARSE_STACK_BYTES: usize = 256 << 20;
/// How long the parse may take. brush-parser backtracks exponentially on some unbalanced
/// input the checks below do not catch (fuzzing found a 237-byte command taking 30 s); past
/// this the command is refused and the parsing thread is left to finish on its own.
const ANALYSIS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);
/// Brackets (`$(`, `(`, `${`, `{`) open at once beyond which the command is refused unparsed.
const MAX_NESTING: usize = 64;
/// Parentheses open at once beyond which the command is refused unparsed: brush-parser
/// backtracks over unclosed `(` (subshell or arithmetic?) in time doubling with each one
/// (24 took 8 s in a release build).
const MAX_PAREN_NESTING: usize = 12;
/// Digits from which a number may overflow brush-parser's integer types.
const MAX_DIGITS: usize = 10;

/// Refuses what brush-parser 0.4 cannot parse without panicking, overflowing the stack or
/// looping (`<<` CR `<#` allocates without end; control characters are refused as a class),
/// which the release build (`panic = "abort"`) turns into the end of the whole process:
/// nesting that recurses once per bracket (2 MiB of stack, a tokio worker's, lasts ~200
/// levels of `$(` in a debug build), and numbers it parses with `unwrap()` (a file
/// descriptor `N>`, `~N`, a `{N..M}` range). The scan ignores quoting, so it can only refuse
/// more, never less, than the parser would see.
fn unparsable_safely(command: &str) -> Result<(), Denial> {
    if let Some(c) = command
        .chars()
        .find(|c| c.is_ascii_control() && !matches!(c, '\n' | '\t'))
    {
        return Err(Denial::new(format!(
            "the command contains the control character U+{:04X}; allowlist mode refuses control \
             characters other than tab and newline",
            u32::from(c)
        )));
    }
    // Refused below whatever the quoting: as heredocs and parameter expansions they would be
    // refused anyway, and their parsers blow up (`^<<($${x` panics; each unclosed `${a[`
    // doubles the time: 6 took over a minute).
    for (token, what, literal) in [
        ("<<", "`<<` (heredocs, here-strings)", "[<]<"),
        ("${", "`${`", "[$]{"),
    ] {
        if command.contains(token) {
            return Err(Denial::new(format!(
                "{what} is refused in allowlist mode, even quoted, because the shell parser \
                 cannot be trusted with it; to match it literally in a pattern write `{literal}`"
            )));
        }
    }
    let (mut depth, mut parens): (usize, usize) = (0, 0);
    for c in command.chars() {
        match c {
            '(' | '{' => {
                depth += 1;
                if c == '(' {
                    parens += 1;
                }
                if depth > MAX_NESTING || parens > MAX_PAREN_NESTING {
                    let (limit, what) = if parens > MAX_PAREN_NESTING {
                        (MAX_PAREN_NESTING, "parentheses")
                    } else {
                        (MAX_NESTING, "brackets")
                    };
                    return Err(Denial::new(format!(
                        "the command nests {what} more than {limit} deep; allowlist mode refuses \
                         it: run simpler commands"
                    )));
                }
            }
            ')' => {
                depth = depth.saturating_sub(1);
                parens = parens.saturating_sub(1);
            }
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let bytes = command.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if !bytes[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        if at - start < MAX_DIGITS {
            continue;
        }
        let before = &command[..start];
        let before = before.strip_suffix(['+', '-']).unwrap_or(before);
        let after = &command[at..];
        if after.starts_with(['<', '>'])
            || after.starts_with("..")
            || before.ends_with(['~', '{'])
            || before.ends_with("..")
        {
            return Err(Denial::new(format!(
                "the number `{}` is too long where the shell reads it as a file descriptor, \
                 `~N` or a `{{N..M}}` range; allowlist mode refuses it",
                &command[start..at]
            )));
        }
    }
    Ok(())
}

/// The values a cluster of short options (`-abc...`) may carry glued on. Which letter takes a
/// value is the program's business (`grep -f FILE`, `date -f FILE`, `sort -T DIR`), so every
/// tail after a run of option letters is a candidate: the one from the first `/`, `~` or `.`
/// (`-f/etc/x`, `-f../x`), and each bare tail that names an existing file (`-flink_out`,
/// `-nflink_out`, `-f=link_out` either way it is read), which may be a symlink out of the
/// workspace.
fn short_option_values<'a>(arg: &'a str, cwd: &Path) -> Vec<&'a str> {
    let mut values: Vec<&str> = arg
        .find(['/', '~', '.'])
        .map(|at| &arg[at..])
        .into_iter()
        .collect();
    let mut tails = Vec::new();
    for (at, c) in arg.char_indices().skip(1) {
        if at >= 2 {
            tails.push(&arg[at..]);
        }
        if !c.is_ascii_alphanumeric() {
            if c == '=' {
                tails.push(&arg[at + 1..]);
            }
            break;
        }
    }
    // Longer than PATH_MAX cannot exist; skipping it keeps a huge argument cheap.
    values.extend(
        tails
            .into_iter()
            .filter(|tail| tail.len() <= 4096 && std::fs::symlink_metadata(cwd.join(tail)).is_ok()),
    );
    values
}

/// The raw word of a prefix/suffix item, or why the item is refused.
fn check_item(item: &CommandPrefixOrSuffixItem) -> Result<&str, Denial> {
    match item {
        CommandPrefixOrSuffixItem::Word(word) => Ok(word.value.as_str()),
        CommandPrefixOrSuffixItem::AssignmentWord(_, word) => Err(Denial::new(format!(
            "variable assignments (`{}`) are not allowed in allowlist mode: the environment is \
             fixed",
            word.value
        ))),
        CommandPrefixOrSuffixItem::ProcessSubstitution(..) => Err(Denial::new(
            "process substitution `<(...)`/`>(...)` is not allowed in allowlist mode: run the \
             inner command separately",
        )),
        CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
            let what = match redirect {
                IoRedirect::HereDocument(..) => "heredocs (`<<`)".to_owned(),
                IoRedirect::HereString(..) => "here-strings (`<<<`)".to_owned(),
                IoRedirect::File(..) | IoRedirect::OutputAndError(..) => {
                    format!("redirection `{redirect}`")
                }
            };
            Err(Denial::new(format!(
                "{what} is not allowed in allowlist mode: use read_file and write_file for \
                 files, or pipe with `|`"
            )))
        }
    }
}
