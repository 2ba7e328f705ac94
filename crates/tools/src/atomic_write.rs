//! Replacing a file's content so a reader sees the old or the new file, never half of one.

use std::io::Write as _;
use std::path::Path;

use crate::tool::ToolError;

/// Writes through a temporary file in the same directory, then renames it over `path`
/// (`path` is already resolved by the guard, so it is not a symlink). An existing file keeps
/// its permissions.
pub(crate) fn write_atomically(path: &Path, content: &[u8]) -> Result<(), ToolError> {
    let io = |action: &'static str| {
        move |source| ToolError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    if path.is_dir() {
        return Err(ToolError::Rejected(format!(
            "{} is a directory, not a file",
            path.display()
        )));
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(io("create the parent directories of"))?;
    let permissions = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut temp = tempfile::Builder::new()
        .prefix(".nanocrab-write-")
        .tempfile_in(dir)
        .map_err(io("create a temporary file next to"))?;
    temp.write_all(content).map_err(io("write"))?;
    temp.as_file().sync_all().map_err(io("write"))?;
    let permissions = match permissions {
        Some(existing) => existing,
        None => {
            use std::os::unix::fs::PermissionsExt as _;
            // Owner-only, like everything else nanocrab writes (security.md): the workspace
            // holds the user's notes and memory.
            std::fs::Permissions::from_mode(0o600)
        }
    };
    std::fs::set_permissions(temp.path(), permissions).map_err(io("set permissions of"))?;
    temp.persist(path).map_err(|err| ToolError::Io {
        action: "replace",
        path: path.to_path_buf(),
        source: err.error,
    })?;
    Ok(())
}
