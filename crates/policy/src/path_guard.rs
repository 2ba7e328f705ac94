//! Which files the tools may read and write.
//!
//! Every path is resolved the way the kernel will resolve it when the tool opens it: `~`
//! expanded, made absolute, and walked component by component with symlinks followed (also
//! dangling ones, whose target a write would create) and `..` applied to the real parent of
//! what is already resolved. Only the part that does not exist yet is taken lexically. The
//! check then runs on that result, and the tools open the result, not what was asked, so a
//! path cannot mean one thing to the check and another to the open.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use nanocrab_config::ToolsConfig;

/// The workspace files the system prompt is built from, relative to the workspace: the
/// bootstrap files and, ending in `/`, the skills folder with everything in it. Whatever is
/// written there becomes a standing instruction of every later session, so the file tools
/// treat a write to them as guarded and keep a copy of what it replaced.
pub const INSTRUCTION_PATHS: &[&str] = &[
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "TOOLS.md",
    "IDENTITY.md",
    "HEARTBEAT.md",
    "skills/",
];

/// Symlinks followed in one resolution before giving up, as Linux's `MAXSYMLINKS`.
const MAX_SYMLINK_HOPS: usize = 40;

/// Why the guard could not be built from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum PathGuardError {
    #[error("the workspace must be an absolute path, got {0}")]
    RelativeWorkspace(PathBuf),
    #[error("tools.{key}: cannot use `{path}`: {reason}")]
    BadConfiguredPath {
        key: &'static str,
        path: PathBuf,
        reason: String,
    },
}

/// A refused path: what was asked, what it resolved to (when it got that far) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PathDenial {
    message: String,
}

impl PathDenial {
    fn new(message: String) -> Self {
        Self { message }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Whether a path is about to be read or written, or passed to a command (which reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    Argument,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read | Self::Argument => f.write_str("read"),
            Self::Write => f.write_str("write"),
        }
    }
}

/// The file-access policy of one agent: workspace confinement, extra allowed roots and
/// read-only (protected) paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathGuard {
    workspace: PathBuf,
    restrict_to_workspace: bool,
    allowed: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    /// Folders of skills outside the workspace (installed, bundled, `skills.extraDirs`): the
    /// prompt's skill index points into them, so they are readable; never writable, so that
    /// no turn can rewrite the instructions of later ones there.
    skill_folders: Vec<PathBuf>,
    home: Option<PathBuf>,
}

impl PathGuard {
    /// `workspace` must be absolute. Configured allowed and protected paths may use `~` and may
    /// be relative to the workspace; they are resolved (symlinks included) once, here.
    pub fn new(
        workspace: &Path,
        config: &ToolsConfig,
        home: Option<&Path>,
    ) -> Result<Self, PathGuardError> {
        if !workspace.is_absolute() {
            return Err(PathGuardError::RelativeWorkspace(workspace.to_path_buf()));
        }
        let workspace =
            resolve_absolute(workspace).map_err(|reason| PathGuardError::BadConfiguredPath {
                key: "workspace",
                path: workspace.to_path_buf(),
                reason,
            })?;
        let mut guard = Self {
            workspace,
            restrict_to_workspace: config.restrict_to_workspace,
            allowed: Vec::new(),
            protected: Vec::new(),
            skill_folders: Vec::new(),
            home: home.map(Path::to_path_buf),
        };
        for (key, configured, into_protected) in [
            ("allowedPaths", &config.allowed_paths, false),
            ("protectedPaths", &config.protected_paths, true),
        ] {
            for path in configured {
                let resolved = guard
                    .resolve(&guard.workspace.clone(), path, Access::Read)
                    .map_err(|reason| PathGuardError::BadConfiguredPath {
                        key,
                        path: path.clone(),
                        reason,
                    })?;
                if into_protected {
                    guard.protected.push(resolved);
                } else {
                    guard.allowed.push(resolved);
                }
            }
        }
        Ok(guard)
    }

    /// Makes `folders` (absolute ones; they need not exist yet) readable and never writable:
    /// the skill folders outside the workspace.
    pub fn with_skill_folders(mut self, folders: &[PathBuf]) -> Self {
        self.skill_folders = folders
            .iter()
            .filter(|folder| folder.is_absolute())
            .map(|folder| resolve_absolute(folder).unwrap_or_else(|_| folder.clone()))
            .collect();
        self
    }

    /// The workspace, resolved (symlinks followed).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The user's home, for `~`.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// Whether a resolved path is inside the workspace or an `allowedPaths` root: the places
    /// config grants the file tools outright. Elsewhere (reachable only with
    /// `restrictToWorkspace` off) a call is guarded.
    pub fn is_in_granted_roots(&self, resolved: &Path) -> bool {
        resolved.starts_with(&self.workspace)
            || self.allowed.iter().any(|root| resolved.starts_with(root))
    }

    /// Whether a resolved path lies in a skill folder outside the workspace, which the guard
    /// lets the tools read and nothing else.
    pub fn is_in_skill_folder(&self, resolved: &Path) -> bool {
        self.skill_folders
            .iter()
            .any(|folder| resolved.starts_with(folder))
    }

    /// Whether a resolved path is a skill's own `SKILL.md`: `<root>/<folder>/SKILL.md`, the
    /// root being the workspace's `skills/` or a skill folder. Not a `SKILL.md` deeper in a
    /// skill's files (an example it ships), nor one elsewhere.
    pub fn is_skill_file(&self, resolved: &Path) -> bool {
        let Some(root) = resolved.parent().and_then(Path::parent) else {
            return false;
        };
        let workspace_skills = self.workspace.join("skills");
        resolved.file_name().is_some_and(|name| name == "SKILL.md")
            && (self.skill_folders.iter().any(|folder| folder == root)
                || root == workspace_skills
                || resolve_absolute(&workspace_skills).is_ok_and(|skills| root == skills))
    }

    /// `allowedPaths`, resolved.
    pub fn allowed_paths(&self) -> &[PathBuf] {
        &self.allowed
    }

    /// `protectedPaths`, resolved: absolute, symlinks followed.
    pub fn protected_paths(&self) -> &[PathBuf] {
        &self.protected
    }

    /// [`INSTRUCTION_PATHS`] under the workspace, resolved as a write to them would be (a
    /// bootstrap file that is a symlink gives its target), and the skill folders: what
    /// commands find read-only. They need not exist.
    pub fn guarded_paths(&self) -> Vec<PathBuf> {
        INSTRUCTION_PATHS
            .iter()
            .map(|name| {
                let lexical = self.workspace.join(name.trim_end_matches('/'));
                resolve_absolute(&lexical).unwrap_or(lexical)
            })
            .chain(self.skill_folders.iter().cloned())
            .collect()
    }

    /// When `resolved` (a path the guard resolved) is an instruction file or lies in an
    /// instruction folder: its path relative to the workspace as the prompt names it
    /// (`SOUL.md`, `skills/weather/SKILL.md`), also when it was reached through a symlink.
    pub fn instruction_file(&self, resolved: &Path) -> Option<PathBuf> {
        INSTRUCTION_PATHS.iter().find_map(|name| {
            let name = Path::new(name.trim_end_matches('/'));
            let lexical = self.workspace.join(name);
            // Resolved now, not when the guard was made: a link made since must count too.
            let target = resolve_absolute(&lexical).unwrap_or_else(|_| lexical.clone());
            [lexical, target].iter().find_map(|root| {
                resolved.strip_prefix(root).ok().map(|rest| {
                    if rest.as_os_str().is_empty() {
                        name.to_path_buf()
                    } else {
                        name.join(rest)
                    }
                })
            })
        })
    }

    pub fn restricts_to_workspace(&self) -> bool {
        self.restrict_to_workspace
    }

    /// A path a tool was given (`~` expanded, relative to the workspace) that it will read.
    /// Returns the resolved path, which is what the tool must open.
    pub fn check_read(&self, asked: &str) -> Result<PathBuf, PathDenial> {
        self.check(&self.workspace, asked, Access::Read)
    }

    /// As [`Self::check_read`], and only inside the workspace, whatever else may be read: a
    /// file that leaves the machine (sent to a chat) comes from the workspace alone.
    pub fn check_workspace_read(&self, asked: &str) -> Result<PathBuf, PathDenial> {
        let path = self.check_read(asked)?;
        if !path.starts_with(&self.workspace) {
            return Err(PathDenial::new(format!(
                "{} is outside the workspace; only files in the workspace ({}) can leave this \
                 machine",
                path.display(),
                self.workspace.display()
            )));
        }
        Ok(path)
    }

    /// As [`Self::check_read`], for a write: protected paths are refused as well.
    pub fn check_write(&self, asked: &str) -> Result<PathBuf, PathDenial> {
        self.check(&self.workspace, asked, Access::Write)
    }

    /// A command argument a program will open relative to its working directory `cwd`.
    /// No `~` expansion: the shell-word evaluation already did it where a shell would.
    /// `/proc/self` (and `/dev/fd`, `/dev/stdin`... through it) is refused: it names the
    /// process that opens it, which is the command, not the guard that resolved it.
    pub fn check_argument(&self, cwd: &Path, argument: &str) -> Result<PathBuf, PathDenial> {
        self.check(cwd, argument, Access::Argument)
    }

    fn check(&self, base: &Path, asked: &str, access: Access) -> Result<PathBuf, PathDenial> {
        if asked.is_empty() {
            return Err(PathDenial::new(format!("cannot {access} an empty path")));
        }
        let resolved = self
            .resolve(base, Path::new(asked), access)
            .map_err(|reason| PathDenial::new(format!("cannot {access} `{asked}`: {reason}")))?;
        let skill_folder = self
            .skill_folders
            .iter()
            .find(|folder| resolved.starts_with(folder));
        // Never written by the tools, even inside the workspace or an allowed path (an
        // `extraDirs` entry may be either): a skill there is trusted as an instruction, and
        // only `nanocrab skills` changes it.
        if let Some(folder) = skill_folder
            && access == Access::Write
        {
            return Err(PathDenial::new(format!(
                "cannot write `{asked}`: it resolves to {}, inside the skill folder {}, which the \
                 tools may only read (install and remove skills with `nanocrab skills`)",
                resolved.display(),
                folder.display(),
            )));
        }
        // A skill folder outside the workspace is open to the file tools' reads only: a
        // command's argument may be written by the program.
        let skill_read = skill_folder.is_some() && access == Access::Read;
        if self.restrict_to_workspace
            && !skill_read
            && !resolved.starts_with(&self.workspace)
            && !self.allowed.iter().any(|root| resolved.starts_with(root))
        {
            let allowed = if self.allowed.is_empty() {
                "no other paths are allowed (tools.allowedPaths)".to_owned()
            } else {
                let allowed: Vec<String> = self
                    .allowed
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                format!("also allowed: {}", allowed.join(", "))
            };
            return Err(PathDenial::new(format!(
                "cannot {access} `{asked}`: it resolves to {}, which is outside the workspace {}; \
                 {allowed}",
                resolved.display(),
                self.workspace.display(),
            )));
        }
        if access == Access::Write
            && let Some(protected) = self.protected.iter().find(|p| resolved.starts_with(p))
        {
            return Err(PathDenial::new(format!(
                "cannot write `{asked}`: it resolves to {}, inside the protected path {}, which \
                 is read-only (tools.protectedPaths)",
                resolved.display(),
                protected.display(),
            )));
        }
        Ok(resolved)
    }

    fn resolve(&self, base: &Path, asked: &Path, access: Access) -> Result<PathBuf, String> {
        let expand_tilde = access != Access::Argument;
        let mut components = asked.components();
        let absolute = match components.next() {
            Some(Component::Normal(first)) if expand_tilde && first == "~" => {
                let home = self
                    .home
                    .as_deref()
                    .ok_or("`~` cannot be expanded because the user's home directory is unknown")?;
                home.join(components.as_path())
            }
            Some(Component::Normal(first))
                if expand_tilde && first.to_string_lossy().starts_with('~') =>
            {
                return Err(format!(
                    "`{}` (another user's home) is not supported; use an absolute path",
                    first.to_string_lossy()
                ));
            }
            _ => base.join(asked),
        };
        resolve_walk(&absolute, access == Access::Argument)
    }
}

/// Walks `path` as the kernel would: existing components with symlinks followed, `..` taken
/// on the real parent, the first missing component and everything after it lexically.
fn resolve_absolute(path: &Path) -> Result<PathBuf, String> {
    resolve_walk(path, false)
}

/// The links in /proc that name the process following them.
const SELF_LINKS: &[&str] = &["/proc/self", "/proc/thread-self"];

/// [`resolve_absolute`]; `for_another_process` refuses [`SELF_LINKS`], whose target the guard
/// would take from its own process while the program that opens the path gets its own.
fn resolve_walk(path: &Path, for_another_process: bool) -> Result<PathBuf, String> {
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components(&mut pending, path, false);
    let mut resolved = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&name);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if for_another_process && SELF_LINKS.iter().any(|link| candidate == Path::new(link))
                {
                    return Err(format!(
                        "it goes through {}, which names the process that opens it (the \
                         command, not nanocrab), so it cannot be checked; name the file directly",
                        candidate.display()
                    ));
                }
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(format!(
                        "too many levels of symbolic links at {}",
                        candidate.display()
                    ));
                }
                let target = std::fs::read_link(&candidate).map_err(|err| {
                    format!("cannot read the symlink {}: {err}", candidate.display())
                })?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                push_components(&mut pending, &target, true);
            }
            // Missing (or unreadable) components stay lexical; nothing below them can be a
            // symlink the guard has not seen, because they do not exist yet.
            Ok(_) | Err(_) => resolved = candidate,
        }
    }
    Ok(resolved)
}

/// Queues `path`'s components (`.` dropped, `..` kept for the walk) in front of the pending
/// ones when `in_front`, otherwise after them.
fn push_components(pending: &mut VecDeque<OsString>, path: &Path, in_front: bool) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    if in_front {
        for name in names.into_iter().rev() {
            pending.push_front(name);
        }
    } else {
        pending.extend(names);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn dotdot_past_the_root_stays_at_the_root() {
        assert_eq!(
            resolve_absolute(Path::new("/../../nonexistent-xyz/../a")).unwrap(),
            PathBuf::from("/a")
        );
    }

    #[test]
    fn instruction_files_are_found_directly_inside_and_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("skills/weather")).unwrap();
        std::fs::create_dir_all(dir.path().join("dotfiles")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("dotfiles/soul.md"), ws.join("SOUL.md"))
            .unwrap();
        // The link leads out of the workspace, where only an unrestricted guard may write.
        let config = ToolsConfig {
            restrict_to_workspace: false,
            ..ToolsConfig::default()
        };
        let guard = PathGuard::new(&ws, &config, None).unwrap();
        let ws = guard.workspace().to_path_buf();
        let found = |asked: &str| {
            guard
                .instruction_file(&guard.check_write(asked).unwrap())
                .map(|p| p.display().to_string())
        };
        assert_eq!(
            [
                "AGENTS.md",
                "./skills/weather/SKILL.md",
                "skills",
                "SOUL.md",
                "notes/SOUL.md",
                "AGENTS.md.bak",
                "memory/MEMORY.md",
            ]
            .map(found),
            [
                Some("AGENTS.md".to_owned()),
                Some("skills/weather/SKILL.md".to_owned()),
                Some("skills".to_owned()),
                Some("SOUL.md".to_owned()),
                None,
                None,
                None,
            ]
        );
        let guarded = guard.guarded_paths();
        assert_eq!(guarded.len(), INSTRUCTION_PATHS.len());
        assert_eq!(guarded[0], ws.join("AGENTS.md"));
        assert_eq!(
            guarded[1],
            dir.path().canonicalize().unwrap().join("dotfiles/soul.md")
        );
        assert_eq!(guarded[6], ws.join("skills"));
    }

    #[test]
    fn skill_folders_are_readable_and_never_writable() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let skills = dir.path().join("home/skills");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(skills.join("gh")).unwrap();
        std::fs::write(skills.join("gh/SKILL.md"), "x").unwrap();
        let guard = PathGuard::new(&ws, &ToolsConfig::default(), None)
            .unwrap()
            .with_skill_folders(&[skills.clone(), PathBuf::from("relative")]);
        let skill = skills.join("gh/SKILL.md");
        assert_eq!(
            guard.check_read(&skill.display().to_string()).unwrap(),
            skill
        );
        assert_eq!(
            guard
                .check_write(&skill.display().to_string())
                .unwrap_err()
                .message(),
            format!(
                "cannot write `{0}`: it resolves to {0}, inside the skill folder {1}, which the \
                 tools may only read (install and remove skills with `nanocrab skills`)",
                skill.display(),
                skills.display()
            )
        );
        // Beside the skill folders, nothing more is readable.
        assert!(
            guard
                .check_read(&dir.path().join("home/config.json").display().to_string())
                .is_err()
        );
        // A command's argument may be written by its program: outside the workspace, a skill
        // folder is the file tools' to read, not a command's.
        assert!(
            guard
                .check_argument(&ws, &skill.display().to_string())
                .is_err()
        );
        // An extra folder inside the workspace is no more writable than the others, and
        // commands find it read-only.
        let inside = ws.canonicalize().unwrap().join("my-skills");
        std::fs::create_dir_all(inside.join("x")).unwrap();
        let guard = guard.with_skill_folders(&[skills.clone(), inside.clone()]);
        assert!(guard.check_write("my-skills/x/SKILL.md").is_err());
        assert!(guard.check_read("my-skills/x/SKILL.md").is_ok());
        assert!(guard.guarded_paths().contains(&inside));
        // Only a skill's own SKILL.md is one: not one deeper in its files, nor elsewhere.
        assert!(guard.is_skill_file(&skill));
        assert!(guard.is_skill_file(&ws.canonicalize().unwrap().join("skills/w/SKILL.md")));
        assert!(!guard.is_skill_file(&skills.join("gh/examples/x/SKILL.md")));
        assert!(!guard.is_skill_file(&ws.canonicalize().unwrap().join("notes/x/SKILL.md")));
        assert!(!guard.is_skill_file(&skills.join("gh/README.md")));
    }

    #[test]
    fn protected_paths_are_given_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let config = ToolsConfig {
            protected_paths: vec!["secrets".into()],
            ..ToolsConfig::default()
        };
        let guard = PathGuard::new(dir.path(), &config, None).unwrap();
        assert_eq!(
            guard.protected_paths(),
            [dir.path().canonicalize().unwrap().join("secrets")]
        );
    }

    #[test]
    fn symlink_loops_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::os::unix::fs::symlink(dir.path().join("b"), &a).unwrap();
        std::os::unix::fs::symlink(&a, dir.path().join("b")).unwrap();
        let err = resolve_absolute(&a.join("x")).unwrap_err();
        assert!(
            err.starts_with("too many levels of symbolic links"),
            "{err}"
        );
    }
}
