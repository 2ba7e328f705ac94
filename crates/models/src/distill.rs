//! Distilling a static table from a BERT encoder: every vocabulary token, alone between the
//! encoder's start and end marks, goes through the model once, and its mean-pooled output
//! becomes that token's row. A text's vector is then the mean of its tokens' rows, which keeps
//! much of the encoder's sense of which words are alike at a tiny fraction of its cost.

use crate::bert::BertEmbedder;
use crate::catalogue::{ModelKind, ModelSource, ModelSpec, find};
use crate::error::ModelError;
use crate::static_table::{TABLE_FILE, TABLE_TENSOR};
use crate::store::{InstalledModel, ModelStore};

/// Tokens run through the encoder at once: three positions each, so large batches are cheap.
const BATCH: usize = 512;

/// Builds `spec` (a [`ModelSource::Distilled`] static table) from its installed source model.
/// `progress(done, total)` counts tokens. The table is installed only once it is whole.
pub fn distill_static_table(
    store: &ModelStore,
    spec: &ModelSpec,
    progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<InstalledModel, ModelError> {
    let (ModelKind::StaticTable, ModelSource::Distilled { from }) = (spec.kind, spec.source) else {
        return Err(ModelError::Run {
            name: spec.name.to_owned(),
            detail: "is not a distilled static table".to_owned(),
        });
    };
    let source = find(from)?;
    let source_dir = store.installed_dir(source)?;
    let encoder = BertEmbedder::load(&source_dir, source.max_tokens)?;
    let tokenizer_path = source_dir.join("tokenizer.json");
    let tokenizer =
        tokenizers::Tokenizer::from_file(&tokenizer_path).map_err(|err| ModelError::Files {
            path: tokenizer_path.clone(),
            detail: err.to_string(),
        })?;
    let marks = ["[CLS]", "[SEP]"].map(|mark| tokenizer.token_to_id(mark));
    let [Some(start), Some(end)] = marks else {
        return Err(ModelError::Files {
            path: tokenizer_path,
            detail: "has no [CLS] or [SEP] token".to_owned(),
        });
    };
    let vocab = encoder.vocab_size as u32;
    let mut table: Vec<u8> = Vec::with_capacity(vocab as usize * encoder.dimensions() * 4);
    let ids: Vec<u32> = (0..vocab).collect();
    for batch in ids.chunks(BATCH) {
        let rows = batch.iter().map(|id| vec![start, *id, end]).collect();
        let mask = batch.iter().map(|_| vec![1, 1, 1]).collect();
        for row in encoder.pooled(rows, mask)? {
            table.extend(row.iter().flat_map(|x| x.to_le_bytes()));
        }
        progress(
            (table.len() / (encoder.dimensions() * 4)) as u64,
            Some(u64::from(vocab)),
        );
    }

    let staging = store.staging(spec.name)?;
    let target = staging.path().join("tokenizer.json");
    std::fs::copy(&tokenizer_path, &target).map_err(|source| ModelError::Io {
        action: "copy to",
        path: target,
        source,
    })?;
    let table_path = staging.path().join(TABLE_FILE);
    let shape = vec![vocab as usize, encoder.dimensions()];
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape, &table)
        .map_err(|err| ModelError::Run {
            name: spec.name.to_owned(),
            detail: err.to_string(),
        })?;
    safetensors::serialize_to_file([(TABLE_TENSOR, view)], None, &table_path).map_err(|err| {
        ModelError::Files {
            path: table_path.clone(),
            detail: err.to_string(),
        }
    })?;
    store.install(spec, staging, format!("distilled from {from}"))
}
