//! The workspace on disk: the templates `nanocrab onboard` writes.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Workspace files written by `onboard`, relative to the workspace, with their default text.
pub const TEMPLATES: &[(&str, &str)] = &[
    ("AGENTS.md", include_str!("../templates/AGENTS.md")),
    ("SOUL.md", include_str!("../templates/SOUL.md")),
    ("USER.md", include_str!("../templates/USER.md")),
    ("TOOLS.md", include_str!("../templates/TOOLS.md")),
    ("IDENTITY.md", include_str!("../templates/IDENTITY.md")),
    ("HEARTBEAT.md", include_str!("../templates/HEARTBEAT.md")),
    (
        "memory/MEMORY.md",
        include_str!("../templates/memory/MEMORY.md"),
    ),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateOutcome {
    Created(PathBuf),
    /// The file existed and was left as it was.
    Kept(PathBuf),
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct WorkspaceError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// Writes every template that is not there yet, and the `memory/` and `skills/` dirs. A file
/// appears whole or not at all (temp file, then a hard link that never replaces an existing
/// file), so a user's edits are never overwritten, even by a concurrent run. An empty file is
/// filled: it holds no edit, and `exec` leaves empty ones where instruction files are missing
/// (so that commands find them read-only).
pub fn write_templates(workspace: &Path) -> Result<Vec<TemplateOutcome>, WorkspaceError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WorkspaceError { path, source }
    };
    for dir in ["memory", "skills"] {
        let dir = workspace.join(dir);
        std::fs::create_dir_all(&dir).map_err(err(&dir))?;
    }
    let mut outcomes = Vec::with_capacity(TEMPLATES.len());
    for (name, text) in TEMPLATES {
        let path = workspace.join(name);
        let empty = match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() == 0 => true,
            Ok(_) => {
                outcomes.push(TemplateOutcome::Kept(path));
                continue;
            }
            Err(_) => false,
        };
        let dir = path.parent().unwrap_or(workspace);
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(err(&path))?;
        temp.write_all(text.as_bytes()).map_err(err(&path))?;
        temp.as_file().sync_all().map_err(err(&path))?;
        if empty {
            temp.persist(&path).map_err(|e| err(&path)(e.error))?;
            outcomes.push(TemplateOutcome::Created(path));
            continue;
        }
        match std::fs::hard_link(temp.path(), &path) {
            Ok(()) => outcomes.push(TemplateOutcome::Created(path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                outcomes.push(TemplateOutcome::Kept(path));
            }
            Err(e) => return Err(err(&path)(e)),
        }
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn an_empty_file_is_filled_with_its_template() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("SOUL.md"), "").unwrap();
        let outcomes = write_templates(dir.path()).unwrap();
        assert!(outcomes.contains(&TemplateOutcome::Created(dir.path().join("SOUL.md"))));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("SOUL.md")).unwrap(),
            include_str!("../templates/SOUL.md")
        );
    }

    #[test]
    fn templates_are_written_once_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("SOUL.md"), "mine").unwrap();
        let outcomes = write_templates(dir.path()).unwrap();
        assert_eq!(
            outcomes[1],
            TemplateOutcome::Kept(dir.path().join("SOUL.md"))
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("SOUL.md")).unwrap(),
            "mine"
        );
        assert!(matches!(outcomes[0], TemplateOutcome::Created(_)));
        let again = write_templates(dir.path()).unwrap();
        assert!(again.iter().all(|o| matches!(o, TemplateOutcome::Kept(_))));
        assert!(dir.path().join("skills").is_dir());
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, 8, "six files, memory/ and skills/, no temp files");
    }

    #[test]
    fn the_files_injected_into_every_prompt_stay_small() {
        let injected: usize = TEMPLATES
            .iter()
            .filter(|(name, _)| *name != "HEARTBEAT.md")
            .map(|(_, text)| text.len())
            .sum();
        assert!(injected <= 3_800, "{injected} characters");
    }
}
