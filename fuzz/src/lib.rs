//! The file-system fixture both fuzz targets check against, built once per fuzzing process
//! (the targets run millions of inputs; a fresh temp dir per input would dominate the time).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nanocrab_config::ToolsConfig;
use nanocrab_policy::PathGuard;

/// root/{ws, outside, home}: the workspace holds every kind of link out (absolute, relative,
/// dangling, a chain, a loop), a hard link to an outside file and a protected folder.
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub ws: PathBuf,
    pub protected: PathBuf,
    pub guard: PathGuard,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

#[allow(clippy::expect_used)]
pub fn fixture() -> &'static Fixture {
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temp dir for the fuzz fixture");
        let root = dir.path().canonicalize().expect("the temp dir resolves");
        let ws = root.join("ws");
        let setup = || -> std::io::Result<()> {
            for sub in ["ws/notes", "ws/secrets", "outside/sub", "home"] {
                std::fs::create_dir_all(root.join(sub))?;
            }
            std::fs::write(ws.join("notes/a.md"), "a")?;
            std::fs::write(ws.join("secrets/key"), "k")?;
            std::fs::write(root.join("outside/secret"), "s")?;
            std::fs::hard_link(root.join("outside/secret"), ws.join("hard"))?;
            symlink(root.join("outside"), ws.join("link_dir"))?;
            symlink("../outside", ws.join("relative_link"))?;
            symlink(root.join("outside/new"), ws.join("dangling"))?;
            symlink(root.join("outside/secret"), ws.join("notes/link_file"))?;
            symlink("chain2", ws.join("chain1"))?;
            symlink("notes/../relative_link/sub", ws.join("chain2"))?;
            symlink("loop_b", ws.join("loop_a"))?;
            symlink("loop_a", ws.join("loop_b"))?;
            symlink("notes", ws.join("inside_link"))?;
            symlink("/proc/self/root", ws.join("proc_root"))?;
            Ok(())
        };
        setup().expect("the fuzz fixture's files and links");
        let config = ToolsConfig {
            protected_paths: vec![PathBuf::from("secrets")],
            ..ToolsConfig::default()
        };
        let guard = PathGuard::new(&ws, &config, Some(&root.join("home")))
            .expect("a guard over the fixture");
        Fixture {
            protected: ws.join("secrets"),
            ws,
            root,
            guard,
            _dir: dir,
        }
    })
}

/// Whether what the guard returned is really inside the workspace: lexically, and for the
/// longest existing prefix also after the kernel follows every link in it.
pub fn really_inside(resolved: &Path, ws: &Path) -> bool {
    if !resolved.starts_with(ws) {
        return false;
    }
    let mut existing = resolved;
    loop {
        if std::fs::symlink_metadata(existing).is_ok() {
            return match existing.canonicalize() {
                Ok(real) => real.starts_with(ws),
                // A path the kernel cannot resolve (a NUL byte, a loop) cannot be opened either.
                Err(_) => true,
            };
        }
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return true,
        }
    }
}
