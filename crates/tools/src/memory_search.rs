use async_trait::async_trait;
use nanocrab_memory::{IndexError, IndexSetup, SearchHit, SearchMode, SearchOptions};
use nanocrab_policy::{Capability, Invocation, Risk};
use nanocrab_schema::ToolDef;
use serde::Deserialize;
use serde_json::json;

use crate::arguments::parse_arguments;
use crate::note_marks::NoteOrigins;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};
use crate::untrusted::wrap_untrusted;

const EXPECTED: &str = "`query` (string) and optional `limit` (positive integer)";

/// A caller may ask for more than the configured number of results, up to this.
const MAX_LIMIT: usize = 20;

/// The snippet of `hit` as the model is shown it: an unmarked memory note as it is, anything
/// else (a document, a transcript, a note written from untrusted text) fenced with its origin.
pub fn hit_for_model(hit: &SearchHit, origins: &NoteOrigins) -> String {
    let snippet = hit.snippet.trim_end();
    match origins.fence_source(&hit.path) {
        None => snippet.to_owned(),
        Some(source) => wrap_untrusted(&source, snippet),
    }
}

/// `memory_search(query, limit?)`: ranked snippets of the memory files and documents, each with
/// its path and lines for `memory_get`. The index is brought up to date first, so a note the
/// agent just wrote is found.
pub struct MemorySearchTool {
    index: IndexSetup,
    /// Ranking as configured; the caller's `limit` replaces the configured one.
    options: SearchOptions,
}

impl MemorySearchTool {
    pub fn new(index: IndexSetup, options: SearchOptions) -> Self {
        Self { index, options }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    query: String,
    limit: Option<usize>,
}

#[async_trait]
impl Tool for MemorySearchTool {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "memory_search".into(),
            description: "Search long-term memory (memory/*.md) and documents (knowledge/) by \
                          keywords and meaning. Returns ranked snippets with path:lines for \
                          memory_get."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "description": format!("max results (default {})", self.options.limit)}
                },
                "required": ["query"]
            }),
        }
    }

    fn invocation(
        &self,
        input: &serde_json::Value,
        _: &ToolContext,
    ) -> Result<Invocation, ToolError> {
        let args: Arguments = parse_arguments("memory_search", input.clone(), EXPECTED)?;
        Ok(Invocation::new(
            Risk::Safe,
            format!("search memory for {:?}", args.query),
            vec![Capability::FsRead(self.index.workspace.clone())],
        ))
    }

    async fn call(
        &self,
        input: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Arguments = parse_arguments("memory_search", input, EXPECTED)?;
        let options = SearchOptions {
            limit: args.limit.unwrap_or(self.options.limit).clamp(1, MAX_LIMIT),
            ..self.options.clone()
        };
        let setup = self.index.clone();
        let query = args.query.clone();
        // SQLite and the file walk block: off the async threads, but on this runtime, whose
        // I/O a remote embedding model's request needs.
        let runtime = tokio::runtime::Handle::current();
        let results = tokio::task::spawn_blocking(move || {
            runtime.block_on(async {
                let mut index = setup.open().await?;
                index.sync().await?;
                index.search(&query, &options).await
            })
        })
        .await
        .map_err(|err| ToolError::Rejected(format!("memory search stopped: {err}")))?
        .map_err(|err: IndexError| ToolError::Rejected(err.to_string()))?;
        // The model should know when a miss may only mean other words were used.
        let keyword_only = match &results.mode {
            SearchMode::Hybrid { .. } => "",
            SearchMode::Keyword { .. } => " (keyword search only: no embedding model)",
        };
        if results.hits.is_empty() {
            return Ok(ToolOutput::trusted(format!(
                "No memory matches {:?}{keyword_only}. Try other words, or read memory/MEMORY.md.",
                args.query
            )));
        }
        let origins = NoteOrigins::load(ctx.memory_provenance.as_ref());
        let mut out = String::new();
        for (rank, hit) in results.hits.iter().enumerate() {
            out.push_str(&format!(
                "{}. {}:{}-{} (score {:.2})\n{}\n\n",
                rank + 1,
                hit.path,
                hit.start_line,
                hit.end_line,
                hit.score,
                hit_for_model(hit, &origins)
            ));
        }
        // Each snippet from a document, a transcript or a marked note is fenced on its own.
        Ok(ToolOutput::trusted(out.trim_end()))
    }
}
