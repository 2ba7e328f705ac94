#![allow(clippy::unwrap_used, clippy::expect_used)]
//! web_fetch against the fake web on 127.0.0.1, through the tool registry (the policy point):
//! what a page becomes, what is refused and why, caps, timeouts and the cache.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use nanocrab_config::WebConfig;
use nanocrab_policy::{CapabilityGrant, CapabilityPattern, GrantSource, Grants};
use nanocrab_schema::{ToolCall, ToolResult};
use nanocrab_testkit::FakeWeb;
use nanocrab_tools::{ToolContext, ToolPolicy, ToolRegistry};
use nanocrab_web::{Resolve, SystemResolver, WebSetup, web_tools};
use pretty_assertions::assert_eq;
use serde_json::json;

/// Names to addresses, one answer after another for each name (the last repeats), counting
/// the lookups; names it does not know go to the system's resolver.
#[derive(Default)]
struct Table {
    answers: BTreeMap<String, Vec<Vec<IpAddr>>>,
    lookups: Mutex<Vec<String>>,
}

impl Table {
    fn with(name: &str, answers: &[&[&str]]) -> Arc<Self> {
        let answers = answers
            .iter()
            .map(|ips| ips.iter().map(|ip| ip.parse().unwrap()).collect())
            .collect();
        Arc::new(Self {
            answers: BTreeMap::from([(name.to_owned(), answers)]),
            lookups: Mutex::default(),
        })
    }

    fn lookups(&self) -> Vec<String> {
        self.lookups.lock().unwrap().clone()
    }
}

impl Resolve for Table {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>> {
        Box::pin(async move {
            let mut lookups = self.lookups.lock().unwrap();
            let Some(answers) = self.answers.get(host) else {
                drop(lookups);
                return SystemResolver.lookup(host, port).await;
            };
            let index = lookups.iter().filter(|name| *name == host).count();
            lookups.push(host.to_owned());
            Ok(answers[index.min(answers.len() - 1)].clone())
        })
    }
}

/// The time, moved on by the test.
#[derive(Clone)]
struct Clock(Arc<Mutex<jiff::Timestamp>>);

impl Clock {
    fn new() -> Self {
        Self(Arc::new(Mutex::new(
            "2026-11-22T14:05:00Z".parse().unwrap(),
        )))
    }

    fn advance(&self, minutes: i64) {
        let mut now = self.0.lock().unwrap();
        *now = now
            .checked_add(jiff::SignedDuration::from_mins(minutes))
            .unwrap();
    }
}

struct Setup {
    config: WebConfig,
    resolver: Arc<dyn Resolve>,
    clock: Clock,
    cache: Option<tempfile::TempDir>,
    grants: Vec<&'static str>,
}

impl Setup {
    /// Loopback reachable (the fake web is there), no cache, the system's resolver.
    fn new() -> Self {
        Self::with_config(json!({ "allowPrivate": ["127.0.0.1"] }))
    }

    fn with_config(config: serde_json::Value) -> Self {
        Self {
            config: serde_json::from_value(config).unwrap(),
            resolver: Arc::new(SystemResolver),
            clock: Clock::new(),
            cache: None,
            grants: Vec::new(),
        }
    }

    fn registry(&self) -> ToolRegistry {
        let clock = self.clock.clone();
        let tools = web_tools(
            &self.config,
            WebSetup {
                cache_dir: self.cache.as_ref().map(|dir| dir.path().join("web-cache")),
                search_key_problem: None,
                resolver: Arc::clone(&self.resolver),
                clock: Arc::new(move || *clock.0.lock().unwrap()),
            },
        )
        .unwrap();
        let grants = self
            .grants
            .iter()
            .map(|text| CapabilityGrant {
                pattern: CapabilityPattern::parse(text, None).unwrap(),
                source: GrantSource::Config {
                    key: "tools.grants[0]".into(),
                },
            })
            .collect();
        let mut registry = ToolRegistry::new().with_policy(ToolPolicy {
            grants: Grants::new(grants),
            ..ToolPolicy::default()
        });
        for tool in tools {
            registry.register(tool);
        }
        registry
    }
}

async fn fetch(registry: &ToolRegistry, input: serde_json::Value) -> ToolResult {
    let call = ToolCall {
        id: "call_1".into(),
        name: "web_fetch".into(),
        input,
    };
    registry.execute(&call, &ToolContext::new("/ws")).await
}

/// The result with the fake web's port taken out, so snapshots do not change per run.
fn shown(web: &FakeWeb, result: &ToolResult) -> String {
    let text = result
        .content
        .replace(&web.addr().port().to_string(), "PORT");
    if result.is_error {
        format!("error: {text}")
    } else {
        text
    }
}

#[tokio::test]
async fn a_page_keeps_its_article_and_drops_the_boilerplate() {
    let web = FakeWeb::start().await;
    let registry = Setup::new().registry();
    let result = fetch(&registry, json!({ "url": web.url("/article") })).await;
    assert!(!result.is_error, "{}", result.content);
    let text = shown(&web, &result);
    for kept in [
        "Bleeding the radiator lets that air out",
        "## How to do it",
        "It should sit near 1.5 bar",
    ] {
        assert!(text.contains(kept), "{kept:?} missing from {text}");
    }
    for dropped in [
        "Accept all",
        "TRACKER-ID",
        "Subscribe now",
        "Ten celebrity kitchens",
        "All rights reserved",
        "font-family",
    ] {
        assert!(!text.contains(dropped), "{dropped:?} kept in {text}");
    }
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn loopback_is_refused_unless_allowed() {
    let web = FakeWeb::start().await;
    let registry = Setup::with_config(json!({})).registry();
    let result = fetch(&registry, json!({ "url": web.url("/article") })).await;
    assert_eq!(
        shown(&web, &result),
        "error: Error: 127.0.0.1 is a loopback address: web_fetch reaches only public addresses unless the host is in tools.web.allowPrivate"
    );
    assert_eq!(web.requests(), vec![], "nothing reached the server");
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_unless_allowed() {
    let web = FakeWeb::start().await;
    let port = web.addr().port();
    let url = format!("http://intranet.test:{port}/article");
    let mut setup = Setup::with_config(json!({ "allowPrivate": ["intranet.test:1"] }));
    setup.resolver = Table::with("intranet.test", &[&["93.184.215.14", "127.0.0.1"]]);
    let result = fetch(&setup.registry(), json!({ "url": url })).await;
    assert_eq!(
        shown(&web, &result),
        "error: Error: intranet.test resolves to 127.0.0.1, a loopback address: web_fetch reaches only public addresses unless the host is in tools.web.allowPrivate"
    );
    assert_eq!(web.requests(), vec![]);

    setup.config = serde_json::from_value(json!({ "allowPrivate": ["intranet.test"] })).unwrap();
    setup.resolver = Table::with("intranet.test", &[&["127.0.0.1"]]);
    let result = fetch(&setup.registry(), json!({ "url": url })).await;
    assert!(!result.is_error, "{}", result.content);
    assert_eq!(web.requests_to("/article").len(), 1);
}

/// The name is resolved once per hop and the connection goes to that answer: a second,
/// different answer (the rebinding attack) is never asked for. Nothing listens on 127.0.0.2.
#[tokio::test]
async fn the_connection_is_pinned_to_the_checked_address() {
    let web = FakeWeb::start().await;
    let table = Table::with("rebind.test", &[&["127.0.0.1"], &["127.0.0.2"]]);
    let mut setup = Setup::with_config(json!({ "allowPrivate": ["rebind.test"] }));
    setup.resolver = table.clone();
    let url = format!("http://rebind.test:{}/article", web.addr().port());
    let result = fetch(&setup.registry(), json!({ "url": url })).await;
    assert!(!result.is_error, "{}", result.content);
    assert_eq!(table.lookups(), ["rebind.test"]);
    assert_eq!(
        web.requests_to("/article")[0].header("host"),
        Some(format!("rebind.test:{}", web.addr().port()).as_str())
    );
}

#[tokio::test]
async fn redirects_are_checked_again_at_every_hop() {
    let web = FakeWeb::start().await;
    let port = web.addr().port();
    let registry = Setup::new().registry();
    let redirect = |to: &str| web.url(&format!("/redirect?to={}", urlencode(to)));
    let mut refused = Vec::new();
    for to in [
        format!("http://localhost:{port}/article"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        format!("http://[::ffff:127.0.0.2]:{port}/article"),
        "http://10.0.0.1/".to_owned(),
        format!("http://user:hunter22@127.0.0.1:{port}/article"),
        "file:///etc/passwd".to_owned(),
        "gopher://127.0.0.1:70/".to_owned(),
    ] {
        refused.push(shown(
            &web,
            &fetch(&registry, json!({ "url": redirect(&to) })).await,
        ));
    }
    assert_eq!(
        refused,
        [
            "error: Error: localhost resolves to 127.0.0.1, a loopback address: web_fetch reaches only public addresses unless the host is in tools.web.allowPrivate",
            "error: Error: 169.254.169.254 is a link-local address (where cloud metadata services answer): web_fetch reaches only public addresses unless the host is in tools.web.allowPrivate",
            "error: Error: [::ffff:127.0.0.2] is a loopback address: web_fetch reaches only public addresses unless the host is in tools.web.allowPrivate",
            "error: Error: 10.0.0.1 is a private address (10.0.0.0/8): web_fetch reaches only public addresses unless the host is in tools.web.allowPrivate",
            "error: Error: http://127.0.0.1:PORT/article carries a user name or password; web_fetch sends no credentials (ask the user for another way to reach it)",
            "error: Error: web_fetch reads only http:// and https:// URLs, not file:",
            "error: Error: web_fetch reads only http:// and https:// URLs, not gopher:",
        ]
    );
    // Only the redirects themselves were served.
    assert_eq!(web.requests().len(), web.requests_to("/redirect").len());
}

#[tokio::test]
async fn at_most_the_configured_redirects_are_followed() {
    let web = FakeWeb::start().await;
    let registry = Setup::new().registry();
    let five = fetch(&registry, json!({ "url": web.url("/hops/5") })).await;
    assert!(
        five.content.ends_with("arrived\n</untrusted-data>"),
        "{}",
        five.content
    );
    let six = fetch(&registry, json!({ "url": web.url("/hops/6") })).await;
    assert_eq!(
        shown(&web, &six),
        "error: Error: http://127.0.0.1:PORT/hops/1 redirects more than 5 times (tools.web.fetch.maxRedirects)"
    );
}

#[tokio::test]
async fn bad_urls_are_refused_before_anything_runs() {
    let registry = Setup::new().registry();
    let mut errors = Vec::new();
    for url in [
        "file:///etc/passwd",
        "javascript:alert(1)",
        "http://admin:s3cret@example.com/",
        "not a url",
    ] {
        errors.push(fetch(&registry, json!({ "url": url })).await.content);
    }
    assert_eq!(
        errors,
        [
            "Error: web_fetch reads only http:// and https:// URLs, not file:",
            "Error: web_fetch reads only http:// and https:// URLs, not javascript:",
            "Error: http://example.com/ carries a user name or password; web_fetch sends no credentials (ask the user for another way to reach it)",
            "Error: not a url is not a URL web_fetch can read: relative URL without a base",
        ]
    );
}

#[tokio::test]
async fn under_require_grant_every_host_needs_a_grant_and_a_redirect_stops_at_another() {
    let web = FakeWeb::start().await;
    let port = web.addr().port();
    let mut setup = Setup::with_config(
        json!({ "requireGrant": true, "allowPrivate": ["127.0.0.1", "localhost"] }),
    );
    let denied = fetch(&setup.registry(), json!({ "url": web.url("/article") })).await;
    assert_eq!(
        shown(&web, &denied),
        "error: Error: web_fetch needs approval (guarded) for net:127.0.0.1:PORT, and no one can approve it in this run. Do without it, or tell the user it must be granted in config (tools.grants)."
    );
    setup.grants = vec!["net:127.0.0.1"];
    let registry = setup.registry();
    let granted = fetch(&registry, json!({ "url": web.url("/article") })).await;
    assert!(!granted.is_error, "{}", granted.content);
    let elsewhere = format!(
        "/redirect?to={}",
        urlencode(&format!("http://localhost:{port}/article"))
    );
    let stopped = fetch(&registry, json!({ "url": web.url(&elsewhere) })).await;
    assert_eq!(
        shown(&web, &stopped),
        format!(
            "error: Error: http://127.0.0.1:PORT/redirect?to=http%3A%2F%2Flocalhost%3APORT%2Farticle redirects to http://localhost:PORT/article, another host, which needs its own grant (tools.web.requireGrant): call web_fetch with that URL"
        )
    );
}

#[tokio::test]
async fn a_50_mb_body_is_cut_at_the_cap() {
    let web = FakeWeb::start().await;
    let registry = Setup::with_config(json!({
        "allowPrivate": ["127.0.0.1"],
        "fetch": { "maxBytes": 1048576, "maxChars": 100 }
    }))
    .registry();
    let result = fetch(&registry, json!({ "url": web.url("/big") })).await;
    assert_eq!(
        shown(&web, &result),
        format!(
            "<untrusted-data source=\"web_fetch http://127.0.0.1:PORT/big\">\nURL: http://127.0.0.1:PORT/big\nContent-Type: text/plain\n\n{}\n\n[Characters 0-100 of 1048576. Call web_fetch with offset=100 for more.]\n[The download stopped at 1048576 bytes (tools.web.fetch.maxBytes); the rest of the page was not read.]\n</untrusted-data>",
            "a".repeat(100)
        )
    );
}

#[tokio::test]
async fn a_gzip_bomb_is_capped_on_what_it_decodes_to() {
    let web = FakeWeb::start().await;
    let registry = Setup::with_config(json!({
        "allowPrivate": ["127.0.0.1"],
        "fetch": { "maxBytes": 1048576, "maxChars": 10 }
    }))
    .registry();
    let result = fetch(&registry, json!({ "url": web.url("/bomb") })).await;
    let text = shown(&web, &result);
    assert!(
        text.contains("[Characters 0-10 of 1048576.")
            && text.contains("[The download stopped at 1048576 bytes"),
        "{text}"
    );
    assert_eq!(
        web.requests_to("/bomb")[0].header("accept-encoding"),
        Some("gzip")
    );
}

/// The limit is a second; the server never answers. How long it took is not the point: that
/// the call ends, and says why.
#[tokio::test]
async fn a_slow_server_times_out() {
    let web = FakeWeb::start().await;
    let registry = Setup::with_config(json!({
        "allowPrivate": ["127.0.0.1"],
        "fetch": { "timeoutSeconds": 1 }
    }))
    .registry();
    let result = fetch(&registry, json!({ "url": web.url("/slow") })).await;
    assert_eq!(
        shown(&web, &result),
        "error: Error: the fetch took longer than 1 s (tools.web.fetch.timeoutSeconds) and was stopped"
    );
}

#[tokio::test]
async fn a_pdf_becomes_its_text_json_passes_and_an_image_is_described() {
    let web = FakeWeb::start().await;
    let registry = Setup::new().registry();
    let mut shown_all = Vec::new();
    for path in ["/boiler.pdf", "/data.json", "/image.png"] {
        let result = fetch(&registry, json!({ "url": web.url(path) })).await;
        shown_all.push(shown(&web, &result));
    }
    insta::assert_snapshot!(shown_all.join("\n\n"));
}

#[tokio::test]
async fn pages_are_cached_for_their_ttl_and_paged_with_offset() {
    let web = FakeWeb::start().await;
    let mut setup = Setup::with_config(json!({
        "allowPrivate": ["127.0.0.1"],
        "fetch": { "maxChars": 300, "cacheTtlMinutes": 15 }
    }));
    setup.cache = Some(tempfile::tempdir().unwrap());
    let registry = setup.registry();
    let first = fetch(&registry, json!({ "url": web.url("/article") })).await;
    assert!(
        first.content.contains("Call web_fetch with offset=300"),
        "{}",
        first.content
    );
    setup.clock.advance(10);
    let second = fetch(
        &registry,
        json!({ "url": web.url("/article"), "offset": 300 }),
    )
    .await;
    assert!(
        second.content.contains("[Characters 300-"),
        "{}",
        second.content
    );
    assert_eq!(
        web.requests_to("/article").len(),
        1,
        "the second page came from the cache"
    );
    setup.clock.advance(6);
    fetch(&registry, json!({ "url": web.url("/article") })).await;
    assert_eq!(
        web.requests_to("/article").len(),
        2,
        "16 minutes on, fetched again"
    );

    // A page its server says not to store is fetched every time.
    fetch(&registry, json!({ "url": web.url("/no-store") })).await;
    fetch(&registry, json!({ "url": web.url("/no-store") })).await;
    assert_eq!(web.requests_to("/no-store").len(), 2);

    // Another agent, whose allowPrivate does not reach 127.0.0.1, does not get the cached
    // copy of a page only that address serves.
    let mut other = Setup::with_config(json!({ "fetch": { "cacheTtlMinutes": 15 } }));
    other.cache = setup.cache.take();
    other.clock = setup.clock.clone();
    let refused = fetch(&other.registry(), json!({ "url": web.url("/article") })).await;
    assert!(refused.is_error, "{}", refused.content);
}

fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
