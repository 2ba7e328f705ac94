//! Asking a search provider: the request each one takes, its answer read into titles, URLs
//! and snippets, and its refusals (a rate limit, a bad key) said as what they are.

mod brave;
mod duckduckgo;
mod searxng;
mod tavily;

use std::time::Duration;

use nanocrab_config::SearchProvider;
use nanocrab_config::http::{Timeouts, client_builder};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::fetch::causes;

// How recent results must be (no doc comment: it would be sent with every request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Freshness {
    Day,
    Week,
    Month,
    Year,
}

/// One search as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub text: String,
    pub count: u8,
    pub freshness: Option<Freshness>,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SearchError {
    #[error("{provider} needs an API key: {problem}")]
    NoKey {
        provider: &'static str,
        problem: String,
    },
    #[error(
        "{provider} is rate-limiting the searches (HTTP {status}){}; do not search again now, \
         answer from what you have or tell the user",
        retry.as_ref().map(|after| format!(", try again in {after} s")).unwrap_or_default()
    )]
    RateLimited {
        provider: &'static str,
        status: u16,
        retry: Option<String>,
    },
    #[error("{provider} refused the API key (HTTP {status}); check tools.web.search.apiKey")]
    BadKey { provider: &'static str, status: u16 },
    #[error(
        "DuckDuckGo took the search for automated traffic (HTTP {0}) and sent a challenge \
         instead of results; wait a while, or configure another provider \
         (tools.web.search.provider)"
    )]
    Challenged(u16),
    #[error("{provider} answered HTTP {status}: {body}")]
    Status {
        provider: &'static str,
        status: u16,
        body: String,
    },
    #[error("cannot reach {provider}: {reason}")]
    Transport {
        provider: &'static str,
        reason: String,
    },
    #[error("{provider}'s answer cannot be read: {reason}")]
    Shape {
        provider: &'static str,
        reason: String,
    },
}

/// The provider of `tools.web.search`, ready to ask.
pub struct Searcher {
    provider: SearchProvider,
    key: Option<String>,
    /// Why there is no key when one is needed (a `${VAR}` that is not set), for the error.
    problem: Option<String>,
    base: String,
    client: reqwest::Client,
}

/// Characters of an error body shown.
const ERROR_BODY_CHARS: usize = 300;

impl Searcher {
    /// `base`: `tools.web.search.baseUrl`, or the provider's own address. `problem` says why
    /// the key is missing, when config knows.
    pub fn new(
        provider: SearchProvider,
        key: Option<String>,
        problem: Option<String>,
        base: Option<String>,
        timeout: Duration,
        user_agent: Option<&str>,
    ) -> Result<Self, String> {
        let mut builder = client_builder(Timeouts {
            connect: timeout.min(Duration::from_secs(10)),
            read: None,
            total: Some(timeout),
        })
        // The key goes only where config sent it.
        .redirect(reqwest::redirect::Policy::none());
        if let Some(agent) = user_agent {
            builder = builder.user_agent(agent);
        }
        let client = builder.build().map_err(|err| causes(&err))?;
        let base = base.unwrap_or_else(|| {
            match provider {
                SearchProvider::Brave => "https://api.search.brave.com",
                SearchProvider::Tavily => "https://api.tavily.com",
                SearchProvider::Duckduckgo => "https://html.duckduckgo.com",
                // Config refuses SearXNG without a base URL.
                SearchProvider::Searxng => "http://localhost:8888",
            }
            .to_owned()
        });
        Ok(Self {
            provider,
            key,
            problem,
            base: base.trim_end_matches('/').to_owned(),
            client,
        })
    }

    pub fn provider(&self) -> SearchProvider {
        self.provider
    }

    /// Where the searches go, for the capability `net:<host>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    pub async fn search(&self, query: &Query) -> Result<Vec<Hit>, SearchError> {
        let provider = self.provider.name();
        let key = || {
            self.key.as_deref().ok_or_else(|| SearchError::NoKey {
                provider,
                problem: self.problem.clone().unwrap_or_else(|| {
                    "set tools.web.search.apiKey (e.g. \"${BRAVE_API_KEY}\") or choose another \
                     tools.web.search.provider"
                        .to_owned()
                }),
            })
        };
        let request = match self.provider {
            SearchProvider::Brave => brave::request(&self.client, &self.base, key()?, query),
            SearchProvider::Tavily => tavily::request(&self.client, &self.base, key()?, query),
            SearchProvider::Searxng => searxng::request(&self.client, &self.base, query),
            SearchProvider::Duckduckgo => duckduckgo::request(&self.client, &self.base, query),
        };
        let response = request.send().await.map_err(|err| SearchError::Transport {
            provider,
            reason: causes(&err),
        })?;
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .or_else(|| response.headers().get("x-ratelimit-reset"))
            .and_then(|value| value.to_str().ok())
            // Brave's reset header lists one number per window (`1, 1419704`): the first is soonest.
            .map(|value| value.split(',').next().unwrap_or(value).trim().to_owned());
        let body = response
            .text()
            .await
            .map_err(|err| SearchError::Transport {
                provider,
                reason: causes(&err),
            })?;
        match status {
            200..=299 => {}
            429 => {
                return Err(SearchError::RateLimited {
                    provider,
                    status,
                    retry,
                });
            }
            // Tavily's "plan limit exceeded" and "pay-as-you-go limit exceeded".
            432 | 433 if self.provider == SearchProvider::Tavily => {
                return Err(SearchError::RateLimited {
                    provider,
                    status,
                    retry,
                });
            }
            401 | 403 if self.provider.needs_key() => {
                return Err(SearchError::BadKey { provider, status });
            }
            _ => {
                return Err(SearchError::Status {
                    provider,
                    status,
                    body: body.chars().take(ERROR_BODY_CHARS).collect(),
                });
            }
        }
        let shape = |reason: String| SearchError::Shape { provider, reason };
        let mut hits = match self.provider {
            SearchProvider::Brave => brave::hits(&body).map_err(shape)?,
            SearchProvider::Tavily => tavily::hits(&body).map_err(shape)?,
            SearchProvider::Searxng => searxng::hits(&body).map_err(shape)?,
            SearchProvider::Duckduckgo => duckduckgo::hits(&body, status)?,
        };
        hits.truncate(usize::from(query.count));
        Ok(hits)
    }
}

/// `address` with `params` as its query string (reqwest is built without its `query` feature).
pub(crate) fn with_query(address: String, params: &[(&str, &str)]) -> String {
    match url::Url::parse(&address) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(params);
            url.to_string()
        }
        // A base that is no URL fails in the request, which says so.
        Err(_) => address,
    }
}

/// Text with its tags taken out and entities decoded, whitespace folded: the snippets of Brave
/// and SearXNG carry `<strong>` and `&amp;`.
pub(crate) fn plain(html: &str) -> String {
    let document = dom_query::Document::from(format!("<p>{html}</p>"));
    document
        .select("p")
        .text()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
