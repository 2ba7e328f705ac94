#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 7's bypass table at the policy layer: every way out of the workspace or past the
//! allowlist, each with the exact answer the policy gives. A row that is allowed says why that
//! is harmless; all others are denied. docs/security.md ("Bypass table") summarises it, and
//! crates/tools/tests/bypass_table.rs runs the same attempts through the tools.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use nanocrab_config::{ExecConfig, ExecMode, ToolsConfig};
use nanocrab_policy::{DEFAULT_SAFE_BINS, ExecPlan, ExecPolicy, PathGuard};
use pretty_assertions::assert_eq;

/// root/{ws, outside, home}. In ws: every kind of link out, a hard link to an outside file, a
/// link into the protected `secrets`, and a link to /proc/self.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    guard: PathGuard,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        for sub in ["ws/notes", "ws/secrets", "outside/sub", "home"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(ws.join("notes/a.md"), "a").unwrap();
        std::fs::write(ws.join("secrets/key"), "k").unwrap();
        std::fs::write(root.join("outside/secret"), "s").unwrap();
        std::fs::hard_link(root.join("outside/secret"), ws.join("hard")).unwrap();
        for (target, link) in [
            (root.join("outside/secret"), "link_file"),
            (root.join("outside"), "link_dir"),
            (PathBuf::from("../outside/secret"), "relative_file"),
            (PathBuf::from("../outside"), "relative_link"),
            (PathBuf::from("chain2"), "chain1"),
            (PathBuf::from("notes/../relative_link/sub"), "chain2"),
            (root.join("outside/new"), "dangling"),
            (PathBuf::from("../outside/new_rel"), "relative_dangling"),
            (PathBuf::from("loop_b"), "loop_a"),
            (PathBuf::from("loop_a"), "loop_b"),
            (PathBuf::from("secrets"), "to_secrets"),
            (PathBuf::from("/proc/self"), "proc_self"),
        ] {
            symlink(target, ws.join(link)).unwrap();
        }
        let config = ToolsConfig {
            protected_paths: vec![PathBuf::from("secrets")],
            ..ToolsConfig::default()
        };
        let guard = PathGuard::new(&ws, &config, Some(&root.join("home"))).unwrap();
        Self {
            _dir: dir,
            root,
            ws,
            guard,
        }
    }

    fn outside(&self, access: &str, asked: &str, resolved: &Path) -> String {
        format!(
            "cannot {access} `{asked}`: it resolves to {}, which is outside the workspace {}; no \
             other paths are allowed (tools.allowedPaths)",
            resolved.display(),
            self.ws.display()
        )
    }

    fn protected(&self, asked: &str, resolved: &Path) -> String {
        format!(
            "cannot write `{asked}`: it resolves to {}, inside the protected path {}, which is \
             read-only (tools.protectedPaths)",
            resolved.display(),
            self.ws.join("secrets").display()
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    /// A command argument, resolved against the workspace as the command's working directory.
    Argument,
}

/// What the policy answered; compared whole, row by row.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome<T> {
    Denied(String),
    /// Denied as outside the workspace, where the resolved path depends on the test process
    /// (what its fd 0 is), so only the kind is compared.
    DeniedOutside,
    /// Allowed, with why that is harmless.
    Allowed(T, &'static str),
}

struct PathRow {
    name: &'static str,
    access: Access,
    asked: String,
    expected: Outcome<PathBuf>,
}

fn row(name: &'static str, access: Access, asked: &str, expected: Outcome<PathBuf>) -> PathRow {
    PathRow {
        name,
        access,
        asked: asked.to_owned(),
        expected,
    }
}

#[test]
fn path_bypass_table() {
    use Access::{Argument, Read, Write};
    use Outcome::{Allowed, Denied, DeniedOutside};
    let fx = Fixture::new();
    let (root, ws) = (&fx.root, &fx.ws);
    let outside =
        |access: &str, asked: &str, resolved: &Path| Denied(fx.outside(access, asked, resolved));
    let through_self = |asked: &str, link: &str| {
        Denied(format!(
            "cannot read `{asked}`: it goes through {link}, which names the process that opens \
             it (the command, not nanocrab), so it cannot be checked; name the file directly"
        ))
    };
    let deep_inside = format!("{}x", "a/".repeat(3000));
    let deep_out = format!("{}etc/passwd", "../".repeat(5000));
    let long_name = "x".repeat(300);
    let nul_out = "notes/a.md\0/../../../etc/passwd";
    let process_cwd = std::env::current_dir().unwrap();
    let rows = vec![
        // Absolute paths and `..`.
        row("absolute path outside", Read, "/etc/passwd", outside("read", "/etc/passwd", Path::new("/etc/passwd"))),
        row("absolute path to a sibling of the workspace", Read, &root.join("outside/secret").display().to_string(), outside("read", &root.join("outside/secret").display().to_string(), &root.join("outside/secret"))),
        row("doubled slashes", Read, "//etc//passwd", outside("read", "//etc//passwd", Path::new("/etc/passwd"))),
        row("`..` climbing", Read, "../outside/secret", outside("read", "../outside/secret", &root.join("outside/secret"))),
        row("`..` climbing from a subfolder", Write, "notes/../../outside/x", outside("write", "notes/../../outside/x", &root.join("outside/x"))),
        row("`..` past the root", Read, "../../../../../../../../../etc/passwd", outside("read", "../../../../../../../../../etc/passwd", Path::new("/etc/passwd"))),
        row("the workspace's name in a sibling path", Read, "../ws2/x", outside("read", "../ws2/x", &root.join("ws2/x"))),
        // `~` and variables.
        row("`~`", Read, "~", outside("read", "~", &root.join("home"))),
        row("`~/...`", Read, "~/.ssh/id_rsa", outside("read", "~/.ssh/id_rsa", &root.join("home/.ssh/id_rsa"))),
        row("`~user`", Read, "~root/.ssh/id_rsa", Denied("cannot read `~root/.ssh/id_rsa`: `~root` (another user's home) is not supported; use an absolute path".into())),
        row("`~+` (bash's $PWD)", Read, "~+/x", Denied("cannot read `~+/x`: `~+` (another user's home) is not supported; use an absolute path".into())),
        row("`$HOME` is not expanded", Write, "$HOME/.bashrc", Allowed(ws.join("$HOME/.bashrc"), "no expansion: a folder literally named `$HOME` in the workspace")),
        row("`${HOME}` is not expanded", Read, "${HOME}/x", Allowed(ws.join("${HOME}/x"), "no expansion: a folder literally named `${HOME}` in the workspace")),
        // Symlinks.
        row("symlink to an outside file (absolute)", Read, "link_file", outside("read", "link_file", &root.join("outside/secret"))),
        row("symlink to an outside file (relative)", Write, "relative_file", outside("write", "relative_file", &root.join("outside/secret"))),
        row("symlink to an outside dir (absolute)", Read, "link_dir/secret", outside("read", "link_dir/secret", &root.join("outside/secret"))),
        row("symlink to an outside dir (relative)", Write, "relative_link/new", outside("write", "relative_link/new", &root.join("outside/new"))),
        row("chain of symlinks out", Read, "chain1", outside("read", "chain1", &root.join("outside/sub"))),
        row("dangling symlink out, written (absolute)", Write, "dangling", outside("write", "dangling", &root.join("outside/new"))),
        row("dangling symlink out, written (relative)", Write, "relative_dangling", outside("write", "relative_dangling", &root.join("outside/new_rel"))),
        row("new file under a symlinked dir", Write, "link_dir/sub/new.txt", outside("write", "link_dir/sub/new.txt", &root.join("outside/sub/new.txt"))),
        row("symlink loop", Read, "loop_a/x", Denied(format!("cannot read `loop_a/x`: too many levels of symbolic links at {}", ws.join("loop_a").display()))),
        // Hard links.
        row("hard link to an outside file, read", Read, "hard", Allowed(ws.join("hard"), "a hard link is the file itself, like a copy: only someone who could already read the original can link it (fs.protected_hardlinks), and nothing in allowlist mode can create one")),
        row("hard link to an outside file, written", Write, "hard", Allowed(ws.join("hard"), "write_file and edit_file replace the name with a new file (rename), so the outside inode is not changed; crates/tools/tests/bypass_table.rs checks it")),
        // /proc and /dev.
        row("/proc/self/root", Read, "/proc/self/root/etc/passwd", outside("read", "/proc/self/root/etc/passwd", Path::new("/etc/passwd"))),
        row("/proc/self/root back into the workspace", Read, &format!("/proc/self/root{}", ws.join("notes/a.md").display()), Allowed(ws.join("notes/a.md"), "the same file: nanocrab's / is /")),
        row("/proc/self/cwd (nanocrab's cwd)", Read, "/proc/self/cwd/x", outside("read", "/proc/self/cwd/x", &process_cwd.join("x"))),
        row("/dev/fd/0", Read, "/dev/fd/0", DeniedOutside),
        row("/dev/stdin", Read, "/dev/stdin", DeniedOutside),
        row("link in the workspace to /proc/self", Read, "proc_self/root/etc/passwd", outside("read", "proc_self/root/etc/passwd", Path::new("/etc/passwd"))),
        row("argument through /proc/self/cwd", Argument, "/proc/self/cwd/..", through_self("/proc/self/cwd/..", "/proc/self")),
        row("argument through /proc/thread-self", Argument, "/proc/thread-self/root/etc/passwd", through_self("/proc/thread-self/root/etc/passwd", "/proc/thread-self")),
        row("argument /dev/stdin", Argument, "/dev/stdin", through_self("/dev/stdin", "/proc/self")),
        row("argument through a link to /proc/self", Argument, "proc_self/cwd", through_self("proc_self/cwd", "/proc/self")),
        // NUL bytes and length.
        row("NUL byte, then `..` out", Read, nul_out, outside("read", nul_out, Path::new(&format!("{}/etc/passwd", root.display())))),
        row("NUL byte inside a name", Read, "notes/a.md\0.txt", Allowed(ws.join("notes/a.md\0.txt"), "the open fails: Rust refuses paths with NUL bytes (no C-string truncation)")),
        row("overlong path inside", Write, &deep_inside, Allowed(ws.join(&deep_inside), "inside the workspace; the kernel refuses it (ENAMETOOLONG)")),
        row("overlong `..` chain", Read, &deep_out, outside("read", &deep_out, Path::new("/etc/passwd"))),
        row("overlong name", Write, &long_name, Allowed(ws.join(&long_name), "inside the workspace; the kernel refuses it (ENAMETOOLONG)")),
        // Look-alikes, trailing slashes and dots, case.
        row("fullwidth dots", Write, "．．/outside/x", Allowed(ws.join("．．/outside/x"), "U+FF0E is an ordinary letter to the kernel: a new folder in the workspace")),
        row("division slash", Write, "..∕outside∕x", Allowed(ws.join("..∕outside∕x"), "U+2215 is an ordinary letter to the kernel: one new name in the workspace")),
        row("backslashes", Write, "..\\outside\\x", Allowed(ws.join("..\\outside\\x"), "a backslash is an ordinary letter on Unix: one new name in the workspace")),
        row("URL-encoded dots", Read, "%2e%2e/outside/secret", Allowed(ws.join("%2e%2e/outside/secret"), "no decoding: a folder literally named `%2e%2e`")),
        row("file:// URL", Read, "file:///etc/passwd", Allowed(ws.join("file:/etc/passwd"), "not a URL to the file system: a folder named `file:` in the workspace")),
        row("trailing slash on a link out", Read, "link_dir/", outside("read", "link_dir/", &root.join("outside"))),
        row("trailing `/.` on a link out", Read, "link_file/.", outside("read", "link_file/.", &root.join("outside/secret"))),
        row("three dots", Write, "...", Allowed(ws.join("..."), "`...` is an ordinary name, not a parent")),
        row("case: the workspace's name upper-cased", Read, "../WS/notes/a.md", outside("read", "../WS/notes/a.md", &root.join("WS/notes/a.md"))),
        row("case: a link's name upper-cased", Read, "LINK_DIR/secret", Allowed(ws.join("LINK_DIR/secret"), "another (missing) name on a case-sensitive file system; the prefix check is exact, so case can only refuse more")),
        row("leading space", Read, " /etc/passwd", Allowed(ws.join(" /etc/passwd"), "a folder named ` ` in the workspace")),
        row("empty path", Read, "", Denied("cannot read an empty path".into())),
        // protectedPaths inside the workspace.
        row("protected file", Write, "secrets/key", Denied(fx.protected("secrets/key", &ws.join("secrets/key")))),
        row("protected folder itself", Write, "secrets", Denied(fx.protected("secrets", &ws.join("secrets")))),
        row("protected, new file", Write, "secrets/new", Denied(fx.protected("secrets/new", &ws.join("secrets/new")))),
        row("protected via `..`", Write, "notes/../secrets/key", Denied(fx.protected("notes/../secrets/key", &ws.join("secrets/key")))),
        row("protected via `./` and `..`", Write, "./secrets/../secrets/key", Denied(fx.protected("./secrets/../secrets/key", &ws.join("secrets/key")))),
        row("protected via a link inside the workspace", Write, "to_secrets/key", Denied(fx.protected("to_secrets/key", &ws.join("secrets/key")))),
        row("protected with a trailing slash", Write, "secrets/key/", Denied(fx.protected("secrets/key/", &ws.join("secrets/key")))),
        row("protected with a trailing `/.`", Write, "secrets/.", Denied(fx.protected("secrets/.", &ws.join("secrets")))),
        row("protected by absolute path", Write, &ws.join("secrets/key").display().to_string(), Denied(fx.protected(&ws.join("secrets/key").display().to_string(), &ws.join("secrets/key")))),
        row("protected, read", Read, "secrets/key", Allowed(ws.join("secrets/key"), "protected paths are read-only, not hidden")),
        row("protected, case changed", Write, "SECRETS/key", Allowed(ws.join("SECRETS/key"), "another folder on a case-sensitive file system (Linux); on a case-insensitive one this would write into `secrets`")),
    ];
    let mut expected = Vec::new();
    let mut got = Vec::new();
    for row in &rows {
        if let Allowed(_, why) = &row.expected {
            assert!(!why.is_empty(), "{}: an allowed row says why", row.name);
        }
        let result = match row.access {
            Read => fx.guard.check_read(&row.asked),
            Write => fx.guard.check_write(&row.asked),
            Argument => fx.guard.check_argument(ws, &row.asked),
        };
        let outcome = match (result, &row.expected) {
            (Ok(path), Allowed(_, why)) => Allowed(path, why),
            (Ok(path), _) => Allowed(path, ""),
            (Err(denial), DeniedOutside)
                if denial.message().contains("which is outside the workspace") =>
            {
                DeniedOutside
            }
            (Err(denial), _) => Denied(denial.message().to_owned()),
        };
        got.push((row.name, row.access, outcome));
        expected.push((row.name, row.access, row.expected.clone()));
    }
    assert_eq!(got, expected);
}

struct ExecRow {
    name: &'static str,
    command: String,
    expected: Outcome<Vec<Vec<String>>>,
}

fn exec(name: &'static str, command: &str, expected: Outcome<Vec<Vec<String>>>) -> ExecRow {
    ExecRow {
        name,
        command: command.to_owned(),
        expected,
    }
}

fn plan(segments: &[&[&str]]) -> Vec<Vec<String>> {
    segments
        .iter()
        .map(|words| words.iter().map(|w| (*w).to_owned()).collect())
        .collect()
}

#[test]
fn exec_bypass_table() {
    use Outcome::{Allowed, Denied};
    let fx = Fixture::new();
    let policy = ExecPolicy::new(&ExecConfig {
        mode: ExecMode::Allowlist,
        ..ExecConfig::default()
    })
    .unwrap();
    let (root, ws) = (&fx.root, &fx.ws);
    let d = |message: &str| Denied(message.to_owned());
    let several = d(
        "several commands (`;` or a newline) are not allowed in allowlist mode: run \
                     each command separately",
    );
    let redirect = |r: &str| {
        Denied(format!(
            "redirection `{r}` is not allowed in allowlist mode: use read_file and write_file \
             for files, or pipe with `|`"
        ))
    };
    let substitution = |word: &str| {
        Denied(format!(
            "command substitution `$(...)` in `{word}` is not allowed in allowlist mode: run \
             the inner command separately and use its output"
        ))
    };
    let variable = |word: &str| {
        Denied(format!(
            "variable expansion (`$VAR`, `${{...}}`) in `{word}` is not allowed in allowlist \
             mode: write the value literally, or quote a literal `$` with single quotes"
        ))
    };
    let pattern = |c: char, word: &str| {
        Denied(format!(
            "unquoted `{c}` in `{word}` is a glob or brace pattern, which allowlist mode does \
             not expand: quote it, or name the files explicitly"
        ))
    };
    let not_safe = |program: &str| {
        Denied(format!(
            "`{program}` is not a safe bin; allowlist mode runs only: {} (tools.exec.safeBins \
             and tools.exec.mode change this)",
            DEFAULT_SAFE_BINS.join(", ")
        ))
    };
    let interpreter = |p: &str| {
        Denied(format!(
            "`{p}` is a shell or interpreter that runs arbitrary code (`{p} -c`, `{p} -e`, a \
             script or stdin), so allowlist mode refuses it even if it is in safeBins"
        ))
    };
    let launcher = |p: &str| {
        Denied(format!(
            "`{p}` runs other programs, so allowlist mode refuses it even if it is in \
             safeBins: call the program directly"
        ))
    };
    let assignment = |word: &str| {
        Denied(format!(
            "variable assignments (`{word}`) are not allowed in allowlist mode: the environment \
             is fixed"
        ))
    };
    let with_path = |program: &str| {
        Denied(format!(
            "`{program}`: programs must be named without a path in allowlist mode (`cat`, not \
             `/bin/cat` or `./cat`); safe bins are looked up in PATH"
        ))
    };
    let outside = |program: &str, asked: &str, resolved: &Path| {
        Denied(format!(
            "`{program}`: {}",
            fx.outside("read", asked, resolved)
        ))
    };
    let control = |what: &str| {
        Denied(format!(
            "shell control structures ({what}) are not allowed in allowlist mode: run plain \
             commands, one at a time"
        ))
    };
    let secret = root.join("outside/secret");
    let long_word = "A".repeat(16_000);
    let many_words = vec!["a"; 5_000].join(" ");
    let rows = vec![
        // Chaining.
        exec("`;`", "ls; rm -rf ~", several.clone()),
        exec(
            "`&&`",
            "ls && rm -rf ~",
            d("`&&` is not allowed in allowlist mode: run each command separately"),
        ),
        exec(
            "`||`",
            "false || rm -rf ~",
            d("`||` is not allowed in allowlist mode: run each command separately"),
        ),
        exec(
            "`&`",
            "ls & rm -rf ~",
            d(
                "`&` (background) is not allowed in allowlist mode: commands run in the foreground (in `ls`)",
            ),
        ),
        exec("newline", "ls\nrm -rf ~", several.clone()),
        exec(
            "line continuation then `;`",
            "ls\\\n; rm -rf ~",
            several.clone(),
        ),
        exec(
            "pipe into a shell",
            "echo 'rm -rf ~' | sh",
            interpreter("sh"),
        ),
        exec("`|&`", "ls |& cat", redirect("2>& 1")),
        exec(
            "`!`",
            "! rm -rf ~",
            d("`!` (negation) is not allowed in allowlist mode: run the command without it"),
        ),
        exec(
            "`time`",
            "time rm -rf ~",
            d("`time` is not allowed in allowlist mode: run the command without it"),
        ),
        exec(
            "subshell",
            "(rm -rf ~)",
            d("subshells `( ... )` are not allowed in allowlist mode: run the command directly"),
        ),
        exec(
            "brace group",
            "{ rm -rf ~; }",
            d(
                "brace groups `{ ...; }` are not allowed in allowlist mode: run the command directly",
            ),
        ),
        exec(
            "function",
            "f() { rm -rf ~; }",
            d("function definitions are not allowed in allowlist mode: run plain commands"),
        ),
        exec("`if`", "if true; then rm -rf ~; fi", control("`if`")),
        exec(
            "`while` in a pipeline",
            "ls | while read f; do rm $f; done",
            control("`while`"),
        ),
        exec("`case`", "case x in x) rm -rf ~;; esac", control("`case`")),
        exec("`coproc`", "coproc rm -rf ~", control("`coproc`")),
        exec("`((`", "((x=1))", control("`(( ... ))`")),
        exec(
            "`[[`",
            "[[ -f x ]]",
            d("`[[ ... ]]` tests are not allowed in allowlist mode: run plain commands"),
        ),
        // Redirection.
        exec("`>`", "echo x > /etc/passwd", redirect("> /etc/passwd")),
        exec("`>>`", "echo x >> notes/a.md", redirect(">> notes/a.md")),
        exec("`<`", "cat < /etc/shadow", redirect("< /etc/shadow")),
        exec("`2>`", "ls 2>/dev/null", redirect("2> /dev/null")),
        exec("`&>`", "ls &> out", redirect("&> out")),
        exec("`>|`", "ls >| out", redirect(">| out")),
        exec("`<>`", "ls <> out", redirect("<> out")),
        exec("`>&2`", "ls >&2", redirect(">& 2")),
        exec("`3>`", "ls 3>out", redirect("3> out")),
        exec(
            "here-doc",
            "cat <<EOF\nhi\nEOF",
            d(
                "`<<` (heredocs, here-strings) is refused in allowlist mode, even quoted, because the shell parser cannot be trusted with it; to match it literally in a pattern write `[<]<`",
            ),
        ),
        exec(
            "here-string",
            "cat <<< hi",
            d(
                "`<<` (heredocs, here-strings) is refused in allowlist mode, even quoted, because the shell parser cannot be trusted with it; to match it literally in a pattern write `[<]<`",
            ),
        ),
        // Substitution.
        exec("`$()`", "echo $(id)", substitution("$(id)")),
        exec(
            "`$()` in double quotes",
            "echo \"$(id)\"",
            substitution("\"$(id)\""),
        ),
        exec(
            "backticks",
            "echo `id`",
            d(
                "backticks (command substitution) in ``id`` are not allowed in allowlist mode: run the inner command separately and use its output",
            ),
        ),
        exec(
            "`<()`",
            "cat <(id)",
            d(
                "process substitution `<(...)`/`>(...)` is not allowed in allowlist mode: run the inner command separately",
            ),
        ),
        exec(
            "`>()`",
            "ls >(id)",
            d(
                "process substitution `<(...)`/`>(...)` is not allowed in allowlist mode: run the inner command separately",
            ),
        ),
        exec(
            "`$(( ))`",
            "echo $((1+1))",
            d(
                "arithmetic expansion `$((...))` in `$((1+1))` is not allowed in allowlist mode: write the number literally",
            ),
        ),
        exec(
            "`$[ ]`",
            "echo $[1+1]",
            d(
                "arithmetic expansion `$((...))` in `$[1+1]` is not allowed in allowlist mode: write the number literally",
            ),
        ),
        exec(
            "`$()` quoted in single quotes",
            "echo '$(id)'",
            Allowed(
                plan(&[&["echo", "$(id)"]]),
                "single quotes make it literal text for echo; no shell runs",
            ),
        ),
        // Variables and expansion.
        exec(
            "`$HOME`",
            "cat $HOME/.ssh/id_rsa",
            variable("$HOME/.ssh/id_rsa"),
        ),
        exec(
            "`${IFS}`",
            "cat${IFS}/etc/passwd",
            d(
                "`${` is refused in allowlist mode, even quoted, because the shell parser cannot be trusted with it; to match it literally in a pattern write `[$]{`",
            ),
        ),
        exec(
            "`${` in single quotes (parser blow-up found by fuzzing)",
            "echo '${a[}${a[}${a[}${a[}${a[}${a[}'",
            d(
                "`${` is refused in allowlist mode, even quoted, because the shell parser cannot be trusted with it; to match it literally in a pattern write `[$]{`",
            ),
        ),
        exec(
            "`<<` in single quotes (parser crash found by fuzzing)",
            "grep '^<<($${x' notes/a.md",
            d(
                "`<<` (heredocs, here-strings) is refused in allowlist mode, even quoted, because the shell parser cannot be trusted with it; to match it literally in a pattern write `[<]<`",
            ),
        ),
        exec("`$0`", "echo $0", variable("$0")),
        exec("`$@`", "echo $@", variable("$@")),
        exec(
            "`~` expands to the home, outside",
            "cat ~/.ssh/id_rsa",
            outside(
                "cat",
                &root.join("home/.ssh/id_rsa").display().to_string(),
                &root.join("home/.ssh/id_rsa"),
            ),
        ),
        exec(
            "`~user`",
            "cat ~root/.ssh/id_rsa",
            d(
                "the tilde form in `~root/.ssh/id_rsa` is not allowed in allowlist mode: only `~` and `~/...` are expanded",
            ),
        ),
        exec(
            "`~+`",
            "ls ~+",
            d(
                "the tilde form in `~+` is not allowed in allowlist mode: only `~` and `~/...` are expanded",
            ),
        ),
        exec("glob `*`", "cat *", pattern('*', "*")),
        exec("glob `?`", "cat /etc/passw?", pattern('?', "/etc/passw?")),
        exec(
            "glob `[...]`",
            "cat /etc/[p]asswd",
            pattern('[', "/etc/[p]asswd"),
        ),
        exec(
            "brace expansion",
            "cat /etc/{passwd,shadow}",
            pattern('{', "/etc/{passwd,shadow}"),
        ),
        exec("extended glob", "cat @(x)", pattern('(', "@(x)")),
        exec(
            "ANSI-C quoting",
            "$'\\x6c\\x73'",
            d(
                "ANSI-C quoting `$'...'` in `$'\\x6c\\x73'` is not allowed in allowlist mode: use single quotes",
            ),
        ),
        exec(
            "brace expansion, escaped",
            "echo \\{a,b\\}",
            Allowed(
                plan(&[&["echo", "{a,b}"]]),
                "escaped: the literal text `{a,b}` for echo",
            ),
        ),
        // Inline interpreters and programs that run programs.
        exec(
            "python3 -c",
            "python3 -c 'import os; os.system(\"id\")'",
            interpreter("python3"),
        ),
        exec(
            "versioned python",
            "python3.12 -c 1",
            interpreter("python3.12"),
        ),
        exec("sh -c", "sh -c id", interpreter("sh")),
        exec("bash -c", "bash -c id", interpreter("bash")),
        exec("perl -e", "perl -e 'system(\"id\")'", interpreter("perl")),
        exec(
            "node -e",
            "node -e 'require(\"child_process\")'",
            interpreter("node"),
        ),
        exec(
            "awk system()",
            "awk 'BEGIN{system(\"id\")}'",
            interpreter("awk"),
        ),
        exec(
            "sed `e` command",
            "sed -e '1e id' notes/a.md",
            interpreter("sed"),
        ),
        exec(
            "sed `w` command",
            "sed 'w /etc/x' notes/a.md",
            interpreter("sed"),
        ),
        exec("busybox", "busybox sh", interpreter("busybox")),
        exec(
            "find -exec (not a safe bin)",
            "find . -exec id ';'",
            not_safe("find"),
        ),
        exec("xargs", "xargs rm", launcher("xargs")),
        exec("env X=1 cmd", "env X=1 rm -rf ~", assignment("X=1")),
        exec("env cmd", "env rm -rf ~", launcher("env")),
        exec("command", "command rm", launcher("command")),
        exec("exec", "exec rm", launcher("exec")),
        exec("escaped `\\time`", "\\time rm", launcher("time")),
        exec("nohup", "nohup rm", launcher("nohup")),
        exec("timeout", "timeout 5 rm", launcher("timeout")),
        exec("make", "make", launcher("make")),
        exec("cargo", "cargo build", not_safe("cargo")),
        exec(
            "git -c core.pager",
            "git -c core.pager=id log",
            not_safe("git"),
        ),
        exec(
            "tar --to-command",
            "tar --to-command=id -xf x.tar",
            not_safe("tar"),
        ),
        exec(
            "jq reading the environment",
            "jq -n env",
            Allowed(
                plan(&[&["jq", "-n", "env"]]),
                "exec gives commands only PATH, HOME, LANG, LC_ALL, TERM, TZ and USER (crates/tools/tests/exec_tool.rs checks it)",
            ),
        ),
        // Environment tricks.
        exec("`PATH=.`", "PATH=. ls", assignment("PATH=.")),
        exec(
            "`LD_PRELOAD=`",
            "LD_PRELOAD=/tmp/x.so ls",
            assignment("LD_PRELOAD=/tmp/x.so"),
        ),
        exec(
            "`dd of=` reads as an assignment",
            "dd of=/etc/passwd",
            assignment("of=/etc/passwd"),
        ),
        // Quoting tricks.
        exec(
            "split quotes",
            "'l''s'",
            Allowed(
                plan(&[&["ls"]]),
                "the quotes are removed: it is `ls`, a safe bin",
            ),
        ),
        exec(
            "backslash in the name",
            "l\\s",
            Allowed(
                plan(&[&["ls"]]),
                "the backslash is removed: it is `ls`, a safe bin",
            ),
        ),
        exec("quoted rm", "'r''m' -rf ~", not_safe("rm")),
        exec("look-alike letters", "ⅼs", not_safe("ⅼs")),
        exec("upper case", "LS", not_safe("LS")),
        exec(
            "NUL byte",
            "ls\0x",
            d(
                "the command contains the control character U+0000; allowlist mode refuses control characters other than tab and newline",
            ),
        ),
        exec(
            "carriage return",
            "ls\r\nrm -rf ~",
            d(
                "the command contains the control character U+000D; allowlist mode refuses control characters other than tab and newline",
            ),
        ),
        // Program paths.
        exec(
            "absolute program path",
            "/bin/rm -rf ~",
            with_path("/bin/rm"),
        ),
        exec(
            "a safe bin by absolute path",
            "/usr/bin/ls",
            with_path("/usr/bin/ls"),
        ),
        exec("program in the workspace", "./ls", with_path("./ls")),
        exec(
            "program via `~`",
            "~/ls",
            with_path(&root.join("home/ls").display().to_string()),
        ),
        // Programs and options that write, or read what the guard did not see.
        exec("tee", "tee /etc/x", not_safe("tee")),
        exec("cp", "cp notes/a.md /tmp/x", not_safe("cp")),
        exec("mv", "mv notes/a.md /tmp/x", not_safe("mv")),
        exec("rm", "rm -rf ~", not_safe("rm")),
        exec(
            "sort -o",
            "sort -o /tmp/x notes/a.md",
            d(
                "`sort -o` is refused in allowlist mode: it writes files, runs a program or reads file names from a file",
            ),
        ),
        exec(
            "sort --output (abbreviated)",
            "sort --out=/tmp/x notes/a.md",
            d(
                "`sort --out=/tmp/x` is refused in allowlist mode: it writes files, runs a program or reads file names from a file",
            ),
        ),
        exec(
            "sort --compress-program",
            "sort --compress-program=sh notes/a.md",
            d(
                "`sort --compress-program=sh` is refused in allowlist mode: it writes files, runs a program or reads file names from a file",
            ),
        ),
        exec(
            "sort -T into a link out (glued)",
            "sort -Tlink_dir notes/a.md",
            outside("sort", "link_dir", &root.join("outside")),
        ),
        exec(
            "uniq with an output file",
            "uniq notes/a.md notes/b.md",
            d(
                "`uniq` with a second file operand writes its output to that file, so allowlist mode refuses it: use write_file to save output",
            ),
        ),
        exec(
            "wc --files0-from",
            "wc --files0-from=list",
            d(
                "`wc --files0-from=list` is refused in allowlist mode: it reads file names from a file, which bypasses the path check",
            ),
        ),
        exec(
            "grep -R follows links",
            "grep -R x .",
            d(
                "`grep -R` is refused in allowlist mode: it follows symlinks while recursing, which can leave the workspace; use -r",
            ),
        ),
        exec(
            "ls -RL follows links",
            "ls -RL .",
            d(
                "`ls -RL` is refused in allowlist mode: it follows symlinks, also while recursing (`-RL`), which lists and stats files outside the workspace",
            ),
        ),
        exec(
            "ls --dereference",
            "ls -l --dereference",
            d(
                "`ls --dereference` is refused in allowlist mode: it follows symlinks, also while recursing (`-RL`), which lists and stats files outside the workspace",
            ),
        ),
        exec(
            "date -s",
            "date -s 2000-01-01",
            d("`date -s` is refused in allowlist mode: it changes the system clock"),
        ),
        exec(
            "date -f prints a file (glued)",
            "date -flink_file",
            outside("date", "link_file", &secret),
        ),
        exec(
            "grep -f reads a file (glued, clustered)",
            "grep -nflink_file notes/a.md",
            outside("grep", "link_file", &secret),
        ),
        exec(
            "grep --file=",
            "grep --file=../outside/secret x",
            outside("grep", "../outside/secret", &secret),
        ),
        exec(
            "jq --rawfile",
            "jq -n --rawfile s relative_file '$s'",
            outside("jq", "relative_file", &secret),
        ),
        // Paths in arguments.
        exec(
            "absolute path",
            "cat /etc/passwd",
            outside("cat", "/etc/passwd", Path::new("/etc/passwd")),
        ),
        exec(
            "`..` climbing",
            "cat ../outside/secret",
            outside("cat", "../outside/secret", &secret),
        ),
        exec(
            "symlink out, bare name",
            "cat link_file",
            outside("cat", "link_file", &secret),
        ),
        exec(
            "symlink out after `--`",
            "cat -- relative_file",
            outside("cat", "relative_file", &secret),
        ),
        exec(
            "chain of symlinks",
            "ls chain1",
            outside("ls", "chain1", &root.join("outside/sub")),
        ),
        exec(
            "/proc/self/root",
            "cat /proc/self/root/etc/passwd",
            d(
                "`cat`: cannot read `/proc/self/root/etc/passwd`: it goes through /proc/self, which names the process that opens it (the command, not nanocrab), so it cannot be checked; name the file directly",
            ),
        ),
        exec(
            "/proc/self/cwd",
            "ls /proc/self/cwd/..",
            d(
                "`ls`: cannot read `/proc/self/cwd/..`: it goes through /proc/self, which names the process that opens it (the command, not nanocrab), so it cannot be checked; name the file directly",
            ),
        ),
        exec(
            "/dev/stdin",
            "cat /dev/stdin",
            d(
                "`cat`: cannot read `/dev/stdin`: it goes through /proc/self, which names the process that opens it (the command, not nanocrab), so it cannot be checked; name the file directly",
            ),
        ),
        exec(
            "hard link out",
            "cat hard",
            Allowed(
                plan(&[&["cat", "hard"]]),
                "the file itself, as in the path table: only someone who could read the original can link it into the workspace",
            ),
        ),
        // Long commands.
        exec(
            "very long argument",
            &format!("echo {long_word}"),
            Allowed(
                plan(&[&["echo", &long_word]]),
                "still only echo; the kernel refuses a single argument over 128 KiB at spawn",
            ),
        ),
        exec(
            "many arguments",
            &format!("echo {many_words}"),
            Allowed(
                vec![
                    std::iter::once("echo")
                        .chain(std::iter::repeat_n("a", 5_000))
                        .map(str::to_owned)
                        .collect(),
                ],
                "still only echo",
            ),
        ),
        exec(
            "over 16 KiB",
            &"x".repeat(20_000),
            d(
                "the command is 20000 bytes long; allowlist mode parses at most 16 KiB: put long data in a file with write_file and pass its name",
            ),
        ),
        exec(
            "deep nesting",
            &format!("echo {}", "$(".repeat(40)),
            d(
                "the command nests parentheses more than 12 deep; allowlist mode refuses it: run simpler commands",
            ),
        ),
        exec(
            "fd number overflow (fuzz crash)",
            "777777777776<",
            d(
                "the number `777777777776` is too long where the shell reads it as a file descriptor, `~N` or a `{N..M}` range; allowlist mode refuses it",
            ),
        ),
        exec("empty", "   ", d("the command is empty")),
    ];
    let mut expected = Vec::new();
    let mut got = Vec::new();
    for row in &rows {
        let outcome = match (policy.analyze(&row.command, ws, &fx.guard), &row.expected) {
            (Ok(ExecPlan::Pipeline(segments)), Allowed(_, why)) => Allowed(segments, why),
            (Ok(ExecPlan::Pipeline(segments)), _) => Allowed(segments, ""),
            (Ok(ExecPlan::Shell(command)), _) => Denied(format!("planned a shell: {command}")),
            (Err(denial), _) => Denied(denial.message().to_owned()),
        };
        got.push((row.name, outcome));
        expected.push((row.name, row.expected.clone()));
    }
    assert_eq!(got, expected);
}
