//! Finding the skills of an agent in its four sources, and whether each can be offered.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use nanocrab_config::SkillsConfig;

use crate::front_matter::{self, SkillMeta};

/// Where a skill was found, in order of precedence: of two skills with one name, the one from
/// the earlier source is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SkillSource {
    /// `<workspace>/skills/`: the agent's own.
    Workspace,
    /// `~/.nanocrab/skills/`: installed with `nanocrab skills install`, shared by every agent.
    #[serde(rename = "installed")]
    User,
    /// Shipped with nanocrab.
    Bundled,
    /// `skills.extraDirs`.
    Extra,
}

impl fmt::Display for SkillSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Workspace => "workspace",
            Self::User => "installed",
            Self::Bundled => "bundled",
            Self::Extra => "extra",
        })
    }
}

/// The folders skills are looked for in, and the settings that switch skills off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillRoots {
    /// `(source, folder holding skill folders)`, in order of precedence.
    pub folders: Vec<(SkillSource, PathBuf)>,
    /// Names of skills the config switches off (`skills.entries.<name>.enabled: false`).
    pub disabled: BTreeSet<String>,
}

impl SkillRoots {
    /// The workspace's skills only, as a context without configuration sees them.
    pub fn workspace_only(workspace: &Path) -> Self {
        Self {
            folders: vec![(SkillSource::Workspace, workspace.join("skills"))],
            disabled: BTreeSet::new(),
        }
    }

    /// The four sources of an agent whose workspace is `workspace`, with `home`'s `skills/`,
    /// the `bundled` folder and the config's `extraDirs` (`~` expanded with `user_home`).
    pub fn new(
        workspace: &Path,
        home: &Path,
        bundled: &Path,
        config: &SkillsConfig,
        user_home: Option<&Path>,
    ) -> Self {
        let mut folders = vec![
            (SkillSource::Workspace, workspace.join("skills")),
            (SkillSource::User, home.join("skills")),
            (SkillSource::Bundled, bundled.to_path_buf()),
        ];
        for extra in &config.extra_dirs {
            let extra = nanocrab_config::expand_home(extra, user_home);
            folders.push((SkillSource::Extra, workspace.join(extra)));
        }
        Self {
            folders,
            disabled: config
                .entries
                .iter()
                .filter(|(_, entry)| !entry.enabled)
                .map(|(name, _)| name.clone())
                .collect(),
        }
    }

    /// Every skill folder of every source: available, unavailable, shadowed, disabled or
    /// unreadable, in order of name and then precedence.
    pub fn discover(&self, host: &Host) -> Vec<Skill> {
        let mut skills: Vec<Skill> = Vec::new();
        let mut winners: BTreeMap<String, PathBuf> = BTreeMap::new();
        for (source, folder) in &self.folders {
            let Ok(entries) = std::fs::read_dir(folder) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = entries
                .flatten()
                .map(|entry| entry.path())
                // Hidden folders are an install in progress or a tool's own.
                .filter(|path| {
                    !path
                        .file_name()
                        .is_some_and(|name| name.to_string_lossy().starts_with('.'))
                })
                .filter(|path| path.join("SKILL.md").is_file())
                .collect();
            dirs.sort();
            for dir in dirs {
                let file = dir.join("SKILL.md");
                let folder_name = dir
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let (meta, body, parsed) = match std::fs::read_to_string(&file)
                    .map_err(|err| err.to_string())
                    .and_then(|text| {
                        front_matter::parse(&text)
                            .map(|meta| {
                                let body = front_matter::split(&text)
                                    .map(|(_, body)| body.trim().to_owned())
                                    .unwrap_or_default();
                                (meta, body)
                            })
                            .map_err(|err| err.to_string())
                    }) {
                    Ok((meta, body)) => (meta, body, Ok(())),
                    Err(reason) => (SkillMeta::default(), String::new(), Err(reason)),
                };
                let name = meta.name.clone().unwrap_or(folder_name);
                let status = if let Err(reason) = parsed {
                    Status::Invalid(reason)
                } else if let Some(winner) = winners.get(&name) {
                    Status::Shadowed(winner.clone())
                } else if self.disabled.contains(&name) {
                    Status::Disabled
                } else {
                    let missing = host.missing(&meta);
                    if missing.is_empty() {
                        Status::Available
                    } else {
                        Status::Unavailable(missing)
                    }
                };
                if matches!(
                    status,
                    Status::Available | Status::Unavailable(_) | Status::Disabled
                ) {
                    winners.insert(name.clone(), file.clone());
                }
                skills.push(Skill {
                    name,
                    meta,
                    source: *source,
                    file,
                    body,
                    status,
                });
            }
        }
        // Stable: same-named skills stay in order of precedence.
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        skills
    }
}

/// One skill folder as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The front matter's `name`, else the folder's.
    pub name: String,
    pub meta: SkillMeta,
    pub source: SkillSource,
    /// Its `SKILL.md`.
    pub file: PathBuf,
    /// The instructions after the front matter, trimmed.
    pub body: String,
    pub status: Status,
}

impl Skill {
    /// The skill's folder.
    pub fn folder(&self) -> &Path {
        self.file.parent().unwrap_or(&self.file)
    }
}

/// Whether a skill is offered to the agent, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Available,
    /// Its requirements are not met on this machine.
    Unavailable(Vec<Missing>),
    /// Switched off by `skills.entries.<name>.enabled`.
    Disabled,
    /// A skill of the same name from a source of higher precedence (its `SKILL.md`) is used.
    Shadowed(PathBuf),
    /// Its `SKILL.md` cannot be read or its front matter is malformed.
    Invalid(String),
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Available => f.write_str("available"),
            Self::Unavailable(missing) => {
                f.write_str("unavailable: ")?;
                for (i, missing) in missing.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{missing}")?;
                }
                Ok(())
            }
            Self::Disabled => f.write_str("disabled (skills.entries.<name>.enabled)"),
            Self::Shadowed(by) => write!(f, "shadowed by {}", by.display()),
            Self::Invalid(reason) => write!(f, "invalid: {reason}"),
        }
    }
}

/// A requirement of a skill this machine does not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// A program of `requires.bins` is not on `PATH`.
    Bin(String),
    /// None of the programs of `requires.anyBins` is on `PATH`.
    AnyBin(Vec<String>),
    /// An environment variable of `requires.env` is not set (or empty).
    Env(String),
    /// A config key of `requires.config` is not set.
    Config(String),
    /// The skill is for other operating systems.
    Os { wanted: Vec<String>, have: String },
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bin(bin) => write!(f, "`{bin}` is not on PATH"),
            Self::AnyBin(bins) => write!(f, "none of `{}` is on PATH", bins.join("`, `")),
            Self::Env(name) => write!(f, "environment variable {name} is not set"),
            // A skill waiting to be switched on names itself: say how.
            Self::Config(key) if key.starts_with("skills.entries.") => write!(
                f,
                "switched off; add {key} to the config to switch it on (`\"{}\": {{}}` under \
                 skills.entries)",
                &key["skills.entries.".len()..]
            ),
            Self::Config(key) => write!(f, "config key {key} is not set"),
            Self::Os { wanted, have } => {
                write!(f, "only for {}, this is {have}", wanted.join(", "))
            }
        }
    }
}

/// What a skill's requirements are checked against: the machine, its environment and the
/// config. Passed in, so tests need not touch the process's environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    /// `std::env::consts::OS`: `linux`, `macos`, `windows`.
    pub os: String,
    /// The folders of `PATH`, in order.
    pub path: Vec<PathBuf>,
    /// Names of the environment variables that are set and not empty.
    pub env: BTreeSet<String>,
    /// Dotted config keys with a value that is set: not null, false, 0 or empty.
    pub config: BTreeSet<String>,
}

impl Host {
    /// This process's OS, `PATH` and environment, and the keys set in `config` (the config
    /// file's values, as JSON).
    pub fn from_process(config: &serde_json::Value) -> Self {
        let path = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect())
            .unwrap_or_default();
        let env = std::env::vars_os()
            .filter(|(_, value)| !value.is_empty())
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect();
        Self {
            os: std::env::consts::OS.to_owned(),
            path,
            env,
            config: set_keys(config),
        }
    }

    /// Whether `bin` is an executable file in a folder of `PATH`.
    pub fn has_bin(&self, bin: &str) -> bool {
        // A name with a separator would reach outside PATH.
        if bin.is_empty() || bin.contains(['/', '\\']) {
            return false;
        }
        self.path.iter().any(|dir| is_executable(&dir.join(bin)))
    }

    /// The requirements of `meta` this host does not meet, in the order they are written.
    pub fn missing(&self, meta: &SkillMeta) -> Vec<Missing> {
        let mut missing = Vec::new();
        if !meta.os.is_empty() && !meta.os.iter().any(|os| os_name(os) == os_name(&self.os)) {
            missing.push(Missing::Os {
                wanted: meta.os.clone(),
                have: self.os.clone(),
            });
        }
        let requires = &meta.requires;
        missing.extend(
            requires
                .bins
                .iter()
                .filter(|bin| !self.has_bin(bin))
                .map(|bin| Missing::Bin(bin.clone())),
        );
        if !requires.any_bins.is_empty() && !requires.any_bins.iter().any(|b| self.has_bin(b)) {
            missing.push(Missing::AnyBin(requires.any_bins.clone()));
        }
        missing.extend(
            requires
                .env
                .iter()
                .filter(|name| !self.env.contains(*name))
                .map(|name| Missing::Env(name.clone())),
        );
        missing.extend(
            requires
                .config
                .iter()
                .filter(|key| !self.config.contains(*key))
                .map(|key| Missing::Config(key.clone())),
        );
        missing
    }
}

/// The name an OS goes by in Rust (`std::env::consts::OS`), from the names skills use
/// (Node's `process.platform` in OpenClaw's: `darwin`, `win32`).
fn os_name(os: &str) -> &str {
    match os {
        "darwin" | "macos" | "mac" | "osx" => "macos",
        "win32" | "windows" => "windows",
        other => other,
    }
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    ["", ".exe", ".cmd", ".bat"].iter().any(|ext| {
        let mut name = path.as_os_str().to_owned();
        name.push(ext);
        Path::new(&name).is_file()
    })
}

/// Every dotted key of `value` whose value is set (objects and arrays too, when not empty).
fn set_keys(value: &serde_json::Value) -> BTreeSet<String> {
    fn walk(prefix: &str, value: &serde_json::Value, keys: &mut BTreeSet<String>) {
        let set = match value {
            serde_json::Value::Null => false,
            serde_json::Value::Bool(b) => *b,
            serde_json::Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
            serde_json::Value::String(s) => !s.is_empty(),
            serde_json::Value::Array(items) => !items.is_empty(),
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    let path = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    walk(&path, value, keys);
                }
                !map.is_empty()
            }
        };
        if set && !prefix.is_empty() {
            keys.insert(prefix.to_owned());
        }
    }
    let mut keys = BTreeSet::new();
    walk("", value, &mut keys);
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn skill(root: &Path, folder: &str, text: &str) {
        std::fs::create_dir_all(root.join(folder)).unwrap();
        std::fs::write(root.join(folder).join("SKILL.md"), text).unwrap();
    }

    fn linux() -> Host {
        Host {
            os: "linux".into(),
            ..Host::default()
        }
    }

    fn statuses(skills: &[Skill]) -> Vec<(String, SkillSource, Status)> {
        skills
            .iter()
            .map(|s| (s.name.clone(), s.source, s.status.clone()))
            .collect()
    }

    #[test]
    fn a_missing_binary_env_var_config_key_or_os_makes_a_skill_unavailable_and_says_why() {
        let bin = tempfile::tempdir().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::write(bin.path().join("gh"), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(
                bin.path().join("gh"),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap();
            // Present but not executable: not a program.
            std::fs::write(bin.path().join("jq"), "").unwrap();
        }
        let host = Host {
            os: "linux".into(),
            path: vec![PathBuf::from("/nonexistent"), bin.path().to_path_buf()],
            env: BTreeSet::from(["GH_TOKEN".to_owned()]),
            config: set_keys(&serde_json::json!({
                "channels": {"telegram": {"token": "t", "allowFrom": []}},
                "tools": {"restrictToWorkspace": false}
            })),
        };
        let meta = front_matter::parse(
            "---\nrequires:\n  bins: [gh, jq]\n  anyBins: [fd, fdfind]\n  env: [GH_TOKEN, OPENAI_API_KEY]\n  config: [channels.telegram.token, channels.telegram.allowFrom, tools.restrictToWorkspace]\nos: [darwin, win32]\n---\n",
        )
        .unwrap();
        assert_eq!(
            host.missing(&meta),
            vec![
                Missing::Os {
                    wanted: vec!["darwin".into(), "win32".into()],
                    have: "linux".into()
                },
                Missing::Bin("jq".into()),
                Missing::AnyBin(vec!["fd".into(), "fdfind".into()]),
                Missing::Env("OPENAI_API_KEY".into()),
                Missing::Config("channels.telegram.allowFrom".into()),
                Missing::Config("tools.restrictToWorkspace".into()),
            ]
        );
        let met = front_matter::parse(
            "---\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"gh\"], \"anyBins\": [\"fd\", \"gh\"], \"env\": [\"GH_TOKEN\"], \"config\": [\"channels.telegram\"]}, \"os\": [\"linux\"]}}\n---\n",
        )
        .unwrap();
        assert_eq!(host.missing(&met), Vec::new());
        assert!(!host.has_bin("../gh"));
        insta::assert_snapshot!(
            Status::Unavailable(host.missing(&meta)).to_string(),
            @"unavailable: only for darwin, win32, this is linux; `jq` is not on PATH; none of `fd`, `fdfind` is on PATH; environment variable OPENAI_API_KEY is not set; config key channels.telegram.allowFrom is not set; config key tools.restrictToWorkspace is not set"
        );
    }

    #[test]
    fn the_earlier_source_wins_and_the_later_one_is_listed_as_shadowed() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, home, bundled, extra) = (
            dir.path().join("ws"),
            dir.path().join("home"),
            dir.path().join("bundled"),
            dir.path().join("extra"),
        );
        skill(
            &ws.join("skills"),
            "notes",
            "---\nname: notes\ndescription: mine\n---\n",
        );
        skill(
            &home.join("skills"),
            "notes",
            "---\nname: notes\ndescription: installed\n---\n",
        );
        // Another folder name, the same skill name.
        skill(
            &bundled,
            "daily-notes",
            "---\nname: notes\ndescription: bundled\n---\n",
        );
        skill(
            &bundled,
            "weather",
            "---\ndescription: bundled weather\n---\n",
        );
        skill(&extra, "weather", "---\ndescription: extra weather\n---\n");
        skill(&extra, "broken", "---\nrequires:\n  bins: [gh\n---\n");
        skill(&extra, "off", "---\ndescription: switched off\n---\n");
        skill(&extra, "needs-env", "---\nrequires: {env: [NOPE]}\n---\n");
        std::fs::create_dir_all(extra.join("no-skill-md")).unwrap();
        let config: SkillsConfig = serde_json::from_value(serde_json::json!({
            "extraDirs": [extra],
            "entries": {"off": {"enabled": false}, "notes": {}}
        }))
        .unwrap();
        let roots = SkillRoots::new(&ws, &home, &bundled, &config, None);
        let skills = roots.discover(&linux());
        let found = statuses(&skills);
        assert_eq!(
            found,
            vec![
                (
                    "broken".to_owned(),
                    SkillSource::Extra,
                    Status::Invalid(
                        "front matter: did not find expected ',' or ']' at line 3 column 1, while parsing a flow sequence at line 2 column 9".into()
                    )
                ),
                (
                    "needs-env".to_owned(),
                    SkillSource::Extra,
                    Status::Unavailable(vec![Missing::Env("NOPE".into())])
                ),
                ("notes".to_owned(), SkillSource::Workspace, Status::Available),
                (
                    "notes".to_owned(),
                    SkillSource::User,
                    Status::Shadowed(ws.join("skills/notes/SKILL.md"))
                ),
                (
                    "notes".to_owned(),
                    SkillSource::Bundled,
                    Status::Shadowed(ws.join("skills/notes/SKILL.md"))
                ),
                ("off".to_owned(), SkillSource::Extra, Status::Disabled),
                ("weather".to_owned(), SkillSource::Bundled, Status::Available),
                (
                    "weather".to_owned(),
                    SkillSource::Extra,
                    Status::Shadowed(bundled.join("weather/SKILL.md"))
                ),
            ]
        );
        assert_eq!(skills[2].meta.description, "mine");
    }
}
