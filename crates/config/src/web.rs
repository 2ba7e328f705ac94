//! `tools.web`: the `web_fetch` and `web_search` tools, in nanobot's shape (`enable`,
//! `search.provider`, `search.apiKey`, `search.baseUrl`, `search.maxResults`) with OpenClaw's
//! fetch limits (`fetch.maxChars`, `timeoutSeconds`, `cacheTtlMinutes`, `maxRedirects`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most redirects a fetch follows, whatever config asks.
pub const MAX_REDIRECTS: u8 = 5;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebConfig {
    /// Offer `web_fetch` and `web_search` at all (nanobot's key); `false` offers neither.
    #[serde(default = "default_true")]
    pub enable: bool,
    /// Every host needs a grant (`net:example.com`, `net:*.example.com`) or an approval, as a
    /// guarded call; without it public hosts are reached without asking.
    #[serde(default)]
    pub require_grant: bool,
    /// Hosts that may be reached on loopback, private, link-local or other non-public
    /// addresses, as written in the URL: `127.0.0.1`, `localhost:8080` (that port only),
    /// `nas.home.arpa`, `*.home.arpa`. Nothing else ever is, whatever its name resolves to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_private: Vec<String>,
    /// The `User-Agent` of fetches and searches; default `nanocrab/<version>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// nanobot's proxy: refused when set, since a proxy resolves names where nanocrab cannot
    /// check the addresses they lead to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    #[serde(default)]
    pub fetch: WebFetchConfig,
    #[serde(default)]
    pub search: WebSearchConfig,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            enable: true,
            require_grant: false,
            allow_private: Vec::new(),
            user_agent: None,
            proxy: None,
            fetch: WebFetchConfig::default(),
            search: WebSearchConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebFetchConfig {
    /// Offer `web_fetch`.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Characters of text one call returns; `offset` pages on.
    #[serde(default = "default_max_chars")]
    pub max_chars: usize,
    /// Bytes of a response read (after gzip is undone); the rest is not downloaded.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// Seconds for the whole fetch, redirects and body included.
    #[serde(default = "default_fetch_timeout")]
    pub timeout_seconds: u64,
    /// How long a fetched page is kept in `state/web-cache/`; 0 keeps nothing.
    #[serde(default = "default_cache_ttl")]
    pub cache_ttl_minutes: u64,
    /// Redirects followed, each checked again like the first address; at most 5.
    #[serde(default = "default_max_redirects")]
    pub max_redirects: u8,
}

impl Default for WebFetchConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_chars: default_max_chars(),
            max_bytes: default_max_bytes(),
            timeout_seconds: default_fetch_timeout(),
            cache_ttl_minutes: default_cache_ttl(),
            max_redirects: default_max_redirects(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebSearchConfig {
    /// Offer `web_search`.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Who answers: `brave`, `tavily`, `searxng` or `duckduckgo`. Default: `brave` when
    /// `apiKey` is set (nanobot's old shape), else `duckduckgo`, which needs no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<SearchProvider>,
    /// The provider's key (Brave's `X-Subscription-Token`, Tavily's bearer token), best as
    /// `${BRAVE_API_KEY}`. An empty string, as nanobot writes, is no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The provider's address; required for `searxng` (your instance), otherwise the
    /// provider's own (`https://api.search.brave.com`, `https://api.tavily.com`,
    /// `https://html.duckduckgo.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Results when the model gives no `count`; at most 10.
    #[serde(default = "default_max_results")]
    pub max_results: u8,
    /// Seconds a search may take (nanobot's key).
    #[serde(default = "default_search_timeout")]
    pub timeout: u64,
}

impl Default for WebSearchConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            provider: None,
            api_key: None,
            base_url: None,
            max_results: default_max_results(),
            timeout: default_search_timeout(),
        }
    }
}

impl WebSearchConfig {
    /// The key, unless it is empty.
    pub fn key(&self) -> Option<&str> {
        self.api_key.as_deref().filter(|key| !key.trim().is_empty())
    }

    /// The provider in force: the one named, or Brave when a key is set, or DuckDuckGo.
    pub fn provider(&self) -> SearchProvider {
        match (self.provider, self.key()) {
            (Some(provider), _) => provider,
            (None, Some(_)) => SearchProvider::Brave,
            (None, None) => SearchProvider::Duckduckgo,
        }
    }
}

/// A web search backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    /// Brave Search API (`X-Subscription-Token`).
    Brave,
    /// Tavily's search API (bearer token).
    Tavily,
    /// A SearXNG instance (`format=json`, no key).
    Searxng,
    /// DuckDuckGo's HTML endpoint (no key).
    Duckduckgo,
}

impl SearchProvider {
    pub fn name(self) -> &'static str {
        match self {
            Self::Brave => "Brave",
            Self::Tavily => "Tavily",
            Self::Searxng => "SearXNG",
            Self::Duckduckgo => "DuckDuckGo",
        }
    }

    /// Whether it needs `apiKey`.
    pub fn needs_key(self) -> bool {
        match self {
            Self::Brave | Self::Tavily => true,
            Self::Searxng | Self::Duckduckgo => false,
        }
    }
}

impl WebConfig {
    /// Checks what serde cannot; an error is the key below `tools.web` and why.
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.proxy.is_some() {
            return Err((
                "proxy".into(),
                "nanocrab's web tools connect directly: a proxy would resolve names where \
                 nanocrab cannot check the addresses (loopback, private networks) they lead to; \
                 remove the key"
                    .into(),
            ));
        }
        for (index, entry) in self.allow_private.iter().enumerate() {
            let entry = entry.trim();
            if entry.is_empty() || entry == "*" || entry.contains('/') {
                return Err((
                    format!("allowPrivate.{index}"),
                    format!(
                        "{entry:?} is not a host; allowed: a host as written in URLs \
                         (127.0.0.1, localhost:8080, nas.home.arpa, *.home.arpa)"
                    ),
                ));
            }
        }
        let fetch = &self.fetch;
        for (key, value) in [
            ("fetch.maxChars", fetch.max_chars as u64),
            ("fetch.maxBytes", fetch.max_bytes),
            ("fetch.timeoutSeconds", fetch.timeout_seconds),
            ("search.timeout", self.search.timeout),
            ("search.maxResults", u64::from(self.search.max_results)),
        ] {
            if value == 0 {
                return Err((key.into(), "0 is too small; allowed: at least 1".into()));
            }
        }
        if fetch.max_redirects > MAX_REDIRECTS {
            return Err((
                "fetch.maxRedirects".into(),
                format!(
                    "{} is too many; allowed: 0 to {MAX_REDIRECTS}",
                    fetch.max_redirects
                ),
            ));
        }
        if self.search.max_results > 10 {
            return Err((
                "search.maxResults".into(),
                format!("{} is too many; allowed: 1 to 10", self.search.max_results),
            ));
        }
        if let Some(base) = &self.search.base_url
            && !(base.starts_with("http://") || base.starts_with("https://"))
        {
            return Err((
                "search.baseUrl".into(),
                "must be an http:// or https:// URL".into(),
            ));
        }
        if self.search.provider() == SearchProvider::Searxng && self.search.base_url.is_none() {
            return Err((
                "search.baseUrl".into(),
                "SearXNG needs the address of your instance (e.g. http://localhost:8888)".into(),
            ));
        }
        Ok(())
    }
}

fn default_true() -> bool {
    true
}

fn default_max_chars() -> usize {
    20_000
}

fn default_max_bytes() -> u64 {
    5 * 1024 * 1024
}

fn default_fetch_timeout() -> u64 {
    30
}

fn default_cache_ttl() -> u64 {
    15
}

fn default_max_redirects() -> u8 {
    MAX_REDIRECTS
}

fn default_max_results() -> u8 {
    5
}

fn default_search_timeout() -> u64 {
    30
}
