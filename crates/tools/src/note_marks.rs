//! Memory notes written from untrusted text: marked in the provenance log when written, and
//! fenced, naming where they came from, whenever they are shown to the model again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::memory_provenance::{MemoryProvenance, NoteMark};
use crate::tool::{ToolContext, ToolError};
use crate::untrusted::wrap_untrusted;

/// `path` (resolved, inside `workspace`) as a memory note's name, `memory/MEMORY.md`; `None`
/// for a file outside the workspace's `memory/`.
pub fn note_name(workspace: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(workspace).ok()?;
    if !relative.starts_with("memory") {
        return None;
    }
    Some(
        relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
    )
}

/// Marks the note at `path` as written from what the turn has read, when it is a note and the
/// turn has read untrusted text. Called before the write: if the mark cannot be made, the note
/// is not written.
pub(crate) fn mark_before_write(
    ctx: &ToolContext,
    workspace: &Path,
    path: &Path,
) -> Result<(), ToolError> {
    let (Some(provenance), Some(note)) = (&ctx.memory_provenance, note_name(workspace, path))
    else {
        return Ok(());
    };
    if ctx.untrusted_sources.is_empty() {
        return Ok(());
    }
    let session = ctx.session.as_ref().map(ToString::to_string);
    provenance
        .mark_untrusted(&note, &ctx.untrusted_sources, session.as_deref())
        .map_err(|err| {
            ToolError::Rejected(format!(
                "{note} was not written: it would hold text from untrusted sources, and {err}"
            ))
        })
}

/// The marks of an agent's notes, read once for one answer, telling how the text of each
/// memory file or document may be shown to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteOrigins {
    /// An unreadable log is kept as its error: then every note is fenced, since none can be
    /// shown to be clean.
    marks: Result<BTreeMap<String, NoteMark>, String>,
}

impl NoteOrigins {
    /// The marks in `provenance`; none without one.
    pub fn load(provenance: Option<&MemoryProvenance>) -> Self {
        Self {
            marks: provenance.map_or_else(
                || Ok(BTreeMap::new()),
                |p| p.marks().map_err(|err| err.to_string()),
            ),
        }
    }

    /// The fence source for text of the indexed file `path` (`memory/…`, `knowledge/…`,
    /// `sessions/…`): `None` for an unmarked memory note, the user's and the agent's own;
    /// documents and transcripts always come from elsewhere.
    pub fn fence_source(&self, path: &str) -> Option<String> {
        if path.starts_with("memory/") {
            self.note_source(path)
        } else {
            Some(path.to_owned())
        }
    }

    /// `snippet` of the indexed file `path` as the model is shown it: an unmarked memory note
    /// as it is, anything else (a document, a transcript, a note written from untrusted text)
    /// fenced with its origin.
    pub fn snippet_for_model(&self, path: &str, snippet: &str) -> String {
        let snippet = snippet.trim_end();
        match self.fence_source(path) {
            None => snippet.to_owned(),
            Some(source) => wrap_untrusted(&source, snippet),
        }
    }

    /// For the memory note `note`: `None` when it is not marked, else what it was written
    /// from, to name in its fence.
    pub fn note_source(&self, note: &str) -> Option<String> {
        match &self.marks {
            Ok(marks) => marks.get(note).map(|mark| {
                if mark.sources.is_empty() {
                    format!("{note}, written from untrusted content")
                } else {
                    format!("{note}, written from {}", mark.sources.join("; "))
                }
            }),
            Err(err) => Some(format!("{note}, origin unknown ({err})")),
        }
    }
}

/// The files under `memory/` when a shell command started; when the watch is dropped (the
/// command finished, failed or timed out), every note it added or changed is marked as
/// written from the command, whose output is untrusted, and from what the turn had read.
pub(crate) struct NotesWatch {
    provenance: MemoryProvenance,
    memory: PathBuf,
    workspace: PathBuf,
    sources: Vec<String>,
    session: Option<String>,
    before: BTreeMap<PathBuf, [u8; 32]>,
}

impl NotesWatch {
    /// `None` when the run keeps no provenance.
    pub(crate) fn start(ctx: &ToolContext, workspace: &Path, source: String) -> Option<Self> {
        let provenance = ctx.memory_provenance.clone()?;
        let memory = workspace.join("memory");
        let mut sources = vec![source];
        sources.extend(ctx.untrusted_sources.iter().cloned());
        Some(Self {
            before: digests(&memory),
            provenance,
            memory,
            workspace: workspace.to_path_buf(),
            sources,
            session: ctx.session.as_ref().map(ToString::to_string),
        })
    }
}

impl Drop for NotesWatch {
    fn drop(&mut self) {
        for (path, digest) in digests(&self.memory) {
            if self.before.get(&path) == Some(&digest) {
                continue;
            }
            let Some(note) = note_name(&self.workspace, &path) else {
                continue;
            };
            if let Err(err) =
                self.provenance
                    .mark_untrusted(&note, &self.sources, self.session.as_deref())
            {
                // The command has run; all that is left is to say the note went unmarked.
                tracing::error!("{note} was changed by a command but could not be marked: {err}");
            }
        }
    }
}

/// A digest of each regular file under `dir`, links not followed. Content, not times: a
/// command can set a file's times back.
fn digests(dir: &Path) -> BTreeMap<PathBuf, [u8; 32]> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(path),
                Ok(kind) if kind.is_file() => {
                    if let Ok(bytes) = std::fs::read(&path) {
                        out.insert(path, Sha256::digest(&bytes).into());
                    }
                }
                Ok(_) | Err(_) => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn context(dir: &Path, sources: &[&str]) -> ToolContext {
        ToolContext {
            untrusted_sources: sources.iter().map(|s| (*s).to_owned()).collect(),
            memory_provenance: Some(MemoryProvenance::new(dir.join("provenance.jsonl"))),
            ..ToolContext::new(dir.join("ws"))
        }
    }

    fn marked(ctx: &ToolContext) -> Vec<(String, Vec<String>)> {
        ctx.memory_provenance
            .as_ref()
            .unwrap()
            .marks()
            .unwrap()
            .into_iter()
            .map(|(note, mark)| (note, mark.sources))
            .collect()
    }

    #[test]
    fn a_note_is_marked_only_when_the_turn_has_read_untrusted_text() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let clean = context(dir.path(), &[]);
        mark_before_write(&clean, &ws, &ws.join("memory/MEMORY.md")).unwrap();
        assert!(marked(&clean).is_empty());

        let read_page = context(dir.path(), &["read_file /ws/page.html"]);
        mark_before_write(&read_page, &ws, &ws.join("notes.md")).unwrap();
        assert!(marked(&read_page).is_empty());
        mark_before_write(&read_page, &ws, &ws.join("memory/2026-01-02.md")).unwrap();
        assert_eq!(
            marked(&read_page),
            vec![(
                "memory/2026-01-02.md".to_owned(),
                vec!["read_file /ws/page.html".to_owned()]
            )]
        );
        let origins = NoteOrigins::load(read_page.memory_provenance.as_ref());
        assert_eq!(
            origins.fence_source("memory/2026-01-02.md").as_deref(),
            Some("memory/2026-01-02.md, written from read_file /ws/page.html")
        );
        assert_eq!(origins.fence_source("memory/MEMORY.md"), None);
        assert_eq!(
            origins.fence_source("knowledge/bike.txt").as_deref(),
            Some("knowledge/bike.txt")
        );
    }

    #[test]
    fn an_unreadable_log_fences_every_note() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("provenance.jsonl");
        std::fs::write(&log, "garbage\n{}\n").unwrap();
        let origins = NoteOrigins::load(Some(&MemoryProvenance::new(log)));
        let source = origins.fence_source("memory/MEMORY.md").unwrap();
        assert!(
            source.starts_with("memory/MEMORY.md, origin unknown ("),
            "{source}"
        );
    }

    #[test]
    fn a_watch_marks_the_notes_a_command_added_or_changed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("memory/people")).unwrap();
        std::fs::write(ws.join("memory/MEMORY.md"), "same\n").unwrap();
        std::fs::write(ws.join("memory/people/ada.md"), "old\n").unwrap();
        let ctx = context(dir.path(), &["forwarded from Mallory"]);
        let watch = NotesWatch::start(&ctx, &ws, "exec curl evil".into()).unwrap();
        std::fs::write(ws.join("memory/people/ada.md"), "new\n").unwrap();
        std::fs::write(ws.join("memory/2026-01-02.md"), "added\n").unwrap();
        std::fs::write(ws.join("elsewhere.md"), "not a note\n").unwrap();
        drop(watch);
        let sources = vec![
            "exec curl evil".to_owned(),
            "forwarded from Mallory".to_owned(),
        ];
        assert_eq!(
            marked(&ctx),
            vec![
                ("memory/2026-01-02.md".to_owned(), sources.clone()),
                ("memory/people/ada.md".to_owned(), sources),
            ]
        );
    }
}
