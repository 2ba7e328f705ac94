//! The models' types in a build without the `local-models` feature: the store and `models
//! pull` still work, but loading a model says which feature this build lacks, so that a
//! config asking for a local model fails with the reason, never with a panic.

use std::ops::ControlFlow;
use std::path::Path;

use crate::catalogue::ModelSpec;
use crate::chat_request::{ChatTurn, GenerateOptions, Generation};
use crate::error::ModelError;
use crate::store::ModelStore;

/// No value of it exists: the models below are never loaded in this build.
enum Absent {}

pub struct BertEmbedder {
    absent: Absent,
}

impl BertEmbedder {
    pub fn from_store(_store: &ModelStore, _spec: &ModelSpec) -> Result<Self, ModelError> {
        Err(ModelError::NotBuilt)
    }

    pub fn load(_dir: &Path, _max_tokens: usize) -> Result<Self, ModelError> {
        Err(ModelError::NotBuilt)
    }

    pub fn dimensions(&self) -> usize {
        match self.absent {}
    }

    pub fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        match self.absent {}
    }
}

pub struct ChatModel {
    absent: Absent,
}

impl ChatModel {
    pub fn load(_gguf: &Path) -> Result<Self, ModelError> {
        Err(ModelError::NotBuilt)
    }

    pub fn context_tokens(&self) -> usize {
        match self.absent {}
    }

    pub fn render(
        &self,
        _turns: &[ChatTurn],
        _tools: &[serde_json::Value],
    ) -> Result<String, ModelError> {
        match self.absent {}
    }

    pub fn count_tokens(&self, _text: &str) -> Result<usize, ModelError> {
        match self.absent {}
    }

    pub fn generate(
        &mut self,
        _turns: &[ChatTurn],
        _options: &GenerateOptions,
        _on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, ModelError> {
        match self.absent {}
    }
}
