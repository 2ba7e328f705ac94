//! A BERT sentence encoder (all-MiniLM-L6-v2 and its kin) on the CPU: tokens through the
//! transformer, mean-pooled over the real tokens, scaled to unit length, as
//! sentence-transformers does.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::catalogue::{ModelKind, ModelSpec};
use crate::error::ModelError;
use crate::store::ModelStore;

/// Texts run through the model together; larger batches pad more and gain little on a CPU.
const BATCH: usize = 16;

pub struct BertEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    dimensions: usize,
}

impl BertEmbedder {
    /// Loads the installed embedding model `spec` from `store`.
    pub fn from_store(store: &ModelStore, spec: &ModelSpec) -> Result<Self, ModelError> {
        match spec.kind {
            ModelKind::Embedding { max_tokens, .. } => {
                Self::load(&store.installed_dir(spec)?, max_tokens)
            }
            ModelKind::Chat { .. } => Err(ModelError::Run {
                name: spec.name.clone(),
                detail: "a chat model, not an embedding model".to_owned(),
            }),
        }
    }

    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`; texts longer
    /// than `max_tokens` are cut.
    pub fn load(dir: &Path, max_tokens: usize) -> Result<Self, ModelError> {
        let files = |path: &Path, detail: String| ModelError::Files {
            path: path.to_path_buf(),
            detail,
        };
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(|source| ModelError::Io {
            action: "read",
            path: config_path.clone(),
            source,
        })?;
        let config: Config =
            serde_json::from_str(&text).map_err(|err| files(&config_path, err.to_string()))?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|err| files(&tokenizer_path, err.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens.min(config.max_position_embeddings),
                ..TruncationParams::default()
            }))
            .map_err(|err| files(&tokenizer_path, err.to_string()))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        let weights_path = dir.join("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|source| ModelError::Io {
            action: "read",
            path: weights_path.clone(),
            source,
        })?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|err| files(&weights_path, err.to_string()))?;
        let model =
            BertModel::load(vb, &config).map_err(|err| files(&weights_path, err.to_string()))?;
        Ok(Self {
            model,
            tokenizer,
            dimensions: config.hidden_size,
        })
    }

    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// One unit-length vector per text.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            let encodings = self
                .tokenizer
                .encode_batch(batch.to_vec(), true)
                .map_err(|err| self.error(err.to_string()))?;
            let ids: Vec<Vec<u32>> = encodings.iter().map(|e| e.get_ids().to_vec()).collect();
            let mask: Vec<Vec<u32>> = encodings
                .iter()
                .map(|e| e.get_attention_mask().to_vec())
                .collect();
            out.extend(self.pooled(ids, mask)?);
        }
        Ok(out)
    }

    /// The mean of the model's output over the positions `mask` marks, per row, unit length.
    fn pooled(&self, ids: Vec<Vec<u32>>, mask: Vec<Vec<u32>>) -> Result<Vec<Vec<f32>>, ModelError> {
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::new(ids, &Device::Cpu)?;
            let mask = Tensor::new(mask, &Device::Cpu)?;
            let types = ids.zeros_like()?;
            let output = self.model.forward(&ids, &types, Some(&mask))?;
            let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = output.broadcast_mul(&weights)?.sum(1)?;
            let counts = weights.sum(1)?.clamp(1e-9, f64::MAX)?;
            summed.broadcast_div(&counts)?.to_vec2::<f32>()
        };
        let mut rows = run().map_err(|err| self.error(err.to_string()))?;
        for row in &mut rows {
            crate::normalise(row);
        }
        Ok(rows)
    }

    fn error(&self, detail: String) -> ModelError {
        ModelError::Run {
            name: "bert".to_owned(),
            detail,
        }
    }
}
