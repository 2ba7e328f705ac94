//! Where the agent's memory notes came from. A note written while the conversation held text
//! from outside the user (a web page, a command's output, a forwarded message) is marked, with
//! those sources, in an append-only JSONL log beside the index; whoever shows the note to the
//! model again fences it as untrusted, naming the sources, until the user trusts it again.
//!
//! One line per event: `{"note":"memory/MEMORY.md","mark":"untrusted","sources":[...],
//! "at":"...","session":"cli:default"}`, or `"mark":"trusted"` when the user vouched for it.
//! The log is only appended to, so a crash can at worst leave its last line torn; reading skips
//! such a line, and the next append cuts it off.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Characters of one source kept in the log: enough to name a URL or a command.
const MAX_SOURCE_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    #[error("cannot {action} the memory provenance log {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line before the last is not an entry: the file was edited by hand or damaged. Marks
    /// after it cannot be trusted to be complete, so nothing is guessed.
    #[error(
        "the memory provenance log {} is damaged at line {line}: {reason}; fix or remove that line",
        path.display()
    )]
    Damaged {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// What one line of the log says about a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mark {
    /// Written while the conversation held the `sources`.
    Untrusted,
    /// The user vouched for the note as it is (`nanocrab memory trust`).
    Trusted,
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvenanceEntry {
    /// Relative to the workspace, with `/`: `memory/MEMORY.md`.
    pub note: String,
    pub mark: Mark,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// A note that is marked now: every source it was written from since it was last trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteMark {
    /// In the order first seen, each once.
    pub sources: Vec<String>,
    /// When it was last written from them.
    pub at: String,
    pub sessions: Vec<String>,
}

/// The provenance log of one agent's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryProvenance {
    file: PathBuf,
}

impl MemoryProvenance {
    /// The log at `file` (`state/memory-provenance.jsonl`); it is made when first needed.
    pub fn new(file: impl Into<PathBuf>) -> Self {
        Self { file: file.into() }
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Records that `note` is being written while the conversation holds `sources`. Called
    /// before the write: a note must never be on disk without its mark.
    pub fn mark_untrusted(
        &self,
        note: &str,
        sources: &[String],
        session: Option<&str>,
    ) -> Result<(), ProvenanceError> {
        let mut kept: Vec<String> = Vec::with_capacity(sources.len());
        for source in sources {
            let source = match source.char_indices().nth(MAX_SOURCE_CHARS) {
                Some((at, _)) => format!("{}…", &source[..at]),
                None => source.clone(),
            };
            if !kept.contains(&source) {
                kept.push(source);
            }
        }
        self.append(&[ProvenanceEntry {
            note: note.to_owned(),
            mark: Mark::Untrusted,
            sources: kept,
            at: jiff::Timestamp::now().to_string(),
            session: session.map(str::to_owned),
        }])
    }

    /// Records that the user trusts each of `notes` as it is now.
    pub fn trust(&self, notes: &[String]) -> Result<(), ProvenanceError> {
        let at = jiff::Timestamp::now().to_string();
        let entries: Vec<ProvenanceEntry> = notes
            .iter()
            .map(|note| ProvenanceEntry {
                note: note.clone(),
                mark: Mark::Trusted,
                sources: Vec::new(),
                at: at.clone(),
                session: None,
            })
            .collect();
        self.append(&entries)
    }

    /// The notes marked now, by path. No log yet means no marks.
    pub fn marks(&self) -> Result<BTreeMap<String, NoteMark>, ProvenanceError> {
        let mut marks: BTreeMap<String, NoteMark> = BTreeMap::new();
        for entry in self.entries()? {
            match entry.mark {
                Mark::Trusted => {
                    marks.remove(&entry.note);
                }
                Mark::Untrusted => {
                    let mark = marks.entry(entry.note).or_insert_with(|| NoteMark {
                        sources: Vec::new(),
                        at: String::new(),
                        sessions: Vec::new(),
                    });
                    for source in entry.sources {
                        if !mark.sources.contains(&source) {
                            mark.sources.push(source);
                        }
                    }
                    if let Some(session) = entry.session
                        && !mark.sessions.contains(&session)
                    {
                        mark.sessions.push(session);
                    }
                    mark.at = entry.at;
                }
            }
        }
        Ok(marks)
    }

    /// Every entry in the log, oldest first; a torn last line is left out.
    pub fn entries(&self) -> Result<Vec<ProvenanceEntry>, ProvenanceError> {
        let text = match std::fs::read(&self.file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(ProvenanceError::Io {
                    action: "read",
                    path: self.file.clone(),
                    source,
                });
            }
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut entries = Vec::with_capacity(lines.len());
        for (index, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<ProvenanceEntry>(line) {
                Ok(entry) => entries.push(entry),
                // A write cut short by a crash: the mark it was making never took effect,
                // and the note write it preceded never happened either.
                Err(_) if index + 1 == lines.len() && !text.ends_with('\n') => {}
                Err(err) => {
                    return Err(ProvenanceError::Damaged {
                        path: self.file.clone(),
                        line: index + 1,
                        reason: err.to_string(),
                    });
                }
            }
        }
        Ok(entries)
    }

    /// Appends `entries`, one line each, in one write.
    fn append(&self, entries: &[ProvenanceEntry]) -> Result<(), ProvenanceError> {
        if entries.is_empty() {
            return Ok(());
        }
        let io = |action| {
            move |source| ProvenanceError::Io {
                action,
                path: self.file.clone(),
                source,
            }
        };
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir).map_err(io("create the folder of"))?;
        }
        // A torn last line is cut off first: reading skips it only while it is last.
        if let Ok(bytes) = std::fs::read(&self.file)
            && bytes.last().is_some_and(|last| *last != b'\n')
        {
            let whole = bytes
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |at| at + 1);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&self.file)
                .and_then(|file| file.set_len(whole as u64))
                .map_err(io("repair"))?;
        }
        let mut text = String::new();
        for entry in entries {
            let line = serde_json::to_string(entry)
                .map_err(|err| io("write")(std::io::Error::other(err)))?;
            text.push_str(&line);
            text.push('\n');
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)
            .map_err(io("open"))?;
        file.write_all(text.as_bytes()).map_err(io("write"))?;
        file.sync_data().map_err(io("sync"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn log() -> (tempfile::TempDir, MemoryProvenance) {
        let dir = tempfile::tempdir().unwrap();
        let log = MemoryProvenance::new(dir.path().join("state/memory-provenance.jsonl"));
        (dir, log)
    }

    fn sources(marks: &BTreeMap<String, NoteMark>, note: &str) -> Vec<String> {
        marks[note].sources.clone()
    }

    #[test]
    fn no_log_means_no_marks() {
        let (_dir, log) = log();
        assert!(log.marks().unwrap().is_empty());
    }

    #[test]
    fn marks_gather_their_sources_until_the_note_is_trusted() {
        let (_dir, log) = log();
        let page = "read_file /ws/page.html".to_owned();
        let forward = "forwarded from Mallory".to_owned();
        log.mark_untrusted(
            "memory/MEMORY.md",
            std::slice::from_ref(&page),
            Some("cli:default"),
        )
        .unwrap();
        log.mark_untrusted(
            "memory/MEMORY.md",
            &[forward.clone(), page.clone()],
            Some("telegram:42"),
        )
        .unwrap();
        log.mark_untrusted("memory/2026-01-02.md", std::slice::from_ref(&page), None)
            .unwrap();
        let marks = log.marks().unwrap();
        assert_eq!(
            sources(&marks, "memory/MEMORY.md"),
            vec![page.clone(), forward]
        );
        assert_eq!(
            marks["memory/MEMORY.md"].sessions,
            vec!["cli:default".to_owned(), "telegram:42".to_owned()]
        );

        log.trust(&["memory/MEMORY.md".to_owned()]).unwrap();
        let marks = log.marks().unwrap();
        assert_eq!(
            marks.keys().collect::<Vec<_>>(),
            vec!["memory/2026-01-02.md"]
        );

        // Written from a page again after it was trusted: marked again, with only that page.
        log.mark_untrusted("memory/MEMORY.md", std::slice::from_ref(&page), None)
            .unwrap();
        assert_eq!(
            sources(&log.marks().unwrap(), "memory/MEMORY.md"),
            vec![page]
        );
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_next_entry_stays_whole() {
        let (_dir, log) = log();
        log.mark_untrusted("memory/a.md", &["exec curl x".to_owned()], None)
            .unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(log.file())
            .unwrap();
        file.write_all(br#"{"note":"memory/b.md","mark":"untr"#)
            .unwrap();
        assert_eq!(
            log.marks().unwrap().keys().collect::<Vec<_>>(),
            vec!["memory/a.md"]
        );

        log.mark_untrusted("memory/c.md", &["exec curl y".to_owned()], None)
            .unwrap();
        assert_eq!(
            log.marks().unwrap().keys().collect::<Vec<_>>(),
            vec!["memory/a.md", "memory/c.md"]
        );
    }

    #[test]
    fn a_damaged_line_before_the_last_is_an_error_naming_it() {
        let (_dir, log) = log();
        std::fs::create_dir_all(log.file().parent().unwrap()).unwrap();
        std::fs::write(
            log.file(),
            "not json\n{\"note\":\"memory/a.md\",\"mark\":\"trusted\",\"at\":\"x\"}\n",
        )
        .unwrap();
        let err = log.marks().unwrap_err().to_string();
        assert!(err.contains("damaged at line 1"), "{err}");
    }

    #[test]
    fn long_sources_are_shortened() {
        let (_dir, log) = log();
        log.mark_untrusted("memory/a.md", &["x".repeat(1_000)], None)
            .unwrap();
        let kept = &log.marks().unwrap()["memory/a.md"].sources[0];
        assert_eq!(kept.chars().count(), MAX_SOURCE_CHARS + 1);
    }
}
