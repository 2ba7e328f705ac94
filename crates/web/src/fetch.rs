//! One GET the way a page should be fetched for a model that may have been talked into asking
//! for it: only http and https, no credentials, the host's addresses resolved here and every
//! one checked before connecting, the connection pinned to the checked addresses, each
//! redirect checked again from the start, the body read up to a cap (gzip undone with a cap on
//! what it decodes to), and one deadline for all of it.

use std::future::Future;
use std::io::Read as _;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use nanocrab_config::http::{Timeouts, client_builder};
use nanocrab_policy::{Capability, CapabilityPattern};
use url::{Host, Url};

use crate::address::non_public;

/// How a host's name becomes addresses; the system's resolver, or a table in tests.
pub trait Resolve: Send + Sync {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>>;
}

/// The system's resolver (`getaddrinfo` on tokio's blocking threads).
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>> {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host, port))
                .await?
                .map(|address| address.ip())
                .collect())
        })
    }
}

/// How much one fetch may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// Bytes of body kept, after gzip is undone; the download stops there.
    pub max_bytes: u64,
    /// For the whole fetch: every hop, every body.
    pub timeout: Duration,
    pub max_redirects: u8,
}

/// What the fetch may reach besides the public internet, and how far a redirect may lead.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// `tools.web.allowPrivate`, each as a `net:` pattern: the hosts that may be on
    /// non-public addresses.
    pub allow_private: Vec<CapabilityPattern>,
    /// A redirect to another host ends the fetch (`tools.web.requireGrant`): that host needs
    /// its own grant, which only a new call gets checked for.
    pub same_host_only: bool,
}

/// A response as fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Where the last redirect led.
    pub url: Url,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// The body went on past [`FetchLimits::max_bytes`]; what is here is its start.
    pub cut: bool,
    /// The capability target (`host` or `host:port`) of every hop, the first one first.
    pub hosts: Vec<String>,
    /// Those of them on non-public addresses (let through by `allowPrivate`): a cached copy is
    /// shown only to a fetcher whose `allowPrivate` lets them through too.
    pub private_hosts: Vec<String>,
    /// The server let it be stored: no `Cache-Control: no-store` or `private`, no cookie set.
    pub storable: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FetchError {
    #[error("{0} is not a URL web_fetch can read: {1}")]
    BadUrl(String, String),
    #[error("web_fetch reads only http:// and https:// URLs, not {0}:")]
    Scheme(String),
    #[error(
        "{0} carries a user name or password; web_fetch sends no credentials (ask the user for \
         another way to reach it)"
    )]
    Credentials(String),
    #[error(
        "{}: web_fetch reaches only public addresses unless the host is in \
         tools.web.allowPrivate",
        if host.trim_matches(['[', ']']) == address.to_string() {
            format!("{host} is {kind}")
        } else {
            format!("{host} resolves to {address}, {kind}")
        }
    )]
    Private {
        host: String,
        address: IpAddr,
        kind: &'static str,
    },
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("{0} has no address")]
    NoAddress(String),
    #[error("the fetch took longer than {0} s (tools.web.fetch.timeoutSeconds) and was stopped")]
    TimedOut(u64),
    #[error("{url} redirects more than {max} times (tools.web.fetch.maxRedirects)")]
    TooManyRedirects { url: String, max: u8 },
    #[error(
        "{from} redirects to {to}, another host, which needs its own grant \
         (tools.web.requireGrant): call web_fetch with that URL"
    )]
    RedirectElsewhere { from: String, to: String },
    #[error("{url} redirects to {location:?}, which is not a URL")]
    BadRedirect { url: String, location: String },
    #[error("cannot fetch {url}: {reason}")]
    Transport { url: String, reason: String },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: String },
    #[error("{url} sent its body {encoding}-encoded, which web_fetch did not ask for")]
    Encoding { url: String, encoding: String },
}

/// Fetches with one set of limits and reach.
pub struct Fetcher {
    limits: FetchLimits,
    reach: Reach,
    user_agent: Option<String>,
    resolver: Arc<dyn Resolve>,
}

/// The capability a URL's host needs: `net:host`, or `net:host:port` off the scheme's port.
pub fn capability_target(url: &Url) -> Option<String> {
    let host = match url.host()? {
        Host::Domain(name) => name.to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => format!("[{ip}]"),
    };
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}

/// `text` as a URL web_fetch may ask for at all: http or https, a host, no credentials.
pub fn checked_url(text: &str) -> Result<Url, FetchError> {
    let url =
        Url::parse(text.trim()).map_err(|err| FetchError::BadUrl(text.into(), err.to_string()))?;
    check(&url)?;
    Ok(url)
}

fn check(url: &Url) -> Result<(), FetchError> {
    match url.scheme() {
        "http" | "https" => {}
        other => return Err(FetchError::Scheme(other.to_owned())),
    }
    if !url.username().is_empty() || url.password().is_some() {
        let mut shown = url.clone();
        // The secret itself stays out of the message, the model and the audit log.
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        return Err(FetchError::Credentials(shown.to_string()));
    }
    if url.host().is_none() {
        return Err(FetchError::BadUrl(url.to_string(), "it has no host".into()));
    }
    Ok(())
}

impl Fetcher {
    pub fn new(
        limits: FetchLimits,
        reach: Reach,
        user_agent: Option<String>,
        resolver: Arc<dyn Resolve>,
    ) -> Self {
        Self {
            limits,
            reach,
            user_agent,
            resolver,
        }
    }

    pub fn limits(&self) -> FetchLimits {
        self.limits
    }

    /// Whether `target` (`host` or `host:port`) may be on a non-public address.
    pub fn allows_private(&self, target: &str) -> bool {
        let capability = Capability::Net(target.to_owned());
        self.reach
            .allow_private
            .iter()
            .any(|pattern| pattern.covers(&capability))
    }

    /// GETs `url`, following redirects within the limits; every hop is checked like the first.
    pub async fn fetch(&self, url: Url) -> Result<Fetched, FetchError> {
        let timeout = self.limits.timeout;
        tokio::time::timeout(timeout, self.follow(url))
            .await
            .unwrap_or(Err(FetchError::TimedOut(timeout.as_secs().max(1))))
    }

    async fn follow(&self, mut url: Url) -> Result<Fetched, FetchError> {
        let mut hosts = Vec::new();
        let mut private_hosts = Vec::new();
        let mut hops = 0;
        loop {
            check(&url)?;
            let (addresses, on_private) = self.addresses(&url).await?;
            let target = capability_target(&url).unwrap_or_default();
            if on_private {
                private_hosts.push(target.clone());
            }
            hosts.push(target);
            let response = self.get(&url, &addresses).await?;
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            match location {
                Some(location) if status.is_redirection() => {
                    if hops == self.limits.max_redirects {
                        return Err(FetchError::TooManyRedirects {
                            url: url.to_string(),
                            max: self.limits.max_redirects,
                        });
                    }
                    let next = url.join(&location).map_err(|_| FetchError::BadRedirect {
                        url: url.to_string(),
                        location: location.clone(),
                    })?;
                    if self.reach.same_host_only
                        && capability_target(&next) != capability_target(&url)
                    {
                        return Err(FetchError::RedirectElsewhere {
                            from: url.to_string(),
                            to: next.to_string(),
                        });
                    }
                    hops += 1;
                    url = next;
                }
                Some(_) | None if !status.is_success() => {
                    return Err(FetchError::Status {
                        url: url.to_string(),
                        status: status.to_string(),
                    });
                }
                Some(_) | None => return self.read(url, response, hosts, private_hosts).await,
            }
        }
    }

    /// The addresses to connect to for `url`, each checked; and whether any is non-public.
    /// The browser's proxy connects only to these too.
    pub async fn addresses(&self, url: &Url) -> Result<(Vec<SocketAddr>, bool), FetchError> {
        let port = url.port_or_known_default().unwrap_or(443);
        let (host, ips) =
            match url.host() {
                Some(Host::Ipv4(ip)) => (ip.to_string(), vec![IpAddr::V4(ip)]),
                Some(Host::Ipv6(ip)) => (format!("[{ip}]"), vec![IpAddr::V6(ip)]),
                Some(Host::Domain(name)) => {
                    let ips = self.resolver.lookup(name, port).await.map_err(|err| {
                        FetchError::Resolve {
                            host: name.to_owned(),
                            reason: err.to_string(),
                        }
                    })?;
                    (name.to_owned(), ips)
                }
                None => return Err(FetchError::BadUrl(url.to_string(), "it has no host".into())),
            };
        if ips.is_empty() {
            return Err(FetchError::NoAddress(host));
        }
        let allowed = capability_target(url).is_some_and(|target| self.allows_private(&target));
        let mut private = false;
        for ip in &ips {
            if let Some(kind) = non_public(*ip) {
                if !allowed {
                    return Err(FetchError::Private {
                        host,
                        address: *ip,
                        kind,
                    });
                }
                private = true;
            }
        }
        Ok((
            ips.into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect(),
            private,
        ))
    }

    /// One request, connected only to `addresses`: a client of its own, told the addresses,
    /// with no proxy (a proxy would resolve the name again, where it was not checked) and no
    /// redirects of its own.
    async fn get(
        &self,
        url: &Url,
        addresses: &[SocketAddr],
    ) -> Result<reqwest::Response, FetchError> {
        let transport = |err: reqwest::Error| FetchError::Transport {
            url: url.to_string(),
            reason: causes(&err),
        };
        let mut builder = client_builder(Timeouts {
            connect: self.limits.timeout.min(Duration::from_secs(10)),
            read: None,
            total: None,
        })
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none());
        if let Some(Host::Domain(name)) = url.host() {
            builder = builder.resolve_to_addrs(name, addresses);
        }
        if let Some(agent) = &self.user_agent {
            builder = builder.user_agent(agent.as_str());
        }
        let client = builder.build().map_err(transport)?;
        client
            .get(url.as_str())
            .header(reqwest::header::ACCEPT_ENCODING, "gzip")
            .header(
                reqwest::header::ACCEPT,
                "text/html, application/xhtml+xml, application/pdf, application/json, text/*;q=0.9, */*;q=0.5",
            )
            .send()
            .await
            .map_err(transport)
    }

    /// The body, up to the cap, gzip undone.
    async fn read(
        &self,
        url: Url,
        mut response: reqwest::Response,
        hosts: Vec<String>,
        private_hosts: Vec<String>,
    ) -> Result<Fetched, FetchError> {
        let headers = response.headers();
        let text = |name: reqwest::header::HeaderName| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_ascii_lowercase)
        };
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let encoding = text(reqwest::header::CONTENT_ENCODING);
        let storable = !headers.contains_key(reqwest::header::SET_COOKIE)
            && !text(reqwest::header::CACHE_CONTROL)
                .is_some_and(|control| control.contains("no-store") || control.contains("private"));
        let gzip = match encoding.as_deref().map(str::trim) {
            None | Some("identity") | Some("") => false,
            Some("gzip") | Some("x-gzip") => true,
            Some(other) => {
                return Err(FetchError::Encoding {
                    url: url.to_string(),
                    encoding: other.to_owned(),
                });
            }
        };
        let cap = usize::try_from(self.limits.max_bytes).unwrap_or(usize::MAX);
        let mut body = Vec::new();
        let mut cut = false;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = cap.saturating_sub(body.len());
                    if chunk.len() > room {
                        body.extend_from_slice(&chunk[..room]);
                        cut = true;
                        // Dropping the response closes the connection: the rest is never read.
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(err) => {
                    return Err(FetchError::Transport {
                        url: url.to_string(),
                        reason: causes(&err),
                    });
                }
            }
        }
        if gzip {
            let (decoded, decoded_cut) = gunzip(&body, cap);
            body = decoded;
            cut |= decoded_cut;
        }
        Ok(Fetched {
            url,
            content_type,
            body,
            cut,
            hosts,
            private_hosts,
            storable,
        })
    }
}

/// `compressed` decoded up to `cap` bytes, and whether there was more (or the stream was cut
/// short, as a capped download is): a bomb of zeros decodes only to the cap.
fn gunzip(compressed: &[u8], cap: usize) -> (Vec<u8>, bool) {
    let mut decoder = flate2::read::GzDecoder::new(compressed);
    let mut out = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match decoder.read(&mut buffer) {
            Ok(0) => return (out, false),
            Ok(read) => {
                let room = cap - out.len();
                if read > room {
                    out.extend_from_slice(&buffer[..room]);
                    return (out, true);
                }
                out.extend_from_slice(&buffer[..read]);
            }
            // A truncated stream: what decoded so far is the start of the body.
            Err(_) => return (out, true),
        }
    }
}

/// An error with its causes, which reqwest keeps below the top ("error sending request").
pub fn causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
