//! `nanocrab skills`: what skills an agent has and why one is not offered; installing and
//! removing the shared ones in `~/.nanocrab/skills/`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use nanocrab_config::{Config, DEFAULT_AGENT_ID};
use nanocrab_skills::{Missing, Skill, SkillSource, Status};

use super::Env;
use crate::cli::SkillsCommand;

/// An archive larger than this is not downloaded: a skill is instructions and a few files.
const MAX_DOWNLOAD_BYTES: usize = 64 * 1024 * 1024;

pub fn run(env: &Env, command: SkillsCommand) -> anyhow::Result<()> {
    match command {
        SkillsCommand::List { json, agent } => {
            let (_, skills) = found(env, &agent)?;
            if json {
                let list: Vec<serde_json::Value> = skills.iter().map(skill_json).collect();
                outln!("{}", serde_json::to_string_pretty(&list)?)?;
                return Ok(());
            }
            if skills.is_empty() {
                outln!("No skills found.")?;
                return Ok(());
            }
            let width = skills.iter().map(|s| s.name.len()).max().unwrap_or(0);
            for (title, offered) in [("Offered to the agent:", true), ("Not offered:", false)] {
                let part: Vec<&Skill> = skills
                    .iter()
                    .filter(|s| (s.status == Status::Available) == offered)
                    .collect();
                if part.is_empty() {
                    continue;
                }
                outln!("{title}")?;
                for skill in part {
                    let what = match &skill.status {
                        Status::Available => skill.meta.description.clone(),
                        Status::Unavailable(_)
                        | Status::Disabled
                        | Status::Shadowed(_)
                        | Status::Invalid(_) => skill.status.to_string(),
                    };
                    outln!(
                        "  {:width$}  {:9}  {what}",
                        skill.name,
                        skill.source.to_string()
                    )?;
                }
            }
            Ok(())
        }
        SkillsCommand::Show { name, agent } => {
            let (_, skills) = found(env, &agent)?;
            let named: Vec<&Skill> = skills.iter().filter(|s| s.name == name).collect();
            let Some(skill) = named
                .iter()
                .find(|s| !matches!(s.status, Status::Shadowed(_)))
                .or(named.first())
            else {
                bail!("no skill named `{name}` (nanocrab skills list shows them all)");
            };
            let meta = &skill.meta;
            outln!(
                "{} ({} skill, {})",
                skill.name,
                skill.source,
                home_relative(env, &skill.file)
            )?;
            outln!("status: {}", skill.status)?;
            outln!("description: {}", meta.description)?;
            let requires = &meta.requires;
            for (key, values) in [
                ("requires.bins", &requires.bins),
                ("requires.anyBins", &requires.any_bins),
                ("requires.env", &requires.env),
                ("requires.config", &requires.config),
                ("os", &meta.os),
                ("capabilities", &meta.capabilities),
            ] {
                if !values.is_empty() {
                    outln!("{key}: {}", values.join(", "))?;
                }
            }
            if meta.always {
                outln!("always: its whole text is in every prompt")?;
            }
            for other in named.iter().filter(|s| s.file != skill.file) {
                outln!(
                    "also: {} ({})",
                    home_relative(env, &other.file),
                    other.status
                )?;
            }
            outln!("\n{}", skill.body)?;
            Ok(())
        }
        SkillsCommand::Check { agent } => {
            let (config, skills) = found(env, &agent)?;
            let mut problems = Vec::new();
            for skill in &skills {
                let counts = match (&skill.status, skill.source) {
                    (Status::Invalid(_), _) => true,
                    // A bundled skill waiting for its program or to be switched on is normal.
                    (Status::Unavailable(_), source) => source != SkillSource::Bundled,
                    (Status::Available | Status::Disabled | Status::Shadowed(_), _) => false,
                };
                if counts {
                    problems.push(format!(
                        "{} ({}): {}",
                        skill.name,
                        home_relative(env, &skill.file),
                        skill.status
                    ));
                }
            }
            for name in config.skills.entries.keys() {
                if !skills.iter().any(|skill| &skill.name == name) {
                    problems.push(format!(
                        "skills.entries.{name}: there is no skill named `{name}`"
                    ));
                }
            }
            let offered = match skills
                .iter()
                .filter(|s| s.status == Status::Available)
                .count()
            {
                1 => "1 skill offered".to_owned(),
                n => format!("{n} skills offered"),
            };
            if problems.is_empty() {
                outln!("{offered}; no problems.")?;
                return Ok(());
            }
            for problem in &problems {
                outln!("{problem}")?;
            }
            let found = match problems.len() {
                1 => "1 problem".to_owned(),
                n => format!("{n} problems"),
            };
            bail!("{found} with skills; {offered}")
        }
        SkillsCommand::Install { source } => {
            let root = env.paths.skills_dir();
            let staging = tempfile::tempdir().context("cannot make a temporary folder")?;
            let local = if source.starts_with("http://") || source.starts_with("https://") {
                download(&source, staging.path())?
            } else {
                PathBuf::from(&source)
            };
            let installed = nanocrab_skills::install(&local, &root)
                .with_context(|| format!("cannot install a skill from {source}"))?;
            outln!(
                "Installed `{}` into {} (nothing in it was run).",
                installed.name,
                installed.folder.display()
            )?;
            // How it is seen by the default agent: is it offered, or shadowed by a workspace
            // skill, or waiting for a program?
            if let Ok(loaded) = env.load_config() {
                let (roots, host) = env.skills(&loaded.config, DEFAULT_AGENT_ID);
                if let Some(skill) = roots
                    .discover(&host)
                    .into_iter()
                    .find(|s| s.file.starts_with(&installed.folder))
                {
                    outln!("Status: {}", skill.status)?;
                    if !skill.meta.capabilities.is_empty() {
                        outln!(
                            "It asks for: {} (granted only as tools.grants says)",
                            skill.meta.capabilities.join(", ")
                        )?;
                    }
                }
            }
            Ok(())
        }
        SkillsCommand::Remove { name } => {
            let root = env.paths.skills_dir();
            let roots = nanocrab_skills::SkillRoots {
                folders: vec![(SkillSource::User, root.clone())],
                ..Default::default()
            };
            let skill = roots
                .discover(&nanocrab_skills::Host::default())
                .into_iter()
                .find(|s| s.name == name);
            let Some(skill) = skill else {
                bail!(
                    "no skill named `{name}` is installed in {} (only those can be removed here; nanocrab skills list says where each one is)",
                    root.display()
                );
            };
            let folder = skill.folder().to_path_buf();
            std::fs::remove_dir_all(&folder)
                .with_context(|| format!("cannot remove {}", folder.display()))?;
            outln!("Removed `{name}` ({}).", folder.display())?;
            Ok(())
        }
    }
}

/// The config and every skill agent `agent` has, by name.
fn found(env: &Env, agent: &str) -> anyhow::Result<(Config, Vec<Skill>)> {
    let config = env.load_config()?.config;
    if agent != DEFAULT_AGENT_ID && !config.agents.entries.contains_key(agent) {
        bail!("no agent `{agent}` in agents.entries");
    }
    let (roots, host) = env.skills(&config, agent);
    Ok((config, roots.discover(&host)))
}

/// `path` from `~` when it is under the user's home, as the prompt shows it.
fn home_relative(env: &Env, path: &Path) -> String {
    match env
        .user_home
        .as_deref()
        .and_then(|home| path.strip_prefix(home).ok())
    {
        Some(rest) => Path::new("~").join(rest).display().to_string(),
        None => path.display().to_string(),
    }
}

/// Fetches the archive at `url` into `dir`, named as the URL's last segment says (its kind
/// comes from there).
fn download(url: &str, dir: &Path) -> anyhow::Result<PathBuf> {
    let file_name = url
        .split(['?', '#'])
        .next()
        .and_then(|path| path.rsplit('/').next())
        .filter(|name| !name.is_empty() && *name != "." && *name != "..")
        .with_context(|| format!("{url} names no file (.zip, .tar.gz or .tgz)"))?;
    let client = nanocrab_config::http::client_builder(nanocrab_config::http::Timeouts {
        connect: std::time::Duration::from_secs(15),
        read: Some(std::time::Duration::from_secs(60)),
        total: Some(std::time::Duration::from_secs(300)),
    })
    .build()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bytes = runtime.block_on(async {
        let mut response = client.get(url).send().await?.error_for_status()?;
        let too_large = || {
            anyhow::anyhow!(
                "{url} is larger than {} MiB",
                MAX_DOWNLOAD_BYTES / 1024 / 1024
            )
        };
        if response
            .content_length()
            .is_some_and(|length| length > MAX_DOWNLOAD_BYTES as u64)
        {
            return Err(too_large());
        }
        // Chunk by chunk: a server that sends no length is stopped at the limit, not held in
        // memory whole first.
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if bytes.len() + chunk.len() > MAX_DOWNLOAD_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        anyhow::Ok(bytes)
    });
    let bytes = bytes.with_context(|| format!("cannot download {url}"))?;
    let path = dir.join(file_name);
    std::fs::write(&path, &bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// A skill as `skills list --json` prints it (and the web page's `/api/skills` answers).
fn skill_json(skill: &Skill) -> serde_json::Value {
    let (status, reasons) = match &skill.status {
        Status::Available => ("available", Vec::new()),
        Status::Unavailable(missing) => (
            "unavailable",
            missing.iter().map(Missing::to_string).collect(),
        ),
        Status::Disabled => ("disabled", Vec::new()),
        Status::Shadowed(by) => ("shadowed", vec![by.display().to_string()]),
        Status::Invalid(reason) => ("invalid", vec![reason.clone()]),
    };
    serde_json::json!({
        "name": skill.name,
        "description": skill.meta.description,
        "source": skill.source,
        "path": skill.file,
        "status": status,
        "reasons": reasons,
        "always": skill.meta.always,
        "requires": {
            "bins": skill.meta.requires.bins,
            "anyBins": skill.meta.requires.any_bins,
            "env": skill.meta.requires.env,
            "config": skill.meta.requires.config,
            "os": skill.meta.os,
        },
        "capabilities": skill.meta.capabilities,
    })
}

/// `skills list --json` of agent `agent`.
pub fn list_json(env: &Env, agent: &str) -> anyhow::Result<serde_json::Value> {
    let (_, skills) = found(env, agent)?;
    Ok(serde_json::Value::Array(
        skills.iter().map(skill_json).collect(),
    ))
}
