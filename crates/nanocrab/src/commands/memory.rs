//! `nanocrab memory search | index | status`.

use nanocrab_memory::{MemoryIndex, SearchOptions};

use super::Env;
use crate::cli::MemoryCommand;

pub fn run(env: &Env, command: MemoryCommand) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    let workspace = env.workspace(&config);
    let database = env.paths.memory_index();
    let sessions = config
        .memory
        .index_sessions
        .then(|| env.paths.sessions_dir());
    match command {
        MemoryCommand::Search { query, limit, json } => {
            let mut index = MemoryIndex::open(&database, &workspace)?.with_sessions(sessions);
            index.sync()?;
            let mut options = SearchOptions::from_config(&config.memory);
            options.limit = limit.unwrap_or(options.limit).max(1);
            let hits = index.search(&query, &options)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&hits)?);
                return Ok(());
            }
            // Said on stderr, so that stdout is only results.
            eprintln!("(keyword search: no embedding model is set up yet)");
            if hits.is_empty() {
                println!("no matches for {query:?} in {}", workspace.display());
            }
            for (rank, hit) in hits.iter().enumerate() {
                println!(
                    "{}. {}:{}-{}  {:.2}{}",
                    rank + 1,
                    hit.path,
                    hit.start_line,
                    hit.end_line,
                    hit.score,
                    if hit.heading.is_empty() {
                        String::new()
                    } else {
                        format!("  ({})", hit.heading)
                    }
                );
                for line in hit.snippet.lines() {
                    println!("   {line}");
                }
            }
        }
        MemoryCommand::Index { rebuild } => {
            let report = if rebuild {
                MemoryIndex::rebuild(&database, &workspace, sessions)?.1
            } else {
                MemoryIndex::open(&database, &workspace)?
                    .with_sessions(sessions)
                    .sync()?
            };
            println!(
                "{} files: {} added, {} changed, {} removed; {} chunks indexed in {} ms",
                report.files,
                report.added,
                report.changed,
                report.removed,
                report.chunks,
                report.elapsed.as_millis()
            );
        }
        MemoryCommand::Status => {
            let index = MemoryIndex::open(&database, &workspace)?.with_sessions(sessions);
            let status = index.status()?;
            println!("index      {}", status.database.display());
            println!("workspace  {}", workspace.display());
            let sources: Vec<String> = status
                .per_source
                .iter()
                .map(|(source, n)| format!("{source}/ {n}"))
                .collect();
            println!("files      {} ({})", status.files, sources.join(", "));
            println!("chunks     {}", status.chunks);
            println!(
                "last sync  {}",
                status.last_sync.as_deref().unwrap_or("never")
            );
            println!("search     keyword (BM25); no embedding model is set up yet");
        }
    }
    Ok(())
}
