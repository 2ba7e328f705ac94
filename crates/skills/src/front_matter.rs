//! The front matter of a `SKILL.md`, read in nanocrab's keys and in the shapes OpenClaw
//! (`metadata.openclaw`, formerly `metadata.clawdbot`) and nanobot (`metadata.nanobot`) write,
//! so that their skills work unchanged.

use serde::Deserialize;

/// What a skill says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillMeta {
    /// `None`: the folder's name is the skill's name.
    pub name: Option<String>,
    /// One line: a multi-line YAML value is joined with spaces.
    pub description: String,
    /// The whole text goes into every prompt, not just the index line.
    pub always: bool,
    /// The user may ask for it by name (OpenClaw's slash commands); read and kept, not used yet.
    pub user_invocable: bool,
    pub requires: Requirements,
    /// Operating systems it runs on (`linux`, `macos`/`darwin`, `windows`/`win32`); empty: any.
    pub os: Vec<String>,
    /// The environment variable holding the skill's main credential (OpenClaw).
    pub primary_env: Option<String>,
    /// Capabilities the skill needs, as `kind:target` (`exec:gh`, `net:api.github.com`).
    pub capabilities: Vec<String>,
}

/// What must be present on this machine for the skill to be offered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Requirements {
    /// Programs that must all be on `PATH`.
    pub bins: Vec<String>,
    /// Programs of which one is enough.
    #[serde(rename = "anyBins", alias = "any-bins", alias = "any_bins")]
    pub any_bins: Vec<String>,
    /// Environment variables that must be set and not empty.
    pub env: Vec<String>,
    /// Config keys (dotted, `channels.telegram.token`) that must be set.
    pub config: Vec<String>,
}

impl Requirements {
    fn add(&mut self, other: Requirements) {
        for (mine, theirs) in [
            (&mut self.bins, other.bins),
            (&mut self.any_bins, other.any_bins),
            (&mut self.env, other.env),
            (&mut self.config, other.config),
        ] {
            for item in theirs {
                if !mine.contains(&item) {
                    mine.push(item);
                }
            }
        }
    }
}

/// A `SKILL.md` whose front matter cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    #[error("the front matter opened by `---` on the first line has no closing `---` line")]
    Unclosed,
    #[error("front matter: {key}: {message}")]
    Key { key: String, message: String },
    #[error("front matter: {0}")]
    Yaml(String),
}

/// The keys that gate a skill, in nanocrab's top level and in each tool's `metadata` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Gates {
    requires: Requirements,
    os: OneOrMany,
    always: Option<bool>,
    #[serde(rename = "primaryEnv", alias = "primary-env", alias = "primary_env")]
    primary_env: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Document {
    name: Option<String>,
    description: Option<String>,
    #[serde(
        rename = "user-invocable",
        alias = "userInvocable",
        alias = "user_invocable"
    )]
    user_invocable: Option<bool>,
    capabilities: Vec<String>,
    metadata: Option<yaml_serde::Value>,
    // The keys of [`Gates`], spelled out: behind `flatten` an error would lose its key.
    requires: Requirements,
    os: OneOrMany,
    always: Option<bool>,
    #[serde(rename = "primaryEnv", alias = "primary-env", alias = "primary_env")]
    primary_env: Option<String>,
}

/// `os: linux` as well as `os: [linux, darwin]`.
#[derive(Debug, Default, Deserialize)]
#[serde(from = "OneOrManyRaw")]
struct OneOrMany(Vec<String>);

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrManyRaw {
    One(String),
    Many(Vec<String>),
}

impl From<OneOrManyRaw> for OneOrMany {
    fn from(raw: OneOrManyRaw) -> Self {
        match raw {
            OneOrManyRaw::One(one) => Self(vec![one]),
            OneOrManyRaw::Many(many) => Self(many),
        }
    }
}

/// The `metadata` entries read, nanocrab's first; `clawdbot` and `clawdis` are OpenClaw's
/// earlier names, still found in published skills.
const METADATA_KEYS: [&str; 5] = ["nanocrab", "openclaw", "clawdbot", "clawdis", "nanobot"];

/// Splits `text` into its front matter (without the `---` lines) and the Markdown after it.
/// Without a `---` first line there is no front matter.
pub fn split(text: &str) -> Result<(&str, &str), FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(first_end) = text.find('\n') else {
        return Ok(("", text));
    };
    if text[..first_end].trim_end() != "---" {
        return Ok(("", text));
    }
    let rest = &text[first_end + 1..];
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    Err(FrontMatterError::Unclosed)
}

/// Front matter that is not YAML but reads as nanobot reads it, one `key: value` a line:
/// `description: Use when: the user asks` (a second `: ` is an error in YAML) works in nanobot,
/// and worked in nanocrab before it read YAML, so such skills must not vanish. `None` when a
/// line is indented or has no `:` (nested YAML that is broken indeed).
fn line_by_line(yaml: &str) -> Option<Document> {
    let mut map = yaml_serde::Mapping::new();
    for line in yaml.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return None;
        }
        let (key, value) = line.split_once(':')?;
        let value = value.trim();
        // `a: b` parses as a mapping; only a flow mapping (`{...}`) is meant as one.
        let value = match yaml_serde::from_str::<yaml_serde::Value>(value) {
            Ok(parsed) if !parsed.is_mapping() || value.starts_with('{') => parsed,
            Ok(_) | Err(_) => yaml_serde::Value::String(value.trim_matches(['"', '\'']).to_owned()),
        };
        map.insert(yaml_serde::Value::String(key.trim().to_owned()), value);
    }
    yaml_serde::from_value(yaml_serde::Value::Mapping(map)).ok()
}

/// Reads the front matter of a `SKILL.md` (the whole file's text).
pub fn parse(text: &str) -> Result<SkillMeta, FrontMatterError> {
    let (yaml, _) = split(text)?;
    let document: Document = if yaml.trim().is_empty() {
        Document::default()
    } else {
        // Its errors name the key (`requires.bins: invalid type: ...`).
        match yaml_serde::from_str(yaml) {
            Ok(document) => document,
            Err(err) => line_by_line(yaml).ok_or(FrontMatterError::Yaml(err.to_string()))?,
        }
    };
    let mut meta = SkillMeta {
        name: document
            .name
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty()),
        description: document
            .description
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        always: false,
        user_invocable: document.user_invocable.unwrap_or(true),
        requires: Requirements::default(),
        os: Vec::new(),
        primary_env: None,
        capabilities: document.capabilities,
    };
    let mut all_gates = vec![Gates {
        requires: document.requires,
        os: document.os,
        always: document.always,
        primary_env: document.primary_env,
    }];
    if let Some(metadata) = document.metadata {
        // Some skills write `metadata` as a JSON string rather than a mapping.
        let metadata = match metadata {
            yaml_serde::Value::String(text) => {
                yaml_serde::from_str(&text).map_err(|err| FrontMatterError::Key {
                    key: "metadata".to_owned(),
                    message: err.to_string(),
                })?
            }
            other => other,
        };
        for key in METADATA_KEYS {
            if let Some(value) = metadata.get(key) {
                let gates: Gates =
                    serde_path_to_error::deserialize(value.clone()).map_err(|err| {
                        FrontMatterError::Key {
                            key: format!("metadata.{key}.{}", err.path()),
                            message: err.into_inner().to_string(),
                        }
                    })?;
                all_gates.push(gates);
            }
        }
    }
    for gates in all_gates {
        meta.requires.add(gates.requires);
        for os in gates.os.0 {
            if !meta.os.contains(&os) {
                meta.os.push(os);
            }
        }
        meta.always |= gates.always.unwrap_or(false);
        if meta.primary_env.is_none() {
            meta.primary_env = gates.primary_env;
        }
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn nanocrabs_own_keys_with_a_folded_description() {
        let text = "---\nname: gh-helper\ndescription: >\n  Work with GitHub issues\n  and pull requests\nalways: false\nuser-invocable: false\nrequires:\n  bins: [gh]\n  anyBins: [git, jj]\n  env: [GH_TOKEN]\n  config: [channels.telegram]\nos: [linux, macos]\nprimaryEnv: GH_TOKEN\ncapabilities: [\"exec:gh\", \"net:api.github.com\"]\n---\n# Body\n";
        assert_eq!(
            parse(text).unwrap(),
            SkillMeta {
                name: Some("gh-helper".into()),
                description: "Work with GitHub issues and pull requests".into(),
                always: false,
                user_invocable: false,
                requires: Requirements {
                    bins: vec!["gh".into()],
                    any_bins: vec!["git".into(), "jj".into()],
                    env: vec!["GH_TOKEN".into()],
                    config: vec!["channels.telegram".into()],
                },
                os: vec!["linux".into(), "macos".into()],
                primary_env: Some("GH_TOKEN".into()),
                capabilities: vec!["exec:gh".into(), "net:api.github.com".into()],
            }
        );
    }

    #[test]
    fn openclaws_shape_with_metadata_as_one_line_of_json() {
        // As OpenClaw's bundled skills are written.
        let text = r#"---
name: github
description: "Interact with GitHub using the `gh` CLI. Use `gh issue`, `gh pr`, `gh run`, and `gh api` for issues, PRs, CI runs, and advanced queries."
metadata: {"openclaw": {"emoji": "🐙", "requires": {"bins": ["gh"], "anyBins": ["git"], "env": ["GH_TOKEN"], "config": ["browser.enabled"]}, "os": ["darwin", "linux"], "primaryEnv": "GH_TOKEN", "install": [{"id": "brew", "kind": "brew", "formula": "gh", "bins": ["gh"]}]}}
---

# GitHub Skill
"#;
        assert_eq!(
            parse(text).unwrap(),
            SkillMeta {
                name: Some("github".into()),
                description: "Interact with GitHub using the `gh` CLI. Use `gh issue`, `gh pr`, `gh run`, and `gh api` for issues, PRs, CI runs, and advanced queries.".into(),
                always: false,
                user_invocable: true,
                requires: Requirements {
                    bins: vec!["gh".into()],
                    any_bins: vec!["git".into()],
                    env: vec!["GH_TOKEN".into()],
                    config: vec!["browser.enabled".into()],
                },
                os: vec!["darwin".into(), "linux".into()],
                primary_env: Some("GH_TOKEN".into()),
                capabilities: Vec::new(),
            }
        );
    }

    #[test]
    fn nanobots_shape_with_always_in_its_metadata_or_at_the_top() {
        let text = "---\nname: memory\ndescription: Two-layer memory system with grep-based recall.\nalways: true\n---\nbody\n";
        let meta = parse(text).unwrap();
        assert!(meta.always);
        let text = "---\nname: tmux\ndescription: Remote-control tmux sessions\nmetadata: {\"nanobot\":{\"emoji\":\"🧵\",\"os\":[\"darwin\",\"linux\"],\"requires\":{\"bins\":[\"tmux\"]},\"always\":true}}\n---\n";
        assert_eq!(
            parse(text).unwrap(),
            SkillMeta {
                name: Some("tmux".into()),
                description: "Remote-control tmux sessions".into(),
                always: true,
                user_invocable: true,
                requires: Requirements {
                    bins: vec!["tmux".into()],
                    ..Requirements::default()
                },
                os: vec!["darwin".into(), "linux".into()],
                primary_env: None,
                capabilities: Vec::new(),
            }
        );
        // Metadata as a string holding JSON, and as a block mapping.
        let text =
            "---\nname: x\nmetadata: '{\"nanobot\": {\"requires\": {\"env\": [\"KEY\"]}}}'\n---\n";
        assert_eq!(parse(text).unwrap().requires.env, vec!["KEY".to_owned()]);
        let text =
            "---\nname: x\nmetadata:\n  nanobot:\n    requires:\n      bins: [\"jq\"]\n---\n";
        assert_eq!(parse(text).unwrap().requires.bins, vec!["jq".to_owned()]);
    }

    #[test]
    fn a_description_with_a_colon_reads_as_nanobot_reads_it() {
        let text = "---\nname: standup\ndescription: Use when: the user asks for the standup\nalways: true\nmetadata: {\"nanobot\": {\"requires\": {\"bins\": [\"git\"]}}}\n---\n";
        let meta = parse(text).unwrap();
        assert_eq!(
            (meta.description.as_str(), meta.always, meta.requires.bins),
            (
                "Use when: the user asks for the standup",
                true,
                vec!["git".to_owned()]
            )
        );
    }

    #[test]
    fn no_front_matter_and_empty_front_matter() {
        assert_eq!(
            parse("Just do it.\n").unwrap(),
            SkillMeta {
                user_invocable: true,
                ..SkillMeta::default()
            }
        );
        assert_eq!(parse("---\n---\nbody").unwrap().name, None);
        assert_eq!(
            split("---\nname: a\n---\nbody\n").unwrap(),
            ("name: a\n", "body\n")
        );
    }

    #[test]
    fn bad_front_matter_names_the_key() {
        assert_eq!(
            parse("---\nname: a\n").unwrap_err(),
            FrontMatterError::Unclosed
        );
        assert_eq!(
            parse("---\nname: a\nrequires:\n  bins: gh\n---\n").unwrap_err(),
            FrontMatterError::Yaml(
                "requires.bins: invalid type: string \"gh\", expected a sequence at line 3 column 9"
                    .into()
            )
        );
        let err = parse("---\nmetadata: {\"openclaw\": {\"always\": \"yes\"}}\n---\n").unwrap_err();
        assert!(
            matches!(&err, FrontMatterError::Key { key, .. } if key == "metadata.openclaw.always"),
            "{err:?}"
        );
        assert_eq!(
            parse("---\nname: a\nrequires:\n  bins: [gh\n---\n")
                .unwrap_err()
                .to_string(),
            "front matter: did not find expected ',' or ']' at line 4 column 1, while parsing a flow sequence at line 3 column 9"
        );
    }
}
