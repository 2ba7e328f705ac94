//! What exact token counting costs: loading a vocabulary (once per process, on the first turn
//! of an OpenAI-family model), the memory it keeps, and counting, against the estimate.
//!
//!     cargo bench -p nanocrab-sessions --features tiktoken --bench token_count
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use nanocrab_schema::LlmMessage;
use nanocrab_sessions::{TokenCounter, estimate_tokens};

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    // The path the agent takes: the first exact count of a process loads the vocabulary.
    for model in ["gpt-4o", "gpt-4"] {
        let counter = TokenCounter::for_model(model);
        assert!(counter.is_exact(), "{model}: {counter:?}");
        let before = rss_mb();
        let start = Instant::now();
        counter.count_text("");
        let load = start.elapsed();
        println!(
            "{model}: {counter:?} first load {:.0} ms, resident memory +{:.1} MB",
            load.as_secs_f64() * 1e3,
            rss_mb() - before
        );
    }
    // More loads of each, as many new processes would pay them.
    fn loads<T, E: std::fmt::Debug>(load: fn() -> Result<T, E>) -> Duration {
        median(
            (0..5)
                .map(|_| {
                    let start = Instant::now();
                    drop(load().unwrap());
                    start.elapsed()
                })
                .collect(),
        )
    }
    println!(
        "load, median of 5: o200k_base {:.0} ms, cl100k_base {:.0} ms",
        loads(tiktoken_rs::o200k_base).as_secs_f64() * 1e3,
        loads(tiktoken_rs::cl100k_base).as_secs_f64() * 1e3
    );

    // Prose, markdown and code: the project's docs and agent loop.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut corpus = String::new();
    for file in [
        "docs/architecture.md",
        "docs/configuration.md",
        "docs/providers.md",
        "crates/core/src/agent.rs",
    ] {
        corpus.push_str(&std::fs::read_to_string(root.join(file)).unwrap());
    }
    // A typical message: about 2,000 characters cut at a line end.
    let cut = corpus[..2_000].rfind('\n').unwrap_or(2_000);
    let message = LlmMessage::user(&corpus[..cut]);
    println!(
        "corpus {} bytes; message {} bytes ({} tokens estimated)",
        corpus.len(),
        cut,
        estimate_tokens(&message)
    );
    for (name, counter) in [
        ("o200k_base", TokenCounter::for_model("gpt-4o")),
        ("cl100k_base", TokenCounter::for_model("gpt-4")),
        ("estimate", TokenCounter::Estimate),
    ] {
        let runs = 20;
        let start = Instant::now();
        let mut tokens = 0;
        for _ in 0..runs {
            tokens = std::hint::black_box(counter.count_text(std::hint::black_box(&corpus)));
        }
        let whole = start.elapsed() / runs;
        let runs = 2_000;
        let start = Instant::now();
        for _ in 0..runs {
            std::hint::black_box(counter.count_message(std::hint::black_box(&message)));
        }
        let one = start.elapsed() / runs;
        println!(
            "{name:>11}: corpus {tokens} tokens in {:.3} ms; one message {:.3} µs",
            whole.as_secs_f64() * 1e3,
            one.as_secs_f64() * 1e6
        );
    }
}
