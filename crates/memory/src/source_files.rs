//! The files the index reads: which folders, which endings, and each file's size and time,
//! which a sync compares with what the index last read.
//!
//! A one-shot search looks at every file (`nanocrab memory search` has no watch to tell it
//! what changed), and at 20,000 notes that look is most of the search's time: it is split in
//! two, a listing of the folders and then the `stat` of each file, shared between threads.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// The source name of session transcripts, indexed when asked for.
pub(crate) const SESSIONS: &str = "sessions";

/// Folders of the workspace that are indexed, and the file endings read in each.
pub(crate) const SOURCES: [(&str, &[&str]); 2] = [
    ("memory", &["md"]),
    (
        "knowledge",
        &["md", "markdown", "txt", "html", "htm", "pdf"],
    ),
];

/// Files a thread is given to `stat` at the least: below that, a thread costs more than the
/// calls it would take over.
const STAT_SHARE_MIN: usize = 1024;
/// Threads that `stat` at most: past a few, they wait on each other in the kernel.
const STAT_THREADS_MAX: usize = 4;

pub(crate) struct SourceFile {
    /// The index's name for it: `<source>/<path under the folder>`, with `/`.
    pub(crate) relative: String,
    pub(crate) source: &'static str,
    pub(crate) mtime: i64,
    pub(crate) size: i64,
}

/// A folder that could not be listed.
#[derive(Debug)]
pub(crate) struct ListError {
    pub(crate) folder: PathBuf,
    pub(crate) source: std::io::Error,
}

/// Where the files are: the workspace's source folders, and the transcripts when indexed.
#[derive(Clone, Copy)]
pub(crate) struct SourceFolders<'a> {
    pub(crate) workspace: &'a Path,
    pub(crate) sessions: Option<&'a Path>,
}

/// A file found by the listing, not yet looked at: in `folders[folder]`, named `relative` in
/// the index, whose last `name` bytes are its name in the folder.
struct Listed {
    folder: usize,
    relative: String,
    name: usize,
    source: &'static str,
}

impl SourceFolders<'_> {
    /// Every file the index reads, in no particular order. Links are not followed: the index
    /// reads what the workspace holds, nothing it points to elsewhere. A file that goes away
    /// between the listing and its `stat` is left out, as if it had gone a moment earlier.
    pub(crate) fn every_file(self) -> Result<Vec<SourceFile>, ListError> {
        let (mut folders, mut listed) = (Vec::new(), Vec::new());
        for (source, endings) in SOURCES {
            let root = self.workspace.join(source);
            list(root, source, endings, &mut folders, &mut listed)?;
        }
        if let Some(dir) = self.sessions {
            list(
                dir.to_path_buf(),
                SESSIONS,
                &["jsonl"],
                &mut folders,
                &mut listed,
            )?;
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(STAT_THREADS_MAX)
            .min(listed.len() / STAT_SHARE_MIN)
            .max(1);
        let share = listed.len().div_ceil(threads).max(1);
        let folders = &folders;
        let stats: Vec<Option<(i64, i64)>> = std::thread::scope(|scope| {
            let mut shares = listed.chunks(share);
            let first = shares.next().unwrap_or_default();
            let others: Vec<_> = shares
                .map(|files| scope.spawn(move || stat_each(folders, files)))
                .collect();
            let mut stats = stat_each(folders, first);
            for other in others {
                match other.join() {
                    Ok(more) => stats.extend(more),
                    // A panic is a bug: carried on, not turned into files that look deleted.
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            stats
        });
        Ok(listed
            .into_iter()
            .zip(stats)
            .filter_map(|(file, stat)| {
                let (mtime, size) = stat?;
                Some(SourceFile {
                    relative: file.relative,
                    source: file.source,
                    mtime,
                    size,
                })
            })
            .collect())
    }

    /// The files `paths` name (as the index names them) that exist and the index reads.
    pub(crate) fn named_files(self, paths: &[String]) -> Vec<SourceFile> {
        let mut out = Vec::new();
        for relative in paths {
            let Some((source, absolute, endings)) = self.resolve(relative) else {
                continue;
            };
            // Gone (or never one the index reads): left out, so the sync removes it.
            let Ok(meta) = std::fs::symlink_metadata(&absolute) else {
                continue;
            };
            if !readable(&absolute, endings) || !meta.is_file() {
                continue;
            }
            out.push(SourceFile {
                relative: relative.clone(),
                source,
                mtime: nanos(meta.mtime(), meta.mtime_nsec()),
                size: meta.len() as i64,
            });
        }
        out
    }

    /// Where the file the index names `relative` is.
    pub(crate) fn path(self, relative: &str) -> Option<PathBuf> {
        self.resolve(relative).map(|(_, path, _)| path)
    }

    /// The source, path and endings of the file the index names `relative`.
    fn resolve(self, relative: &str) -> Option<(&'static str, PathBuf, &'static [&'static str])> {
        let (top, rest) = relative.split_once('/')?;
        match SOURCES.iter().find(|(source, _)| *source == top) {
            Some((source, endings)) => {
                Some((source, self.workspace.join(source).join(rest), endings))
            }
            None if top == SESSIONS => self
                .sessions
                .map(|dir| (SESSIONS, dir.join(rest), &["jsonl"][..])),
            None => None,
        }
    }
}

/// Adds every folder under `root` (and `root`) to `folders` and every file in them with one of
/// `endings` to `listed`, named `<source>/<path under root>`.
fn list(
    root: PathBuf,
    source: &'static str,
    endings: &[&str],
    folders: &mut Vec<PathBuf>,
    listed: &mut Vec<Listed>,
) -> Result<(), ListError> {
    // Each folder with its name in the index.
    let mut stack = vec![(root, source.to_owned())];
    while let Some((dir, named)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(ListError {
                    folder: dir,
                    source,
                });
            }
        };
        let folder = folders.len();
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            // A name that is not UTF-8 cannot be a path in the index, nor can what is under it.
            let Some(name) = name.to_str() else { continue };
            if kind.is_dir() {
                stack.push((entry.path(), format!("{named}/{name}")));
            } else if kind.is_file() && readable(Path::new(name), endings) {
                listed.push(Listed {
                    folder,
                    relative: format!("{named}/{name}"),
                    name: name.len(),
                    source,
                });
            }
        }
        folders.push(dir);
    }
    Ok(())
}

fn readable(path: &Path, endings: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| endings.iter().any(|ending| e.eq_ignore_ascii_case(ending)))
}

/// The time and size of each file, `None` for one that is gone or no longer a file. Each is
/// looked at by its name in its folder, opened once for its files: about a third less of the
/// kernel's time than by the whole path.
fn stat_each(folders: &[PathBuf], files: &[Listed]) -> Vec<Option<(i64, i64)>> {
    let mut open: Option<(usize, Option<OwnedFd>)> = None;
    files
        .iter()
        .map(|file| {
            let fd = match &open {
                Some((folder, fd)) if *folder == file.folder => fd,
                Some(_) | None => {
                    let fd = rustix::fs::open(
                        &folders[file.folder],
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .ok();
                    &open.insert((file.folder, fd)).1
                }
            };
            let name = &file.relative[file.relative.len() - file.name..];
            let stat = rustix::fs::statat(fd.as_ref()?, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
            FileType::from_raw_mode(stat.st_mode).is_file().then(|| {
                (
                    nanos(stat.st_mtime, stat.st_mtime_nsec as i64),
                    stat.st_size,
                )
            })
        })
        .collect()
}

/// A modification time in nanoseconds since the epoch; 0 before it.
fn nanos(seconds: i64, nanoseconds: i64) -> i64 {
    seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(nanoseconds)
        .max(0)
}
