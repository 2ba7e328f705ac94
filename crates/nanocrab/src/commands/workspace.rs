//! `nanocrab workspace`: the kept versions of the instruction files (bootstrap files and
//! skills) the tools changed, what each change did, and undoing it.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use nanocrab_config::{Config, DEFAULT_AGENT_ID};
use nanocrab_policy::PathGuard;
use nanocrab_tools::{ContentDigest, WorkspaceHistory};

use super::Env;
use crate::cli::WorkspaceCommand;

pub fn run(env: &Env, command: WorkspaceCommand) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    let history = WorkspaceHistory::new(env.paths.workspace_history());
    match command {
        WorkspaceCommand::History { path, agent } => {
            let workspace = workspace_of(env, &config, &agent)?;
            let paths = match path {
                Some(path) => vec![relative(&workspace, &path)],
                None => history.paths(&agent)?,
            };
            if paths.is_empty() {
                outln!(
                    "no instruction file of agent {agent} has been changed by a tool yet \
                     (changes are kept in {})",
                    env.paths.workspace_history().join(&agent).display()
                )?;
                return Ok(());
            }
            for path in &paths {
                outln!("{path}")?;
                for version in history.versions(&agent, path)? {
                    let time = match version.time.parse::<jiff::Timestamp>() {
                        Ok(at) => at
                            .to_zoned(jiff::tz::TimeZone::system())
                            .strftime("%Y-%m-%d %H:%M:%S")
                            .to_string(),
                        Err(_) => version.time.clone(),
                    };
                    let sizes = match (&version.before, &version.after) {
                        (None, Some(after)) => format!("new file, {} bytes", after.size),
                        (Some(before), Some(after)) => {
                            format!("{} → {} bytes", before.size, after.size)
                        }
                        (Some(before), None) => format!("removed, {} bytes", before.size),
                        (None, None) => "no file before or after".to_owned(),
                    };
                    outln!(
                        "  {:>3}  {time}  {:<10}  {:<16}  {sizes}",
                        version.version,
                        version.tool,
                        version.session.as_deref().unwrap_or("-"),
                    )?;
                }
            }
            let flag = agent_flag(&agent);
            outln!(
                "what a change did: nanocrab workspace diff{flag} PATH VERSION · undo it: \
                 nanocrab workspace restore{flag} PATH VERSION"
            )?;
        }
        WorkspaceCommand::Diff {
            path,
            number: version,
            agent,
        } => {
            let workspace = workspace_of(env, &config, &agent)?;
            let path = relative(&workspace, &path);
            let versions = history.versions(&agent, &path)?;
            let version = match version {
                Some(version) => version,
                None => versions.last().map_or(0, |v| v.version),
            };
            let (record, before) = history.content(&agent, &path, version)?;
            // What the change left is what the next one replaced, or the file as it is now.
            let after = match versions.iter().find(|v| v.version > version) {
                Some(next) => history.content(&agent, &path, next.version)?.1,
                None => {
                    let file = guard(env, &config, &agent, &workspace)?
                        .check_read(&path)
                        .map_err(|denial| anyhow::anyhow!("{denial}"))?;
                    match std::fs::read(&file) {
                        Ok(content) => Some(content),
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
                        Err(err) => {
                            return Err(err).with_context(|| format!("cannot read {path}"));
                        }
                    }
                }
            };
            if after.as_deref().map(ContentDigest::of) != record.after {
                eprintln!(
                    "note: {path} was changed again outside nanocrab's tools after version \
                     {version}; the diff shows that change too"
                );
            }
            let text = |content: &Option<Vec<u8>>| {
                content
                    .as_deref()
                    .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
                    .unwrap_or_default()
            };
            let (old, new) = (text(&before), text(&after));
            let old_header = match &before {
                Some(_) => format!("{path} before version {version}"),
                None => format!("{path} before version {version} (no file)"),
            };
            let new_header = match &after {
                Some(_) => format!("{path} after version {version}"),
                None => format!("{path} after version {version} (no file)"),
            };
            out!(
                "{}",
                similar::TextDiff::from_lines(&old, &new)
                    .unified_diff()
                    .header(&old_header, &new_header)
            )?;
        }
        WorkspaceCommand::Restore {
            path,
            number: version,
            agent,
        } => {
            let workspace = workspace_of(env, &config, &agent)?;
            let path = relative(&workspace, &path);
            // Resolved as the file tools resolve it: a link is followed, protectedPaths hold.
            let target = guard(env, &config, &agent, &workspace)?
                .check_write(&path)
                .map_err(|denial| anyhow::anyhow!("{denial}"))?;
            let (restored, recorded) = history.restore(&agent, &path, &target, version)?;
            let state = match restored.before {
                Some(_) => "as it was before version",
                None => "removed: it did not exist before version",
            };
            outln!(
                "{path} {state} {version}; what it held is kept as version {} (nanocrab \
                 workspace restore{} {path} {} puts it back)",
                recorded.version,
                agent_flag(&agent),
                recorded.version,
            )?;
        }
    }
    Ok(())
}

/// Agent `id`'s workspace; an error for an agent the config does not have.
fn workspace_of(env: &Env, config: &Config, id: &str) -> anyhow::Result<PathBuf> {
    if config.agents.settings(id).is_none() {
        let mut known = vec![DEFAULT_AGENT_ID.to_owned()];
        known.extend(config.agents.entries.keys().cloned());
        anyhow::bail!(
            "no agent `{id}` in agents.entries ({}); agents: {}",
            env.config_path.display(),
            known.join(", ")
        );
    }
    Ok(env.agent_workspace(config, id))
}

/// The path guard of agent `id`, as its file tools have it.
fn guard(env: &Env, config: &Config, id: &str, workspace: &Path) -> anyhow::Result<PathGuard> {
    let tools = config
        .agents
        .entries
        .get(id)
        .and_then(|entry| entry.tools.as_ref())
        .unwrap_or(&config.tools);
    let workspace = workspace
        .canonicalize()
        .with_context(|| format!("cannot open the workspace {}", workspace.display()))?;
    Ok(PathGuard::new(&workspace, tools, env.user_home.as_deref())?)
}

/// `path` as the history names it: relative to the workspace, without `./`; an absolute
/// path inside the workspace is taken relative to it.
fn relative(workspace: &Path, path: &str) -> String {
    let asked = Path::new(path);
    let inside = [Some(workspace.to_path_buf()), workspace.canonicalize().ok()]
        .into_iter()
        .flatten()
        .find_map(|root| asked.strip_prefix(root).ok().map(Path::to_path_buf));
    let relative = inside.unwrap_or_else(|| asked.to_path_buf());
    let relative = relative
        .components()
        .filter(|component| !matches!(component, std::path::Component::CurDir))
        .collect::<PathBuf>();
    relative.to_string_lossy().into_owned()
}

fn agent_flag(agent: &str) -> String {
    if agent == DEFAULT_AGENT_ID {
        String::new()
    } else {
        format!(" --agent {agent}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn paths_are_taken_relative_to_the_workspace() {
        let ws = Path::new("/nonexistent-ws");
        assert_eq!(
            [
                "SOUL.md",
                "./skills/w/SKILL.md",
                "/nonexistent-ws/USER.md",
                "../x"
            ]
            .map(|path| relative(ws, path)),
            ["SOUL.md", "skills/w/SKILL.md", "USER.md", "../x"]
        );
    }
}
