//! The keyword half of memory search: BM25 over postings the index keeps itself, in SQLite,
//! in the same transactions as the chunks they index.
//!
//! SQLite's FTS5 did this before, and ranked every chunk that had any word of the query: at
//! 100,000 chunks a query of common words matches over 10,000 of them, and FTS5's `bm25()`
//! looks each one's length up with a statement of its own (about a microsecond each, 21 ms a
//! search; "Memory at scale" in docs/benchmarks.md). Here each posting carries its chunk's
//! length, so a search reads the few rows of its words and ranks their postings in a loop.
//!
//! A word's postings are kept in blocks of consecutive chunk ids: an edit rewrites the blocks
//! of the chunks it removed and added, never the whole list of a word that is in every note.
//! The score is FTS5's `bm25()` (k1 = 1.2, b = 0.75, the same idf floor), over words folded
//! and stemmed the way FTS5's `porter unicode61 remove_diacritics 2` tokenizer did, with
//! Snowball's English stemmer (Porter's own revision of his algorithm) for the stemming.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use rusqlite::{OptionalExtension as _, Transaction, params};
use rust_stemmers::{Algorithm, Stemmer};

/// The postings table: one row per word and block of chunk ids.
pub(crate) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS postings (
        term TEXT NOT NULL, block INTEGER NOT NULL, data BLOB NOT NULL,
        PRIMARY KEY (term, block)) WITHOUT ROWID;
";

/// Chunk ids per block, as a shift: 8,192 ids, so that the block of a word in every chunk is
/// at most about 24 kB, which an edit reads and writes again.
const BLOCK_BITS: u32 = 13;
/// BM25's term-frequency saturation and length normalisation, FTS5's defaults.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Postings held in memory before a long sync (a first build) writes them out: about a
/// megabyte (more made the build no faster, and its peak RSS larger).
const FLUSH_POSTINGS: usize = 1 << 16;
/// Words longer than this are kept as they are: no stemmer rule applies to a hash or a key.
const MAX_STEMMED_CHARS: usize = 64;
/// Words whose terms a sync remembers past a write of its postings; past that, it forgets them.
const STEMS_KEPT: usize = 1 << 16;

/// The `meta` keys of the totals BM25 needs: chunks indexed and their words.
const CHUNKS_KEY: &str = "keyword_chunks";
const TOKENS_KEY: &str = "keyword_tokens";

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Calls `each` with every word of `text` in order, folded: lower case, without diacritics. A
/// word is a run of letters and digits; combining marks are dropped without ending it, as
/// FTS5's `unicode61` with `remove_diacritics 2` did.
pub(crate) fn for_each_word(text: &str, mut each: impl FnMut(&str)) {
    let mut word = String::new();
    for c in text.chars() {
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() {
                word.push(c.to_ascii_lowercase());
            } else if !word.is_empty() {
                each(&word);
                word.clear();
            }
            continue;
        }
        let mut separator = false;
        unicode_normalization::char::decompose_canonical(c, |part| {
            if unicode_normalization::char::is_combining_mark(part) {
                return;
            }
            if part.is_alphanumeric() {
                word.extend(part.to_lowercase());
            } else {
                separator = true;
            }
        });
        if separator && !word.is_empty() {
            each(&word);
            word.clear();
        }
    }
    if !word.is_empty() {
        each(&word);
    }
}

/// The term a folded word is indexed and searched under.
pub(crate) fn stem(word: &str) -> Cow<'_, str> {
    if word.chars().nth(MAX_STEMMED_CHARS).is_some() {
        Cow::Borrowed(word)
    } else {
        STEMMER.stem(word)
    }
}

/// One chunk in one word's postings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Posting {
    chunk: i64,
    /// How often the word is in the chunk.
    count: u32,
    /// The chunk's length in words.
    length: u32,
}

/// The postings a sync adds and removes, written out in the sync's transaction.
#[derive(Default)]
pub(crate) struct KeywordChanges {
    added: HashMap<String, Vec<Posting>>,
    removed: HashMap<String, HashSet<i64>>,
    pending: usize,
    chunks: i64,
    tokens: i64,
    /// The terms of words seen in this sync: most words come again and again, and stemming
    /// was a tenth of a first build.
    stems: HashMap<String, String>,
}

impl KeywordChanges {
    /// Chunk `chunk` (its heading and text) is new.
    pub(crate) fn add(
        &mut self,
        tx: &Transaction<'_>,
        chunk: i64,
        heading: &str,
        text: &str,
    ) -> rusqlite::Result<()> {
        let (counts, length) = word_counts(&mut self.stems, heading, text);
        self.chunks += 1;
        self.tokens += i64::from(length);
        self.pending += counts.len();
        for (term, count) in counts {
            self.added.entry(term).or_default().push(Posting {
                chunk,
                count,
                length,
            });
        }
        if self.pending >= FLUSH_POSTINGS {
            self.write(tx)?;
        }
        Ok(())
    }

    /// Chunk `chunk`, as it was indexed (its heading and text), is gone.
    pub(crate) fn remove(&mut self, chunk: i64, heading: &str, text: &str) {
        let (counts, length) = word_counts(&mut self.stems, heading, text);
        self.chunks -= 1;
        self.tokens -= i64::from(length);
        for (term, _) in counts {
            // Added earlier in this sync and not yet written: it never reaches the table.
            if let Some(added) = self.added.get_mut(&term) {
                added.retain(|p| p.chunk != chunk);
            }
            self.removed.entry(term).or_default().insert(chunk);
        }
    }

    /// Writes out what was gathered: each block a change touches is read, changed and written
    /// again (or deleted when nothing is left in it), and the totals follow.
    pub(crate) fn write(&mut self, tx: &Transaction<'_>) -> rusqlite::Result<()> {
        // In key order: the rows are visited as they lie in the table.
        let mut terms: Vec<&str> = self
            .added
            .keys()
            .chain(self.removed.keys())
            .map(String::as_str)
            .collect();
        terms.sort_unstable();
        terms.dedup();
        let mut read =
            tx.prepare_cached("SELECT data FROM postings WHERE term = ?1 AND block = ?2")?;
        let mut store = tx.prepare_cached(
            "INSERT OR REPLACE INTO postings (term, block, data) VALUES (?1, ?2, ?3)",
        )?;
        let mut delete =
            tx.prepare_cached("DELETE FROM postings WHERE term = ?1 AND block = ?2")?;
        let (no_removals, no_additions) = (HashSet::new(), Vec::new());
        let mut numbers = Vec::new();
        let mut postings = Vec::new();
        let mut data = Vec::new();
        for term in terms {
            let removed = self.removed.get(term).unwrap_or(&no_removals);
            let added = self.added.get(term).unwrap_or(&no_additions);
            numbers.clear();
            numbers.extend(added.iter().map(|p| block(p.chunk)));
            numbers.extend(removed.iter().map(|chunk| block(*chunk)));
            numbers.sort_unstable();
            numbers.dedup();
            for &number in &numbers {
                postings.clear();
                if let Some(stored) = read
                    .query_row(params![term, number], |row| row.get::<_, Vec<u8>>(0))
                    .optional()?
                {
                    decode(&stored, number, &mut postings)?;
                }
                postings.retain(|p| !removed.contains(&p.chunk));
                postings.extend(added.iter().filter(|p| block(p.chunk) == number));
                if postings.is_empty() {
                    delete.execute(params![term, number])?;
                    continue;
                }
                postings.sort_unstable_by_key(|p| p.chunk);
                encode(&postings, number, &mut data);
                store.execute(params![term, number, data])?;
            }
        }
        for (key, delta) in [(CHUNKS_KEY, self.chunks), (TOKENS_KEY, self.tokens)] {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + ?2",
                params![key, delta],
            )?;
        }
        let stems = std::mem::take(&mut self.stems);
        *self = Self::default();
        if stems.len() < STEMS_KEPT {
            self.stems = stems;
        }
        Ok(())
    }
}

/// How often each word is in a chunk (its heading and text, as FTS5's two columns of equal
/// weight were), and how many words it has.
fn word_counts(
    stems: &mut HashMap<String, String>,
    heading: &str,
    text: &str,
) -> (Vec<(String, u32)>, u32) {
    let mut terms: Vec<String> = Vec::new();
    for part in [heading, text] {
        for_each_word(part, |word| {
            let term = match stems.get(word) {
                Some(term) => term.clone(),
                None => {
                    let term = stem(word).into_owned();
                    stems.insert(word.to_owned(), term.clone());
                    term
                }
            };
            terms.push(term);
        });
    }
    let length = u32::try_from(terms.len()).unwrap_or(u32::MAX);
    terms.sort_unstable();
    let mut counts: Vec<(String, u32)> = Vec::new();
    for term in terms {
        match counts.last_mut() {
            Some((last, count)) if *last == term => *count += 1,
            _ => counts.push((term, 1)),
        }
    }
    (counts, length)
}

fn block(chunk: i64) -> i64 {
    chunk >> BLOCK_BITS
}

/// A block's postings as varints: each chunk id as its distance from the one before (the
/// first from the block's start), then the word's count and the chunk's length.
fn encode(postings: &[Posting], number: i64, out: &mut Vec<u8>) {
    out.clear();
    let mut previous = number << BLOCK_BITS;
    for p in postings {
        put_varint(out, (p.chunk - previous) as u64);
        put_varint(out, u64::from(p.count));
        put_varint(out, u64::from(p.length));
        previous = p.chunk;
    }
}

fn decode(data: &[u8], number: i64, out: &mut Vec<Posting>) -> rusqlite::Result<()> {
    let damaged = || {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Blob,
            "a damaged postings block".into(),
        )
    };
    let mut at = 0;
    let mut chunk = number << BLOCK_BITS;
    while at < data.len() {
        let mut next = || get_varint(data, &mut at).ok_or_else(damaged);
        chunk += i64::try_from(next()?).map_err(|_| damaged())?;
        let count = u32::try_from(next()?).map_err(|_| damaged())?;
        let length = u32::try_from(next()?).map_err(|_| damaged())?;
        out.push(Posting {
            chunk,
            count,
            length,
        });
    }
    Ok(())
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn get_varint(data: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// The `limit` chunks that score best for `terms` (stemmed; a word given twice counts twice, as
/// in FTS5's query before), by BM25, best first (ties by chunk id), with their scores.
pub(crate) fn search(
    conn: &rusqlite::Connection,
    terms: &[String],
    limit: usize,
) -> rusqlite::Result<Vec<(i64, f64)>> {
    let total = |key: &str| -> rusqlite::Result<f64> {
        let value: Option<i64> = conn
            .query_row(
                "SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?1",
                [key],
                |row| row.get(0),
            )
            .optional()?;
        Ok(value.unwrap_or(0) as f64)
    };
    let chunks = total(CHUNKS_KEY)?;
    let tokens = total(TOKENS_KEY)?;
    if chunks <= 0.0 || limit == 0 {
        return Ok(Vec::new());
    }
    let average_length = (tokens / chunks).max(1.0);
    let mut read =
        conn.prepare_cached("SELECT block, data FROM postings WHERE term = ?1 ORDER BY block")?;
    // Each word's postings as their share of the score, in chunk order.
    let mut distinct: Vec<(&String, f64)> = Vec::with_capacity(terms.len());
    for term in terms {
        match distinct.iter_mut().find(|(seen, _)| *seen == term) {
            Some((_, times)) => *times += 1.0,
            None => distinct.push((term, 1.0)),
        }
    }
    let mut lists: Vec<Vec<(i64, f64)>> = Vec::with_capacity(distinct.len());
    let mut postings = Vec::new();
    for (term, times) in distinct {
        postings.clear();
        let mut rows = read.query([term])?;
        while let Some(row) = rows.next()? {
            let number: i64 = row.get(0)?;
            decode(row.get_ref(1)?.as_blob()?, number, &mut postings)?;
        }
        if postings.is_empty() {
            continue;
        }
        let found = postings.len() as f64;
        // FTS5's idf, floored the same way: a word in more than half the chunks still counts
        // for a little, never against.
        let idf = times * ((chunks - found + 0.5) / (found + 0.5)).ln().max(1e-6);
        lists.push(
            postings
                .iter()
                .map(|p| {
                    let count = f64::from(p.count);
                    let norm = K1 * (1.0 - B + B * f64::from(p.length) / average_length);
                    (p.chunk, idf * count * (K1 + 1.0) / (count + norm))
                })
                .collect(),
        );
    }
    // The lists merged by chunk: each chunk's shares summed.
    let mut heads = vec![0usize; lists.len()];
    let mut scored: Vec<(i64, f64)> = Vec::new();
    loop {
        let next = lists
            .iter()
            .zip(&heads)
            .filter_map(|(list, head)| list.get(*head).map(|(chunk, _)| *chunk))
            .min();
        let Some(chunk) = next else { break };
        let mut score = 0.0;
        for (list, head) in lists.iter().zip(heads.iter_mut()) {
            if let Some((at, share)) = list.get(*head)
                && *at == chunk
            {
                score += share;
                *head += 1;
            }
        }
        scored.push((chunk, score));
    }
    let order = |a: &(i64, f64), b: &(i64, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit - 1, order);
        scored.truncate(limit);
    }
    scored.sort_unstable_by(order);
    Ok(scored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn words(text: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for_each_word(text, |word| {
            out.push((word.to_owned(), stem(word).into_owned()))
        });
        out
    }

    #[test]
    fn words_are_folded_then_stemmed() {
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect()
        };
        assert_eq!(
            words("Running to the Café, naïvely: don't-stop 2026-11-01 ÉCOLES"),
            pairs(&[
                ("running", "run"),
                ("to", "to"),
                ("the", "the"),
                ("cafe", "cafe"),
                ("naively", "naiv"),
                ("don", "don"),
                ("t", "t"),
                ("stop", "stop"),
                ("2026", "2026"),
                ("11", "11"),
                ("01", "01"),
                ("ecoles", "ecol"),
            ])
        );
        // A decomposed accent is dropped without splitting the word.
        assert_eq!(words("cafe\u{301}"), pairs(&[("cafe", "cafe")]));
        // Scripts without case or spaces are words of letters all the same.
        assert_eq!(
            words("東京タワー привет"),
            pairs(&[("東京タワー", "東京タワー"), ("привет", "привет")])
        );
    }

    /// A connection with the tables the keyword index writes to.
    fn database() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);")
            .unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn
    }

    /// SplitMix64, for reproducible random notes.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % n as u64) as usize
        }
    }

    /// Words that Porter's first algorithm (FTS5's) and Snowball's English stem alike.
    const WORDS: [&str; 24] = [
        "cat", "dog", "lisbon", "dentist", "march", "ada", "sister", "tax", "garden", "piano",
        "train", "book", "river", "coffee", "paris", "doctor", "monday", "lesson", "window",
        "bread", "school", "red", "blue", "green",
    ];

    /// A heading of up to two words and a text of up to forty, the first words likelier.
    fn note(rng: &mut Rng) -> (String, String) {
        let words = |rng: &mut Rng, most: usize| -> String {
            let n = rng.below(most + 1);
            (0..n)
                .map(|_| WORDS[rng.below(WORDS.len()).min(rng.below(WORDS.len()))])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let heading = words(rng, 2);
        let text = words(rng, 40);
        (heading, text)
    }

    fn ranked(scored: &[(i64, f64)]) -> Vec<(i64, String)> {
        scored
            .iter()
            .map(|(chunk, score)| (*chunk, format!("{score:.9}")))
            .collect()
    }

    #[test]
    fn scores_are_fts5s_bm25() {
        let mut conn = database();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE fts USING fts5(heading, text,
                 tokenize = 'porter unicode61 remove_diacritics 2');",
        )
        .unwrap();
        let mut rng = Rng(7);
        let tx = conn.transaction().unwrap();
        let mut changes = KeywordChanges::default();
        for chunk in 1..=300 {
            let (heading, text) = note(&mut rng);
            changes.add(&tx, chunk, &heading, &text).unwrap();
            tx.execute(
                "INSERT INTO fts (rowid, heading, text) VALUES (?1, ?2, ?3)",
                params![chunk, heading, text],
            )
            .unwrap();
        }
        changes.write(&tx).unwrap();
        tx.commit().unwrap();
        for query in [
            &["lisbon"][..],
            &["cat", "dog"],
            &["green", "school", "piano"],
            &["coffee", "nowhere"],
            &["cat", "red", "cat"],
        ] {
            let mut terms: Vec<String> = Vec::new();
            for_each_word(&query.join(" "), |word| terms.push(stem(word).into_owned()));
            let ours = search(&conn, &terms, 20).unwrap();
            let expression = query.join(" OR ");
            let fts5: Vec<(i64, f64)> = conn
                .prepare("SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ?1")
                .unwrap()
                .query_map([&expression], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let mut fts5 = fts5;
            fts5.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            fts5.truncate(20);
            assert!(!ours.is_empty(), "{expression}");
            assert_eq!(ranked(&ours), ranked(&fts5), "{expression}");
        }
    }

    /// Chunks added, removed and added again under ids used before, across several syncs and
    /// with writes in the middle of one: the postings are always those of the chunks there are.
    #[test]
    fn edits_leave_the_postings_of_the_chunks_there_are() {
        let mut conn = database();
        let mut rng = Rng(11);
        let mut live: HashMap<i64, (String, String)> = HashMap::new();
        for _ in 0..30 {
            let tx = conn.transaction().unwrap();
            let mut changes = KeywordChanges::default();
            for _ in 0..20 {
                // Ids in two blocks, reused as SQLite reuses the largest.
                let chunk = (rng.below(2) as i64) << BLOCK_BITS | rng.below(40) as i64;
                if let Some((heading, text)) = live.remove(&chunk) {
                    changes.remove(chunk, &heading, &text);
                }
                if rng.below(3) > 0 {
                    let (heading, text) = note(&mut rng);
                    changes.add(&tx, chunk, &heading, &text).unwrap();
                    live.insert(chunk, (heading, text));
                }
                if rng.below(10) == 0 {
                    changes.write(&tx).unwrap();
                }
            }
            changes.write(&tx).unwrap();
            tx.commit().unwrap();
        }
        // The same chunks indexed at once, in a database of their own.
        let mut fresh = database();
        let tx = fresh.transaction().unwrap();
        let mut changes = KeywordChanges::default();
        for (chunk, (heading, text)) in &live {
            changes.add(&tx, *chunk, heading, text).unwrap();
        }
        changes.write(&tx).unwrap();
        tx.commit().unwrap();
        let rows = |conn: &rusqlite::Connection| -> Vec<(String, i64, Vec<u8>)> {
            conn.prepare("SELECT term, block, data FROM postings ORDER BY term, block")
                .unwrap()
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let totals = |conn: &rusqlite::Connection| -> Vec<(String, String)> {
            conn.prepare("SELECT key, value FROM meta ORDER BY key")
                .unwrap()
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert!(live.len() > 20);
        assert_eq!(rows(&conn), rows(&fresh));
        assert_eq!(totals(&conn), totals(&fresh));
    }

    #[test]
    fn a_very_long_word_is_kept_as_it_is() {
        let key = "a".repeat(65) + "ing";
        assert_eq!(words(&key), vec![(key.clone(), key)]);
    }

    #[test]
    fn postings_survive_their_encoding() {
        let number = 3;
        let first = number << BLOCK_BITS;
        let postings = vec![
            Posting {
                chunk: first,
                count: 1,
                length: 12,
            },
            Posting {
                chunk: first + 1,
                count: 300,
                length: 70_000,
            },
            Posting {
                chunk: first + 8_000,
                count: 2,
                length: 1,
            },
        ];
        let mut data = Vec::new();
        encode(&postings, number, &mut data);
        let mut back = Vec::new();
        decode(&data, number, &mut back).unwrap();
        assert_eq!(back, postings);
        // Cut in the middle of a varint: an error, not a wrong posting.
        assert!(decode(&data[..data.len() - 1], number, &mut Vec::new()).is_err());
    }
}
