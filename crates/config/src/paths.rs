use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::ConfigError;

/// Where nanocrab keeps its files: `$NANOCRAB_HOME`, default `~/.nanocrab`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    home: PathBuf,
}

impl Paths {
    /// Resolves the home from the values of `NANOCRAB_HOME` and the user's home directory.
    pub fn resolve(
        nanocrab_home: Option<OsString>,
        user_home: Option<PathBuf>,
    ) -> Result<Self, ConfigError> {
        if let Some(home) = nanocrab_home.filter(|h| !h.is_empty()) {
            return Ok(Self {
                home: expand_home(Path::new(&home), user_home.as_deref()),
            });
        }
        match user_home {
            Some(user_home) => Ok(Self {
                home: user_home.join(".nanocrab"),
            }),
            None => Err(ConfigError::NoHome),
        }
    }

    /// [`Paths::resolve`] with the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::resolve(std::env::var_os("NANOCRAB_HOME"), std::env::home_dir())
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn config_file(&self) -> PathBuf {
        self.home.join("config.json")
    }

    pub fn workspace(&self) -> PathBuf {
        self.home.join("workspace")
    }

    /// Skills installed with `nanocrab skills install`, shared by every agent.
    pub fn skills_dir(&self) -> PathBuf {
        self.home.join("skills")
    }

    /// The skills shipped in the binary, written out for the agent to read like any other.
    pub fn bundled_skills_dir(&self) -> PathBuf {
        self.home.join("bundled-skills")
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.home.join("state")
    }

    /// Local model files, one folder per model (`nanocrab models`).
    pub fn models_dir(&self) -> PathBuf {
        self.home.join("models")
    }

    /// The memory search index: rebuildable from the workspace's files at any time.
    pub fn memory_index(&self) -> PathBuf {
        self.state_dir().join("memory-index.sqlite")
    }

    /// Every tool call, append-only; unlike the index it cannot be rebuilt.
    pub fn audit_log(&self) -> PathBuf {
        self.state_dir().join("audit.sqlite")
    }

    /// What the tools replaced in each agent's instruction files (bootstrap files, skills),
    /// one folder per agent: `nanocrab workspace history`.
    pub fn workspace_history(&self) -> PathBuf {
        self.state_dir().join("workspace-history")
    }

    /// The scheduled jobs and their runs (`nanocrab cron`), which the gateway runs.
    pub fn cron_store(&self) -> PathBuf {
        self.state_dir().join("cron.sqlite")
    }

    /// Every subagent's lifecycle, appended by the gateway.
    pub fn subagents_file(&self) -> PathBuf {
        self.state_dir().join("subagents.jsonl")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.home.join("logs")
    }
}

/// Expands a leading `~` (alone or followed by `/`) to `user_home`; other paths are unchanged.
pub fn expand_home(path: &Path, user_home: Option<&Path>) -> PathBuf {
    let Some(user_home) = user_home else {
        return path.to_path_buf();
    };
    match path.strip_prefix("~") {
        Ok(rest) => user_home.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn home_comes_from_nanocrab_home_then_user_home() {
        let paths = Paths::resolve(Some("/data/crab".into()), Some("/home/u".into())).unwrap();
        assert_eq!(paths.config_file(), PathBuf::from("/data/crab/config.json"));
        let paths = Paths::resolve(None, Some("/home/u".into())).unwrap();
        assert_eq!(
            paths.sessions_dir(),
            PathBuf::from("/home/u/.nanocrab/sessions")
        );
        let paths = Paths::resolve(Some("~/crab".into()), Some("/home/u".into())).unwrap();
        assert_eq!(paths.home(), Path::new("/home/u/crab"));
        assert!(matches!(
            Paths::resolve(None, None),
            Err(ConfigError::NoHome)
        ));
    }

    #[test]
    fn tilde_is_expanded_only_as_a_whole_component() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            expand_home(Path::new("~/ws"), home),
            PathBuf::from("/home/u/ws")
        );
        assert_eq!(expand_home(Path::new("~"), home), PathBuf::from("/home/u"));
        assert_eq!(
            expand_home(Path::new("~bob/ws"), home),
            PathBuf::from("~bob/ws")
        );
        assert_eq!(expand_home(Path::new("/abs"), home), PathBuf::from("/abs"));
    }
}
