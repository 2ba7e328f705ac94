//! The web as a tool: `web_fetch` reads a page (its main content as Markdown), a PDF or JSON,
//! checked against server-side request forgery (only public addresses unless allowed, each
//! redirect checked again, the connection pinned to the checked address), capped, timed and
//! cached; `web_search` asks Brave, Tavily, SearXNG or DuckDuckGo. Both fence what they
//! return as untrusted. The binary adds them to each agent's tools.

mod address;
mod cache;
mod content;
mod fetch;
mod search;
mod web_fetch;
mod web_search;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nanocrab_config::WebConfig;
use nanocrab_policy::CapabilityPattern;
use nanocrab_tools::Tool;

pub use address::non_public;
pub use cache::{Entry, WebCache};
pub use content::{Readable, readable};
pub use fetch::{
    FetchError, FetchLimits, Fetched, Fetcher, Reach, Resolve, SystemResolver, capability_target,
    checked_url,
};
pub use search::{Freshness, Hit, Query, SearchError, Searcher};
pub use web_fetch::{Clock, WebFetchArgs, WebFetchTool};
pub use web_search::{WebSearchArgs, WebSearchTool};

/// What the web tools need besides `tools.web`.
pub struct WebSetup {
    /// `state/web-cache/`; `None` keeps no pages.
    pub cache_dir: Option<PathBuf>,
    /// Why `tools.web.search.apiKey` is missing, when config knows (an unset `${VAR}`).
    pub search_key_problem: Option<String>,
    pub resolver: Arc<dyn Resolve>,
    pub clock: Clock,
}

impl WebSetup {
    /// The system's resolver and clock.
    pub fn new(cache_dir: Option<PathBuf>, search_key_problem: Option<String>) -> Self {
        Self {
            cache_dir,
            search_key_problem,
            resolver: Arc::new(SystemResolver),
            clock: Arc::new(jiff::Timestamp::now),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebSetupError {
    #[error("tools.web.allowPrivate[{index}]: {reason}")]
    AllowPrivate { index: usize, reason: String },
    #[error("tools.web.search: {0}")]
    Client(String),
}

/// The fetcher `tools.web` describes: its limits, its `allowPrivate` hosts, and under
/// `requireGrant` redirects kept to the host asked for. The browser checks its hosts with it.
pub fn fetcher(config: &WebConfig, resolver: Arc<dyn Resolve>) -> Result<Fetcher, WebSetupError> {
    let allow_private = config
        .allow_private
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            CapabilityPattern::parse(&format!("net:{}", entry.trim()), None).map_err(|err| {
                WebSetupError::AllowPrivate {
                    index,
                    reason: err.to_string(),
                }
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Fetcher::new(
        FetchLimits {
            max_bytes: config.fetch.max_bytes,
            timeout: Duration::from_secs(config.fetch.timeout_seconds),
            max_redirects: config
                .fetch
                .max_redirects
                .min(nanocrab_config::MAX_REDIRECTS),
        },
        Reach {
            allow_private,
            same_host_only: config.require_grant,
        },
        config.user_agent.clone(),
        resolver,
    ))
}

/// `web_fetch` and `web_search` as `config` has them (none when `enable` is false).
pub fn web_tools(config: &WebConfig, setup: WebSetup) -> Result<Vec<Arc<dyn Tool>>, WebSetupError> {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    if !config.enable {
        return Ok(tools);
    }
    if config.fetch.enabled {
        let fetcher = fetcher(config, Arc::clone(&setup.resolver))?;
        let cache = setup
            .cache_dir
            .filter(|_| config.fetch.cache_ttl_minutes > 0)
            .map(|dir| {
                WebCache::new(
                    dir,
                    Duration::from_secs(config.fetch.cache_ttl_minutes * 60),
                )
            });
        tools.push(Arc::new(WebFetchTool::new(
            fetcher,
            cache,
            config.fetch.max_chars,
            config.require_grant,
            Arc::clone(&setup.clock),
        )));
    }
    if config.search.enabled {
        let search = &config.search;
        let searcher = Searcher::new(
            search.provider(),
            search.key().map(str::to_owned),
            setup.search_key_problem,
            search.base_url.clone(),
            Duration::from_secs(search.timeout),
            config.user_agent.as_deref(),
        )
        .map_err(WebSetupError::Client)?;
        tools.push(Arc::new(WebSearchTool::new(
            searcher,
            search.max_results,
            config.require_grant,
        )));
    }
    Ok(tools)
}
