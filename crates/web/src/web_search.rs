//! `web_search(query, count?, freshness?)`: titles, URLs and snippets from the provider of
//! `tools.web.search`, fenced as untrusted (the snippets are other people's words).

use nanocrab_policy::{Capability, Invocation, Risk};
use nanocrab_tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::fetch::capability_target;
use crate::search::{Freshness, Query, Searcher};

pub struct WebSearchTool {
    searcher: Searcher,
    default_count: u8,
    require_grant: bool,
}

impl WebSearchTool {
    pub fn new(searcher: Searcher, default_count: u8, require_grant: bool) -> Self {
        Self {
            searcher,
            default_count: default_count.clamp(1, 10),
            require_grant,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    query: String,
    /// 1-10
    count: Option<usize>,
    // Shown as the four values alone: schemars would add `null` to the enum of an `Option`.
    #[serde(default)]
    #[schemars(with = "Freshness")]
    freshness: Option<Freshness>,
}

impl TypedTool for WebSearchTool {
    type Args = WebSearchArgs;

    const NAME: &'static str = "web_search";

    fn description(&self) -> String {
        "Search the web.".into()
    }

    /// `net:<provider host>`: the query leaves for that host; guarded under requireGrant.
    fn invocation(&self, args: &WebSearchArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        let host = url::Url::parse(self.searcher.base())
            .ok()
            .as_ref()
            .and_then(capability_target)
            .unwrap_or_else(|| self.searcher.base().to_owned());
        let risk = if self.require_grant {
            Risk::Guarded
        } else {
            Risk::Safe
        };
        Ok(Invocation::new(
            risk,
            format!(
                "search {} for \"{}\"",
                self.searcher.provider().name(),
                args.query
            ),
            vec![Capability::Net(host)],
        ))
    }

    async fn call(&self, args: WebSearchArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        let text = args.query.trim();
        if text.is_empty() {
            return Err(ToolError::InvalidArguments("the query is empty".into()));
        }
        let count = match args.count {
            None => self.default_count,
            Some(count @ 1..=10) => count as u8,
            Some(other) => {
                return Err(ToolError::InvalidArguments(format!(
                    "count {other} is out of range; allowed: 1 to 10"
                )));
            }
        };
        let query = Query {
            text: text.to_owned(),
            count,
            freshness: args.freshness,
        };
        let hits = self
            .searcher
            .search(&query)
            .await
            .map_err(|err| ToolError::Rejected(err.to_string()))?;
        let provider = self.searcher.provider().name();
        let mut out = format!("Results for \"{text}\" ({provider}):\n");
        if hits.is_empty() {
            out.push_str("\nNo results.");
        }
        for (number, hit) in hits.iter().enumerate() {
            out.push_str(&format!(
                "\n{}. {}\n   {}\n",
                number + 1,
                hit.title,
                hit.url
            ));
            if !hit.snippet.is_empty() {
                out.push_str(&format!("   {}\n", hit.snippet));
            }
        }
        Ok(ToolOutput::untrusted(
            format!("web_search {provider}: {text}"),
            out,
        ))
    }
}
