//! The user's memory files that consolidation writes: `memory/HISTORY.md`, a timeline only
//! ever appended to, and `memory/MEMORY.md`, rewritten whole, atomically, with the version it
//! replaces kept in a backup folder so that a bad rewrite loses nothing.

use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct MemoryFileError {
    action: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

/// `memory/MEMORY.md`, `None` when there is none yet. Any other failure is an error: read as
/// empty, a rewrite built on it would drop the user's memory.
pub fn read_memory(workspace: &Path) -> Result<Option<String>, MemoryFileError> {
    let path = workspace.join("memory/MEMORY.md");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MemoryFileError {
            action: "read",
            path,
            source,
        }),
    }
}

/// Appends `[YYYY-MM-DD HH:MM] entry` and a blank line to `memory/HISTORY.md`, synced to disk.
pub fn append_history(
    workspace: &Path,
    entry: &str,
    at: &jiff::Zoned,
) -> Result<(), MemoryFileError> {
    let path = workspace.join("memory/HISTORY.md");
    let io = |action, source| MemoryFileError {
        action,
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io("create", e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| io("open", e))?;
    let line = format!(
        "[{}] {}\n\n",
        at.strftime("%Y-%m-%d %H:%M"),
        entry.trim().replace("\n\n", "\n")
    );
    file.write_all(line.as_bytes())
        .map_err(|e| io("write", e))?;
    file.sync_data().map_err(|e| io("sync", e))
}

/// Replaces `memory/MEMORY.md` with `text` (a temp file renamed into place). The old version,
/// when there was one and it differs, is first copied to `backups/MEMORY.<time>.md`.
/// Returns whether the file changed.
pub fn rewrite_memory(
    workspace: &Path,
    text: &str,
    backups: &Path,
    at: &jiff::Zoned,
) -> Result<bool, MemoryFileError> {
    let path = workspace.join("memory/MEMORY.md");
    let io = |action, path: &Path, source| MemoryFileError {
        action,
        path: path.to_path_buf(),
        source,
    };
    let text = format!("{}\n", text.trim_end());
    let old = read_memory(workspace)?;
    if old.as_deref() == Some(text.as_str()) {
        return Ok(false);
    }
    if let Some(old) = &old {
        std::fs::create_dir_all(backups).map_err(|e| io("create", backups, e))?;
        let backup = backups.join(format!("MEMORY.{}.md", at.strftime("%Y%m%dT%H%M%S%.f")));
        std::fs::write(&backup, old).map_err(|e| io("write", &backup, e))?;
    }
    let dir = path.parent().unwrap_or(workspace);
    std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io("create", dir, e))?;
    temp.write_all(text.as_bytes())
        .map_err(|e| io("write", &path, e))?;
    temp.as_file()
        .sync_data()
        .map_err(|e| io("sync", &path, e))?;
    temp.persist(&path)
        .map_err(|e| io("rename", &path, e.error))?;
    Ok(true)
}
