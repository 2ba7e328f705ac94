//! What allowlist mode refuses about a program beyond "is it a safe bin": programs that run
//! code or other programs whatever their arguments, and the options of safe bins that write
//! files, run programs or read file names from a file (which would bypass the argument path
//! check).

/// Shells and language runtimes: they run code from `-c`/`-e` arguments, script files or
/// stdin (`echo 'rm -rf ~' | sh`), so no argument check can make them safe.
const INTERPRETERS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "csh",
    "tcsh",
    "busybox",
    "node",
    "nodejs",
    "deno",
    "bun",
    "irb",
    "tclsh",
    "wish",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "sed",
    "Rscript",
    "julia",
    "osascript",
    "pwsh",
    "powershell",
    "expect",
    "jshell",
    "groovy",
];

/// Versioned runtimes (`python3.12`, `perl5.36`, `php8.3`, `lua5.4`, `ruby3.2`).
const INTERPRETER_PREFIXES: &[&str] = &["python", "pypy", "perl", "ruby", "php", "lua"];

/// Programs whose job is to run another program, which would escape the safe-bin check.
const LAUNCHERS: &[&str] = &[
    "env",
    "xargs",
    "nice",
    "nohup",
    "timeout",
    "stdbuf",
    "setsid",
    "sudo",
    "doas",
    "su",
    "runuser",
    "chroot",
    "unshare",
    "nsenter",
    "ionice",
    "taskset",
    "chrt",
    "watch",
    "strace",
    "ltrace",
    "gdb",
    "time",
    "command",
    "builtin",
    "exec",
    "eval",
    "source",
    ".",
    "script",
    "flock",
    "parallel",
    "systemd-run",
    "make",
];

/// `find` actions that run programs or write/delete files.
const FIND_ACTIONS: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
];

/// Options refused per program: (program, short option letters, long option names, why).
const REFUSED_OPTIONS: &[(&str, &str, &[&str], &str)] = &[
    (
        "sort",
        "o",
        &["output", "compress-program", "files0-from"],
        "it writes files, runs a program or reads file names from a file",
    ),
    (
        "wc",
        "",
        &["files0-from"],
        "it reads file names from a file, which bypasses the path check",
    ),
    (
        "grep",
        "R",
        &["dereference-recursive"],
        "it follows symlinks while recursing, which can leave the workspace; use -r",
    ),
    (
        "ls",
        "L",
        &["dereference"],
        "it follows symlinks, also while recursing (`-RL`), which lists and stats files \
         outside the workspace",
    ),
    ("date", "s", &["set"], "it changes the system clock"),
];

/// Why `program` is refused whatever its arguments, if it is.
pub(crate) fn refused_program(program: &str) -> Option<String> {
    if INTERPRETERS.contains(&program)
        || INTERPRETER_PREFIXES
            .iter()
            .any(|prefix| program.starts_with(prefix))
    {
        return Some(format!(
            "`{program}` is a shell or interpreter that runs arbitrary code (`{program} -c`, \
             `{program} -e`, a script or stdin), so allowlist mode refuses it even if it is in \
             safeBins"
        ));
    }
    if LAUNCHERS.contains(&program) {
        return Some(format!(
            "`{program}` runs other programs, so allowlist mode refuses it even if it is in \
             safeBins: call the program directly"
        ));
    }
    None
}

/// Why these arguments of `program` are refused, if they are. `args` excludes the program.
pub(crate) fn refused_arguments(program: &str, args: &[String]) -> Option<String> {
    let options = args.iter().take_while(|arg| arg.as_str() != "--");
    if program == "find" {
        // find's actions are words of its expression, not options: check every word.
        if let Some(action) = args.iter().find(|arg| FIND_ACTIONS.contains(&arg.as_str())) {
            return Some(format!(
                "`find {action}` runs programs or writes files, so allowlist mode refuses it \
                 (refused: {})",
                FIND_ACTIONS.join(", ")
            ));
        }
    }
    if let Some((_, short, long, why)) = REFUSED_OPTIONS.iter().find(|rule| rule.0 == program) {
        for arg in options.clone() {
            let refused = if let Some(name) = arg.strip_prefix("--") {
                let name = name.split('=').next().unwrap_or(name);
                // GNU tools accept any unambiguous prefix of a long option.
                !name.is_empty() && long.iter().any(|refused| refused.starts_with(name))
            } else if let Some(cluster) = arg.strip_prefix('-') {
                cluster.chars().any(|c| short.contains(c))
            } else {
                false
            };
            if refused {
                return Some(format!(
                    "`{program} {arg}` is refused in allowlist mode: {why}"
                ));
            }
        }
    }
    if program == "uniq" {
        let operands = uniq_operands(args);
        if operands > 1 {
            return Some(
                "`uniq` with a second file operand writes its output to that file, so allowlist \
                 mode refuses it: use write_file to save output"
                    .to_owned(),
            );
        }
    }
    None
}

/// File operands of `uniq` (its second one is an output file).
fn uniq_operands(args: &[String]) -> usize {
    let mut operands = 0;
    let mut skip_value = false;
    let mut after_dashdash = false;
    for arg in args {
        if skip_value {
            skip_value = false;
        } else if after_dashdash || arg == "-" || !arg.starts_with('-') {
            operands += 1;
        } else if arg == "--" {
            after_dashdash = true;
        } else if let Some(name) = arg.strip_prefix("--") {
            skip_value = !name.contains('=')
                && !name.is_empty()
                && ["skip-fields", "skip-chars", "check-chars"]
                    .iter()
                    .any(|long| long.starts_with(name));
        } else {
            // `-f N`: the value is the next word unless it is glued on (`-f2`).
            skip_value = arg.len() == 2 && matches!(arg.as_str(), "-f" | "-s" | "-w");
        }
    }
    operands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn uniq_counts_operands_not_option_values() {
        assert_eq!(uniq_operands(&args(&["-f", "1", "in.txt"])), 1);
        assert_eq!(uniq_operands(&args(&["--skip-fields", "1", "in.txt"])), 1);
        assert_eq!(uniq_operands(&args(&["-c", "in.txt", "out.txt"])), 2);
        assert_eq!(uniq_operands(&args(&["--", "-in", "out"])), 2);
    }

    #[test]
    fn abbreviated_long_options_are_caught() {
        assert!(refused_arguments("sort", &args(&["--out=x", "f"])).is_some());
        assert!(refused_arguments("sort", &args(&["--compress=sh"])).is_some());
        assert!(refused_arguments("sort", &args(&["-uo", "x"])).is_some());
        assert!(refused_arguments("sort", &args(&["--field-separator=,", "f"])).is_none());
        assert!(refused_arguments("sort", &args(&["-n", "-r", "f"])).is_none());
    }
}
