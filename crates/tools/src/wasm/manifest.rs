//! `workspace/tools/<name>/tool.json`: what a WASM tool is, what it may touch and how much it
//! may spend.

use std::path::{Component, Path, PathBuf};

use nanocrab_policy::Capability;
use serde::Deserialize;

use super::WasmLoadError;

/// Fuel for one call when the manifest says nothing: about a second of tight-loop work.
pub const DEFAULT_FUEL: u64 = 1_000_000_000;
/// The most fuel a manifest may ask for.
pub const MAX_FUEL: u64 = 50_000_000_000;
pub const DEFAULT_MEMORY_MB: u64 = 64;
pub const MAX_MEMORY_MB: u64 = 1024;
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
pub const MAX_TIMEOUT_MS: u64 = 120_000;

/// The manifest as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawManifest {
    name: String,
    description: String,
    parameters: serde_json::Value,
    #[serde(default)]
    capabilities: Vec<String>,
    #[serde(default)]
    limits: RawLimits,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawLimits {
    fuel: Option<u64>,
    memory_mb: Option<u64>,
    timeout_ms: Option<u64>,
}

/// What one call of the tool may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub fuel: u64,
    pub memory_bytes: usize,
    pub timeout_ms: u64,
}

/// A capability a manifest may request: the only ones a host function exists for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requested {
    /// `fs.read` (the whole workspace) or `fs.read:<dir>` (a directory under it).
    FsRead { under: PathBuf },
    /// `net:<host>`: HTTP GET to that exact host.
    Net { host: String },
    /// `secret:<NAME>`: `{{secret:NAME}}` in a request is replaced by the host.
    Secret { name: String },
}

impl Requested {
    /// The capability the grants must cover; `workspace` is the resolved workspace.
    pub fn capability(&self, workspace: &Path) -> Capability {
        match self {
            Self::FsRead { under } => Capability::FsRead(under_workspace(workspace, under)),
            Self::Net { host } => Capability::Net(host.clone()),
            Self::Secret { name } => Capability::Secret(name.clone()),
        }
    }
}

/// `workspace/under`; the workspace itself for an empty `under` (`join("")` would add a
/// trailing slash, which reads oddly in messages and the audit log).
pub fn under_workspace(workspace: &Path, under: &Path) -> PathBuf {
    if under.as_os_str().is_empty() {
        workspace.to_path_buf()
    } else {
        workspace.join(under)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
    pub requested: Vec<Requested>,
    pub limits: Limits,
}

impl Manifest {
    pub fn fs_read_roots(&self) -> impl Iterator<Item = &Path> {
        self.requested
            .iter()
            .filter_map(|requested| match requested {
                Requested::FsRead { under } => Some(under.as_path()),
                Requested::Net { .. } | Requested::Secret { .. } => None,
            })
    }

    pub fn net_hosts(&self) -> impl Iterator<Item = &str> {
        self.requested
            .iter()
            .filter_map(|requested| match requested {
                Requested::Net { host } => Some(host.as_str()),
                Requested::FsRead { .. } | Requested::Secret { .. } => None,
            })
    }

    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.requested
            .iter()
            .filter_map(|requested| match requested {
                Requested::Secret { name } => Some(name.as_str()),
                Requested::FsRead { .. } | Requested::Net { .. } => None,
            })
    }
}

/// Parses `text`, the manifest at `path` of the tool in directory `dir_name`.
pub fn parse(path: &Path, dir_name: &str, text: &str) -> Result<Manifest, WasmLoadError> {
    let bad = |key: String, reason: String| WasmLoadError::Manifest {
        path: path.to_path_buf(),
        key,
        reason,
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let raw: RawManifest = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let key = err.path().to_string();
        bad(key, err.into_inner().to_string())
    })?;
    if raw.name != dir_name {
        return Err(bad(
            "name".into(),
            format!(
                "`{}` must be the tool's directory name, `{dir_name}`",
                raw.name
            ),
        ));
    }
    if raw.name.is_empty()
        || raw.name.len() > 64
        || !raw
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(bad(
            "name".into(),
            format!(
                "`{}` must be 1 to 64 ASCII letters, digits, `_` or `-`",
                raw.name
            ),
        ));
    }
    if raw.description.trim().is_empty() {
        return Err(bad("description".into(), "must not be empty".into()));
    }
    if raw
        .parameters
        .get("type")
        .and_then(serde_json::Value::as_str)
        != Some("object")
    {
        return Err(bad(
            "parameters".into(),
            "must be a JSON schema with \"type\": \"object\"".into(),
        ));
    }
    let requested = raw
        .capabilities
        .iter()
        .enumerate()
        .map(|(index, text)| {
            requested(text).map_err(|reason| bad(format!("capabilities[{index}]"), reason))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let limit = |key: &str, value: Option<u64>, default: u64, max: u64| match value {
        None => Ok(default),
        Some(0) => Err(bad(format!("limits.{key}"), "must be at least 1".into())),
        Some(value) if value > max => Err(bad(
            format!("limits.{key}"),
            format!("{value} is more than the maximum, {max}"),
        )),
        Some(value) => Ok(value),
    };
    let memory_mb = limit(
        "memoryMb",
        raw.limits.memory_mb,
        DEFAULT_MEMORY_MB,
        MAX_MEMORY_MB,
    )?;
    let limits = Limits {
        fuel: limit("fuel", raw.limits.fuel, DEFAULT_FUEL, MAX_FUEL)?,
        // At most 1 GiB, so this fits a usize on every target nanocrab builds for.
        memory_bytes: usize::try_from(memory_mb << 20).unwrap_or(usize::MAX),
        timeout_ms: limit(
            "timeoutMs",
            raw.limits.timeout_ms,
            DEFAULT_TIMEOUT_MS,
            MAX_TIMEOUT_MS,
        )?,
    };
    Ok(Manifest {
        name: raw.name,
        description: raw.description,
        parameters: raw.parameters,
        requested,
        limits,
    })
}

fn requested(text: &str) -> Result<Requested, String> {
    let (kind, target) = match text.split_once(':') {
        Some((kind, target)) => (kind, Some(target)),
        None => (text, None),
    };
    match (kind, target) {
        ("fs.read", None) => Ok(Requested::FsRead {
            under: PathBuf::new(),
        }),
        ("fs.read", Some(dir)) => {
            let under = Path::new(dir);
            let inside = !dir.is_empty()
                && under
                    .components()
                    .all(|component| matches!(component, Component::Normal(_)));
            if inside {
                Ok(Requested::FsRead {
                    under: under.to_path_buf(),
                })
            } else {
                Err(format!(
                    "`{text}`: the directory must be relative to the workspace, without `..`"
                ))
            }
        }
        ("net", Some(host)) => {
            let valid = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
            if valid {
                Ok(Requested::Net {
                    host: host.to_ascii_lowercase(),
                })
            } else {
                Err(format!(
                    "`{text}`: name one host exactly (`net:api.example.com`), no wildcard or port"
                ))
            }
        }
        ("secret", Some(name)) => {
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if valid {
                Ok(Requested::Secret {
                    name: name.to_owned(),
                })
            } else {
                Err(format!(
                    "`{text}`: a secret name is ASCII letters, digits, `_` or `-`"
                ))
            }
        }
        _ => Err(format!(
            "`{text}` cannot be requested by a WASM tool; it may ask for `fs.read`, \
             `fs.read:<dir>`, `net:<host>` and `secret:<NAME>`"
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn error(text: &str) -> String {
        parse(Path::new("/ws/tools/t/tool.json"), "t", text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_full_manifest_parses_with_its_limits() {
        let manifest = parse(
            Path::new("tool.json"),
            "weather",
            r#"{"name": "weather", "description": "Weather.", "parameters": {"type": "object"},
                "capabilities": ["fs.read:data", "net:API.example.com", "secret:KEY"],
                "limits": {"fuel": 5, "memoryMb": 2, "timeoutMs": 100}}"#,
        )
        .unwrap();
        assert_eq!(
            manifest,
            Manifest {
                name: "weather".into(),
                description: "Weather.".into(),
                parameters: serde_json::json!({"type": "object"}),
                requested: vec![
                    Requested::FsRead {
                        under: "data".into()
                    },
                    Requested::Net {
                        host: "api.example.com".into()
                    },
                    Requested::Secret { name: "KEY".into() },
                ],
                limits: Limits {
                    fuel: 5,
                    memory_bytes: 2 << 20,
                    timeout_ms: 100
                },
            }
        );
    }

    #[test]
    fn bad_manifests_name_the_file_and_the_key() {
        let base = r#""name": "t", "description": "d", "parameters": {"type": "object"}"#;
        let errors = [
            r#"{"name": "t", "parameters": {"type": "object"}}"#.to_owned(),
            format!(r#"{{{base}, "limits": {{"fuel": "many"}}}}"#),
            format!(r#"{{{base}, "limits": {{"timeoutMs": 999999}}}}"#),
            format!(r#"{{{base}, "capabilities": ["exec:git"]}}"#),
            format!(r#"{{{base}, "capabilities": ["fs.read", "fs.read:../x"]}}"#),
            format!(r#"{{{base}, "capabilities": ["net:*.example.com"]}}"#),
            format!(r#"{{{base}, "extra": 1}}"#),
            r#"{"name": "u", "description": "d", "parameters": {"type": "object"}}"#.to_owned(),
            r#"{"name": "t", "description": "d", "parameters": {}}"#.to_owned(),
        ]
        .map(|text| error(&text));
        assert_eq!(
            errors,
            [
                "/ws/tools/t/tool.json: `.`: missing field `description` at line 1 column 47",
                "/ws/tools/t/tool.json: `limits.fuel`: invalid type: string \"many\", expected u64 at line 1 column 93",
                "/ws/tools/t/tool.json: `limits.timeoutMs`: 999999 is more than the maximum, 120000",
                "/ws/tools/t/tool.json: `capabilities[0]`: `exec:git` cannot be requested by a WASM tool; it may ask for `fs.read`, `fs.read:<dir>`, `net:<host>` and `secret:<NAME>`",
                "/ws/tools/t/tool.json: `capabilities[1]`: `fs.read:../x`: the directory must be relative to the workspace, without `..`",
                "/ws/tools/t/tool.json: `capabilities[0]`: `net:*.example.com`: name one host exactly (`net:api.example.com`), no wildcard or port",
                "/ws/tools/t/tool.json: `extra`: unknown field `extra`, expected one of `name`, `description`, `parameters`, `capabilities`, `limits` at line 1 column 75",
                "/ws/tools/t/tool.json: `name`: `u` must be the tool's directory name, `t`",
                "/ws/tools/t/tool.json: `parameters`: must be a JSON schema with \"type\": \"object\"",
            ]
        );
    }
}
