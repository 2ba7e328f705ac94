//! `nanocrab memory search | index | status | trust`.

use std::io::IsTerminal as _;
use std::sync::Arc;

use nanocrab_memory::{EmbeddingProvider, EmbeddingSetup, IndexSetup, SearchMode, SearchOptions};

use super::Env;
use super::embedding_progress::EmbeddingProgress;
use crate::cli::MemoryCommand;

pub fn run(env: &Env, command: MemoryCommand) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    let setup = env.index_setup(&config, nanocrab_config::DEFAULT_AGENT_ID);
    let workspace = &setup.workspace;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match command {
        MemoryCommand::Search { query, limit, json } => {
            let mut options = SearchOptions::from_config(&config.memory);
            options.limit = limit.unwrap_or(options.limit).max(1);
            let results = runtime.block_on(setup.search(&query, &options))?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&results)?)?;
                return Ok(());
            }
            // Said on stderr, so that stdout is only results.
            match &results.mode {
                SearchMode::Hybrid { .. } => {}
                SearchMode::Keyword { reason } => eprintln!("(keyword search only: {reason})"),
            }
            let hits = results.hits;
            if hits.is_empty() {
                outln!("no matches for {query:?} in {}", workspace.display())?;
            }
            for (rank, hit) in hits.iter().enumerate() {
                outln!(
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
                )?;
                for line in hit.snippet.lines() {
                    outln!("   {line}")?;
                }
            }
        }
        MemoryCommand::Index { rebuild } => {
            // The model counted as it goes; a large folder of documents takes a while.
            let progress = setup.embeddings.provider().map(|provider| {
                Arc::new(EmbeddingProgress::new(
                    provider,
                    std::io::stderr().is_terminal(),
                ))
            });
            let setup = match &progress {
                Some(progress) => IndexSetup {
                    embeddings: EmbeddingSetup::Ready(
                        Arc::clone(progress) as Arc<dyn EmbeddingProvider>
                    ),
                    ..setup.clone()
                },
                None => setup.clone(),
            };
            let report = runtime.block_on(async {
                if rebuild {
                    Ok(setup.rebuild().await?.1)
                } else {
                    setup.open().await?.sync().await
                }
            });
            if let Some(progress) = &progress {
                progress.finish();
            }
            let report = report?;
            let rate = match &progress {
                Some(progress) if report.embedded > 0 => format!(
                    " ({:.0} chunks/s)",
                    report.embedded as f64 / progress.spent().as_secs_f64().max(1e-6)
                ),
                Some(_) | None => String::new(),
            };
            outln!(
                "{} files: {} added, {} changed, {} removed; {} chunks indexed, {} embedded{rate} in {} ms",
                report.files,
                report.added,
                report.changed,
                report.removed,
                report.chunks,
                report.embedded,
                report.elapsed.as_millis()
            )?;
            if let Some(err) = &report.embedding_error {
                eprintln!("warning: {err}; notes without a vector are found by keyword only");
            }
        }
        MemoryCommand::Status => {
            let status = runtime.block_on(setup.open())?.status()?;
            outln!("index      {}", status.database.display())?;
            outln!("workspace  {}", workspace.display())?;
            let sources: Vec<String> = status
                .per_source
                .iter()
                .map(|(source, n)| format!("{source}/ {n}"))
                .collect();
            outln!("files      {} ({})", status.files, sources.join(", "))?;
            outln!("chunks     {}", status.chunks)?;
            outln!(
                "updated    {}",
                status.updated.as_deref().unwrap_or("never")
            )?;
            match &setup.embeddings {
                EmbeddingSetup::Ready(provider) => {
                    outln!(
                        "search     hybrid: keyword (BM25) and meaning ({}), fused by {}",
                        provider.id(),
                        match config.memory.fusion {
                            nanocrab_config::Fusion::Rrf => "reciprocal rank",
                            nanocrab_config::Fusion::Weighted => "weighted score",
                        }
                    )?;
                    outln!(
                        "vectors    {} of {} chunks{}",
                        status.embedded_chunks,
                        status.chunks,
                        match &status.embedding_model {
                            Some(model) if model != provider.id() =>
                                format!(" (from {model}; the next sync re-embeds)"),
                            Some(_) | None => String::new(),
                        }
                    )?;
                }
                EmbeddingSetup::KeywordOnly(reason) => {
                    outln!("search     keyword only (BM25): {reason}")?
                }
            }
            let marks = env
                .memory_provenance(nanocrab_config::DEFAULT_AGENT_ID)
                .marks()?;
            if marks.is_empty() {
                outln!("untrusted  none: no note was written from untrusted content")?;
            } else {
                outln!(
                    "untrusted  {} written from untrusted content, fenced for the model until \
                     trusted (`nanocrab memory trust PATH` once checked):",
                    match marks.len() {
                        1 => "1 note".to_owned(),
                        n => format!("{n} notes"),
                    }
                )?;
                for (note, mark) in &marks {
                    outln!("  {note}  (last {}, {})", mark.at, mark.sessions.join(", "))?;
                    for source in &mark.sources {
                        outln!("    from {source}")?;
                    }
                }
            }
        }
        MemoryCommand::Trust { paths, all } => {
            let provenance = env.memory_provenance(nanocrab_config::DEFAULT_AGENT_ID);
            let marks = provenance.marks()?;
            let notes: Vec<String> = if all {
                marks.keys().cloned().collect()
            } else {
                paths
                    .iter()
                    .map(|path| {
                        // As listed, or as a path to the file itself.
                        let note = std::path::Path::new(path)
                            .strip_prefix(workspace)
                            .map_or_else(|_| path.trim_start_matches("./").to_owned(), |p| {
                                p.to_string_lossy().into_owned()
                            });
                        if marks.contains_key(&note) {
                            Ok(note)
                        } else {
                            Err(anyhow::anyhow!(
                                "{path} is not marked as written from untrusted content; `nanocrab memory status` lists the notes that are"
                            ))
                        }
                    })
                    .collect::<anyhow::Result<_>>()?
            };
            provenance.trust(&notes)?;
            if notes.is_empty() {
                outln!("No note is marked; nothing to trust.")?;
            }
            for note in &notes {
                outln!("trusted {note}")?;
            }
        }
    }
    Ok(())
}
