//! The page's file editor: the workspace's text files listed, read and saved under the
//! agent's own path guard (the workspace only; protected paths and skill folders outside it
//! read-only), with instruction files' earlier versions kept and the memory index brought up
//! to date after a save. Also the token counts of files, and the images of transcripts.

use std::path::{Component, Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use nanocrab_config::DEFAULT_AGENT_ID;
use nanocrab_policy::INSTRUCTION_PATHS;
use nanocrab_tools::Change;
use serde::Deserialize;

use crate::web_state::{Workbench, WorkbenchAgent, json_body};
use crate::web_wire::{ApiError, ApiQuery};

/// Files larger than this are neither listed nor opened: the editor is for notes and
/// instructions, not data.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// At most this many files are listed.
const MAX_LISTED: usize = 2_000;
/// Folders of the workspace the editor lists, besides the files at its top.
const LISTED_FOLDERS: &[(&str, &str)] = &[
    ("memory", "memory"),
    ("knowledge", "knowledge"),
    ("skills", "skills"),
];
/// `POST /api/tokens/files` counts at most this many files...
const MAX_COUNTED_FILES: usize = 200;
/// ...and this many bytes of them.
const MAX_COUNTED_BYTES: usize = 4 * 1024 * 1024;
/// Extensions of the files listed.
const TEXT_EXTENSIONS: &[&str] = &["md", "txt", "json", "yaml", "yml", "toml"];

#[derive(Debug, Deserialize)]
pub(crate) struct FileQuery {
    path: Option<String>,
    agent: Option<String>,
}

/// A workspace-relative path from the page: plain names only, no `..`, no root.
fn relative(asked: &str) -> Result<PathBuf, ApiError> {
    let path = FsPath::new(asked.trim());
    let plain = !asked.trim().is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !plain {
        return Err(ApiError::forbidden(format!(
            "`{asked}` is not a path inside the workspace: give it relative to the workspace, as MEMORY.md or memory/2026-01-01.md"
        )));
    }
    Ok(path.to_path_buf())
}

fn modified(meta: &std::fs::Metadata) -> Option<String> {
    let time = meta.modified().ok()?;
    jiff::Timestamp::try_from(time).ok().map(|t| t.to_string())
}

/// Why a write to `path` would be refused; `None` when it is allowed.
fn write_refusal(agent: &WorkbenchAgent, path: &FsPath) -> Option<String> {
    let asked = path.to_string_lossy();
    match agent.guard.check_write(&asked) {
        Ok(resolved) if resolved.starts_with(agent.guard.workspace()) => None,
        Ok(resolved) => Some(format!(
            "{} is outside the workspace; the page edits the workspace only",
            resolved.display()
        )),
        Err(denial) => Some(denial.message().to_owned()),
    }
}

pub(crate) async fn get_files(
    State(workbench): State<Workbench>,
    ApiQuery(query): ApiQuery<FileQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let agent_id = query.agent.as_deref().unwrap_or(DEFAULT_AGENT_ID);
    let agent = workbench.workbench_agent(agent_id)?;
    let agent = agent.clone();
    // The file system blocks: off the threads that serve channels and turns.
    tokio::task::spawn_blocking(move || match query.path {
        Some(path) => read_one(&agent, path.as_str()).map(Json),
        None => Ok(Json(list(&agent))),
    })
    .await
    .map_err(ApiError::internal)?
}

fn read_one(agent: &WorkbenchAgent, asked: &str) -> Result<serde_json::Value, ApiError> {
    let path = relative(asked)?;
    let resolved = agent
        .guard
        .check_workspace_read(&path.to_string_lossy())
        .map_err(|denial| ApiError::forbidden(denial.message()))?;
    let meta = match std::fs::metadata(&resolved) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return Err(ApiError::bad_request(format!("`{asked}` is not a file"))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(ApiError::not_found(format!(
                "no file `{asked}` in the workspace"
            )));
        }
        Err(err) => return Err(ApiError::internal(err)),
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("`{asked}` is larger than 1 MB; open it in an editor of its own"),
        ));
    }
    let bytes = std::fs::read(&resolved).map_err(ApiError::internal)?;
    let content = String::from_utf8(bytes).map_err(|_| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("`{asked}` is not UTF-8 text"),
        )
    })?;
    let refusal = write_refusal(agent, &path);
    Ok(serde_json::json!({
        "path": path.to_string_lossy(),
        "content": content,
        "protected": refusal.is_some(),
        "reason": refusal,
        "modified": modified(&meta),
    }))
}

fn list(agent: &WorkbenchAgent) -> serde_json::Value {
    let root = agent.guard.workspace();
    let mut files = Vec::new();
    let mut add = |path: &FsPath, group: &str| {
        if files.len() >= MAX_LISTED {
            return;
        }
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let Ok(relative) = path.strip_prefix(root) else {
            return;
        };
        // A link out of the workspace is not shown (its size and age would say something
        // of what it points to).
        if agent
            .guard
            .check_workspace_read(&relative.to_string_lossy())
            .is_err()
        {
            return;
        }
        let text = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| TEXT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES || !text {
            return;
        }
        files.push(serde_json::json!({
            "path": relative.to_string_lossy().replace('\\', "/"),
            "group": group,
            "size": meta.len(),
            "modified": modified(&meta),
            "protected": write_refusal(agent, relative).is_some(),
        }));
    };
    let mut top: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|dir| dir.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    top.sort();
    for path in top.iter().filter(|p| p.is_file()) {
        // The files the system prompt is built from, apart from the rest.
        let bootstrap = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|name| INSTRUCTION_PATHS.contains(&name));
        add(path, if bootstrap { "bootstrap" } else { "workspace" });
    }
    for (folder, group) in LISTED_FOLDERS {
        let mut found = Vec::new();
        walk(&root.join(folder), &mut found, 0);
        found.sort();
        for path in &found {
            add(path, group);
        }
    }
    serde_json::json!({
        "workspace": root.display().to_string(),
        "files": files,
    })
}

/// The files under `dir`, hidden ones left out, at most a few folders deep.
fn walk(dir: &FsPath, found: &mut Vec<PathBuf>, depth: usize) {
    if depth > 4 || found.len() > MAX_LISTED {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => walk(&path, found, depth + 1),
            Ok(_) => found.push(path),
            Err(_) => {}
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Save {
    content: String,
}

pub(crate) async fn put_file(
    State(workbench): State<Workbench>,
    ApiQuery(query): ApiQuery<FileQuery>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let agent_id = query
        .agent
        .as_deref()
        .unwrap_or(DEFAULT_AGENT_ID)
        .to_owned();
    let agent = workbench.workbench_agent(&agent_id)?.clone();
    let asked = query
        .path
        .ok_or_else(|| ApiError::bad_request("name the file: ?path=memory/MEMORY.md"))?;
    let path = relative(&asked)?;
    let Save { content } = json_body(&body)?;
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the page saves files of at most 1 MB",
        ));
    }
    if let Some(refusal) = write_refusal(&agent, &path) {
        return Err(ApiError::forbidden(refusal));
    }
    let shown = path.to_string_lossy().replace('\\', "/");
    let resolved = agent
        .guard
        .check_write(&shown)
        .map_err(|denial| ApiError::forbidden(denial.message()))?;
    let before = match std::fs::read(&resolved) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(ApiError::internal(err)),
    };
    // An instruction file's earlier version is kept, as when a tool changes it.
    if let (Some(history), Some(instruction)) =
        (&agent.history, agent.guard.instruction_file(&resolved))
        && before.as_deref() != Some(content.as_bytes())
    {
        let name = instruction.to_string_lossy().replace('\\', "/");
        history
            .record(
                Change {
                    agent: &agent_id,
                    path: &name,
                    tool: "web",
                    session: None,
                },
                before.as_deref(),
                Some(content.as_bytes()),
            )
            .map_err(ApiError::internal)?;
    }
    write_atomically(&resolved, content.as_bytes()).map_err(ApiError::internal)?;
    let reindexed = match &agent.index {
        Some(index) => reindex(index.clone(), shown.clone()).await,
        None => false,
    };
    let meta = std::fs::metadata(&resolved).map_err(ApiError::internal)?;
    Ok(Json(serde_json::json!({
        "path": shown,
        "modified": modified(&meta),
        "reindexed": reindexed,
    })))
}

/// Written to a temporary file beside it and moved into place: a crash leaves the old file
/// or the new one, never half of one.
fn write_atomically(path: &FsPath, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(FsPath::new("."));
    std::fs::create_dir_all(dir)?;
    let mut temp = tempfile::Builder::new()
        .prefix(".nanocrab-web-")
        .tempfile_in(dir)?;
    // The file keeps its mode (a script its execute bit); a new one gets the usual 0644.
    let permissions = match std::fs::metadata(path) {
        Ok(meta) => meta.permissions(),
        Err(_) => std::os::unix::fs::PermissionsExt::from_mode(0o644),
    };
    temp.as_file().set_permissions(permissions)?;
    temp.write_all(content)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

/// Brings the memory index up to date with the file just saved (`path`, relative to the
/// workspace, which is how the index names its files); whether it could. Named, not left to
/// the watch, whose event may not have arrived yet. The search tools sync again before each
/// search, so a failure here only delays it.
async fn reindex(index: nanocrab_memory::IndexSetup, path: String) -> bool {
    let runtime = tokio::runtime::Handle::current();
    let synced = tokio::task::spawn_blocking(move || {
        runtime.block_on(async {
            let mut opened = index.open().await?;
            opened.sync_files(&[path]).await
        })
    })
    .await;
    match synced {
        Ok(Ok(_)) => true,
        Ok(Err(err)) => {
            tracing::warn!("the memory index was not brought up to date after a save: {err}");
            false
        }
        Err(err) => {
            tracing::warn!("the memory index update stopped: {err}");
            false
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFiles {
    paths: Vec<String>,
    #[serde(default)]
    agent: Option<String>,
}

pub(crate) async fn file_tokens(
    State(workbench): State<Workbench>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let TokenFiles { paths, agent } = json_body(&body)?;
    let agent_id = agent.as_deref().unwrap_or(DEFAULT_AGENT_ID);
    let files = workbench.workbench_agent(agent_id)?.clone();
    let counter = Arc::clone(workbench.agent(agent_id)?);
    // Reading and counting block: off the threads that serve channels and turns.
    let out = tokio::task::spawn_blocking(move || {
        let mut counted = 0;
        let mut out = Vec::new();
        for asked in paths.iter().take(MAX_COUNTED_FILES) {
            let entry = match read_one(&files, asked) {
                Ok(_) if counted >= MAX_COUNTED_BYTES => serde_json::json!({
                    "path": asked,
                    "tokens": null,
                    "error": "not counted: the request asked for more than 4 MB of files",
                }),
                Ok(file) => {
                    let content = file["content"].as_str().unwrap_or_default();
                    counted += content.len();
                    serde_json::json!({"path": asked, "tokens": counter.count_tokens(content)})
                }
                Err(err) => {
                    serde_json::json!({"path": asked, "tokens": null, "error": err.message})
                }
            };
            out.push(entry);
        }
        out
    })
    .await
    .map_err(ApiError::internal)?;
    Ok(Json(serde_json::json!({ "files": out })))
}

/// `GET /api/media/{name}`: an image a transcript keeps (`media/<digest>.<ext>` beside the
/// transcripts).
pub(crate) async fn media(
    State(workbench): State<Workbench>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let (stem, ext) = name
        .rsplit_once('.')
        .ok_or_else(|| ApiError::not_found("no such image"))?;
    let content_type = match ext {
        "png" => "image/png",
        "jpg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return Err(ApiError::not_found("no such image")),
    };
    if stem.is_empty() || !stem.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ApiError::not_found("no such image"));
    }
    let agent = workbench.agent(DEFAULT_AGENT_ID)?;
    let path = agent.store().dir().join("media").join(&name);
    let bytes = std::fs::read(&path).map_err(|_| ApiError::not_found("no such image"))?;
    let mut response = Body::from(bytes).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=31536000, immutable"),
    );
    Ok(response)
}
