use nanocrab_policy::{Capability, Invocation, Risk};
use nanocrab_tools::{NoteOrigins, ToolContext, ToolError, ToolOutput, TypedTool, parameters};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::index::{IndexError, SearchMode};
use crate::index_setup::IndexSetup;
use crate::ranking::SearchOptions;

/// A caller may ask for more than the configured number of results, up to this.
const MAX_LIMIT: usize = 20;

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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchArgs {
    query: String,
    // Described in `parameters`: the default comes from config.
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

impl TypedTool for MemorySearchTool {
    type Args = MemorySearchArgs;

    const NAME: &'static str = "memory_search";

    fn description(&self) -> String {
        "Search memory (memory/*.md) and documents (knowledge/) by keywords and meaning; \
         ranked snippets with path:lines for memory_get."
            .into()
    }

    fn parameters(&self) -> serde_json::Value {
        let mut schema = parameters::<MemorySearchArgs>();
        if let Some(limit) = schema
            .pointer_mut("/properties/limit")
            .and_then(serde_json::Value::as_object_mut)
        {
            limit.insert(
                "description".into(),
                format!("max results (default {})", self.options.limit).into(),
            );
        }
        schema
    }

    fn invocation(
        &self,
        args: &MemorySearchArgs,
        _: &ToolContext,
    ) -> Result<Invocation, ToolError> {
        Ok(Invocation::new(
            Risk::Safe,
            format!("search memory for {:?}", args.query),
            vec![Capability::FsRead(self.index.workspace.clone())],
        ))
    }

    async fn call(
        &self,
        args: MemorySearchArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let options = SearchOptions {
            limit: args.limit.unwrap_or(self.options.limit).clamp(1, MAX_LIMIT),
            ..self.options.clone()
        };
        let setup = self.index.clone();
        let query = args.query.clone();
        // SQLite and the file walk block: off the async threads, but on this runtime, whose
        // I/O a remote embedding model's request needs.
        let runtime = tokio::runtime::Handle::current();
        let results =
            tokio::task::spawn_blocking(move || runtime.block_on(setup.search(&query, &options)))
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
                origins.snippet_for_model(&hit.path, &hit.snippet)
            ));
        }
        // Each snippet from a document, a transcript or a marked note is fenced on its own.
        Ok(ToolOutput::trusted(out.trim_end()))
    }
}
