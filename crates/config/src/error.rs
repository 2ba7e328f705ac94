use std::path::PathBuf;

/// Why the configuration could not be used. Every variant names the file and, where there is
/// one, the key path (`tools.exec.mode`), so the user can go straight to the fix. Values are
/// never echoed: a value may be a secret.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot find a home directory: set NANOCRAB_HOME")]
    NoHome,
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: not valid JSON: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: unknown key `{key}`{}", suggestion_text(.suggestion, .expected))]
    UnknownKey {
        path: PathBuf,
        key: String,
        suggestion: Option<String>,
        expected: Vec<String>,
    },
    /// More than one unknown key: all of them, one a line.
    #[error("{path}: unknown keys:{}", unknown_keys_text(.keys))]
    UnknownKeys {
        path: PathBuf,
        keys: Vec<UnknownKey>,
    },
    #[error("{path}: `{key}`: {message}")]
    InvalidValue {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("{path}: `{key}` uses ${{{var}}} but the environment variable {var} is not set")]
    MissingEnv {
        path: PathBuf,
        key: String,
        var: String,
    },
    #[error(
        "{path}: config version {found} is newer than this nanocrab understands (up to {supported}): upgrade nanocrab"
    )]
    TooNew {
        path: PathBuf,
        found: u64,
        supported: u32,
    },
}

fn suggestion_text(suggestion: &Option<String>, expected: &[String]) -> String {
    match suggestion {
        Some(s) => format!(": did you mean `{s}`?"),
        None if expected.is_empty() => String::new(),
        None => format!(" (valid keys here: {})", expected.join(", ")),
    }
}

/// One of several unknown keys: the key path, and what it may have meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    pub key: String,
    pub suggestion: Option<String>,
    pub expected: Vec<String>,
}

fn unknown_keys_text(keys: &[UnknownKey]) -> String {
    keys.iter()
        .map(|k| {
            format!(
                "\n  `{}`{}",
                k.key,
                suggestion_text(&k.suggestion, &k.expected)
            )
        })
        .collect()
}
