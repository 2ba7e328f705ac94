//! `tool_search(query, names, limit)`: when the tools on offer are past `tools.deferAbove`,
//! the extensions' tools (WASM and MCP) are held back from the requests and this tool finds
//! them by what they do and loads them: their definitions are sent from the next request of
//! the turn on. A new turn starts with them held back again.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use nanocrab_policy::{Invocation, Risk};
use nanocrab_schema::ToolDef;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::arguments::TypedTool;
use crate::tool::{ToolContext, ToolError, ToolOutput};

pub const TOOL_SEARCH: &str = "tool_search";
/// Tools a search loads when the call does not say.
const DEFAULT_LIMIT: usize = 5;
const MAX_LIMIT: usize = 10;
/// Where the held-back tools come from, as far as a prompt line or a hint names them.
const SOURCES_SHOWN: usize = 8;
/// A description longer than this is cut in a result: the definition, once loaded, has it all.
const DESCRIPTION_CHARS: usize = 160;
/// BM25's usual constants: how fast repeats of a word stop counting, and how much a long
/// text is discounted.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Words that say nothing of what a tool does; they would only add noise to a score.
const STOP_WORDS: [&str; 20] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
    "or", "that", "the", "this", "to",
];

/// The held-back tools of one turn, their search index, and which ones a call loaded.
pub struct ToolSearch {
    deferred: Vec<ToolDef>,
    index: Bm25,
    /// Indexes into `deferred`, in the order they were loaded.
    loaded: Mutex<Vec<usize>>,
}

impl ToolSearch {
    pub fn new(deferred: Vec<ToolDef>) -> Self {
        let index = Bm25::new(deferred.iter().map(searchable_words).collect());
        Self {
            deferred,
            index,
            loaded: Mutex::new(Vec::new()),
        }
    }

    /// The tools held back.
    pub fn deferred(&self) -> &[ToolDef] {
        &self.deferred
    }

    /// The definitions loaded so far, in the order they were loaded.
    pub fn loaded(&self) -> Vec<ToolDef> {
        self.loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|&index| self.deferred[index].clone())
            .collect()
    }

    pub fn loaded_count(&self) -> usize {
        self.loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The held-back tools that best match `query`, best first, at most `limit`.
    fn search(&self, query: &str, limit: usize) -> Vec<usize> {
        let mut words = words(query);
        words.sort();
        words.dedup();
        let mut scored: Vec<(usize, f64)> = (0..self.deferred.len())
            .map(|doc| (doc, self.index.score(doc, &words)))
            .filter(|(_, score)| *score > 0.0)
            .collect();
        // Stable: of two equal scores, the tool registered first comes first.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.into_iter().take(limit).map(|(doc, _)| doc).collect()
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSearchArgs {
    /// words for what the tool should do
    query: Option<String>,
    /// exact tool names to load
    names: Option<Vec<String>>,
    /// most tools to load (default 5, at most 10)
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

impl TypedTool for ToolSearch {
    type Args = ToolSearchArgs;

    const NAME: &'static str = TOOL_SEARCH;

    fn description(&self) -> String {
        "Find tools not listed yet by what they do (or load them by name); the ones found can \
         be called next."
            .into()
    }

    /// Safe and needs nothing: it only shows definitions of tools the agent already has.
    fn invocation(&self, args: &ToolSearchArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        let summary = match (&args.query, &args.names) {
            (Some(query), _) => format!("search the tools for \"{query}\""),
            (None, Some(names)) => format!("load the tools {}", names.join(", ")),
            (None, None) => "search the tools".to_owned(),
        };
        Ok(Invocation::new(Risk::Safe, summary, Vec::new()))
    }

    async fn call(&self, args: ToolSearchArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = args.query.as_deref().map(str::trim).unwrap_or_default();
        let names = args.names.unwrap_or_default();
        if query.is_empty() && names.is_empty() {
            return Err(ToolError::InvalidArguments(
                "give `query` (words for what the tool should do) or `names` (exact tool names)"
                    .to_owned(),
            ));
        }
        let mut found = Vec::new();
        let mut unknown = Vec::new();
        for name in &names {
            match self.deferred.iter().position(|d| d.name == *name) {
                Some(index) => found.push(index),
                None => unknown.push(name.as_str()),
            }
        }
        if !query.is_empty() {
            let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
            found.extend(self.search(query, limit));
        }
        let mut seen = Vec::with_capacity(found.len());
        found.retain(|index| {
            let first = !seen.contains(index);
            seen.push(*index);
            first
        });
        {
            let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
            for index in &found {
                if !loaded.contains(index) {
                    loaded.push(*index);
                }
            }
        }
        let mut text = String::new();
        if !found.is_empty() {
            text.push_str("Loaded; call them by name from your next step:\n");
            for &index in &found {
                let definition = &self.deferred[index];
                text.push_str(&format!(
                    "- {}({}): {}\n",
                    definition.name,
                    parameter_names(&definition.parameters),
                    one_line(&definition.description)
                ));
            }
        }
        for name in unknown {
            text.push_str(&format!("There is no tool `{name}` to load.\n"));
        }
        if found.is_empty() && !query.is_empty() {
            text.push_str(&format!(
                "No tool matches \"{query}\". Try other words: what the tool acts on, or where \
                 it comes from ({}).\n",
                deferred_sources(self.deferred.iter().map(|d| d.name.as_str()))
            ));
        }
        // The same text as the definitions the model is sent once they are loaded, which are
        // not fenced either: whoever installed the tools vouched for them.
        Ok(ToolOutput::trusted(text.trim_end()))
    }
}

/// Where tools come from, for the model: an MCP server for `<server>__<tool>`, the tool's own
/// name otherwise, each once, in the order given; past a few, `…`.
pub fn deferred_sources<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut sources: Vec<&str> = Vec::new();
    for name in names {
        let source = name.split_once("__").map_or(name, |(server, _)| server);
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    let more = sources.len() > SOURCES_SHOWN;
    sources.truncate(SOURCES_SHOWN);
    let mut listed = sources.join(", ");
    if more {
        listed.push('…');
    }
    listed
}

/// `owner, repo, title, body?`: the top-level parameters, optional ones marked.
fn parameter_names(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, _)| {
            if required.contains(&name.as_str()) {
                name.clone()
            } else {
                format!("{name}?")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first line of a description, cut to [`DESCRIPTION_CHARS`]: after its last whole
/// sentence that fits, or else mid-sentence, marked.
fn one_line(description: &str) -> String {
    let line = description.trim().lines().next().unwrap_or_default().trim();
    if line.chars().count() <= DESCRIPTION_CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(DESCRIPTION_CHARS - 1).collect();
    match cut.rfind(". ") {
        Some(end) => cut[..=end].to_owned(),
        None => format!("{}…", cut.trim_end()),
    }
}

/// What a tool is found by: its name (twice: it says the most in the fewest words), its
/// description, and its parameters' names and descriptions.
fn searchable_words(definition: &ToolDef) -> Vec<String> {
    let mut found = words(&definition.name);
    found.extend(words(&definition.name));
    found.extend(words(&definition.description));
    if let Some(properties) = definition
        .parameters
        .get("properties")
        .and_then(Value::as_object)
    {
        for (name, property) in properties {
            found.extend(words(name));
            if let Some(description) = property.get("description").and_then(Value::as_str) {
                found.extend(words(description));
            }
        }
    }
    found
}

/// The words of `text`, lowercase: split at anything not a letter or digit (`_`, `__`, `-`,
/// spaces) and at camelCase humps (`listAllowedDirectories`, `HTTPServer`), without
/// [`STOP_WORDS`], and a plural made singular (`issues`, `directories`) so that either form
/// finds the other.
fn words(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut keep = |chars: &[char]| {
        let word: String = chars.iter().collect::<String>().to_lowercase();
        if word.is_empty() || STOP_WORDS.contains(&word.as_str()) {
            return;
        }
        let singular = if word.len() > 4 && word.ends_with("ies") {
            format!("{}y", &word[..word.len() - 3])
        } else if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
            word[..word.len() - 1].to_owned()
        } else {
            word
        };
        found.push(singular);
    };
    for part in text.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = part.chars().collect();
        let mut start = 0;
        for at in 1..chars.len() {
            let (before, this) = (chars[at - 1], chars[at]);
            let acronym_ends =
                before.is_uppercase() && chars.get(at + 1).is_some_and(|next| next.is_lowercase());
            if this.is_uppercase() && (!before.is_uppercase() || acronym_ends) {
                keep(&chars[start..at]);
                start = at;
            }
        }
        keep(&chars[start..]);
    }
    found
}

/// Okapi BM25 over the held-back tools. Written here rather than taken from a crate: a turn
/// indexes a few dozen short texts once, with words split our own way (tool names), which is
/// all the `bm25` crate's tokenizers, stemmers and language detection would be asked for.
struct Bm25 {
    /// Each document's words, counted.
    counts: Vec<HashMap<String, usize>>,
    lengths: Vec<usize>,
    average_length: f64,
    /// In how many documents each word occurs.
    documents_with: HashMap<String, usize>,
}

impl Bm25 {
    fn new(documents: Vec<Vec<String>>) -> Self {
        let lengths: Vec<usize> = documents.iter().map(Vec::len).collect();
        let average_length = lengths.iter().sum::<usize>() as f64 / lengths.len().max(1) as f64;
        let counts: Vec<HashMap<String, usize>> = documents
            .into_iter()
            .map(|words| {
                let mut counts = HashMap::new();
                for word in words {
                    *counts.entry(word).or_insert(0) += 1;
                }
                counts
            })
            .collect();
        let mut documents_with = HashMap::new();
        for word in counts.iter().flat_map(HashMap::keys) {
            *documents_with.entry(word.clone()).or_insert(0) += 1;
        }
        Self {
            counts,
            lengths,
            average_length,
            documents_with,
        }
    }

    fn score(&self, document: usize, query: &[String]) -> f64 {
        let total = self.counts.len() as f64;
        let length = self.lengths[document] as f64 / self.average_length.max(1.0);
        query
            .iter()
            .filter_map(|word| {
                let count = *self.counts[document].get(word)? as f64;
                let with = *self.documents_with.get(word)? as f64;
                let rarity = (1.0 + (total - with + 0.5) / (with + 0.5)).ln();
                Some(rarity * count * (K1 + 1.0) / (count + K1 * (1.0 - B + B * length)))
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// 40 tools of three MCP servers: `everything` and `filesystem` as their `tools/list`
    /// gives them, `github` written after the GitHub server's.
    fn mcp_tools() -> Vec<ToolDef> {
        serde_json::from_str(include_str!("../tests/fixtures/mcp-tools.json")).unwrap()
    }

    #[test]
    fn words_split_names_at_every_separator_and_camel_case_hump() {
        let cases = [
            ("github__create_issue", vec!["github", "create", "issue"]),
            ("get-tiny-image", vec!["get", "tiny", "image"]),
            (
                "list_allowed_directories",
                vec!["list", "allowed", "directory"],
            ),
            (
                "listAllowedDirectories",
                vec!["list", "allowed", "directory"],
            ),
            ("HTTPServer v2", vec!["http", "server", "v2"]),
            ("Read the files, as text", vec!["read", "file", "text"]),
            ("per_page: address", vec!["per", "page", "address"]),
        ];
        for (text, expected) in cases {
            assert_eq!(words(text), expected, "{text}");
        }
    }

    #[test]
    fn the_right_tool_comes_first() {
        let search = ToolSearch::new(mcp_tools());
        let first = |query: &str| {
            search
                .search(query, 5)
                .first()
                .map(|&index| search.deferred[index].name.clone())
        };
        let cases = [
            ("create an issue on github", "github__create_issue"),
            ("merge a pull request", "github__merge_pull_request"),
            ("rename a file", "filesystem__move_file"),
            ("gzip compress", "everything__gzip-file-as-resource"),
            ("directory tree", "filesystem__directory_tree"),
            ("sum of two numbers", "everything__get-sum"),
            ("environment variables", "everything__get-env"),
            ("search code", "github__search_code"),
        ];
        let got: Vec<(&str, Option<String>)> = cases
            .iter()
            .map(|(query, _)| (*query, first(query)))
            .collect();
        let expected: Vec<(&str, Option<String>)> = cases
            .iter()
            .map(|(query, name)| (*query, Some((*name).to_owned())))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(first("weather forecast"), None);
    }

    #[test]
    fn sources_name_each_server_once_and_unprefixed_tools_by_name() {
        assert_eq!(
            deferred_sources(["github__a", "motd", "github__b", "fs__c"]),
            "github, motd, fs"
        );
        let many: Vec<String> = (0..10).map(|n| format!("s{n}__t")).collect();
        assert_eq!(
            deferred_sources(many.iter().map(String::as_str)),
            "s0, s1, s2, s3, s4, s5, s6, s7…"
        );
    }

    #[test]
    fn a_long_description_is_cut_to_its_first_line() {
        assert_eq!(one_line("  Echo.\nMore.  "), "Echo.");
        let sentences = format!("First one. Second one. {}", "word ".repeat(40));
        assert_eq!(one_line(&sentences), "First one. Second one.");
        let long = "word ".repeat(50);
        let cut = one_line(&long);
        assert_eq!(cut.chars().count(), DESCRIPTION_CHARS);
        assert!(cut.ends_with("word…"), "{cut}");
    }
}
