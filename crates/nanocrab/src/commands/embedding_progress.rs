//! `nanocrab memory index`: how far the embedding of new chunks is, on a terminal, and how
//! fast the model embeds them (chunks per second of the model's own time).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nanocrab_memory::{EmbeddingError, EmbeddingProvider};

/// The model, counting what it embeds and the time it takes.
pub struct EmbeddingProgress {
    inner: Arc<dyn EmbeddingProvider>,
    bar: indicatif::ProgressBar,
    spent: Mutex<Duration>,
}

impl EmbeddingProgress {
    /// Shows a counter on stderr when `visible` (a terminal).
    pub fn new(inner: Arc<dyn EmbeddingProvider>, visible: bool) -> Self {
        let bar = if visible {
            let bar = indicatif::ProgressBar::new_spinner();
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} embedding: {pos} chunks ({per_sec}) {elapsed}",
            ) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        } else {
            indicatif::ProgressBar::hidden()
        };
        Self {
            inner,
            bar,
            spent: Mutex::default(),
        }
    }

    /// The model's own time so far.
    pub fn spent(&self) -> Duration {
        *self.spent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[async_trait]
impl EmbeddingProvider for EmbeddingProgress {
    /// The model's: the vectors are its, whoever counts them.
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let started = Instant::now();
        let vectors = self.inner.embed(texts).await;
        *self.spent.lock().unwrap_or_else(PoisonError::into_inner) += started.elapsed();
        if vectors.is_ok() {
            self.bar.inc(texts.len() as u64);
        }
        vectors
    }
}
