//! What one turn costs the session store, by the length of the conversation: the reads a
//! gateway turn makes (the history and the settings at its start, the settings again to
//! calibrate after the answer, then the consolidation and title checks after it) with the
//! store's cache warm, as in a running gateway, and cold, as every read was before the cache;
//! and an append synced and not.
//!
//!     cargo bench -p nanocrab-sessions --bench turn_io
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use nanocrab_schema::{LlmMessage, SessionKey, Usage};
use nanocrab_sessions::{SessionEntry, SessionStore};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The reads of one turn; returns the entries seen so the work is not optimised away.
fn turn_reads(store: &SessionStore, key: &SessionKey) -> usize {
    let history = store.load(key).unwrap().messages().len();
    let settings = store.settings(key).unwrap();
    let calibrate = store.settings(key).unwrap();
    let consolidate =
        store.load(key).unwrap().entries.len() + store.settings(key).unwrap().consolidated_entries;
    let title = store.settings(key).unwrap().title.is_some();
    let titled = if title {
        0
    } else {
        store.load(key).unwrap().entries.len()
    };
    history + consolidate + titled + usize::from(settings == calibrate)
}

fn answer(text: &str) -> SessionEntry {
    SessionEntry {
        model: Some("mock/echo".to_owned()),
        usage: Some(Usage {
            input_tokens: 1_200,
            output_tokens: 12,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        }),
        ..SessionEntry::now(LlmMessage::assistant(text))
    }
}

fn main() {
    let key = SessionKey::parse("telegram:7000001").unwrap();
    println!(
        "| turns so far | file | reads of a turn, cold | warm | append + fdatasync | append unsynced |"
    );
    println!("|---|---|---|---|---|---|");
    for turns in [10, 100, 1_000] {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path());
        for i in 0..turns {
            let question = format!("message {i} from chat 7000001");
            store
                .append_unsynced(
                    &key,
                    &[
                        SessionEntry::now(LlmMessage::user(question.clone())),
                        answer(&question),
                    ],
                )
                .unwrap();
        }
        store.sync(&key).unwrap();
        let size = std::fs::metadata(store.path(&key)).unwrap().len();
        let runs = 200;
        let cold = median(
            (0..runs)
                .map(|_| {
                    let fresh = SessionStore::new(dir.path());
                    let start = Instant::now();
                    std::hint::black_box(turn_reads(&fresh, &key));
                    start.elapsed()
                })
                .collect(),
        );
        let warm = median(
            (0..runs)
                .map(|_| {
                    let start = Instant::now();
                    std::hint::black_box(turn_reads(&store, &key));
                    start.elapsed()
                })
                .collect(),
        );
        let append = |synced: bool| {
            median(
                (0..50)
                    .map(|i| {
                        let entry = [answer(&format!("appended {i}"))];
                        let start = Instant::now();
                        if synced {
                            store.append(&key, &entry).unwrap();
                        } else {
                            store.append_unsynced(&key, &entry).unwrap();
                        }
                        start.elapsed()
                    })
                    .collect(),
            )
        };
        let synced = append(true);
        let unsynced = append(false);
        store.sync(&key).unwrap();
        println!(
            "| {turns} | {:.0} KB | {:.0} µs | {:.1} µs | {:.0} µs | {:.1} µs |",
            size as f64 / 1e3,
            micros(cold),
            micros(warm),
            micros(synced),
            micros(unsynced)
        );
    }
}
