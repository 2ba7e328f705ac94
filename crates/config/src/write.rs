use std::io::Write as _;
use std::path::Path;

use crate::error::ConfigError;
use crate::types::Config;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Created,
    AlreadyExists,
}

/// Writes `config` to `path` unless a file is already there. The file appears whole
/// or not at all: it is written to a temp file beside it and then hard-linked into place, and a
/// link never replaces an existing file, even one created meanwhile.
pub fn write_config_if_missing(path: &Path, config: &Config) -> Result<WriteOutcome, ConfigError> {
    let write_err = |source| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        return Ok(WriteOutcome::AlreadyExists);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(write_err)?;
    let mut text = serde_json::to_string_pretty(config)
        .map_err(|err| write_err(std::io::Error::other(err)))?;
    text.push('\n');
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(write_err)?;
    temp.write_all(text.as_bytes()).map_err(write_err)?;
    temp.as_file().sync_all().map_err(write_err)?;
    match std::fs::hard_link(temp.path(), path) {
        Ok(()) => Ok(WriteOutcome::Created),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok(WriteOutcome::AlreadyExists)
        }
        Err(err) => Err(write_err(err)),
    }
}

/// The JSON Schema of `config.json`, generated from the types.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Config)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_default_config_is_written_once_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/config.json");
        assert_eq!(
            write_config_if_missing(&path, &Config::default()).unwrap(),
            WriteOutcome::Created
        );
        let loaded = crate::load(&path, &|_| None).unwrap();
        assert_eq!(loaded.config, Config::default());
        std::fs::write(&path, "{}").unwrap();
        assert_eq!(
            write_config_if_missing(&path, &Config::default()).unwrap(),
            WriteOutcome::AlreadyExists
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
        let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(leftovers, 1, "no temp file is left behind");
    }

    #[test]
    fn default_config_snapshot() {
        insta::assert_snapshot!(serde_json::to_string_pretty(&Config::default()).unwrap());
    }

    #[test]
    fn schema_snapshot() {
        insta::assert_json_snapshot!(json_schema());
    }
}
