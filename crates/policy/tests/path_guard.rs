#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every way out of the workspace the path guard must see through.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use nanocrab_config::ToolsConfig;
use nanocrab_policy::{PathGuard, PathGuardError};
use pretty_assertions::assert_eq;

/// root/{ws, ws2, outside, shared, home}; `root` is canonical so messages are predictable.
struct Layout {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Layout {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["ws/notes", "ws/secrets", "ws2", "outside", "shared", "home"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("ws/notes/a.md"), "a").unwrap();
        std::fs::write(root.join("ws/secrets/key"), "k").unwrap();
        std::fs::write(root.join("outside/secret"), "s").unwrap();
        std::fs::write(root.join("ws2/file"), "w").unwrap();
        symlink(root.join("outside/secret"), root.join("ws/link_file")).unwrap();
        symlink(root.join("outside"), root.join("ws/link_dir")).unwrap();
        symlink("../outside", root.join("ws/relative_link_dir")).unwrap();
        symlink(root.join("outside/created.txt"), root.join("ws/dangling")).unwrap();
        Self { _dir: dir, root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn guard(&self, config: &ToolsConfig) -> PathGuard {
        PathGuard::new(&self.ws(), config, Some(&self.root.join("home"))).unwrap()
    }

    fn outside_message(&self, access: &str, asked: &str, resolved: &Path) -> String {
        format!(
            "cannot {access} `{asked}`: it resolves to {}, which is outside the workspace {}; no \
             other paths are allowed (tools.allowedPaths)",
            resolved.display(),
            self.ws().display()
        )
    }
}

#[test]
fn paths_inside_the_workspace_resolve_to_absolute_paths() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    let ws = layout.ws();
    assert_eq!(
        guard.check_read("notes/a.md").unwrap(),
        ws.join("notes/a.md")
    );
    assert_eq!(
        guard.check_read("./notes/../notes/a.md").unwrap(),
        ws.join("notes/a.md")
    );
    assert_eq!(guard.check_read(".").unwrap(), ws);
    assert_eq!(
        guard.check_write("notes/new/todo.md").unwrap(),
        ws.join("notes/new/todo.md")
    );
    assert_eq!(
        guard
            .check_write(ws.join("x.md").to_str().unwrap())
            .unwrap(),
        ws.join("x.md")
    );
}

#[test]
fn dotdot_out_of_the_workspace_is_refused() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    let resolved = layout.root.join("outside/secret");
    assert_eq!(
        guard.check_read("../outside/secret").unwrap_err().message(),
        layout.outside_message("read", "../outside/secret", &resolved)
    );
    assert_eq!(
        guard
            .check_write("notes/../../outside/secret")
            .unwrap_err()
            .message(),
        layout.outside_message("write", "notes/../../outside/secret", &resolved)
    );
}

#[test]
fn absolute_paths_outside_are_refused() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    assert_eq!(
        guard.check_read("/etc/passwd").unwrap_err().message(),
        layout.outside_message("read", "/etc/passwd", Path::new("/etc/passwd"))
    );
}

#[test]
fn tilde_expands_to_the_given_home_which_is_outside() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    assert_eq!(
        guard.check_read("~/.ssh/id_ed25519").unwrap_err().message(),
        layout.outside_message(
            "read",
            "~/.ssh/id_ed25519",
            &layout.root.join("home/.ssh/id_ed25519")
        )
    );
    assert_eq!(
        guard.check_read("~root/.bashrc").unwrap_err().message(),
        "cannot read `~root/.bashrc`: `~root` (another user's home) is not supported; use an \
         absolute path"
    );
    let homeless = PathGuard::new(&layout.ws(), &ToolsConfig::default(), None).unwrap();
    assert_eq!(
        homeless.check_read("~/x").unwrap_err().message(),
        "cannot read `~/x`: `~` cannot be expanded because the user's home directory is unknown"
    );
}

#[test]
fn symlinked_file_pointing_out_is_refused() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    assert_eq!(
        guard.check_read("link_file").unwrap_err().message(),
        layout.outside_message("read", "link_file", &layout.root.join("outside/secret"))
    );
}

#[test]
fn symlinked_parent_directory_is_refused() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    for asked in ["link_dir/secret", "relative_link_dir/secret"] {
        assert_eq!(
            guard.check_read(asked).unwrap_err().message(),
            layout.outside_message("read", asked, &layout.root.join("outside/secret"))
        );
    }
}

#[test]
fn dotdot_after_a_symlink_climbs_from_the_target_like_the_kernel() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    // Lexically this is ws/outside/secret (inside); the kernel opens root/outside/secret.
    assert_eq!(
        guard
            .check_read("link_dir/../outside/secret")
            .unwrap_err()
            .message(),
        layout.outside_message(
            "read",
            "link_dir/../outside/secret",
            &layout.root.join("outside/secret")
        )
    );
    // And the other way round: climbing back into the workspace is fine.
    assert_eq!(
        guard.check_read("link_dir/../ws/notes/a.md").unwrap(),
        layout.ws().join("notes/a.md")
    );
}

#[test]
fn new_file_under_a_symlinked_dir_is_refused() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    assert_eq!(
        guard
            .check_write("link_dir/new/file.txt")
            .unwrap_err()
            .message(),
        layout.outside_message(
            "write",
            "link_dir/new/file.txt",
            &layout.root.join("outside/new/file.txt")
        )
    );
}

#[test]
fn dangling_symlink_is_judged_by_its_target() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    assert_eq!(
        guard.check_write("dangling").unwrap_err().message(),
        layout.outside_message(
            "write",
            "dangling",
            &layout.root.join("outside/created.txt")
        )
    );
}

#[test]
fn sibling_directory_with_the_workspace_as_name_prefix_is_outside() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    let ws2_file = layout.root.join("ws2/file");
    assert_eq!(
        guard
            .check_read(ws2_file.to_str().unwrap())
            .unwrap_err()
            .message(),
        layout.outside_message("read", ws2_file.to_str().unwrap(), &ws2_file)
    );
    assert_eq!(
        guard.check_read("../ws2/file").unwrap_err().message(),
        layout.outside_message("read", "../ws2/file", &ws2_file)
    );
}

#[test]
fn protected_paths_are_read_only() {
    let layout = Layout::new();
    let config = ToolsConfig {
        protected_paths: vec!["secrets".into()],
        ..ToolsConfig::default()
    };
    let guard = layout.guard(&config);
    let key = layout.ws().join("secrets/key");
    assert_eq!(guard.check_read("secrets/key").unwrap(), key);
    assert_eq!(
        guard
            .check_write("notes/../secrets/key")
            .unwrap_err()
            .message(),
        format!(
            "cannot write `notes/../secrets/key`: it resolves to {}, inside the protected path \
             {}, which is read-only (tools.protectedPaths)",
            key.display(),
            layout.ws().join("secrets").display()
        )
    );
    assert!(guard.check_write("secrets/new").is_err());
}

#[test]
fn allowed_paths_extend_the_workspace_and_are_named_in_denials() {
    let layout = Layout::new();
    let config = ToolsConfig {
        allowed_paths: vec![layout.root.join("shared"), "~/docs".into()],
        ..ToolsConfig::default()
    };
    let guard = layout.guard(&config);
    assert_eq!(
        guard.check_write("../shared/x.md").unwrap(),
        layout.root.join("shared/x.md")
    );
    assert_eq!(
        guard.check_read("~/docs/a").unwrap(),
        layout.root.join("home/docs/a")
    );
    assert_eq!(
        guard.check_read("../outside/secret").unwrap_err().message(),
        format!(
            "cannot read `../outside/secret`: it resolves to {}, which is outside the workspace \
             {}; also allowed: {}, {}",
            layout.root.join("outside/secret").display(),
            layout.ws().display(),
            layout.root.join("shared").display(),
            layout.root.join("home/docs").display()
        )
    );
}

#[test]
fn without_restriction_only_protected_paths_are_refused() {
    let layout = Layout::new();
    let config = ToolsConfig {
        restrict_to_workspace: false,
        protected_paths: vec![layout.root.join("outside")],
        ..ToolsConfig::default()
    };
    let guard = layout.guard(&config);
    assert_eq!(
        guard.check_read("link_file").unwrap(),
        layout.root.join("outside/secret")
    );
    assert_eq!(
        guard.check_write("../ws2/new").unwrap(),
        layout.root.join("ws2/new")
    );
    assert!(
        guard
            .check_write("link_dir/x")
            .unwrap_err()
            .message()
            .contains("inside the protected path")
    );
}

#[test]
fn a_symlinked_workspace_is_compared_by_its_real_path() {
    let layout = Layout::new();
    symlink(layout.ws(), layout.root.join("ws_link")).unwrap();
    let guard =
        PathGuard::new(&layout.root.join("ws_link"), &ToolsConfig::default(), None).unwrap();
    assert_eq!(guard.workspace(), layout.ws());
    assert_eq!(
        guard.check_read("notes/a.md").unwrap(),
        layout.ws().join("notes/a.md")
    );
}

#[test]
fn arguments_resolve_against_the_working_directory_without_tilde_expansion() {
    let layout = Layout::new();
    let guard = layout.guard(&ToolsConfig::default());
    let notes = layout.ws().join("notes");
    assert_eq!(
        guard.check_argument(&notes, "a.md").unwrap(),
        notes.join("a.md")
    );
    assert_eq!(guard.check_argument(&notes, "~").unwrap(), notes.join("~"));
    assert!(
        guard
            .check_argument(&notes, "../../outside/secret")
            .is_err()
    );
}

#[test]
fn bad_configuration_is_an_error() {
    let err = PathGuard::new(Path::new("ws"), &ToolsConfig::default(), None).unwrap_err();
    assert!(matches!(err, PathGuardError::RelativeWorkspace(_)));
    assert_eq!(
        err.to_string(),
        "the workspace must be an absolute path, got ws"
    );
    let config = ToolsConfig {
        allowed_paths: vec!["~/x".into()],
        ..ToolsConfig::default()
    };
    let err = PathGuard::new(Path::new("/tmp"), &config, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tools.allowedPaths: cannot use `~/x`: `~` cannot be expanded because the user's home \
         directory is unknown"
    );
}

#[test]
fn arguments_through_proc_self_are_refused_because_the_command_is_another_process() {
    // The test runs in the crate's folder; with its parent as the workspace and the command
    // run there, `/proc/self/cwd/..` is the workspace to the guard but its parent to `ls`.
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let ws = crate_dir.parent().unwrap();
    let guard = PathGuard::new(ws, &ToolsConfig::default(), None).unwrap();
    let through = |asked: &str, link: &str| {
        format!(
            "cannot read `{asked}`: it goes through {link}, which names the process that opens \
             it (the command, not nanocrab), so it cannot be checked; name the file directly"
        )
    };
    for (asked, link) in [
        ("/proc/self/cwd/..", "/proc/self"),
        ("/proc/thread-self/cwd/..", "/proc/thread-self"),
        ("/dev/stdin", "/proc/self"),
        ("/dev/fd/0", "/proc/self"),
    ] {
        assert_eq!(
            guard.check_argument(ws, asked).unwrap_err().message(),
            through(asked, link),
            "{asked}"
        );
    }
    // The file tools open the path themselves, so there it means what the guard resolved.
    assert_eq!(
        guard.check_read("/proc/self/cwd/..").unwrap(),
        ws.canonicalize().unwrap()
    );
}
