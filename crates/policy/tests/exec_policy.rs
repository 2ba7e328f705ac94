#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every exec bypass form, each with the exact reason given to the model.

use std::path::PathBuf;
use std::time::Duration;

use nanocrab_config::{ExecConfig, ExecMode, ToolsConfig};
use nanocrab_policy::{DEFAULT_SAFE_BINS, ExecPlan, ExecPolicy, PathGuard};
use pretty_assertions::assert_eq;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    guard: PathGuard,
}

impl Fixture {
    fn new(restrict_to_workspace: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/notes")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/secret"), "s").unwrap();
        std::os::unix::fs::symlink(root.join("outside/secret"), root.join("ws/innocent")).unwrap();
        let config = ToolsConfig {
            restrict_to_workspace,
            ..ToolsConfig::default()
        };
        let guard = PathGuard::new(&root.join("ws"), &config, Some(&root.join("home"))).unwrap();
        Self {
            _dir: dir,
            root,
            guard,
        }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn analyze(&self, policy: &ExecPolicy, command: &str) -> Result<ExecPlan, String> {
        policy
            .analyze(command, &self.ws(), &self.guard)
            .map_err(|denial| denial.message().to_owned())
    }
}

fn policy(mode: ExecMode, safe_bins: Option<&[&str]>) -> ExecPolicy {
    ExecPolicy::new(&ExecConfig {
        mode,
        safe_bins: safe_bins.map(|bins| bins.iter().map(|b| (*b).to_owned()).collect()),
        ..ExecConfig::default()
    })
    .unwrap()
}

fn argv(segments: &[&[&str]]) -> ExecPlan {
    ExecPlan::Pipeline(
        segments
            .iter()
            .map(|words| words.iter().map(|w| (*w).to_owned()).collect())
            .collect(),
    )
}

#[test]
fn plain_commands_and_pipelines_of_safe_bins_yield_their_argv() {
    let fx = Fixture::new(true);
    let allow = policy(ExecMode::Allowlist, None);
    for (command, expected) in [
        ("ls", argv(&[&["ls"]])),
        ("cat notes/a.md", argv(&[&["cat", "notes/a.md"]])),
        (
            "grep -n 'TODO: fix' notes/a.md | sort | uniq -c | head -n 5",
            argv(&[
                &["grep", "-n", "TODO: fix", "notes/a.md"],
                &["sort"],
                &["uniq", "-c"],
                &["head", "-n", "5"],
            ]),
        ),
        (
            "jq '.items[] | .name' data.json",
            argv(&[&["jq", ".items[] | .name", "data.json"]]),
        ),
        ("echo \"a\\\"b\" c\\ d", argv(&[&["echo", "a\"b", "c d"]])),
        ("echo '$HOME' # a comment", argv(&[&["echo", "$HOME"]])),
        ("ls .", argv(&[&["ls", "."]])),
        (
            "uniq -f 1 notes/a.md",
            argv(&[&["uniq", "-f", "1", "notes/a.md"]]),
        ),
    ] {
        assert_eq!(fx.analyze(&allow, command), Ok(expected), "{command}");
    }
}

#[test]
fn every_bypass_form_is_refused_with_its_reason() {
    let fx = Fixture::new(true);
    let allow = policy(ExecMode::Allowlist, None);
    let outside_secret = fx.root.join("outside/secret");
    let not_a_safe_bin = |program: &str| {
        format!(
            "`{program}` is not a safe bin; allowlist mode runs only: {} (tools.exec.safeBins \
             and tools.exec.mode change this)",
            DEFAULT_SAFE_BINS.join(", ")
        )
    };
    let outside = |program: &str, asked: &str, resolved: &str| {
        format!(
            "`{program}`: cannot read `{asked}`: it resolves to {resolved}, which is outside the \
             workspace {}; no other paths are allowed (tools.allowedPaths)",
            fx.ws().display()
        )
    };
    let interpreter = |p: &str| {
        format!(
            "`{p}` is a shell or interpreter that runs arbitrary code (`{p} -c`, `{p} -e`, a \
             script or stdin), so allowlist mode refuses it even if it is in safeBins"
        )
    };
    let launcher = |p: &str| {
        format!(
            "`{p}` runs other programs, so allowlist mode refuses it even if it is in safeBins: \
             call the program directly"
        )
    };
    let several = "several commands (`;` or a newline) are not allowed in allowlist mode: run \
                   each command separately";
    let redirect = |r: &str| {
        format!(
            "redirection `{r}` is not allowed in allowlist mode: use read_file and write_file \
             for files, or pipe with `|`"
        )
    };
    let cases: Vec<(&str, String)> = vec![
        ("rm -rf /", not_a_safe_bin("rm")),
        ("cat notes/a.md | rm x", not_a_safe_bin("rm")),
        (
            "ls && rm -rf /",
            "`&&` is not allowed in allowlist mode: run each command separately".into(),
        ),
        (
            "ls || rm -rf /",
            "`||` is not allowed in allowlist mode: run each command separately".into(),
        ),
        ("ls; rm -rf /", several.into()),
        ("ls\nrm -rf /", several.into()),
        (
            "ls & rm -rf /",
            "`&` (background) is not allowed in allowlist mode: commands run in the foreground \
             (in `ls`)"
                .into(),
        ),
        ("echo x > notes/a.md", redirect("> notes/a.md")),
        ("echo x >> notes/a.md", redirect(">> notes/a.md")),
        ("cat < notes/a.md", redirect("< notes/a.md")),
        ("ls 2>/dev/null", redirect("2> /dev/null")),
        ("ls &> out", redirect("&> out")),
        ("ls |& cat", redirect("2>& 1")),
        (
            "cat <<EOF\nhi\nEOF",
            "`<<` (heredocs, here-strings) is refused in allowlist mode, even quoted, because the \
             shell parser cannot be trusted with it; to match it literally in a pattern write \
             `[<]<`"
                .into(),
        ),
        (
            "cat <<< hi",
            "`<<` (heredocs, here-strings) is refused in allowlist mode, even quoted, because the \
             shell parser cannot be trusted with it; to match it literally in a pattern write \
             `[<]<`"
                .into(),
        ),
        (
            "echo `id`",
            "backticks (command substitution) in ``id`` are not allowed in allowlist mode: run \
             the inner command separately and use its output"
                .into(),
        ),
        (
            "echo $(id)",
            "command substitution `$(...)` in `$(id)` is not allowed in allowlist mode: run the \
             inner command separately and use its output"
                .into(),
        ),
        (
            "echo \"$(id)\"",
            "command substitution `$(...)` in `\"$(id)\"` is not allowed in allowlist mode: run \
             the inner command separately and use its output"
                .into(),
        ),
        (
            "echo ${HOME}",
            "`${` is refused in allowlist mode, even quoted, because the shell parser cannot be \
             trusted with it; to match it literally in a pattern write `[$]{`"
                .into(),
        ),
        (
            "cat $HOME/.ssh/id_rsa",
            "variable expansion (`$VAR`, `${...}`) in `$HOME/.ssh/id_rsa` is not allowed in \
             allowlist mode: write the value literally, or quote a literal `$` with single quotes"
                .into(),
        ),
        (
            "(rm -rf /)",
            "subshells `( ... )` are not allowed in allowlist mode: run the command directly"
                .into(),
        ),
        (
            "{ rm -rf /; }",
            "brace groups `{ ...; }` are not allowed in allowlist mode: run the command directly"
                .into(),
        ),
        (
            "f() { rm -rf /; }",
            "function definitions are not allowed in allowlist mode: run plain commands".into(),
        ),
        (
            "if true; then rm -rf /; fi",
            "shell control structures (`if`) are not allowed in allowlist mode: run plain \
             commands, one at a time"
                .into(),
        ),
        (
            "for f in a; do rm $f; done",
            "shell control structures (`for`) are not allowed in allowlist mode: run plain \
             commands, one at a time"
                .into(),
        ),
        (
            "cat <(rm -rf /)",
            "process substitution `<(...)`/`>(...)` is not allowed in allowlist mode: run the \
             inner command separately"
                .into(),
        ),
        (
            "FOO=bar cat notes/a.md",
            "variable assignments (`FOO=bar`) are not allowed in allowlist mode: the environment \
             is fixed"
                .into(),
        ),
        ("bash -c 'rm -rf /'", interpreter("bash")),
        ("sh -c 'rm -rf /'", interpreter("sh")),
        ("zsh -c 'rm -rf /'", interpreter("zsh")),
        ("python -c 'import os'", interpreter("python")),
        ("python3 -c 'import os'", interpreter("python3")),
        ("node -e 'process.exit()'", interpreter("node")),
        ("perl -e 'unlink'", interpreter("perl")),
        ("ruby -e 'exit'", interpreter("ruby")),
        ("php -r 'exit;'", interpreter("php")),
        ("echo 'rm -rf ~' | sh", interpreter("sh")),
        ("env rm -rf /", launcher("env")),
        ("xargs rm", launcher("xargs")),
        ("nice rm -rf /", launcher("nice")),
        ("timeout 5 rm -rf /", launcher("timeout")),
        (
            "/bin/rm -rf /",
            "`/bin/rm`: programs must be named without a path in allowlist mode (`cat`, not \
             `/bin/cat` or `./cat`); safe bins are looked up in PATH"
                .into(),
        ),
        (
            "./cat x",
            "`./cat`: programs must be named without a path in allowlist mode (`cat`, not \
             `/bin/cat` or `./cat`); safe bins are looked up in PATH"
                .into(),
        ),
        (
            "cat /etc/passwd",
            outside("cat", "/etc/passwd", "/etc/passwd"),
        ),
        (
            "cat ../../etc/shadow",
            outside(
                "cat",
                "../../etc/shadow",
                &fx.root
                    .parent()
                    .unwrap()
                    .join("etc/shadow")
                    .display()
                    .to_string(),
            ),
        ),
        (
            "cat ~/.ssh/id_rsa",
            outside(
                "cat",
                &fx.root.join("home/.ssh/id_rsa").display().to_string(),
                &fx.root.join("home/.ssh/id_rsa").display().to_string(),
            ),
        ),
        (
            "cat innocent",
            outside("cat", "innocent", &outside_secret.display().to_string()),
        ),
        (
            "grep -f/etc/passwd x",
            outside("grep", "/etc/passwd", "/etc/passwd"),
        ),
        (
            "grep --file=../outside/secret x",
            outside(
                "grep",
                "../outside/secret",
                &outside_secret.display().to_string(),
            ),
        ),
        // A value glued to a short option that is a bare name: `date -fFILE` prints each
        // line of FILE in its error message, so a link out must be caught there too.
        (
            "date -finnocent",
            outside("date", "innocent", &outside_secret.display().to_string()),
        ),
        (
            "grep -nfinnocent x",
            outside("grep", "innocent", &outside_secret.display().to_string()),
        ),
        (
            "ls -RL .",
            "`ls -RL` is refused in allowlist mode: it follows symlinks, also while recursing \
             (`-RL`), which lists and stats files outside the workspace"
                .into(),
        ),
        (
            "cat -- -x /etc/passwd",
            outside("cat", "/etc/passwd", "/etc/passwd"),
        ),
        (
            "sort -o notes/a.md notes/a.md",
            "`sort -o` is refused in allowlist mode: it writes files, runs a program or reads \
             file names from a file"
                .into(),
        ),
        (
            "sort --compress-prog=sh notes/a.md",
            "`sort --compress-prog=sh` is refused in allowlist mode: it writes files, runs a \
             program or reads file names from a file"
                .into(),
        ),
        (
            "wc --files0-from=list",
            "`wc --files0-from=list` is refused in allowlist mode: it reads file names from a \
             file, which bypasses the path check"
                .into(),
        ),
        (
            "uniq notes/a.md notes/b.md",
            "`uniq` with a second file operand writes its output to that file, so allowlist mode \
             refuses it: use write_file to save output"
                .into(),
        ),
        (
            "grep -R x .",
            "`grep -R` is refused in allowlist mode: it follows symlinks while recursing, which \
             can leave the workspace; use -r"
                .into(),
        ),
        (
            "cat *.md",
            "unquoted `*` in `*.md` is a glob or brace pattern, which allowlist mode does not \
             expand: quote it, or name the files explicitly"
                .into(),
        ),
        (
            "echo 'unclosed",
            "cannot parse the command as shell syntax".into(),
        ),
        ("   ", "the command is empty".into()),
    ];
    for (command, expected) in cases {
        let got = fx.analyze(&allow, command).unwrap_err();
        if command == "echo 'unclosed" {
            assert!(got.starts_with(&expected), "{command}: {got}");
        } else {
            assert_eq!(got, expected, "{command}");
        }
    }
}

#[test]
fn interpreters_and_launchers_are_refused_even_when_listed_as_safe_bins() {
    let fx = Fixture::new(true);
    let allow = policy(
        ExecMode::Allowlist,
        Some(&["bash", "python3", "env", "find", "cat"]),
    );
    assert!(
        fx.analyze(&allow, "bash -c ls")
            .unwrap_err()
            .contains("interpreter")
    );
    assert!(
        fx.analyze(&allow, "python3 x.py")
            .unwrap_err()
            .contains("interpreter")
    );
    assert!(
        fx.analyze(&allow, "env ls")
            .unwrap_err()
            .contains("runs other programs")
    );
    assert_eq!(
        fx.analyze(&allow, "find . -name '*.md' -exec rm '{}' ';'")
            .unwrap_err(),
        "`find -exec` runs programs or writes files, so allowlist mode refuses it (refused: \
         -exec, -execdir, -ok, -okdir, -delete, -fprint, -fprint0, -fprintf, -fls)"
    );
    assert_eq!(
        fx.analyze(&allow, "find . -name '*.md'"),
        Ok(argv(&[&["find", ".", "-name", "*.md"]]))
    );
    // safeBins replaces the default list.
    assert!(
        fx.analyze(&allow, "ls")
            .unwrap_err()
            .starts_with("`ls` is not a safe bin")
    );
}

#[test]
fn without_restriction_arguments_are_not_path_checked() {
    let fx = Fixture::new(false);
    let allow = policy(ExecMode::Allowlist, None);
    assert_eq!(
        fx.analyze(&allow, "cat /etc/hostname"),
        Ok(argv(&[&["cat", "/etc/hostname"]]))
    );
    // The syntax rules still hold.
    assert!(fx.analyze(&allow, "cat /etc/hostname; rm x").is_err());
}

#[test]
fn deny_refuses_everything_and_full_accepts_anything() {
    let fx = Fixture::new(true);
    assert_eq!(
        fx.analyze(&policy(ExecMode::Deny, None), "ls").unwrap_err(),
        "exec is disabled by configuration (tools.exec.mode is \"deny\"); no command can run"
    );
    let command = "cd .. && cat /etc/passwd | python3 -c 'print(1)' > x &";
    assert_eq!(
        fx.analyze(&policy(ExecMode::Full, None), command),
        Ok(ExecPlan::Shell(command.to_owned()))
    );
    assert_eq!(
        fx.analyze(&policy(ExecMode::Full, None), " ").unwrap_err(),
        "the command is empty"
    );
}

#[test]
fn safe_bins_must_be_bare_names() {
    let err = ExecPolicy::new(&ExecConfig {
        mode: ExecMode::Allowlist,
        safe_bins: Some(vec!["/bin/cat".into()]),
        ..ExecConfig::default()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tools.exec.safeBins: `/bin/cat` is not a program name; list bare names such as `jq` \
         (no paths, no spaces)"
    );
}

#[test]
fn a_command_not_parsed_within_the_time_limit_is_refused() {
    let fx = Fixture::new(true);
    // Found by fuzzing: 237 bytes of unbalanced `$(`, `((` and `[` the parser took 30 s over
    // (a fast machine gets through it, to a syntax error, in under 2 s). No parse is done
    // within no time at all, so the refusal does not depend on this machine's speed.
    let slow = String::from_utf8_lossy(include_bytes!("fixtures/slow-parse.bin")).into_owned();
    let allow = policy(ExecMode::Allowlist, None).with_analysis_limit(Duration::ZERO);
    assert_eq!(
        fx.analyze(&allow, &slow).unwrap_err(),
        "the command could not be analysed within 0 s (the shell parser backtracks on some \
         unbalanced brackets); allowlist mode refuses it: run a simpler command"
    );
    // With the production limit which refusal comes first depends on the machine; a refusal
    // it is either way.
    let refusal = fx
        .analyze(&policy(ExecMode::Allowlist, None), &slow)
        .unwrap_err();
    assert!(
        refusal.starts_with("the command could not be analysed within 2 s")
            || refusal.starts_with("cannot parse the command as shell syntax"),
        "{refusal}"
    );
}

#[test]
fn input_that_would_crash_the_parser_is_refused_before_parsing() {
    let fx = Fixture::new(true);
    let allow = policy(ExecMode::Allowlist, None);
    let too_long = |number: &str| {
        format!(
            "the number `{number}` is too long where the shell reads it as a file descriptor, \
             `~N` or a `{{N..M}}` range; allowlist mode refuses it"
        )
    };
    let if_nest = format!(
        "{}true; {}",
        "if true; then ".repeat(800),
        "fi; ".repeat(800)
    );
    let cases: Vec<(String, String)> = vec![
        // Found by the exec_analyze fuzz target: brush-parser unwraps the fd number's parse.
        ("777777777776<".into(), too_long("777777777776")),
        ("ls 99999999999>x".into(), too_long("99999999999")),
        (
            "echo ~99999999999999999999999".into(),
            too_long("99999999999999999999999"),
        ),
        (
            "echo ~+99999999999999999999999".into(),
            too_long("99999999999999999999999"),
        ),
        (
            "echo {1..99999999999999999999}".into(),
            too_long("99999999999999999999"),
        ),
        // Found by fuzzing: brush-parser backtracks in time doubling per unclosed `(`.
        (
            format!("{}0", "(".repeat(25)),
            "the command nests parentheses more than 12 deep; allowlist mode refuses it: run \
             simpler commands"
                .into(),
        ),
        (
            format!("{}0", "( ((".repeat(8)),
            "the command nests parentheses more than 12 deep; allowlist mode refuses it: run \
             simpler commands"
                .into(),
        ),
        // Found by fuzzing: a heredoc whose delimiter starts with CR, then `<#`, allocated
        // gigabytes in brush-parser's tokenizer.
        (
            "ls <<\r<#".into(),
            "the command contains the control character U+000D; allowlist mode refuses control \
             characters other than tab and newline"
                .into(),
        ),
        (
            "ls\0 x".into(),
            "the command contains the control character U+0000; allowlist mode refuses control \
             characters other than tab and newline"
                .into(),
        ),
        // One stack frame per level: 300 levels overflowed a 2 MiB thread's stack.
        (
            format!("echo {}", "$(".repeat(300)),
            "the command nests parentheses more than 12 deep; allowlist mode refuses it: run \
             simpler commands"
                .into(),
        ),
        (
            format!("echo {}", "{".repeat(100)),
            "the command nests brackets more than 64 deep; allowlist mode refuses it: run \
             simpler commands"
                .into(),
        ),
        (
            if_nest.clone(),
            "shell control structures (`if`) are not allowed in allowlist mode: run plain \
             commands, one at a time"
                .into(),
        ),
        (
            "x".repeat(16 * 1024 + 1),
            "the command is 16385 bytes long; allowlist mode parses at most 16 KiB: put long \
             data in a file with write_file and pass its name"
                .into(),
        ),
    ];
    for (command, expected) in cases {
        // A thread with a tokio worker's stack, as where `exec` runs the analysis.
        let got = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .stack_size(2 << 20)
                .spawn_scoped(scope, || fx.analyze(&allow, &command))
                .unwrap()
                .join()
                .unwrap()
        });
        let shown: String = command.chars().take(40).collect();
        assert_eq!(got.unwrap_err(), expected, "{shown}");
    }
    // Long numbers elsewhere are ordinary arguments.
    assert_eq!(
        fx.analyze(&allow, "echo 3.14159265358979323846 12345678901234567890"),
        Ok(argv(&[&[
            "echo",
            "3.14159265358979323846",
            "12345678901234567890"
        ]]))
    );
}
