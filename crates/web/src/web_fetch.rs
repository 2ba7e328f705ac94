//! `web_fetch(url, offset?)`: a page as Markdown, a PDF as text, JSON and text as they are,
//! fenced as untrusted with the URL the redirects led to and the type; at most
//! `tools.web.fetch.maxChars` characters a call, `offset` for the rest.

use std::sync::Arc;

use nanocrab_policy::{Capability, Invocation, Risk};
use nanocrab_tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::cache::{Entry, WebCache};
use crate::content::readable;
use crate::fetch::{Fetcher, capability_target, checked_url};

/// The time now; the system clock, or a test's.
pub type Clock = Arc<dyn Fn() -> jiff::Timestamp + Send + Sync>;

pub struct WebFetchTool {
    fetcher: Fetcher,
    cache: Option<WebCache>,
    max_chars: usize,
    require_grant: bool,
    clock: Clock,
}

impl WebFetchTool {
    /// `cache`: where pages are kept for their TTL; `None` keeps none.
    pub fn new(
        fetcher: Fetcher,
        cache: Option<WebCache>,
        max_chars: usize,
        require_grant: bool,
        clock: Clock,
    ) -> Self {
        Self {
            fetcher,
            cache,
            max_chars: max_chars.max(1),
            require_grant,
            clock,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    url: String,
    offset: Option<usize>,
}

impl TypedTool for WebFetchTool {
    type Args = WebFetchArgs;

    const NAME: &'static str = "web_fetch";

    fn description(&self) -> String {
        "Read a web page (as Markdown) or PDF.".into()
    }

    /// `net:<host>`: safe for any host, unless `tools.web.requireGrant` makes every host
    /// guarded. Non-public addresses are refused later, once the name is resolved.
    fn invocation(&self, args: &WebFetchArgs, _: &ToolContext) -> Result<Invocation, ToolError> {
        let url = checked_url(&args.url).map_err(|err| ToolError::Rejected(err.to_string()))?;
        let target = capability_target(&url)
            .ok_or_else(|| ToolError::Rejected(format!("{url} has no host")))?;
        let risk = if self.require_grant {
            Risk::Guarded
        } else {
            Risk::Safe
        };
        Ok(Invocation::new(
            risk,
            format!("fetch {url}"),
            vec![Capability::Net(target)],
        ))
    }

    async fn call(&self, args: WebFetchArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        let url = checked_url(&args.url).map_err(|err| ToolError::Rejected(err.to_string()))?;
        let now = (self.clock)();
        let asked = capability_target(&url);
        let cached = self.cache.as_ref().and_then(|cache| {
            let entry = cache.get(url.as_str(), now)?;
            // Taken only if this fetch would have got there itself: its allowPrivate lets the
            // private hops through, and under requireGrant no hop left the granted host.
            let reachable = entry
                .private_hosts
                .iter()
                .all(|host| self.fetcher.allows_private(host));
            let granted =
                !self.require_grant || entry.hosts.iter().all(|host| Some(host) == asked.as_ref());
            (reachable && granted).then_some(entry)
        });
        let entry = match cached {
            Some(entry) => entry,
            None => {
                let fetched = self
                    .fetcher
                    .fetch(url.clone())
                    .await
                    .map_err(|err| ToolError::Rejected(err.to_string()))?;
                let page = readable(
                    fetched.content_type.as_deref(),
                    &fetched.body,
                    fetched.url.as_str(),
                    fetched.cut,
                );
                let entry = Entry {
                    url: fetched.url.to_string(),
                    media_type: page.media_type,
                    title: page.title,
                    text: page.text,
                    cut: fetched.cut,
                    hosts: fetched.hosts,
                    private_hosts: fetched.private_hosts,
                    fetched_at: now.as_second(),
                };
                if let Some(cache) = &self.cache
                    && fetched.storable
                    && let Err(err) = cache.put(url.as_str(), &entry, now)
                {
                    tracing::warn!("cannot keep {} in the web cache: {err}", entry.url);
                }
                entry
            }
        };
        let text = self.page(&entry, args.offset.unwrap_or(0))?;
        Ok(ToolOutput::untrusted(
            format!("web_fetch {}", entry.url),
            text,
        ))
    }
}

impl WebFetchTool {
    /// The header, the characters from `offset` on (at most `max_chars`) and what was cut.
    fn page(&self, entry: &Entry, offset: usize) -> Result<String, ToolError> {
        let total = entry.text.chars().count();
        if offset > 0 && offset >= total {
            return Err(ToolError::Rejected(format!(
                "offset {offset} is past the end of {} ({total} characters)",
                entry.url
            )));
        }
        let shown: String = entry
            .text
            .chars()
            .skip(offset)
            .take(self.max_chars)
            .collect();
        let end = offset + shown.chars().count();
        let mut out = format!("URL: {}\nContent-Type: {}\n", entry.url, entry.media_type);
        if let Some(title) = &entry.title {
            out.push_str(&format!("Title: {title}\n"));
        }
        out.push('\n');
        out.push_str(&shown);
        if end < total {
            out.push_str(&format!(
                "\n\n[Characters {offset}-{end} of {total}. Call web_fetch with offset={end} for \
                 more.]"
            ));
        } else if offset > 0 {
            out.push_str(&format!(
                "\n\n[Characters {offset}-{end} of {total}: the end.]"
            ));
        }
        if entry.cut {
            out.push_str(&format!(
                "\n[The download stopped at {} bytes (tools.web.fetch.maxBytes); the rest of the \
                 page was not read.]",
                self.fetcher.limits().max_bytes
            ));
        }
        Ok(out)
    }
}
