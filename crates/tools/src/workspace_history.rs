//! What the tools replaced in the instruction files (the bootstrap files and skills the system
//! prompt is built from), kept so a user can see and undo a change the model made.
//!
//! Change `N` of a file is kept as `<root>/<agent>/<path>/<N>.json`, saying what made it and
//! when, and `<N>.content`, the file as it was before the change (empty when there was no
//! file; the JSON says which). Both are written to a temporary file and then moved into place,
//! and `<N>.content` never replaces an existing one, so two writers cannot take the same `N`.

use std::path::{Component, Path, PathBuf};

use nanocrab_policy::PathGuard;
use nanocrab_schema::InstructionsChange;
use serde::{Deserialize, Serialize};

use crate::atomic_write::write_atomically;
use crate::tool::{ToolContext, ToolError};

/// Size and SHA-256 of a file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentDigest {
    pub size: u64,
    pub sha256: String,
}

impl ContentDigest {
    pub fn of(content: &[u8]) -> Self {
        use sha2::Digest as _;
        Self {
            size: content.len() as u64,
            sha256: sha2::Sha256::digest(content)
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect(),
        }
    }
}

/// One recorded change of an instruction file: `<N>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub version: u32,
    /// When the change was made, RFC 3339 in UTC.
    pub time: String,
    /// Relative to the agent's workspace, `/`-separated.
    pub path: String,
    pub agent: String,
    /// `write_file`, `edit_file`, or `restore` for `nanocrab workspace restore`.
    pub tool: String,
    pub session: Option<String>,
    /// The file before the change, kept in `<N>.content`; `None`: there was no file.
    pub before: Option<ContentDigest>,
    /// The file the change left; `None`: it removed the file (a restore to before it existed).
    pub after: Option<ContentDigest>,
}

/// What is making a change, for its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change<'a> {
    pub agent: &'a str,
    pub path: &'a str,
    pub tool: &'a str,
    pub session: Option<&'a str>,
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is damaged: {source}", path.display())]
    Damaged {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "`{0}` is not a path inside the workspace: give it relative to the workspace, as \
         SOUL.md or skills/weather/SKILL.md"
    )]
    BadPath(String),
    #[error("no change of {path} is recorded; {known}")]
    UnknownPath { path: String, known: String },
    #[error("{path} has no version {version}; its versions are {versions}")]
    UnknownVersion {
        path: String,
        version: u32,
        versions: String,
    },
    #[error("cannot restore {path}: {source}")]
    Restore { path: String, source: ToolError },
}

/// The kept versions of every agent's instruction files, under
/// `$NANOCRAB_HOME/state/workspace-history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceHistory {
    root: PathBuf,
}

impl WorkspaceHistory {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Where the versions of `path` (relative, checked) of `agent` are kept.
    fn dir(&self, agent: &str, path: &str) -> Result<PathBuf, HistoryError> {
        let relative = Path::new(path);
        let plain = relative
            .components()
            .all(|component| matches!(component, Component::Normal(_)));
        if path.is_empty() || !plain {
            return Err(HistoryError::BadPath(path.to_owned()));
        }
        Ok(self.root.join(agent).join(relative))
    }

    /// Keeps `before` (`None`: there was no file) as the next version of `change.path`, with
    /// what the change leaves (`after`); returns the record.
    pub fn record(
        &self,
        change: Change<'_>,
        before: Option<&[u8]>,
        after: Option<&[u8]>,
    ) -> Result<Version, HistoryError> {
        let dir = self.dir(change.agent, change.path)?;
        let io = |action: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| HistoryError::Io {
                action,
                path,
                source,
            }
        };
        std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        let content = {
            use std::io::Write as _;
            let mut temp = tempfile::Builder::new()
                .prefix(".nanocrab-history-")
                .tempfile_in(&dir)
                .map_err(io("create a temporary file in", &dir))?;
            temp.write_all(before.unwrap_or_default())
                .and_then(|()| temp.as_file().sync_all())
                .map_err(io("write", temp.path()))?;
            temp
        };
        let mut version = self.last_number(&dir)? + 1;
        let mut content = content;
        loop {
            let target = dir.join(format!("{version}.content"));
            match content.persist_noclobber(&target) {
                Ok(_) => break,
                Err(err) if err.error.kind() == std::io::ErrorKind::AlreadyExists => {
                    content = err.file;
                    version += 1;
                }
                Err(err) => return Err(io("write", &target)(err.error)),
            }
        }
        let record = Version {
            version,
            time: jiff::Timestamp::now().to_string(),
            path: change.path.to_owned(),
            agent: change.agent.to_owned(),
            tool: change.tool.to_owned(),
            session: change.session.map(str::to_owned),
            before: before.map(ContentDigest::of),
            after: after.map(ContentDigest::of),
        };
        let target = dir.join(format!("{version}.json"));
        let mut json =
            serde_json::to_vec_pretty(&record).map_err(|source| HistoryError::Damaged {
                path: target.clone(),
                source,
            })?;
        json.push(b'\n');
        {
            use std::io::Write as _;
            let mut temp = tempfile::Builder::new()
                .prefix(".nanocrab-history-")
                .tempfile_in(&dir)
                .map_err(io("create a temporary file in", &dir))?;
            temp.write_all(&json)
                .and_then(|()| temp.as_file().sync_all())
                .map_err(io("write", &target))?;
            temp.persist(&target)
                .map_err(|err| io("write", &target)(err.error))?;
        }
        Ok(record)
    }

    /// The highest `N` taken in `dir` by a `<N>.content` or `<N>.json`; 0 for none.
    fn last_number(&self, dir: &Path) -> Result<u32, HistoryError> {
        let entries = std::fs::read_dir(dir).map_err(|source| HistoryError::Io {
            action: "read",
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name();
                let name = name.to_str()?;
                name.strip_suffix(".content")
                    .or_else(|| name.strip_suffix(".json"))?
                    .parse::<u32>()
                    .ok()
            })
            .max()
            .unwrap_or(0))
    }

    /// The recorded changes of `path`, oldest first; an error when there are none.
    pub fn versions(&self, agent: &str, path: &str) -> Result<Vec<Version>, HistoryError> {
        let dir = self.dir(agent, path)?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.unknown_path(agent, path));
            }
            Err(source) => {
                return Err(HistoryError::Io {
                    action: "read",
                    path: dir,
                    source,
                });
            }
        };
        let mut versions = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let is_record = name
                .to_str()
                .and_then(|name| name.strip_suffix(".json"))
                .is_some_and(|number| number.parse::<u32>().is_ok());
            if !is_record {
                continue;
            }
            let file = entry.path();
            let text = std::fs::read(&file).map_err(|source| HistoryError::Io {
                action: "read",
                path: file.clone(),
                source,
            })?;
            let version: Version = serde_json::from_slice(&text)
                .map_err(|source| HistoryError::Damaged { path: file, source })?;
            versions.push(version);
        }
        if versions.is_empty() {
            return Err(self.unknown_path(agent, path));
        }
        versions.sort_by_key(|version| version.version);
        Ok(versions)
    }

    fn unknown_path(&self, agent: &str, path: &str) -> HistoryError {
        let known = match self.paths(agent) {
            Ok(paths) if !paths.is_empty() => {
                format!("files with recorded changes: {}", paths.join(", "))
            }
            Ok(_) | Err(_) => "no instruction file has a recorded change yet".to_owned(),
        };
        HistoryError::UnknownPath {
            path: path.to_owned(),
            known,
        }
    }

    /// Every file of `agent` with a recorded change, relative to its workspace, sorted.
    pub fn paths(&self, agent: &str) -> Result<Vec<String>, HistoryError> {
        let root = self.root.join(agent);
        let mut found = Vec::new();
        let mut pending = vec![root.clone()];
        while let Some(dir) = pending.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(HistoryError::Io {
                        action: "read",
                        path: dir,
                        source,
                    });
                }
            };
            let mut has_versions = false;
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|ext| ext == "json") {
                    has_versions = true;
                }
            }
            if has_versions && let Ok(relative) = dir.strip_prefix(&root) {
                found.push(relative.to_string_lossy().into_owned());
            }
        }
        found.sort();
        Ok(found)
    }

    /// Version `version` of `path` and the file as it was before that change (`None`: there
    /// was no file).
    pub fn content(
        &self,
        agent: &str,
        path: &str,
        version: u32,
    ) -> Result<(Version, Option<Vec<u8>>), HistoryError> {
        let versions = self.versions(agent, path)?;
        let Some(record) = versions.iter().find(|v| v.version == version).cloned() else {
            let numbers: Vec<String> = versions.iter().map(|v| v.version.to_string()).collect();
            return Err(HistoryError::UnknownVersion {
                path: path.to_owned(),
                version,
                versions: numbers.join(", "),
            });
        };
        if record.before.is_none() {
            return Ok((record, None));
        }
        let file = self.dir(agent, path)?.join(format!("{version}.content"));
        let content = std::fs::read(&file).map_err(|source| HistoryError::Io {
            action: "read",
            path: file,
            source,
        })?;
        Ok((record, Some(content)))
    }

    /// Puts `path` back as it was before change `version`: the file at `target` (the path
    /// resolved in the workspace) gets that content, or is removed when there was no file.
    /// What it held is kept first, as a new version (tool `restore`), so a restore can be
    /// undone too. Returns the version restored and the one recorded.
    pub fn restore(
        &self,
        agent: &str,
        path: &str,
        target: &Path,
        version: u32,
    ) -> Result<(Version, Version), HistoryError> {
        let (restored, content) = self.content(agent, path, version)?;
        let current = read_if_exists(target).map_err(|source| HistoryError::Restore {
            path: path.to_owned(),
            source,
        })?;
        let recorded = self.record(
            Change {
                agent,
                path,
                tool: "restore",
                session: None,
            },
            current.as_deref(),
            content.as_deref(),
        )?;
        let written = match &content {
            Some(content) => write_atomically(target, content),
            None => match std::fs::remove_file(target) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(ToolError::Io {
                    action: "remove",
                    path: target.to_path_buf(),
                    source: err,
                }),
                Ok(()) | Err(_) => Ok(()),
            },
        };
        written.map_err(|source| HistoryError::Restore {
            path: path.to_owned(),
            source,
        })?;
        Ok((restored, recorded))
    }
}

/// A file's content, `None` when there is no file.
fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, ToolError> {
    match std::fs::read(path) {
        Ok(content) => Ok(Some(content)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ToolError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `content` to `path` (resolved by `guard`) for `tool`. When `path` is an instruction
/// file, what it held is kept in `history` first and the write does not happen if that
/// fails; the change is returned for the run to report.
pub(crate) fn write_recorded(
    guard: &PathGuard,
    history: Option<&WorkspaceHistory>,
    path: &Path,
    content: &[u8],
    tool: &str,
    ctx: &ToolContext,
) -> Result<Option<InstructionsChange>, ToolError> {
    let (Some(history), Some(relative)) = (history, guard.instruction_file(path)) else {
        write_atomically(path, content)?;
        return Ok(None);
    };
    let relative = relative.to_string_lossy().into_owned();
    let before = read_if_exists(path)?;
    let session = ctx.session.as_ref().map(ToString::to_string);
    let recorded = history
        .record(
            Change {
                agent: &ctx.agent,
                path: &relative,
                tool,
                session: session.as_deref(),
            },
            before.as_deref(),
            Some(content),
        )
        .map_err(|err| {
            ToolError::Rejected(format!(
                "{relative} was not changed: a copy of what it holds is kept before every \
                 change to an instruction file, and {err}"
            ))
        })?;
    write_atomically(path, content)?;
    Ok(Some(InstructionsChange {
        agent: ctx.agent.clone(),
        path: relative,
        version: recorded.version,
        tool: tool.to_owned(),
    }))
}

/// A one-line look at text a change would write, for the human approving it.
pub(crate) fn preview(text: &str) -> String {
    const MAX_CHARS: usize = 200;
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .filter(|c| !c.is_control())
        .collect();
    match flat.char_indices().nth(MAX_CHARS) {
        Some((end, _)) => format!("\"{}…\"", &flat[..end]),
        None => format!("\"{flat}\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn change(path: &str) -> Change<'_> {
        Change {
            agent: "main",
            path,
            tool: "write_file",
            session: Some("cli:default"),
        }
    }

    #[test]
    fn versions_are_numbered_and_keep_what_was_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let history = WorkspaceHistory::new(dir.path());
        let first = history
            .record(change("SOUL.md"), None, Some("one".as_bytes()))
            .unwrap();
        let second = history
            .record(
                change("SOUL.md"),
                Some("one".as_bytes()),
                Some("two".as_bytes()),
            )
            .unwrap();
        history
            .record(change("skills/w/SKILL.md"), None, Some("x".as_bytes()))
            .unwrap();
        assert_eq!((first.version, second.version), (1, 2));
        assert_eq!(first.before, None);
        assert_eq!(second.before, Some(ContentDigest::of(b"one")));
        assert_eq!(
            history.content("main", "SOUL.md", 2).unwrap().1,
            Some(b"one".to_vec())
        );
        assert_eq!(history.content("main", "SOUL.md", 1).unwrap().1, None);
        assert_eq!(
            history.versions("main", "SOUL.md").unwrap(),
            vec![first, second]
        );
        assert_eq!(
            history.paths("main").unwrap(),
            ["SOUL.md", "skills/w/SKILL.md"]
        );
        assert_eq!(history.paths("other").unwrap(), Vec::<String>::new());
        let files: Vec<_> = std::fs::read_dir(dir.path().join("main/SOUL.md"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.starts_with('.'))
            .collect();
        assert_eq!(files, Vec::<String>::new(), "no temporary file is left");
    }

    #[test]
    fn a_number_already_taken_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let history = WorkspaceHistory::new(dir.path());
        std::fs::create_dir_all(dir.path().join("main/SOUL.md")).unwrap();
        // A crash between the content and its record leaves a `.content` alone.
        std::fs::write(dir.path().join("main/SOUL.md/1.content"), "kept").unwrap();
        let version = history
            .record(change("SOUL.md"), Some("a".as_bytes()), None)
            .unwrap();
        assert_eq!(version.version, 2);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("main/SOUL.md/1.content")).unwrap(),
            "kept"
        );
    }

    #[test]
    fn unknown_paths_and_versions_say_what_there_is() {
        let dir = tempfile::tempdir().unwrap();
        let history = WorkspaceHistory::new(dir.path());
        let nothing_yet = history.versions("main", "SOUL.md").unwrap_err().to_string();
        history
            .record(change("SOUL.md"), None, Some("a".as_bytes()))
            .unwrap();
        history
            .record(
                change("SOUL.md"),
                Some("a".as_bytes()),
                Some("b".as_bytes()),
            )
            .unwrap();
        history
            .record(change("AGENTS.md"), None, Some("a".as_bytes()))
            .unwrap();
        assert_eq!(
            [
                nothing_yet,
                history.versions("main", "USER.md").unwrap_err().to_string(),
                history
                    .content("main", "SOUL.md", 7)
                    .unwrap_err()
                    .to_string(),
                history.versions("main", "../x").unwrap_err().to_string(),
            ],
            [
                "no change of SOUL.md is recorded; no instruction file has a recorded change yet",
                "no change of USER.md is recorded; files with recorded changes: AGENTS.md, SOUL.md",
                "SOUL.md has no version 7; its versions are 1, 2",
                "`../x` is not a path inside the workspace: give it relative to the workspace, as \
                 SOUL.md or skills/weather/SKILL.md",
            ]
        );
    }

    #[test]
    fn a_restore_keeps_what_it_replaces_and_can_remove_a_file_that_did_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let history = WorkspaceHistory::new(dir.path().join("history"));
        let soul = dir.path().join("SOUL.md");
        history
            .record(change("SOUL.md"), None, Some("one".as_bytes()))
            .unwrap();
        history
            .record(
                change("SOUL.md"),
                Some("one".as_bytes()),
                Some("two".as_bytes()),
            )
            .unwrap();
        std::fs::write(&soul, "two").unwrap();
        let (restored, recorded) = history.restore("main", "SOUL.md", &soul, 2).unwrap();
        assert_eq!((restored.version, recorded.version), (2, 3));
        assert_eq!(recorded.tool, "restore");
        assert_eq!(std::fs::read_to_string(&soul).unwrap(), "one");
        assert_eq!(
            history.content("main", "SOUL.md", 3).unwrap().1,
            Some(b"two".to_vec())
        );
        history.restore("main", "SOUL.md", &soul, 1).unwrap();
        assert!(!soul.exists());
    }

    #[test]
    fn a_preview_is_one_line_and_short() {
        assert_eq!(preview("a\nb\u{7}"), "\"a⏎b\"");
        let long = "x".repeat(300);
        assert_eq!(preview(&long), format!("\"{}…\"", "x".repeat(200)));
    }
}
