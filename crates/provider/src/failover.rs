//! The primary model and its fallbacks (`agents.defaults.fallbackModels`), tried in order when
//! a model cannot serve (after its own retries).

use crate::error::ProviderError;
use crate::provider::{ChatRequest, ChatResponse, DeltaSink};
use crate::resolve::ResolvedModel;

/// Models in the order they are tried; never empty.
#[derive(Debug, Clone)]
pub struct ModelChain {
    models: Vec<ResolvedModel>,
}

/// A model that failed and the one tried next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub from: String,
    pub to: String,
    pub reason: String,
}

impl ModelChain {
    pub fn new(primary: ResolvedModel, fallbacks: Vec<ResolvedModel>) -> Self {
        let mut models = vec![primary];
        models.extend(fallbacks);
        Self { models }
    }

    pub fn primary(&self) -> &ResolvedModel {
        &self.models[0]
    }

    pub fn get(&self, index: usize) -> Option<&ResolvedModel> {
        self.models.get(index)
    }

    /// Calls the model at `start`, then each later one while the failure warrants a fallback.
    /// `request.model` is replaced by each model's own name. Returns which model answered.
    pub async fn chat(
        &self,
        start: usize,
        request: &ChatRequest<'_>,
        on_delta: DeltaSink<'_>,
        on_fallback: &mut (dyn FnMut(Fallback) + Send),
    ) -> Result<(usize, ChatResponse), ProviderError> {
        let mut tried = Vec::new();
        let mut index = start.min(self.models.len() - 1);
        loop {
            let model = &self.models[index];
            let err = match model
                .provider
                .chat(&request.for_model(&model.model), on_delta)
                .await
            {
                Ok(response) => return Ok((index, response)),
                Err(err) => err,
            };
            tried.push(model.label.clone());
            let Some(next) = self
                .models
                .get(index + 1)
                .filter(|_| err.warrants_fallback())
            else {
                return Err(if tried.len() > 1 {
                    ProviderError::AllModelsFailed {
                        tried,
                        last: Box::new(err),
                    }
                } else {
                    err
                });
            };
            tracing::warn!("{} failed ({err}); trying {}", model.label, next.label);
            on_fallback(Fallback {
                from: model.label.clone(),
                to: next.label.clone(),
                reason: err.to_string(),
            });
            index += 1;
        }
    }
}
