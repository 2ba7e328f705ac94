#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Properties of the path guard and the exec analysis over generated inputs (proptest): what
//! the guard lets through stays inside the workspace however the path is spelled, and the
//! exec analysis never panics and never lets shell control syntax or an unlisted program run.

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use nanocrab_config::{ExecConfig, ExecMode, ToolsConfig};
use nanocrab_policy::{ExecPlan, ExecPolicy, PathGuard};
use proptest::prelude::*;

/// root/{ws/notes, outside}; links out of the workspace, absolute and relative, and a
/// dangling one whose target would be created outside.
fn layout() -> (tempfile::TempDir, PathBuf, PathGuard) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("ws/notes")).unwrap();
    std::fs::create_dir_all(root.join("outside")).unwrap();
    std::fs::write(root.join("outside/secret"), "s").unwrap();
    symlink(root.join("outside"), root.join("ws/link_dir")).unwrap();
    symlink("../outside", root.join("ws/relative_link")).unwrap();
    symlink(root.join("outside/new"), root.join("ws/dangling")).unwrap();
    symlink(root.join("outside/secret"), root.join("ws/notes/link_file")).unwrap();
    let guard = PathGuard::new(&root.join("ws"), &ToolsConfig::default(), Some(&root)).unwrap();
    (dir, root, guard)
}

/// Path segments that matter to a resolver: parents, links out, names of real folders on
/// both sides, odd spellings.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just(String::new()),
        Just("notes".to_owned()),
        Just("ws".to_owned()),
        Just("outside".to_owned()),
        Just("secret".to_owned()),
        Just("link_dir".to_owned()),
        Just("relative_link".to_owned()),
        Just("dangling".to_owned()),
        Just("link_file".to_owned()),
        Just("proc".to_owned()),
        Just("self".to_owned()),
        Just("root".to_owned()),
        "[a-z]{1,6}",
    ]
}

fn path() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just(""), Just("/"), Just("~/"), Just("./")],
        prop::collection::vec(segment(), 1..8),
    )
        .prop_map(|(start, segments)| format!("{start}{}", segments.join("/")))
}

proptest! {
    // Failures are reported with their minimal input, not saved into the source tree.
    #![proptest_config(ProptestConfig {
        cases: 3_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn whatever_the_guard_allows_is_inside_the_workspace(asked in path()) {
        let (_dir, root, guard) = layout();
        let ws = root.join("ws");
        let allowed = [guard.check_read(&asked), guard.check_write(&asked)];
        for resolved in allowed.into_iter().flatten() {
            prop_assert!(
                resolved.starts_with(&ws),
                "{asked:?} resolved to {} outside {}", resolved.display(), ws.display()
            );
            // What the tool opens is what was checked: no link is left to follow out.
            if let Ok(real) = resolved.canonicalize() {
                prop_assert!(real.starts_with(&ws), "{asked:?} opens {}", real.display());
            }
        }
    }

    #[test]
    fn the_exec_analysis_never_panics(command in any::<String>()) {
        let (_dir, root, guard) = layout();
        let policy = ExecPolicy::new(&ExecConfig::default()).unwrap();
        let _ = policy.analyze(&command, &root.join("ws"), &guard);
    }

    #[test]
    fn an_allowed_pipeline_runs_only_safe_bins_without_shell_syntax(
        words in prop::collection::vec(
            prop_oneof![
                Just("ls".to_owned()), Just("cat".to_owned()), Just("rm".to_owned()),
                Just("python3".to_owned()), Just("sh".to_owned()), Just("|".to_owned()),
                Just(";".to_owned()), Just("&&".to_owned()), Just(">".to_owned()),
                Just("$(id)".to_owned()), Just("`id`".to_owned()), Just("*".to_owned()),
                Just("notes".to_owned()), Just("../outside/secret".to_owned()),
                Just("-la".to_owned()), Just("$HOME".to_owned()), Just("FOO=1".to_owned()),
                "[a-z./-]{1,8}",
            ],
            1..7,
        )
    ) {
        let (_dir, root, guard) = layout();
        let policy = ExecPolicy::new(&ExecConfig {
            mode: ExecMode::Allowlist,
            ..ExecConfig::default()
        })
        .unwrap();
        let command = words.join(" ");
        if let Ok(plan) = policy.analyze(&command, &root.join("ws"), &guard) {
            let ExecPlan::Pipeline(segments) = plan else {
                panic!("allowlist mode planned a shell for {command:?}");
            };
            for argv in &segments {
                prop_assert!(
                    policy.safe_bins().contains(&argv[0]),
                    "{command:?} runs {:?}", argv[0]
                );
                for argument in argv {
                    prop_assert!(!argument.contains("$(") && !argument.contains('`'), "{command:?}");
                }
            }
            for control in ["&&", ">", "$(id)", "`id`"] {
                prop_assert!(!words.iter().any(|w| w == control), "{command:?} was allowed");
            }
            // A `;` that ends the command separates nothing (`ls ;` is `ls`); any other does.
            let last = words.len() - 1;
            prop_assert!(
                !words.iter().enumerate().any(|(i, w)| w == ";" && i != last),
                "{command:?} was allowed"
            );
            prop_assert!(!command.contains("outside/secret"), "{command:?} was allowed");
        }
    }
}

/// A safe bin with a few harmless arguments, plain or quoted.
fn simple_command() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["ls", "cat", "echo", "grep", "wc", "sort", "head"]),
        prop::collection::vec(
            prop_oneof![
                "[a-z][a-z.-]{0,5}",
                "'[a-z ;&|<>$()]{0,6}'",
                "\"[a-z ;&|<>()]{0,6}\""
            ],
            0..3,
        ),
    )
        .prop_map(|(program, args)| {
            std::iter::once(program.to_owned())
                .chain(args)
                .collect::<Vec<_>>()
                .join(" ")
        })
}

#[test]
fn an_unquoted_control_operator_between_commands_is_always_denied() {
    // One fixture for all cases: the analysis only reads it.
    let (_dir, root, guard) = layout();
    let policy = ExecPolicy::new(&ExecConfig {
        mode: ExecMode::Allowlist,
        ..ExecConfig::default()
    })
    .unwrap();
    let operator = prop::sample::select(vec![
        ";", " ; ", "&&", " || ", "&", "\n", ">", ">>", "<", "2>", "&>", ">|", "<>", " <(", " >(",
        " $(", " `", "|&", ";;",
    ]);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 2_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(simple_command(), operator, simple_command()),
            |(first, operator, second)| {
                let command = format!("{first}{operator}{second}");
                let result = policy.analyze(&command, &root.join("ws"), &guard);
                prop_assert!(result.is_err(), "{command:?} was allowed: {result:?}");
                Ok(())
            },
        )
        .unwrap();
}
