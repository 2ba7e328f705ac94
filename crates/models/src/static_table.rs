//! A static embedding model: one vector per vocabulary token, distilled from a transformer
//! ([`crate::distill_static_table`]). A text's vector is the mean of its tokens' rows: no
//! attention, so it embeds a note in microseconds where the transformer takes milliseconds,
//! and reads the whole text rather than the first 256 tokens.

use std::path::Path;

use tokenizers::Tokenizer;

use crate::error::ModelError;

pub(crate) const TABLE_FILE: &str = "embeddings.safetensors";
pub(crate) const TABLE_TENSOR: &str = "embeddings";

pub struct StaticEmbedder {
    tokenizer: Tokenizer,
    /// `rows × dimensions`, row-major.
    table: Vec<f32>,
    dimensions: usize,
}

impl StaticEmbedder {
    /// Loads `tokenizer.json` and `embeddings.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let files = |path: &Path, detail: String| ModelError::Files {
            path: path.to_path_buf(),
            detail,
        };
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|err| files(&tokenizer_path, err.to_string()))?;
        tokenizer
            .with_truncation(None)
            .map_err(|err| files(&tokenizer_path, err.to_string()))?;
        tokenizer.with_padding(None);
        let table_path = dir.join(TABLE_FILE);
        let bytes = std::fs::read(&table_path).map_err(|source| ModelError::Io {
            action: "read",
            path: table_path.clone(),
            source,
        })?;
        let tensors = safetensors::SafeTensors::deserialize(&bytes)
            .map_err(|err| files(&table_path, err.to_string()))?;
        let view = tensors
            .tensor(TABLE_TENSOR)
            .map_err(|err| files(&table_path, err.to_string()))?;
        let (safetensors::Dtype::F32, [_, dimensions]) = (view.dtype(), view.shape()) else {
            return Err(files(
                &table_path,
                format!(
                    "`{TABLE_TENSOR}` is {:?} {:?}, not a two-dimensional F32 table",
                    view.dtype(),
                    view.shape()
                ),
            ));
        };
        let table = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(Self {
            tokenizer,
            table,
            dimensions: *dimensions,
        })
    }

    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// One unit-length vector per text; a text with no known token gets a zero vector.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        texts
            .iter()
            .map(|text| {
                let encoding =
                    self.tokenizer
                        .encode(*text, false)
                        .map_err(|err| ModelError::Run {
                            name: "static table".to_owned(),
                            detail: err.to_string(),
                        })?;
                let mut sum = vec![0.0f32; self.dimensions];
                for id in encoding.get_ids() {
                    let start = *id as usize * self.dimensions;
                    if let Some(row) = self.table.get(start..start + self.dimensions) {
                        for (total, x) in sum.iter_mut().zip(row) {
                            *total += x;
                        }
                    }
                }
                crate::normalise(&mut sum);
                Ok(sum)
            })
            .collect()
    }
}
