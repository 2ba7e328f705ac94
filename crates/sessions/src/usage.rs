//! Token usage as the transcripts recorded it, for `nanocrab usage`: every model call of every
//! transcript, live and archived, grouped into turns.

use std::path::{Path, PathBuf};

use nanocrab_schema::{ContentBlock, Role, RunSource, SessionKey, Usage};

use crate::session_store::{SessionError, parse_transcript};

/// One transcript file's model calls.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptUsage {
    pub key: SessionKey,
    pub path: PathBuf,
    /// Reset with `/new` or `nanocrab sessions reset`: the file is in `sessions/archive/`.
    pub archived: bool,
    pub turns: Vec<TurnUsage>,
}

/// A question and everything the agent did to answer it: a turn starts at a user message
/// that is not only tool results and ends before the next one.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnUsage {
    /// When the question was written; `None` for calls recorded before the first readable
    /// question (its line was torn or edited away).
    pub started_at: Option<String>,
    /// Who started the turn, as its question records it.
    pub source: RunSource,
    /// Empty when no call was recorded (the provider failed before answering).
    pub calls: Vec<ModelCall>,
}

/// One model call: an assistant message that records its usage.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    pub timestamp: String,
    /// The `provider/model` label, or in older transcripts the name the provider reported;
    /// `None` if the record does not say.
    pub model: Option<String>,
    pub usage: Usage,
}

/// The usage of every transcript in `sessions_dir` and `sessions_dir/archive`, or only of
/// `only`'s. Ordered by session key; a key's archived transcripts come first, oldest first,
/// then its live one. Unreadable lines are skipped as [`crate::SessionStore::load`] does.
pub fn read_usage(
    sessions_dir: &Path,
    only: Option<&SessionKey>,
) -> Result<Vec<TranscriptUsage>, SessionError> {
    let mut out = Vec::new();
    for archived in [false, true] {
        let dir = if archived {
            sessions_dir.join("archive")
        } else {
            sessions_dir.to_path_buf()
        };
        let read_dir = match std::fs::read_dir(&dir) {
            Ok(read_dir) => read_dir,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(SessionError::Io {
                    action: "list",
                    path: dir,
                    source,
                });
            }
        };
        for file in read_dir.flatten() {
            let path = file.path();
            let name = file.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            // Archived as `<key>.<stamp>.jsonl`, and a key may itself contain dots.
            let key = if archived {
                stem.match_indices('.')
                    .rev()
                    .map(|(at, _)| at)
                    .find(|at| is_archive_stamp(&stem[at + 1..]))
                    .map_or(stem, |at| &stem[..at])
            } else {
                stem
            };
            let Ok(key) = SessionKey::parse(key) else {
                continue;
            };
            if only.is_some_and(|only| *only != key) || !path.is_file() {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|source| SessionError::Io {
                action: "read",
                path: path.clone(),
                source,
            })?;
            let entries = parse_transcript(&path, &bytes).entries;
            let mut turns: Vec<TurnUsage> = Vec::new();
            for entry in entries {
                match entry.role {
                    Role::User => {
                        let question = entry
                            .content
                            .iter()
                            .any(|block| !matches!(block, ContentBlock::ToolResult(_)));
                        if question {
                            turns.push(TurnUsage {
                                started_at: Some(entry.timestamp),
                                source: entry.source.unwrap_or_default(),
                                calls: Vec::new(),
                            });
                        }
                    }
                    Role::Assistant => {
                        // Notes the agent writes itself record no usage: no model was called.
                        let Some(usage) = entry.usage else {
                            continue;
                        };
                        let call = ModelCall {
                            timestamp: entry.timestamp,
                            model: entry.model,
                            usage,
                        };
                        match turns.last_mut() {
                            Some(turn) => turn.calls.push(call),
                            None => turns.push(TurnUsage {
                                started_at: None,
                                source: RunSource::Chat,
                                calls: vec![call],
                            }),
                        }
                    }
                }
            }
            out.push(TranscriptUsage {
                key,
                path,
                archived,
                turns,
            });
        }
    }
    out.sort_by(|a, b| (&a.key, !a.archived, &a.path).cmp(&(&b.key, !b.archived, &b.path)));
    Ok(out)
}

/// `20250102T030405Z` or `20250102T030405.123Z`, as [`crate::SessionStore::reset`] names
/// archives.
fn is_archive_stamp(text: &str) -> bool {
    let Some(text) = text.strip_suffix('Z') else {
        return false;
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, "0"));
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    match whole.as_bytes().split_at_checked(8) {
        Some((date, [b'T', time @ ..])) => {
            time.len() == 6 && digits(date) && digits(time) && digits(fraction.as_bytes())
        }
        Some(_) | None => false,
    }
}
