//! Embeddings for memory search: a seam ([`EmbeddingProvider`]) with a local model from the
//! model store (the default: no key, no network) and any OpenAI-compatible `/embeddings`
//! endpoint behind it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nanocrab_config::http::Timeouts;
use nanocrab_config::{EmbeddingBackend, MemoryConfig, ModelsConfig};
use nanocrab_models::{BertEmbedder, Catalogue, ModelError, ModelKind, ModelSpec, ModelStore};

/// The local model used when `memory.embeddings.model` is not set.
pub const DEFAULT_LOCAL_MODEL: &str = "all-minilm-l6-v2";
const DEFAULT_REMOTE_MODEL: &str = "text-embedding-3-small";
const DEFAULT_REMOTE_BASE: &str = "https://api.openai.com/v1";
/// Texts per request to a remote endpoint; OpenAI takes up to 2,048.
const REMOTE_BATCH: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum EmbeddingError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("embeddings endpoint {url}: {detail}")]
    Remote { url: String, detail: String },
    /// The model's thread ended without an answer (it panicked, or the runtime is stopping).
    #[error("embedding model {model} stopped: {detail}")]
    Stopped { model: String, detail: String },
}

/// Turns texts into vectors whose dot product says how alike they mean.
#[async_trait::async_trait]
pub trait EmbeddingProvider: Send + Sync {
    /// Names the model and where it runs: vectors of different ids are never compared.
    fn id(&self) -> &str;
    /// One unit-length vector per text, in order.
    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError>;
}

/// What `memory.embeddings` asks for and whether it can be had.
#[derive(Clone)]
pub enum EmbeddingSetup {
    Ready(Arc<dyn EmbeddingProvider>),
    /// Search is by keyword only, for this reason (said to the user).
    KeywordOnly(String),
}

impl EmbeddingSetup {
    /// `var` reads the environment, for the key's fallback (`OPENAI_API_KEY`). A local model
    /// is looked up in the catalogue `models` makes (the built-ins and `models.entries`).
    pub fn from_config(
        config: &MemoryConfig,
        models: &ModelsConfig,
        models_dir: PathBuf,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let embeddings = &config.embeddings;
        match embeddings.provider {
            EmbeddingBackend::Off => {
                Self::KeywordOnly("memory.embeddings.provider is \"off\"".to_owned())
            }
            EmbeddingBackend::Local => {
                if let Err(err) = nanocrab_models::runtime_built() {
                    return Self::KeywordOnly(err.to_string());
                }
                let name = embeddings
                    .model
                    .clone()
                    .unwrap_or_else(|| DEFAULT_LOCAL_MODEL.to_owned());
                let store = ModelStore::new(models_dir);
                let installed = Catalogue::from_config(models).and_then(|catalogue| {
                    let spec = catalogue.find(&name)?;
                    store.installed_dir(spec)?;
                    Ok(spec.clone())
                });
                match installed {
                    Ok(spec) => match spec.kind {
                        ModelKind::Embedding { .. } => {
                            Self::Ready(Arc::new(LocalEmbeddings::new(store, spec)))
                        }
                        ModelKind::Chat { .. } => Self::KeywordOnly(format!(
                            "memory.embeddings.model `{name}` is a chat model, not an embedding model"
                        )),
                    },
                    Err(err) => Self::KeywordOnly(err.to_string()),
                }
            }
            EmbeddingBackend::OpenAi => {
                let model = embeddings
                    .model
                    .clone()
                    .unwrap_or_else(|| DEFAULT_REMOTE_MODEL.to_owned());
                let base = embeddings
                    .api_base
                    .clone()
                    .unwrap_or_else(|| DEFAULT_REMOTE_BASE.to_owned());
                let key = embeddings
                    .api_key
                    .clone()
                    .filter(|k| !k.is_empty())
                    .or_else(|| var("OPENAI_API_KEY"));
                Self::Ready(Arc::new(RemoteEmbeddings::new(base, key, model)))
            }
        }
    }

    pub fn provider(&self) -> Option<Arc<dyn EmbeddingProvider>> {
        match self {
            Self::Ready(provider) => Some(provider.clone()),
            Self::KeywordOnly(_) => None,
        }
    }
}

/// Keyword search, until a model is set up.
impl Default for EmbeddingSetup {
    fn default() -> Self {
        Self::KeywordOnly("no embedding model is set up".to_owned())
    }
}

impl std::fmt::Debug for EmbeddingSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ready(provider) => f.debug_tuple("Ready").field(&provider.id()).finish(),
            Self::KeywordOnly(reason) => f.debug_tuple("KeywordOnly").field(reason).finish(),
        }
    }
}

/// Two setups are the same when they embed with the same model, or fall back for the same
/// reason.
impl PartialEq for EmbeddingSetup {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Ready(a), Self::Ready(b)) => a.id() == b.id(),
            (Self::KeywordOnly(a), Self::KeywordOnly(b)) => a == b,
            (Self::Ready(_), Self::KeywordOnly(_)) | (Self::KeywordOnly(_), Self::Ready(_)) => {
                false
            }
        }
    }
}

/// A model from the local store, loaded on first use and kept for the life of the process.
pub struct LocalEmbeddings {
    id: String,
    spec: ModelSpec,
    store: ModelStore,
    loaded: Arc<Mutex<Option<Arc<BertEmbedder>>>>,
}

impl LocalEmbeddings {
    pub fn new(store: ModelStore, spec: ModelSpec) -> Self {
        Self {
            id: format!("local:{}", spec.name),
            spec,
            store,
            loaded: Arc::new(Mutex::new(None)),
        }
    }
}

#[async_trait::async_trait]
impl EmbeddingProvider for LocalEmbeddings {
    fn id(&self) -> &str {
        &self.id
    }

    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let loaded = self.loaded.clone();
        let store = self.store.clone();
        let spec = self.spec.clone();
        let texts: Vec<String> = texts.iter().map(|&text| text.to_owned()).collect();
        // Loading and running the model is CPU work of up to seconds: off the async threads.
        tokio::task::spawn_blocking(move || {
            let model = {
                let mut slot = loaded.lock().unwrap_or_else(|e| e.into_inner());
                match slot.as_ref() {
                    Some(model) => model.clone(),
                    None => {
                        let model = Arc::new(BertEmbedder::from_store(&store, &spec)?);
                        *slot = Some(model.clone());
                        model
                    }
                }
            };
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            Ok(model.embed(&texts)?)
        })
        .await
        .map_err(|err| EmbeddingError::Stopped {
            model: self.id.clone(),
            detail: err.to_string(),
        })?
    }
}

/// An OpenAI-compatible `POST {apiBase}/embeddings`.
pub struct RemoteEmbeddings {
    id: String,
    url: String,
    key: Option<String>,
    model: String,
    /// Built at the first call and kept: a client holds its connection pool and TLS setup.
    client: std::sync::OnceLock<reqwest::Client>,
}

#[derive(serde::Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingRow>,
}

#[derive(serde::Deserialize)]
struct EmbeddingRow {
    index: usize,
    embedding: Vec<f32>,
}

impl RemoteEmbeddings {
    pub fn new(api_base: String, key: Option<String>, model: String) -> Self {
        let base = api_base.trim_end_matches('/');
        Self {
            id: format!("openai:{model}@{base}"),
            url: format!("{base}/embeddings"),
            key,
            model,
            client: std::sync::OnceLock::new(),
        }
    }
}

/// reqwest's messages repeat the URL, which the error already names.
fn without_url(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    if let Some(url) = err.url() {
        text = text.replace(&format!(" for url ({url})"), "");
    }
    text
}

#[async_trait::async_trait]
impl EmbeddingProvider for RemoteEmbeddings {
    fn id(&self) -> &str {
        &self.id
    }

    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let failed = |detail: String| EmbeddingError::Remote {
            url: self.url.clone(),
            detail,
        };
        let client = match self.client.get() {
            Some(client) => client,
            None => {
                let built = nanocrab_config::http::client_builder(Timeouts {
                    connect: Duration::from_secs(10),
                    read: None,
                    total: Some(Duration::from_secs(60)),
                })
                .build()
                .map_err(|err| failed(err.to_string()))?;
                self.client.get_or_init(|| built)
            }
        };
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(REMOTE_BATCH) {
            let mut request = client.post(&self.url).json(&serde_json::json!({
                "model": self.model,
                "input": batch,
            }));
            if let Some(key) = &self.key {
                request = request.bearer_auth(key);
            }
            let response = request
                .send()
                .await
                .map_err(|err| failed(without_url(&err)))?;
            let status = response.status();
            if !status.is_success() {
                let body = response.text().await.unwrap_or_default();
                let message = serde_json::from_str::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                    .unwrap_or(body);
                return Err(failed(format!(
                    "{status}: {}",
                    self.key
                        .as_deref()
                        .map_or(message.clone(), |key| message.replace(key, "[redacted]"))
                )));
            }
            let mut rows = response
                .json::<EmbeddingsResponse>()
                .await
                .map_err(|err| failed(format!("unexpected answer: {}", without_url(&err))))?
                .data;
            if rows.len() != batch.len() {
                return Err(failed(format!(
                    "{} vectors for {} texts",
                    rows.len(),
                    batch.len()
                )));
            }
            rows.sort_by_key(|row| row.index);
            out.extend(rows.into_iter().map(|row| {
                let mut v = row.embedding;
                nanocrab_models::normalise(&mut v);
                v
            }));
        }
        Ok(out)
    }
}
