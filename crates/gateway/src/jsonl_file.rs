//! An append-only file of JSON lines, as the journal and the outbox keep it: a write that
//! failed part-way is followed by a fresh line (a reader skips the torn one), and the file is
//! rewritten whole through a temporary file renamed into place.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;

#[derive(Debug)]
pub(crate) struct JsonlFile {
    file: File,
    /// A write failed part-way; the next one starts on a fresh line.
    torn: bool,
}

/// What failed, for the caller's error: the action (`rewrite`, `replace`, `open`) and why.
pub(crate) type Failed = (&'static str, std::io::Error);

impl JsonlFile {
    /// Replaces the file at `path` with `lines` (whole lines), synced, and opens it for
    /// appending.
    pub(crate) fn replace(path: &Path, lines: &[u8]) -> Result<Self, Failed> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| ("create the directory of", e))?;
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| ("rewrite", e))?;
        temp.write_all(lines).map_err(|e| ("rewrite", e))?;
        temp.as_file().sync_data().map_err(|e| ("sync", e))?;
        temp.persist(path).map_err(|e| ("replace", e.error))?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| ("open", e))?;
        Ok(Self { file, torn: false })
    }

    /// Appends whole `lines`; synced to disk before returning when `sync`.
    pub(crate) fn append(&mut self, lines: &[u8], sync: bool) -> std::io::Result<()> {
        let written = if self.torn {
            self.file.write_all(b"\n")
        } else {
            Ok(())
        }
        .and_then(|()| self.file.write_all(lines))
        .and_then(|()| if sync { self.file.sync_data() } else { Ok(()) });
        self.torn = written.is_err();
        written
    }

    pub(crate) fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }
}
