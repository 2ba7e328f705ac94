//! Retrieval quality of memory search on a labelled set: recall@5 and MRR@10 over the queries
//! of `benches/retrieval/` (written for nanocrab; see its README), each note a file of a fresh
//! workspace indexed exactly as a user's would be: keyword search alone, then for each local
//! embedding model that is installed, vector search alone and both fused.
//!
//!     nanocrab models pull all-minilm-l6-v2
//!     cargo bench -p nanocrab-memory --bench retrieval_quality
//!
//! Models are looked for in `$NANOCRAB_HOME/models`, else `~/.nanocrab/models`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use nanocrab_config::Fusion;
use nanocrab_memory::{
    EmbeddingProvider, EmbeddingSetup, LocalEmbeddings, MemoryIndex, SearchOptions,
};
use nanocrab_models::ModelStore;

#[derive(serde::Deserialize)]
struct Note {
    id: String,
    path: String,
    text: String,
}

#[derive(serde::Deserialize)]
struct Query {
    query: String,
    relevant: Vec<String>,
}

fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The exact scan, every stored f32 vector read and multiplied: the reference the index's
/// scan is held to.
fn exact_scan(conn: &rusqlite::Connection, model: &str, query: &[f32]) -> Vec<(i64, f64)> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT c.id, e.vector FROM chunks c
             JOIN embeddings e ON e.model = ?1 AND e.hash = c.hash",
        )
        .unwrap();
    let mut rows = stmt.query([model]).unwrap();
    let mut scored = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let blob = row.get_ref(1).unwrap().as_blob().unwrap();
        let dot: f32 = blob
            .chunks_exact(4)
            .zip(query)
            .map(|(b, q)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * q)
            .sum();
        scored.push((row.get::<_, i64>(0).unwrap(), f64::from(dot)));
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/retrieval");
    let notes: Vec<Note> = read_jsonl(&data.join("corpus.jsonl"));
    let queries: Vec<Query> = read_jsonl(&data.join("queries.jsonl"));

    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    // Daily notes are memory files; the topical notes stand for documents in knowledge/.
    let mut id_of_path = HashMap::new();
    for note in &notes {
        let relative = if note.path.starts_with("memory/") {
            note.path.clone()
        } else {
            format!("knowledge/{}", note.path)
        };
        let file = workspace.join(&relative);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &note.text).unwrap();
        id_of_path.insert(relative, note.id.clone());
    }
    // The newest daily note is of 2026-03-20: ages are counted from the day after.
    let today = jiff::civil::date(2026, 3, 21);
    let evaluate = |index: &mut MemoryIndex, name: &str, options: &SearchOptions| {
        let (mut recall, mut reciprocal) = (0.0, 0.0);
        let mut latencies = Vec::new();
        for query in &queries {
            let started = Instant::now();
            let hits = runtime
                .block_on(index.search(&query.query, options))
                .unwrap()
                .hits;
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            // A note can be hit by several of its chunks: rank notes, not chunks.
            let mut ranked: Vec<&String> = Vec::new();
            for hit in &hits {
                let id = &id_of_path[&hit.path];
                if !ranked.contains(&id) {
                    ranked.push(id);
                }
            }
            let found = ranked
                .iter()
                .take(5)
                .filter(|id| query.relevant.contains(id))
                .count();
            recall += found as f64 / query.relevant.len() as f64;
            if let Some(rank) = ranked.iter().position(|id| query.relevant.contains(id)) {
                reciprocal += 1.0 / (rank + 1) as f64;
            }
        }
        latencies.sort_by(f64::total_cmp);
        let n = queries.len() as f64;
        println!(
            "{name:<44} recall@5 {:.3}  MRR@10 {:.3}  search median {:.2} ms, p95 {:.2} ms",
            recall / n,
            reciprocal / n,
            latencies[latencies.len() / 2],
            latencies[latencies.len() * 95 / 100]
        );
    };

    let started = Instant::now();
    let mut index = runtime
        .block_on(MemoryIndex::open(
            &dir.path().join("index.sqlite"),
            &workspace,
        ))
        .unwrap();
    let report = runtime.block_on(index.sync()).unwrap();
    println!(
        "{} notes ({} chunks) indexed in {:.0} ms; {} queries",
        notes.len(),
        report.chunks,
        started.elapsed().as_secs_f64() * 1000.0,
        queries.len()
    );
    evaluate(&mut index, "BM25", &SearchOptions::new(10));
    evaluate(
        &mut index,
        "BM25 + recency (half-life 90 days)",
        &SearchOptions {
            recency_half_life_days: Some(90.0),
            today: Some(today),
            ..SearchOptions::new(10)
        },
    );
    evaluate(
        &mut index,
        "BM25 + MMR (lambda 0.7)",
        &SearchOptions {
            mmr_lambda: Some(0.7),
            ..SearchOptions::new(10)
        },
    );

    let models = std::env::var_os("NANOCRAB_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|home| home.join(".nanocrab")))
        .unwrap()
        .join("models");
    let store = ModelStore::new(&models);
    for name in [nanocrab_memory::DEFAULT_LOCAL_MODEL] {
        let catalogue = nanocrab_models::Catalogue::builtin();
        let spec = catalogue.find(name).unwrap();
        if store.installed_dir(spec).is_err() {
            println!(
                "{name}: not installed in {} (nanocrab models pull {name})",
                models.display()
            );
            continue;
        }
        let embedder: Arc<dyn EmbeddingProvider> =
            Arc::new(LocalEmbeddings::new(store.clone(), spec.clone()));
        let started = Instant::now();
        runtime.block_on(embedder.embed(&["warm up"])).unwrap();
        let load = started.elapsed();
        let started = Instant::now();
        let mut index = runtime
            .block_on(MemoryIndex::open(
                &dir.path().join(format!("{name}.sqlite")),
                &workspace,
            ))
            .unwrap()
            .with_embeddings(EmbeddingSetup::Ready(embedder.clone()));
        let report = runtime.block_on(index.sync()).unwrap();
        assert_eq!(report.embedding_error, None);
        println!(
            "{name}: loaded in {:.0} ms; {} chunks indexed and embedded in {:.0} ms",
            load.as_secs_f64() * 1000.0,
            report.embedded,
            started.elapsed().as_secs_f64() * 1000.0
        );
        let weighted = |weight: f64| SearchOptions {
            fusion: Fusion::Weighted,
            vector_weight: weight,
            ..SearchOptions::new(10)
        };
        evaluate(&mut index, &format!("{name}: vector only"), &weighted(1.0));
        // The index's scan (int8 in memory, its best scored again) against the exact one, by
        // the notes each ranks in its top five and by the chunks themselves.
        let conn = rusqlite::Connection::open(dir.path().join(format!("{name}.sqlite"))).unwrap();
        let note_of = |id: i64| -> String {
            let path: String = conn
                .query_row("SELECT path FROM chunks WHERE id = ?1", [id], |row| {
                    row.get(0)
                })
                .unwrap();
            id_of_path[&path].clone()
        };
        let recall5 = |ranked: &[(i64, f64)], relevant: &[String]| {
            let mut notes: Vec<String> = Vec::new();
            for (id, _) in ranked {
                let note = note_of(*id);
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            let found = notes
                .iter()
                .take(5)
                .filter(|n| relevant.contains(n))
                .count();
            found as f64 / relevant.len() as f64
        };
        let (mut exact_recall, mut index_recall, mut same_top5) = (0.0, 0.0, 0);
        for query in &queries {
            let vector = runtime
                .block_on(embedder.embed(&[&query.query]))
                .unwrap()
                .remove(0);
            let mut exact = exact_scan(&conn, embedder.id(), &vector);
            exact.truncate(50);
            let scanned = index.nearest_chunks(embedder.id(), &vector, 50).unwrap();
            exact_recall += recall5(&exact, &query.relevant);
            index_recall += recall5(&scanned, &query.relevant);
            let top5 =
                |list: &[(i64, f64)]| list.iter().take(5).map(|(id, _)| *id).collect::<Vec<_>>();
            same_top5 += usize::from(top5(&exact) == top5(&scanned));
        }
        let n = queries.len() as f64;
        println!(
            "{name}: vector scan, recall@5 of the notes: exact f32 {:.3}, the index's {:.3}; the same top-5 chunks in {same_top5} of {} queries",
            exact_recall / n,
            index_recall / n,
            queries.len()
        );
        drop(conn);
        evaluate(
            &mut index,
            &format!("{name}: hybrid, RRF"),
            &SearchOptions {
                fusion: Fusion::Rrf,
                ..SearchOptions::new(10)
            },
        );
        for weight in [0.3, 0.5, 0.7] {
            evaluate(
                &mut index,
                &format!("{name}: hybrid, weighted {weight}"),
                &weighted(weight),
            );
        }
        evaluate(
            &mut index,
            &format!("{name}: hybrid, weighted 0.5 + MMR 0.7"),
            &SearchOptions {
                mmr_lambda: Some(0.7),
                ..SearchOptions::new(10)
            },
        );
        evaluate(
            &mut index,
            &format!("{name}: hybrid, weighted 0.5 + recency 90 d"),
            &SearchOptions {
                recency_half_life_days: Some(90.0),
                today: Some(today),
                ..SearchOptions::new(10)
            },
        );
    }
}
