//! The stored vectors of one model held in memory for the exact scan of a hybrid search: int8
//! codes, one row after another, loaded from the index once and kept until it changes.
//!
//! Read through SQLite row by row, 100,000 vectors took about as long as the rest of a search
//! many times over (see "Memory at scale" in docs/benchmarks.md): each row a B-tree lookup and
//! a blob decoded as it is multiplied. One contiguous matrix is read in a loop the compiler
//! vectorises; int8 instead of f32 makes it a quarter of the memory and of the bytes each scan
//! pulls through the cache. Every row is ranked by its codes against the query's codes, the
//! best few again by their codes against the query itself, and the index scores the last
//! candidates exactly from their f32 vectors in SQLite: the hits and their scores are the
//! exact scan's (docs/benchmarks.md, "Memory at scale").

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension as _, params};

/// The tables and triggers that record, in every transaction that changes chunks or vectors
/// (by any process, by any code), which chunks' vectors may have changed: a matrix held in
/// memory takes in those rows only, not the whole index again.
pub(crate) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS vector_changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk INTEGER NOT NULL);
    CREATE TRIGGER IF NOT EXISTS chunk_added AFTER INSERT ON chunks
        BEGIN INSERT INTO vector_changes (chunk) VALUES (new.id); END;
    CREATE TRIGGER IF NOT EXISTS chunk_removed AFTER DELETE ON chunks
        BEGIN INSERT INTO vector_changes (chunk) VALUES (old.id); END;
    CREATE TRIGGER IF NOT EXISTS vector_added AFTER INSERT ON embeddings
        BEGIN INSERT INTO vector_changes (chunk) SELECT id FROM chunks WHERE hash = new.hash; END;
    CREATE TRIGGER IF NOT EXISTS vector_removed AFTER DELETE ON embeddings
        BEGIN INSERT INTO vector_changes (chunk) SELECT id FROM chunks WHERE hash = old.hash; END;
    INSERT OR IGNORE INTO meta (key, value) VALUES ('vectors_generation', lower(hex(randomblob(16))));
";

/// Changes kept in the log; older ones are dropped, and a matrix read before them is read
/// again whole.
const CHANGES_KEPT: i64 = 10_000;

/// The matrices of this process, one per index file and model: the agent's tools open the
/// index afresh for each search, and the matrix outlives them.
static MATRICES: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

struct Cached {
    database: PathBuf,
    content: Content,
    matrix: Arc<VectorMatrix>,
    reads: MatrixReads,
}

/// How this process has read an index's matrix (for the tests: counted, not timed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MatrixReads {
    /// Read whole: the first search, or too much changed since.
    pub whole: usize,
    /// Brought up to date with only the chunks that changed.
    pub updates: usize,
    /// Vectors read from SQLite in all.
    pub rows: usize,
}

/// Where the chunks and their vectors stand: the index file's own generation (a rebuilt file
/// is another) and the last change recorded in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Content {
    generation: String,
    last_change: i64,
    /// Changes after this one are all in the log.
    logged_from: i64,
}

impl Content {
    pub(crate) fn read(conn: &Connection) -> rusqlite::Result<Self> {
        conn.query_row(
            "SELECT (SELECT value FROM meta WHERE key = 'vectors_generation'),
                    (SELECT seq FROM sqlite_sequence WHERE name = 'vector_changes'),
                    (SELECT value FROM meta WHERE key = 'vector_changes_from')",
            [],
            |row| {
                Ok(Self {
                    generation: row.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    last_change: row.get::<_, Option<i64>>(1)?.unwrap_or(0),
                    logged_from: row
                        .get::<_, Option<String>>(2)?
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                })
            },
        )
    }
}

impl Content {
    /// The last change of `earlier` (this type's text, as [`Display`](std::fmt::Display) wrote
    /// it) when every change since is in this file's log; `None` when it is another file's or
    /// the log was cut past it.
    pub(crate) fn logged_since(&self, earlier: &str) -> Option<i64> {
        let (generation, last_change) = earlier.split_once(':')?;
        let last_change: i64 = last_change.parse().ok()?;
        (generation == self.generation && last_change >= self.logged_from).then_some(last_change)
    }

    pub(crate) fn last_change(&self) -> i64 {
        self.last_change
    }
}

impl std::fmt::Display for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.generation, self.last_change)
    }
}

/// Drops all but the newest [`CHANGES_KEPT`] changes from the log, inside a transaction that
/// wrote some.
pub(crate) fn forget_old_changes(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let last: i64 = tx.query_row(
        "SELECT coalesce(max(seq), 0) FROM vector_changes",
        [],
        |row| row.get(0),
    )?;
    let cut = last - CHANGES_KEPT;
    if tx.execute("DELETE FROM vector_changes WHERE seq <= ?1", [cut])? > 0 {
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('vector_changes_from', ?1)",
            [cut.to_string()],
        )?;
    }
    Ok(())
}

/// `model`'s matrix for the index at `database`: the one this process holds when the index has
/// not changed since, brought up to date when only some chunks have, else read whole.
pub(crate) fn matrix(
    conn: &Connection,
    database: &Path,
    model: &str,
) -> rusqlite::Result<Arc<VectorMatrix>> {
    // Read before the vectors: a change committed in between is taken in again next time,
    // never missed.
    let content = Content::read(conn)?;
    let mut cache = MATRICES.lock().unwrap_or_else(|e| e.into_inner());
    let slot = cache
        .iter()
        .position(|c| c.database == database && c.matrix.model == model);
    let Some(i) = slot else {
        let (matrix, rows) = VectorMatrix::load(conn, model)?;
        let matrix = Arc::new(matrix);
        cache.push(Cached {
            database: database.to_path_buf(),
            content,
            matrix: matrix.clone(),
            reads: MatrixReads {
                whole: 1,
                updates: 0,
                rows,
            },
        });
        return Ok(matrix);
    };
    let cached = &mut cache[i];
    if cached.content == content {
        return Ok(cached.matrix.clone());
    }
    let changed: Option<Vec<i64>> = if cached.content.generation == content.generation
        && cached.content.last_change >= content.logged_from
    {
        let mut stmt =
            conn.prepare_cached("SELECT DISTINCT chunk FROM vector_changes WHERE seq > ?1")?;
        let chunks = stmt
            .query_map([cached.content.last_change], |row| row.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        // Past a quarter of the rows, one pass over the whole table costs less than a lookup
        // per chunk (and for a few dozen either costs next to nothing).
        (chunks.len() <= cached.matrix.ids.len() / 4 + 64).then_some(chunks)
    } else {
        None
    };
    let (matrix, rows) = match changed {
        Some(chunks) => {
            cached.reads.updates += 1;
            cached.matrix.with_changes(conn, &chunks)?
        }
        None => {
            cached.reads.whole += 1;
            VectorMatrix::load(conn, model)?
        }
    };
    cached.reads.rows += rows;
    cached.content = content;
    cached.matrix = Arc::new(matrix);
    Ok(cached.matrix.clone())
}

/// How this process has read `database`'s matrix for `model`.
pub fn matrix_reads(database: &Path, model: &str) -> MatrixReads {
    MATRICES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|c| c.database == database && c.matrix.model == model)
        .map_or(MatrixReads::default(), |c| c.reads)
}

/// Candidates scored again against the f32 query, per hit asked for: the order by codes alone
/// differs from it only among near ties, and one just past the cut is brought back.
const RESCORE_FACTOR: usize = 4;
/// Candidates past the hits asked for that are scored exactly: the rows' rounding moves a
/// cosine by about 0.0005, which reorders only near ties.
pub(crate) const EXACT_MARGIN: usize = 10;

pub(crate) struct VectorMatrix {
    model: String,
    dimensions: usize,
    ids: Vec<i64>,
    /// Per row: what one step of its codes is worth (its largest magnitude over 127).
    scales: Vec<f32>,
    codes: Vec<i8>,
}

impl VectorMatrix {
    /// Every chunk's `model` vector, and how many were read.
    fn load(conn: &Connection, model: &str) -> rusqlite::Result<(Self, usize)> {
        let mut stmt = conn.prepare_cached(
            "SELECT c.id, e.vector FROM chunks c
             JOIN embeddings e ON e.model = ?1 AND e.hash = c.hash",
        )?;
        let mut rows = stmt.query([model])?;
        let mut matrix = Self {
            model: model.to_owned(),
            dimensions: 0,
            ids: Vec::new(),
            scales: Vec::new(),
            codes: Vec::new(),
        };
        let (mut values, mut read) = (Vec::new(), 0);
        while let Some(row) = rows.next()? {
            matrix.push(row.get(0)?, row.get_ref(1)?.as_blob()?, &mut values);
            read += 1;
        }
        Ok((matrix, read))
    }

    /// This matrix with the rows of `chunks` as the index holds them now: gone, new or with
    /// another vector. The rows of every other chunk are copied, not read again.
    fn with_changes(&self, conn: &Connection, chunks: &[i64]) -> rusqlite::Result<(Self, usize)> {
        let changed: HashSet<i64> = chunks.iter().copied().collect();
        let mut next = Self {
            model: self.model.clone(),
            dimensions: self.dimensions,
            ids: Vec::with_capacity(self.ids.len()),
            scales: Vec::with_capacity(self.scales.len()),
            codes: Vec::with_capacity(self.codes.len()),
        };
        for (row, id) in self.ids.iter().enumerate() {
            if changed.contains(id) {
                continue;
            }
            next.ids.push(*id);
            next.scales.push(self.scales[row]);
            let start = row * self.dimensions;
            next.codes
                .extend_from_slice(&self.codes[start..start + self.dimensions]);
        }
        let mut stmt = conn.prepare_cached(
            "SELECT e.vector FROM chunks c
             JOIN embeddings e ON e.model = ?1 AND e.hash = c.hash WHERE c.id = ?2",
        )?;
        let (mut values, mut read) = (Vec::new(), 0);
        for id in chunks {
            let blob: Option<Vec<u8>> = stmt
                .query_row(params![self.model, id], |row| row.get(0))
                .optional()?;
            if let Some(blob) = blob {
                next.push(*id, &blob, &mut values);
                read += 1;
            }
        }
        Ok((next, read))
    }

    /// Adds chunk `id`'s row from its stored `blob` (little-endian f32s), decoded through
    /// `values`. A vector of another length than the first (a damaged row) is left out, as the
    /// per-row scan would have scored it as garbage.
    fn push(&mut self, id: i64, blob: &[u8], values: &mut Vec<f32>) {
        values.clear();
        values.extend(
            blob.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        if self.ids.is_empty() {
            self.dimensions = values.len();
        }
        if values.len() != self.dimensions || values.is_empty() {
            return;
        }
        let (scale, codes) = quantise(values);
        self.ids.push(id);
        self.scales.push(scale);
        self.codes.extend(codes);
    }

    /// The chunk ids of the `limit` rows most like `query`, with their cosine from the codes,
    /// best first.
    pub(crate) fn nearest(&self, query: &[f32], limit: usize) -> Vec<(i64, f64)> {
        if self.ids.is_empty() || query.len() != self.dimensions || limit == 0 {
            return Vec::new();
        }
        // The query's own scale is the same for every row: it does not change the order.
        let (_, query_codes) = quantise(query);
        let mut coarse: Vec<(f32, u32)> = self
            .codes
            .chunks_exact(self.dimensions)
            .zip(&self.scales)
            .enumerate()
            .map(|(row, (codes, scale))| (dot(codes, &query_codes) as f32 * scale, row as u32))
            .collect();
        best_first(&mut coarse, limit.saturating_mul(RESCORE_FACTOR));
        let mut fine: Vec<(f32, u32)> = coarse
            .into_iter()
            .map(|(_, row)| {
                let start = row as usize * self.dimensions;
                let codes = &self.codes[start..start + self.dimensions];
                let dot: f32 = codes
                    .iter()
                    .zip(query)
                    .map(|(c, q)| f32::from(*c) * q)
                    .sum();
                (dot * self.scales[row as usize], row)
            })
            .collect();
        best_first(&mut fine, limit);
        fine.into_iter()
            .map(|(score, row)| (self.ids[row as usize], f64::from(score)))
            .collect()
    }
}

/// Keeps the `limit` highest scores, highest first; ties by row, so that a search is stable.
fn best_first(scored: &mut Vec<(f32, u32)>, limit: usize) {
    let order = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if limit == 0 {
        scored.clear();
        return;
    }
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit - 1, order);
        scored.truncate(limit);
    }
    scored.sort_unstable_by(order);
}

/// int8 codes of `values` and what one step of them is worth.
fn quantise(values: &[f32]) -> (f32, Vec<i8>) {
    let largest = values.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if largest == 0.0 || !largest.is_finite() {
        return (0.0, vec![0; values.len()]);
    }
    let scale = largest / 127.0;
    let codes = values
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (scale, codes)
}

/// Sixteen lanes summed apart, so that the loop becomes vector instructions (a row of 384
/// codes is 24 steps of sixteen); at most 384 × 127 × 127 in all, far inside an i32.
fn dot(a: &[i8], b: &[i8]) -> i32 {
    const LANES: usize = 16;
    let mut sums = [0i32; LANES];
    let (a_body, a_tail) = a.split_at(a.len() / LANES * LANES);
    let (b_body, b_tail) = b.split_at(a_body.len().min(b.len()));
    for (x, y) in a_body.chunks_exact(LANES).zip(b_body.chunks_exact(LANES)) {
        for lane in 0..LANES {
            sums[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    let tail: i32 = a_tail
        .iter()
        .zip(b_tail)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    sums.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn unit(values: &[f32]) -> Vec<f32> {
        let norm = values.iter().map(|x| x * x).sum::<f32>().sqrt();
        values.iter().map(|x| x / norm).collect()
    }

    fn matrix(rows: &[(i64, Vec<f32>)]) -> VectorMatrix {
        let mut m = VectorMatrix {
            model: "m".into(),
            dimensions: rows[0].1.len(),
            ids: Vec::new(),
            scales: Vec::new(),
            codes: Vec::new(),
        };
        for (id, values) in rows {
            let (scale, codes) = quantise(values);
            m.ids.push(*id);
            m.scales.push(scale);
            m.codes.extend(codes);
        }
        m
    }

    #[test]
    fn the_int8_order_is_the_exact_order_for_vectors_apart() {
        // 20 dimensions: the sixteen-lane body and a tail of four.
        let rows: Vec<(i64, Vec<f32>)> = (0..6)
            .map(|i| {
                let values: Vec<f32> = (0..20)
                    .map(|d| ((d * 7 + i * 13) % 11) as f32 - 5.0 + if d == i { 9.0 } else { 0.0 })
                    .collect();
                (100 + i as i64, unit(&values))
            })
            .collect();
        let query = unit(
            &(0..20)
                .map(|d| if d == 2 { 3.0 } else { 0.1 })
                .collect::<Vec<_>>(),
        );
        let mut exact: Vec<(i64, f32)> = rows
            .iter()
            .map(|(id, v)| (*id, v.iter().zip(&query).map(|(a, b)| a * b).sum()))
            .collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1));
        let expected: Vec<i64> = exact.iter().take(3).map(|(id, _)| *id).collect();
        let found = matrix(&rows).nearest(&query, 3);
        assert_eq!(
            found.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            expected
        );
        for ((_, got), (_, want)) in found.iter().zip(&exact) {
            assert!((got - f64::from(*want)).abs() < 0.01, "{got} vs {want}");
        }
        assert_eq!(matrix(&rows).nearest(&query, 10).len(), 6);
    }

    #[test]
    fn quantised_codes_span_the_int8_range_and_a_zero_vector_stays_zero() {
        assert_eq!(
            quantise(&[0.5, -0.25, 0.0]),
            (0.5 / 127.0, vec![127, -64, 0])
        );
        assert_eq!(quantise(&[0.0, 0.0]), (0.0, vec![0, 0]));
        assert_eq!(dot(&[1; 33], &[2; 33]), 66);
    }
}
