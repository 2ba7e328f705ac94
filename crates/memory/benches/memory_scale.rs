//! Memory search at scale: generated workspaces of 1,000, 10,000 and 100,000 chunks (Markdown
//! notes of realistic words, several chunks a file, under `memory/` and `knowledge/`), each
//! indexed as a user's would be, and per size: the index build, its size on disk, peak RSS,
//! in-process search latency by keyword and hybrid, and the vector scan on its own.
//!
//!     cargo bench -p nanocrab-memory --bench memory_scale [-- --sizes 1000,10000 --json]
//!     cargo bench -p nanocrab-memory --bench memory_scale -- --write-corpus DIR --sizes 10000
//!
//! Each size runs in a process of its own (this binary again), so that its peak RSS is its own.
//! Stored vectors are synthetic (unit vectors of 384 dimensions, from the chunk's hash): the
//! model would take hours to embed 100,000 chunks on this machine, and a scan costs the same
//! whatever the numbers are. The query goes through all-MiniLM-L6-v2 when the model is in
//! `--models DIR`, else `$NANOCRAB_HOME/models`, else `~/.nanocrab/models`; without it, the hybrid row with the
//! model says why it is missing and the synthetic-query row still times everything else.
//! `--write-corpus DIR` writes one size's workspace files under DIR (and `DIR/queries.txt`)
//! for `scripts/bench.py --memory-scale`, which times whole `nanocrab memory search` processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use nanocrab_memory::{
    EmbeddingError, EmbeddingProvider, EmbeddingSetup, LocalEmbeddings, MemoryIndex, SearchMode,
    SearchOptions,
};
use nanocrab_models::ModelStore;
use serde_json::json;

const DIMENSIONS: usize = 384;
const DEFAULT_SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// What the index calls the local model's vectors (`LocalEmbeddings::id`).
const MODEL_ID: &str = "local:all-minilm-l6-v2";
/// The candidates a hybrid search asks of the scan (`FUSION_POOL` in index.rs).
const POOL: usize = 50;

/// SplitMix64: the same corpus on every machine and every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Skewed towards the front of a list sorted by frequency, as words are in real text.
    fn skewed(&mut self, n: usize) -> usize {
        ((self.unit().powi(3)) * n as f64) as usize % n
    }
}

/// The words of the retrieval set's notes (written as a person's notes would be), most
/// frequent first: generated notes read like notes, and BM25 sees realistic term statistics.
fn vocabulary() -> Vec<String> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/retrieval/corpus.jsonl");
    let text = std::fs::read_to_string(corpus).unwrap();
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let note: serde_json::Value = serde_json::from_str(line).unwrap();
        for word in note["text"]
            .as_str()
            .unwrap()
            .split(|c: char| !c.is_alphabetic())
            .filter(|w| w.len() >= 3)
        {
            *counts.entry(word.to_lowercase()).or_default() += 1;
        }
    }
    let mut words: Vec<(String, usize)> = counts.into_iter().collect();
    words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    words.into_iter().map(|(w, _)| w).collect()
}

const FUNCTION_WORDS: [&str; 12] = [
    "the", "and", "to", "of", "a", "in", "for", "with", "on", "at", "is", "we",
];

fn sentence(rng: &mut Rng, words: &[String], length: usize) -> String {
    let mut out: Vec<&str> = Vec::with_capacity(length);
    for _ in 0..length {
        if rng.below(10) < 3 {
            out.push(FUNCTION_WORDS[rng.below(FUNCTION_WORDS.len())]);
        } else {
            out.push(&words[rng.skewed(words.len())]);
        }
    }
    let mut text = out.join(" ");
    if let Some(first) = text.get(..1) {
        text = first.to_uppercase() + &text[1..];
    }
    text + "."
}

/// One file of `sections` sections, each a chunk of its own (well under the chunker's
/// window), under a title.
fn note(rng: &mut Rng, words: &[String], sections: usize) -> String {
    let mut text = format!("# {}\n", sentence(rng, words, 3).trim_end_matches('.'));
    for _ in 0..sections {
        let length = 2 + rng.below(3);
        text.push_str(&format!(
            "\n## {}\n",
            sentence(rng, words, length).trim_end_matches('.')
        ));
        for _ in 0..2 + rng.below(4) {
            let length = 10 + rng.below(14);
            let line = sentence(rng, words, length);
            if rng.below(2) == 0 {
                text.push_str(&format!("- {line}\n"));
            } else {
                text.push_str(&format!("{line}\n"));
            }
        }
    }
    text
}

/// Writes a workspace of exactly `chunks` chunks (2 to 8 a file) under `workspace`: daily
/// notes in `memory/`, documents in `knowledge/<topic>/`.
fn write_corpus(workspace: &Path, chunks: usize, words: &[String]) -> usize {
    let mut rng = Rng(chunks as u64);
    let (mut written, mut files) = (0, 0);
    while written < chunks {
        let sections = (2 + rng.below(7)).min(chunks - written);
        let relative = if files % 3 == 0 {
            let day = files / 3;
            format!(
                "memory/{}-{:02}-{:02}.md",
                2000 + day / 372,
                day / 31 % 12 + 1,
                day % 31 + 1
            )
        } else {
            format!("knowledge/{}/{files:06}.md", words[files % 40])
        };
        let path = workspace.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, note(&mut rng, words, sections)).unwrap();
        written += sections;
        files += 1;
    }
    files
}

/// Queries as people type them: two to five words of the notes, some as questions.
fn queries(count: usize, words: &[String]) -> Vec<String> {
    let mut rng = Rng(0x5eed);
    (0..count)
        .map(|i| {
            // Not the very commonest words: a query names what it is about.
            let mut pick = || words[50 + rng.skewed(words.len() - 50)].clone();
            match i % 4 {
                0 => format!("what did I note about {} and {}", pick(), pick()),
                1 => format!("{} {}", pick(), pick()),
                2 => format!("{} {} {}", pick(), pick(), pick()),
                _ => format!("when is the {} {} {} {}", pick(), pick(), pick(), pick()),
            }
        })
        .collect()
}

/// A unit vector from a seed: stored vectors from their chunk's hash, queries from their text.
fn synthetic_vector(seed: &[u8]) -> Vec<f32> {
    let mut state = 0xcbf2_9ce4_8422_2325u64;
    for b in seed {
        state = (state ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = Rng(state);
    let mut v: Vec<f32> = (0..DIMENSIONS)
        .map(|_| (rng.unit() * 2.0 - 1.0) as f32)
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    for x in &mut v {
        *x /= norm;
    }
    v
}

/// Answers every query with a synthetic vector under the model's id: a hybrid search without
/// the model's pass.
struct SyntheticQueries;

#[async_trait::async_trait]
impl EmbeddingProvider for SyntheticQueries {
    fn id(&self) -> &str {
        MODEL_ID
    }

    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        Ok(texts
            .iter()
            .map(|t| synthetic_vector(t.as_bytes()))
            .collect())
    }
}

fn percentiles(mut ms: Vec<f64>) -> serde_json::Value {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 * q) as usize).min(ms.len() - 1)];
    json!({ "p50": at(0.5), "p95": at(0.95), "runs": ms.len() })
}

fn vm_hwm_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Peak RSS from here on (Linux: 5 in `clear_refs` resets VmHWM to the current RSS).
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn disk_bytes(database: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let mut p = database.as_os_str().to_owned();
            p.push(suffix);
            std::fs::metadata(PathBuf::from(p)).ok().map(|m| m.len())
        })
        .sum()
}

fn models_dir() -> PathBuf {
    let args: Vec<String> = std::env::args().collect();
    if let Some(dir) = args
        .iter()
        .position(|a| a == "--models")
        .and_then(|i| args.get(i + 1))
    {
        return PathBuf::from(dir);
    }
    std::env::var_os("NANOCRAB_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|home| home.join(".nanocrab")))
        .unwrap()
        .join("models")
}

/// The local model when installed, else why not.
fn local_model() -> Result<Arc<dyn EmbeddingProvider>, String> {
    let models = models_dir();
    let store = ModelStore::new(&models);
    let catalogue = nanocrab_models::Catalogue::builtin();
    let spec = catalogue
        .find(nanocrab_memory::DEFAULT_LOCAL_MODEL)
        .map_err(|e| e.to_string())?;
    store
        .installed_dir(spec)
        .map_err(|err| format!("{err} (looked in {})", models.display()))?;
    Ok(Arc::new(LocalEmbeddings::new(store, spec.clone())))
}

/// The stored vectors' scan as it was before the index kept them in memory: every row's blob
/// read through SQLite and decoded as it is multiplied. Kept here for the before/after figure.
fn blob_scan(conn: &rusqlite::Connection, query: &[f32], limit: usize) -> Vec<(i64, f64)> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT c.id, e.vector FROM chunks c
             JOIN embeddings e ON e.model = ?1 AND e.hash = c.hash",
        )
        .unwrap();
    let mut rows = stmt.query([MODEL_ID]).unwrap();
    let mut scored = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let id: i64 = row.get(0).unwrap();
        let blob = row.get_ref(1).unwrap().as_blob().unwrap();
        let dot: f32 = blob
            .chunks_exact(4)
            .zip(query)
            .map(|(b, q)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * q)
            .sum();
        scored.push((id, f64::from(dot)));
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(limit);
    scored
}

/// Every vector as one f32 matrix in memory, for the figure of a contiguous f32 scan.
fn f32_matrix(conn: &rusqlite::Connection) -> (Vec<i64>, Vec<f32>) {
    let mut stmt = conn
        .prepare(
            "SELECT c.id, e.vector FROM chunks c
             JOIN embeddings e ON e.model = ?1 AND e.hash = c.hash",
        )
        .unwrap();
    let mut rows = stmt.query([MODEL_ID]).unwrap();
    let (mut ids, mut values) = (Vec::new(), Vec::new());
    while let Some(row) = rows.next().unwrap() {
        ids.push(row.get(0).unwrap());
        let blob = row.get_ref(1).unwrap().as_blob().unwrap();
        values.extend(
            blob.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
    }
    (ids, values)
}

/// The exact scan over a contiguous f32 matrix, sixteen lanes summed apart.
fn f32_scan(ids: &[i64], values: &[f32], query: &[f32], limit: usize) -> Vec<(i64, f64)> {
    let mut scored: Vec<(i64, f64)> = values
        .chunks_exact(DIMENSIONS)
        .zip(ids)
        .map(|(row, id)| {
            let mut sums = [0f32; 16];
            for (x, y) in row.chunks_exact(16).zip(query.chunks_exact(16)) {
                for lane in 0..16 {
                    sums[lane] += x[lane] * y[lane];
                }
            }
            (*id, f64::from(sums.iter().sum::<f32>()))
        })
        .collect();
    let by_score = |a: &(i64, f64), b: &(i64, f64)| b.1.total_cmp(&a.1);
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit - 1, by_score);
        scored.truncate(limit);
    }
    scored.sort_by(by_score);
    scored
}

fn time_ms<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let started = Instant::now();
    let out = f();
    (out, started.elapsed().as_secs_f64() * 1000.0)
}

/// Everything measured at one size, in this process.
fn measure(chunks: usize, query_count: usize) -> serde_json::Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let words = vocabulary();
    let queries = queries(query_count, &words);
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    let files = write_corpus(&workspace, chunks, &words);
    let database = dir.path().join("memory-index.sqlite");

    // The first build, by keyword (no model): what `nanocrab memory index` does.
    let (report, build_ms) = time_ms(|| {
        let mut index = runtime
            .block_on(MemoryIndex::open(&database, &workspace))
            .unwrap();
        runtime.block_on(index.sync()).unwrap()
    });
    assert_eq!(report.chunks, chunks, "the generator's chunk count");
    let keyword_bytes = disk_bytes(&database);
    let mut index = runtime
        .block_on(MemoryIndex::open(&database, &workspace))
        .unwrap();
    let sync_unchanged: Vec<f64> = (0..5)
        .map(|_| time_ms(|| runtime.block_on(index.sync()).unwrap()).1)
        .collect();
    let options = SearchOptions::new(10);
    let search_all = |index: &mut MemoryIndex| {
        for query in queries.iter().take(10) {
            runtime.block_on(index.search(query, &options)).unwrap();
        }
        let mut mode = None;
        let ms: Vec<f64> = queries
            .iter()
            .map(|query| {
                let (results, ms) =
                    time_ms(|| runtime.block_on(index.search(query, &options)).unwrap());
                mode = Some(results.mode);
                ms
            })
            .collect();
        (percentiles(ms), mode)
    };
    let (keyword, _) = search_all(&mut index);
    drop(index);
    let keyword_hwm = vm_hwm_mb();

    // Vectors for every chunk, as a model would have left them.
    {
        let mut conn = rusqlite::Connection::open(&database).unwrap();
        let tx = conn.transaction().unwrap();
        let hashes: Vec<String> = {
            let mut stmt = tx.prepare("SELECT DISTINCT hash FROM chunks").unwrap();
            stmt.query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        {
            let mut insert = tx
                .prepare(
                    "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?1, ?2, ?3)",
                )
                .unwrap();
            for hash in &hashes {
                let blob: Vec<u8> = synthetic_vector(hash.as_bytes())
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect();
                insert
                    .execute(rusqlite::params![MODEL_ID, hash, blob])
                    .unwrap();
            }
        }
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedding_model', ?1)",
            [MODEL_ID],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let vector_bytes = disk_bytes(&database);

    // The scan alone, with a query vector of its own.
    let query_vector = synthetic_vector(b"the scan's query");
    let conn = rusqlite::Connection::open(&database).unwrap();
    let exact = blob_scan(&conn, &query_vector, POOL);
    let blob_runs = if chunks >= 100_000 { 10 } else { 30 };
    let blob: Vec<f64> = (0..blob_runs)
        .map(|_| time_ms(|| blob_scan(&conn, &query_vector, POOL)).1)
        .collect();
    let (ids, values) = f32_matrix(&conn);
    let f32_runs: Vec<f64> = (0..100)
        .map(|_| time_ms(|| f32_scan(&ids, &values, &query_vector, POOL)).1)
        .collect();
    drop((ids, values));
    drop(conn);
    // What the hybrid searches below hold at their peak, without the comparisons above.
    reset_hwm();
    let mut index = runtime
        .block_on(MemoryIndex::open(&database, &workspace))
        .unwrap()
        .with_embeddings(EmbeddingSetup::Ready(Arc::new(SyntheticQueries)));
    let (first, first_ms) =
        time_ms(|| index.nearest_chunks(MODEL_ID, &query_vector, POOL).unwrap());
    let scan: Vec<f64> = (0..100)
        .map(|_| time_ms(|| index.nearest_chunks(MODEL_ID, &query_vector, POOL).unwrap()).1)
        .collect();
    // What the index's scan returns against the exact scan: the same top five, by id.
    let top = |list: &[(i64, f64)]| {
        list.iter()
            .take(5)
            .map(|(id, _)| *id)
            .collect::<HashSet<_>>()
    };
    let overlap5 = top(&first).intersection(&top(&exact)).count() as f64 / 5.0;

    let (hybrid_synthetic, mode) = search_all(&mut index);
    assert!(matches!(mode, Some(SearchMode::Hybrid { .. })), "{mode:?}");
    // One note edited (by hand or by the agent), synced, and the next scan: the matrix takes
    // in the edited note's chunks, not every vector again. The sync before it finds every
    // vector there, as a search after `nanocrab memory index` would.
    runtime.block_on(index.sync()).unwrap();
    let note = workspace.join("memory/2000-01-01.md");
    let text = std::fs::read_to_string(&note).unwrap();
    std::fs::write(
        &note,
        text + "\n## An edit\nThe heron came back to the pond by the mill.\n",
    )
    .unwrap();
    let (report, edit_sync_ms) = time_ms(|| runtime.block_on(index.sync()).unwrap());
    assert_eq!((report.changed, report.read), (1, 1));
    let (_, scan_after_edit_ms) =
        time_ms(|| index.nearest_chunks(MODEL_ID, &query_vector, POOL).unwrap());
    drop(index);
    let hybrid_hwm = vm_hwm_mb();
    let hybrid_model = match local_model() {
        Ok(model) => {
            let (_, load_ms) = time_ms(|| runtime.block_on(model.embed(&["warm up"])).unwrap());
            let mut index = runtime
                .block_on(MemoryIndex::open(&database, &workspace))
                .unwrap()
                .with_embeddings(EmbeddingSetup::Ready(model));
            let (figures, mode) = search_all(&mut index);
            assert!(matches!(mode, Some(SearchMode::Hybrid { .. })), "{mode:?}");
            json!({ "latencyMs": figures, "modelLoadMs": load_ms, "vmHwmMb": vm_hwm_mb() })
        }
        Err(why) => json!({ "skipped": why }),
    };

    json!({
        "chunks": chunks,
        "files": files,
        "buildMs": build_ms,
        "indexBytesKeyword": keyword_bytes,
        "indexBytesWithVectors": vector_bytes,
        "syncUnchangedMs": percentiles(sync_unchanged),
        "keywordMs": keyword,
        "hybridSyntheticQueryMs": hybrid_synthetic,
        "hybridModel": hybrid_model,
        "scan": {
            "blobScanMs": percentiles(blob),
            "f32MatrixScanMs": percentiles(f32_runs),
            "indexScanFirstMs": first_ms,
            "editSyncMs": edit_sync_ms,
            "scanAfterEditMs": scan_after_edit_ms,
            "indexScanMs": percentiles(scan),
            "top5OverlapWithExact": overlap5,
        },
        "vmHwmMbKeyword": keyword_hwm,
        "vmHwmMbHybrid": hybrid_hwm,
    })
}

fn print_table(results: &[serde_json::Value]) {
    let p = |v: &serde_json::Value| {
        format!(
            "{:.2} / {:.2}",
            v["p50"].as_f64().unwrap_or(f64::NAN),
            v["p95"].as_f64().unwrap_or(f64::NAN)
        )
    };
    println!("memory_scale: in-process figures, ms as p50 / p95");
    for r in results {
        println!(
            "\n{} chunks in {} files: first build {:.0} ms; index {:.1} MB by keyword, {:.1} MB with vectors; peak RSS {:.1} MB by keyword, {:.1} MB in hybrid searches (synthetic query)",
            r["chunks"],
            r["files"],
            r["buildMs"].as_f64().unwrap_or(f64::NAN),
            r["indexBytesKeyword"].as_f64().unwrap_or(f64::NAN) / 1e6,
            r["indexBytesWithVectors"].as_f64().unwrap_or(f64::NAN) / 1e6,
            r["vmHwmMbKeyword"].as_f64().unwrap_or(f64::NAN),
            r["vmHwmMbHybrid"].as_f64().unwrap_or(f64::NAN)
        );
        println!(
            "  sync, nothing changed           {}",
            p(&r["syncUnchangedMs"])
        );
        println!("  keyword search                  {}", p(&r["keywordMs"]));
        println!(
            "  hybrid, synthetic query vector  {}",
            p(&r["hybridSyntheticQueryMs"])
        );
        match r["hybridModel"]["skipped"].as_str() {
            Some(why) => println!("  hybrid, all-MiniLM-L6-v2        skipped: {why}"),
            None => println!(
                "  hybrid, all-MiniLM-L6-v2        {} (model loaded in {:.0} ms, once; peak RSS {:.1} MB)",
                p(&r["hybridModel"]["latencyMs"]),
                r["hybridModel"]["modelLoadMs"].as_f64().unwrap_or(f64::NAN),
                r["hybridModel"]["vmHwmMb"].as_f64().unwrap_or(f64::NAN)
            ),
        }
        let scan = &r["scan"];
        println!(
            "  vector scan, blobs via SQLite   {}",
            p(&scan["blobScanMs"])
        );
        println!(
            "  vector scan, f32 matrix         {}",
            p(&scan["f32MatrixScanMs"])
        );
        println!(
            "  vector scan, the index's        {} (first {:.1} ms; top-5 overlap with exact {:.2})",
            p(&scan["indexScanMs"]),
            scan["indexScanFirstMs"].as_f64().unwrap_or(f64::NAN),
            scan["top5OverlapWithExact"].as_f64().unwrap_or(f64::NAN)
        );
        println!(
            "  one note edited: sync {:.1} ms, then the scan {:.1} ms",
            scan["editSyncMs"].as_f64().unwrap_or(f64::NAN),
            scan["scanAfterEditMs"].as_f64().unwrap_or(f64::NAN)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let sizes: Vec<usize> = value("--sizes").map_or(DEFAULT_SIZES.to_vec(), |s| {
        s.split(',').map(|n| n.trim().parse().unwrap()).collect()
    });
    let query_count: usize = value("--queries").map_or(200, |n| n.parse().unwrap());
    let as_json = args.iter().any(|a| a == "--json");
    if let Some(dir) = value("--write-corpus") {
        let words = vocabulary();
        let dir = PathBuf::from(dir);
        let size = sizes[0];
        let files = write_corpus(&dir, size, &words);
        std::fs::write(
            dir.join("queries.txt"),
            queries(query_count, &words).join("\n") + "\n",
        )
        .unwrap();
        eprintln!("{size} chunks in {files} files under {}", dir.display());
        return;
    }
    if args.iter().any(|a| a == "--child") {
        println!("{}", measure(sizes[0], query_count));
        return;
    }
    let mut results = Vec::new();
    for size in sizes {
        eprintln!("memory_scale: {size} chunks…");
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        if let Some(dir) = value("--models") {
            child.args(["--models", &dir]);
        }
        let out = child
            .args([
                "--child",
                "--sizes",
                &size.to_string(),
                "--queries",
                &query_count.to_string(),
            ])
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "the run at {size} chunks failed");
        let text = String::from_utf8(out.stdout).unwrap();
        results.push(serde_json::from_str::<serde_json::Value>(text.trim()).unwrap());
    }
    if as_json {
        println!("{}", serde_json::Value::Array(results));
    } else {
        print_table(&results);
    }
}
