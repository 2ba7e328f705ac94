//! Hybrid memory search: keyword and vector results fused, vectors kept per model, and what
//! happens when embedding fails or the model changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use nanocrab_memory::{
    EmbeddingError, EmbeddingProvider, EmbeddingSetup, MatrixReads, MemoryIndex, RemoteEmbeddings,
    SearchMode, SearchOptions,
};
use nanocrab_testkit::MockLlm;
use pretty_assertions::assert_eq;

/// Embeds by concept: words of one group share a dimension, so "car" and "automobile" are
/// alike while sharing no letters. Counts the texts it embeds, and fails when told to.
struct Concepts {
    id: String,
    embedded: AtomicUsize,
    /// Texts embedded before every later call fails; `usize::MAX`: never.
    fail_after: AtomicUsize,
    queries_fail: AtomicBool,
}

const GROUPS: [&[&str]; 4] = [
    &["car", "automobile", "vehicle", "garage", "mechanic"],
    &["dentist", "teeth", "tooth", "dental"],
    &["bread", "sourdough", "baking", "loaf"],
    &["trip", "travel", "lisbon", "porto", "flight"],
];

impl Concepts {
    fn new(id: &str) -> Arc<Self> {
        Arc::new(Self {
            id: id.to_owned(),
            embedded: AtomicUsize::new(0),
            fail_after: AtomicUsize::new(usize::MAX),
            queries_fail: AtomicBool::new(false),
        })
    }

    fn embedded(&self) -> usize {
        self.embedded.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl EmbeddingProvider for Concepts {
    fn id(&self) -> &str {
        &self.id
    }

    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let query = texts.len() == 1 && texts[0].ends_with('?');
        if (query && self.queries_fail.load(Ordering::SeqCst))
            || (!query && self.embedded() + texts.len() > self.fail_after.load(Ordering::SeqCst))
        {
            return Err(EmbeddingError::Remote {
                url: "http://127.0.0.1:9/embeddings".into(),
                detail: "503 Service Unavailable".into(),
            });
        }
        if !query {
            self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
        }
        Ok(texts
            .iter()
            .map(|text| {
                let mut v = vec![0.0f32; GROUPS.len() + 1];
                for word in text.split(|c: char| !c.is_alphanumeric()) {
                    let word = word.to_lowercase();
                    match GROUPS.iter().position(|g| g.contains(&word.as_str())) {
                        Some(group) => v[group] += 1.0,
                        None => v[GROUPS.len()] += 0.05,
                    }
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
                v.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

fn workspace(dir: &Path) -> std::path::PathBuf {
    let ws = dir.join("workspace");
    let write = |path: &str, text: &str| {
        let file = ws.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write(
        "knowledge/garage.md",
        "# Garage\n\nThe automobile goes to the mechanic every March for its service.\n",
    );
    write(
        "memory/MEMORY.md",
        "# Health\n\nDentist appointment every six months, Dr. Okafor.\n",
    );
    write(
        "memory/2026-03-01.md",
        "Baked a sourdough loaf with the new starter.\n",
    );
    ws
}

fn paths(results: &nanocrab_memory::SearchResults) -> Vec<&str> {
    results.hits.iter().map(|h| h.path.as_str()).collect()
}

/// The index at `db` for `ws`, searching by meaning with `concepts` too.
async fn with_concepts(db: &Path, ws: &Path, concepts: &Arc<Concepts>) -> MemoryIndex {
    MemoryIndex::open(db, ws)
        .await
        .unwrap()
        .with_embeddings(EmbeddingSetup::Ready(concepts.clone()))
}

#[tokio::test]
async fn hybrid_search_finds_by_meaning_what_keywords_miss() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let db = dir.path().join("state/memory-index.sqlite");
    let concepts = Concepts::new("test:concepts");

    let mut keyword = MemoryIndex::open(&db, &ws)
        .await
        .unwrap()
        .with_embeddings(EmbeddingSetup::KeywordOnly("no model in this test".into()));
    keyword.sync().await.unwrap();
    let results = keyword
        .search("when is my car checked?", &SearchOptions::new(3))
        .await
        .unwrap();
    assert_eq!(
        results.mode,
        SearchMode::Keyword {
            reason: "no model in this test".into()
        }
    );
    assert_eq!(paths(&results), Vec::<&str>::new());

    let mut hybrid = with_concepts(&db, &ws, &concepts).await;
    let report = hybrid.sync().await.unwrap();
    assert_eq!((report.embedded, report.embedding_error), (3, None));
    let results = hybrid
        .search("when is my car checked?", &SearchOptions::new(3))
        .await
        .unwrap();
    assert_eq!(
        results.mode,
        SearchMode::Hybrid {
            model: "test:concepts".into()
        }
    );
    assert_eq!(paths(&results)[0], "knowledge/garage.md");
    assert_eq!(results.hits[0].score, 1.0);
    // Words still count: a keyword match agreed on by both methods comes first.
    let results = hybrid
        .search("dentist teeth?", &SearchOptions::new(1))
        .await
        .unwrap();
    assert_eq!(paths(&results), vec!["memory/MEMORY.md"]);

    let status = hybrid.status().unwrap();
    assert_eq!(
        (
            status.embedding_model.as_deref(),
            status.embedded_chunks,
            status.chunks
        ),
        (Some("test:concepts"), 3, 3)
    );
}

#[tokio::test]
async fn only_changed_text_is_embedded_again_and_a_rebuild_reuses_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let db = dir.path().join("state/memory-index.sqlite");
    let concepts = Concepts::new("test:concepts");
    let mut index = with_concepts(&db, &ws, &concepts).await;
    index.sync().await.unwrap();
    assert_eq!(concepts.embedded(), 3);

    std::fs::write(
        ws.join("memory/MEMORY.md"),
        "# Health\n\nDentist appointment every six months, Dr. Mensah now.\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("knowledge/copy.md"),
        std::fs::read(ws.join("knowledge/garage.md")).unwrap(),
    )
    .unwrap();
    let report = index.sync().await.unwrap();
    // The edited note is embedded again; the copy's text already has a vector.
    assert_eq!((report.changed, report.added, report.embedded), (1, 1, 1));
    assert_eq!(concepts.embedded(), 4);

    let (rebuilt, report) =
        MemoryIndex::rebuild(&db, &ws, None, EmbeddingSetup::Ready(concepts.clone()))
            .await
            .unwrap();
    assert_eq!((report.chunks, report.embedded), (4, 0));
    assert_eq!(concepts.embedded(), 4);
    assert_eq!(rebuilt.status().unwrap().embedded_chunks, 4);
}

/// Vector search alone: the hits come from the vectors the index holds in memory.
fn by_vector(limit: usize) -> SearchOptions {
    SearchOptions {
        vector_weight: 1.0,
        ..SearchOptions::new(limit)
    }
}

#[tokio::test]
async fn the_vectors_held_in_memory_outlive_an_index_and_follow_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let db = dir.path().join("state/memory-index.sqlite");
    let concepts = Concepts::new("test:concepts");
    let mut index = with_concepts(&db, &ws, &concepts).await;
    index.sync().await.unwrap();
    // "vehicle" is in no note: only the vectors can find the garage.
    let results = index.search("vehicle?", &by_vector(1)).await.unwrap();
    assert_eq!(paths(&results), vec!["knowledge/garage.md"]);
    let reads = || nanocrab_memory::matrix_reads(&db, "test:concepts");
    let vectors = index.status().unwrap().embedded_chunks;
    let read_whole = MatrixReads {
        whole: 1,
        updates: 0,
        rows: vectors,
    };
    assert_eq!(reads(), read_whole);
    // The agent's tool opens the index afresh for each search, and syncs: nothing changed,
    // so the matrix read before serves.
    drop(index);
    let mut index = with_concepts(&db, &ws, &concepts).await;
    index.sync().await.unwrap();
    let results = index.search("vehicle?", &by_vector(1)).await.unwrap();
    assert_eq!(paths(&results), vec!["knowledge/garage.md"]);
    assert_eq!(reads(), read_whole);

    // Edited here: the next search sees the new vectors, not the ones read before.
    std::fs::write(
        ws.join("knowledge/garage.md"),
        "# Bakery\n\nNow a bakery for loaves.\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("memory/2026-03-01.md"),
        "Took the automobile to the mechanic for its service.\n",
    )
    .unwrap();
    let report = index.sync().await.unwrap();
    assert_eq!((report.changed, report.embedded), (2, 2));
    let results = index.search("vehicle?", &by_vector(1)).await.unwrap();
    assert_eq!(paths(&results), vec!["memory/2026-03-01.md"]);
    // Only the two edited notes' vectors are read again.
    assert_eq!(
        reads(),
        MatrixReads {
            updates: 1,
            rows: vectors + 2,
            ..read_whole
        }
    );

    // Synced by another connection (a `nanocrab memory index` beside the gateway): this
    // index's own sync finds nothing changed, and its search still reads the new vectors.
    std::fs::write(
        ws.join("memory/MEMORY.md"),
        "# Health\n\nThe car insurance renews in May; vehicle papers in the drawer.\n",
    )
    .unwrap();
    std::fs::write(ws.join("memory/2026-03-01.md"), "Baked bread.\n").unwrap();
    let mut other = with_concepts(&db, &ws, &concepts).await;
    assert_eq!(other.sync().await.unwrap().changed, 2);
    drop(other);
    assert_eq!(index.sync().await.unwrap().changed, 0);
    let results = index.search("vehicle?", &by_vector(1)).await.unwrap();
    assert_eq!(paths(&results), vec!["memory/MEMORY.md"]);
    assert_eq!(
        reads(),
        MatrixReads {
            updates: 2,
            rows: vectors + 4,
            ..read_whole
        }
    );
}

#[tokio::test]
async fn an_embedding_failure_leaves_keyword_search_and_the_next_sync_finishes_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    for i in 0..40 {
        std::fs::write(
            ws.join(format!("knowledge/note-{i:02}.md")),
            format!("Note {i} about the flight to Lisbon.\n"),
        )
        .unwrap();
    }
    let db = dir.path().join("state/memory-index.sqlite");
    let concepts = Concepts::new("test:concepts");
    concepts.fail_after.store(32, Ordering::SeqCst);
    let mut index = with_concepts(&db, &ws, &concepts).await;
    let report = index.sync().await.unwrap();
    assert_eq!(report.chunks, 43);
    // The batch that went through is kept.
    assert_eq!(report.embedded, 32);
    assert!(
        report
            .embedding_error
            .as_deref()
            .is_some_and(|e| e.contains("503 Service Unavailable")),
        "{report:?}"
    );
    assert_eq!(index.status().unwrap().embedded_chunks, 32);
    assert_eq!(
        paths(
            &index
                .search("sourdough", &SearchOptions::new(1))
                .await
                .unwrap()
        ),
        vec!["memory/2026-03-01.md"]
    );

    concepts.queries_fail.store(true, Ordering::SeqCst);
    let results = index
        .search("garage automobile?", &SearchOptions::new(1))
        .await
        .unwrap();
    assert!(
        matches!(&results.mode, SearchMode::Keyword { reason } if reason.contains("503")),
        "{:?}",
        results.mode
    );
    assert_eq!(paths(&results), vec!["knowledge/garage.md"]);

    concepts.fail_after.store(usize::MAX, Ordering::SeqCst);
    let report = index.sync().await.unwrap();
    assert_eq!((report.embedded, report.embedding_error), (11, None));
    assert_eq!(index.status().unwrap().embedded_chunks, 43);
}

#[tokio::test]
async fn a_new_model_rebuilds_the_index_and_a_failed_rebuild_keeps_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let db = dir.path().join("state/memory-index.sqlite");
    let old = Concepts::new("test:old");
    MemoryIndex::open(&db, &ws)
        .await
        .unwrap()
        .with_embeddings(EmbeddingSetup::Ready(old.clone()))
        .sync()
        .await
        .unwrap();

    let new = Concepts::new("test:new");
    new.fail_after.store(0, Ordering::SeqCst);
    let mut index = MemoryIndex::open(&db, &ws)
        .await
        .unwrap()
        .with_embeddings(EmbeddingSetup::Ready(new.clone()));
    let report = index.sync().await.unwrap();
    assert!(report.embedding_error.is_some(), "{report:?}");
    let status = index.status().unwrap();
    assert_eq!(
        (status.embedding_model.as_deref(), status.embedded_chunks),
        (Some("test:old"), 3)
    );
    let results = index.search("car?", &SearchOptions::new(3)).await.unwrap();
    assert!(
        matches!(&results.mode, SearchMode::Keyword { reason } if reason.contains("could not be rebuilt for test:new")),
        "{:?}",
        results.mode
    );
    // No temporary file of the failed rebuild is left behind.
    let leftovers: Vec<String> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("rebuild"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());

    new.fail_after.store(usize::MAX, Ordering::SeqCst);
    let mut index = MemoryIndex::open(&db, &ws)
        .await
        .unwrap()
        .with_embeddings(EmbeddingSetup::Ready(new.clone()));
    let report = index.sync().await.unwrap();
    assert_eq!((report.embedded, report.embedding_error), (3, None));
    let status = index.status().unwrap();
    assert_eq!(
        (status.embedding_model.as_deref(), status.embedded_chunks),
        (Some("test:new"), 3)
    );
    assert_eq!(
        paths(&index.search("car?", &SearchOptions::new(1)).await.unwrap()),
        vec!["knowledge/garage.md"]
    );
}

#[tokio::test]
async fn remote_embeddings_speak_the_openai_wire_and_never_echo_the_key() {
    let mock = MockLlm::spawn();
    let remote = RemoteEmbeddings::new(
        mock.openai_base(),
        Some("sk-test-secret".into()),
        "text-embedding-3-small".into(),
    );
    assert_eq!(
        remote.id(),
        format!("openai:text-embedding-3-small@{}", mock.openai_base())
    );
    let vectors = remote
        .embed(&["dentist appointment", "sourdough", "dentist appointment"])
        .await
        .unwrap();
    assert_eq!(vectors.len(), 3);
    assert_eq!(vectors[0], vectors[2]);
    assert_eq!(vectors[0].len(), nanocrab_testkit::EMBEDDING_DIMENSIONS);
    let norm: f32 = vectors[1].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/embeddings");
    assert_eq!(
        requests[0].headers["authorization"],
        "Bearer sk-test-secret"
    );
    assert_eq!(
        requests[0].body,
        serde_json::json!({
            "model": "text-embedding-3-small",
            "input": ["dentist appointment", "sourdough", "dentist appointment"]
        })
    );

    // A wrong base: the error names the endpoint and the status, never the key.
    let wrong = RemoteEmbeddings::new(
        format!("{}/nope", mock.openai_base()),
        Some("sk-test-secret".into()),
        "text-embedding-3-small".into(),
    );
    let err = wrong.embed(&["x"]).await.unwrap_err().to_string();
    assert!(
        err.contains("/nope/embeddings") && err.contains("404"),
        "{err}"
    );
    assert!(!err.contains("sk-test-secret"), "{err}");

    // And it serves an index like any model.
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let mut index = MemoryIndex::open(&dir.path().join("index.sqlite"), &ws)
        .await
        .unwrap()
        .with_embeddings(EmbeddingSetup::Ready(Arc::new(remote)));
    assert_eq!(index.sync().await.unwrap().embedded, 3);
    let results = index
        .search("sourdough loaf", &SearchOptions::new(1))
        .await
        .unwrap();
    assert_eq!(paths(&results), vec!["memory/2026-03-01.md"]);
}

/// A local model is found through the catalogue the config makes, so a user's entry works;
/// a chat model is not taken for an embedding model.
#[tokio::test]
async fn local_embeddings_find_a_user_entry_of_the_catalogue() {
    use nanocrab_config::{MemoryConfig, ModelsConfig};
    use nanocrab_models::{Catalogue, Endpoints, ModelStore};
    use nanocrab_testkit::models::{sha256_hex, tiny_bert_files};
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    let models_dir = dir.path().join("models");
    let entry = |kind: &str, files: &[(&str, Vec<u8>)]| {
        let mut entry = json!({
            "kind": kind,
            "files": files.iter().map(|(name, bytes)| json!({
                "name": name, "size": bytes.len(), "sha256": sha256_hex(bytes)
            })).collect::<Vec<_>>(),
            "sources": [{"huggingFace": {"repo": "acme/none", "revision": "main"}}],
        });
        match kind {
            "chat" => entry["contextTokens"] = json!(512),
            _ => entry["dimensions"] = json!(8),
        }
        entry
    };
    let gguf = vec![("tiny.gguf", b"GGUF and not much else".to_vec())];
    let models: ModelsConfig = serde_json::from_value(json!({"entries": {
        "my-bert": entry("embedding", &tiny_bert_files()),
        "tiny-chat": entry("chat", &gguf),
    }}))
    .unwrap();
    let setup = |name: &str| {
        let memory: MemoryConfig =
            serde_json::from_value(json!({"embeddings": {"model": name}})).unwrap();
        EmbeddingSetup::from_config(&memory, &models, models_dir.clone(), &|_| None)
    };
    assert_eq!(
        setup("my-bert"),
        EmbeddingSetup::KeywordOnly(
            "the model `my-bert` is not installed; run `nanocrab models pull my-bert`".to_owned()
        )
    );

    // Installed from files placed by hand: no server is asked.
    let store = ModelStore::new(&models_dir);
    let catalogue = Catalogue::from_config(&models).unwrap();
    let offline = Endpoints {
        index_url: "http://127.0.0.1:9".to_owned(),
        hub_url: "http://127.0.0.1:9".to_owned(),
    };
    std::fs::create_dir_all(store.downloads()).unwrap();
    for (name, bytes) in tiny_bert_files().into_iter().chain(gguf) {
        std::fs::write(store.downloads().join(name), bytes).unwrap();
    }
    for name in ["my-bert", "tiny-chat"] {
        nanocrab_models::pull(&store, catalogue.find(name).unwrap(), &offline, &mut |_| {})
            .await
            .unwrap();
    }

    let ready = setup("my-bert");
    assert_eq!(
        ready.provider().map(|p| p.id().to_owned()),
        Some("local:my-bert".to_owned())
    );
    let vectors = ready
        .provider()
        .unwrap()
        .embed(&["dentist on tuesday"])
        .await
        .unwrap();
    assert_eq!(vectors[0].len(), 8);
    assert_eq!(
        setup("tiny-chat"),
        EmbeddingSetup::KeywordOnly(
            "memory.embeddings.model `tiny-chat` is a chat model, not an embedding model"
                .to_owned()
        )
    );
}
