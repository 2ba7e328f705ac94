#![allow(clippy::unwrap_used, clippy::expect_used)]
//! web_search against each provider's fake on 127.0.0.1, answering with its recorded (or
//! documented) body: the request each one gets, the results read from the answer, refusals.

use std::sync::Arc;

use nanocrab_config::WebConfig;
use nanocrab_schema::{ToolCall, ToolResult};
use nanocrab_testkit::{FakeWeb, WebRequest};
use nanocrab_tools::{ToolContext, ToolRegistry};
use nanocrab_web::{WebSetup, web_tools};
use pretty_assertions::assert_eq;
use serde_json::json;

fn registry(search: serde_json::Value, key_problem: Option<&str>) -> ToolRegistry {
    let config: WebConfig = serde_json::from_value(json!({ "search": search })).unwrap();
    let mut setup = WebSetup::new(None, key_problem.map(str::to_owned));
    setup.clock = Arc::new(|| "2026-11-22T14:05:00Z".parse().unwrap());
    let mut registry = ToolRegistry::new();
    for tool in web_tools(&config, setup).unwrap() {
        registry.register(tool);
    }
    registry
}

async fn search(registry: &ToolRegistry, input: serde_json::Value) -> ToolResult {
    let call = ToolCall {
        id: "call_1".into(),
        name: "web_search".into(),
        input,
    };
    registry.execute(&call, &ToolContext::new("/ws")).await
}

/// What a test compares of a request: method, path and query, and the named headers.
fn seen(request: &WebRequest, headers: &[&str]) -> (String, String, Vec<(String, String)>, String) {
    (
        request.method.clone(),
        request.uri.clone(),
        headers
            .iter()
            .filter_map(|name| Some((name.to_string(), request.header(name)?.to_owned())))
            .collect(),
        request.body.clone(),
    )
}

#[tokio::test]
async fn brave_is_asked_with_its_token_count_and_freshness() {
    let web = FakeWeb::start().await;
    let registry = registry(json!({ "apiKey": "BSA-key", "baseUrl": web.url("") }), None);
    let result = search(
        &registry,
        json!({ "query": "boiler pressure", "count": 2, "freshness": "week" }),
    )
    .await;
    insta::assert_snapshot!(result.content);
    assert_eq!(
        seen(&web.requests()[0], &["x-subscription-token", "accept"]),
        (
            "GET".into(),
            "/res/v1/web/search?q=boiler+pressure&count=2&freshness=pw".into(),
            vec![
                ("x-subscription-token".into(), "BSA-key".into()),
                ("accept".into(), "application/json".into())
            ],
            String::new()
        )
    );
}

#[tokio::test]
async fn a_rate_limit_is_said_as_one_with_when_to_try_again() {
    let web = FakeWeb::start().await;
    let registry = registry(
        json!({ "apiKey": "rate-limited", "baseUrl": web.url("") }),
        None,
    );
    let result = search(&registry, json!({ "query": "boiler pressure" })).await;
    assert_eq!(
        (result.is_error, result.content),
        (
            true,
            "Error: Brave is rate-limiting the searches (HTTP 429), try again in 1 s; do not search again now, answer from what you have or tell the user".to_owned()
        )
    );
}

#[tokio::test]
async fn a_missing_key_says_which_and_why() {
    let registry = registry(
        json!({ "provider": "brave" }),
        Some(
            "`tools.web.search.apiKey` uses ${BRAVE_API_KEY} but the environment variable BRAVE_API_KEY is not set",
        ),
    );
    let result = search(&registry, json!({ "query": "boiler" })).await;
    assert_eq!(
        result.content,
        "Error: Brave needs an API key: `tools.web.search.apiKey` uses ${BRAVE_API_KEY} but the environment variable BRAVE_API_KEY is not set"
    );
}

#[tokio::test]
async fn tavily_gets_a_bearer_token_and_a_json_body() {
    let web = FakeWeb::start().await;
    let registry = registry(
        json!({ "provider": "tavily", "apiKey": "tvly-key", "baseUrl": web.url(""), "maxResults": 1 }),
        None,
    );
    let result = search(
        &registry,
        json!({ "query": "boiler pressure", "freshness": "day" }),
    )
    .await;
    insta::assert_snapshot!(result.content);
    assert_eq!(
        seen(&web.requests()[0], &["authorization", "content-type"]),
        (
            "POST".into(),
            "/search".into(),
            vec![
                ("authorization".into(), "Bearer tvly-key".into()),
                ("content-type".into(), "application/json".into())
            ],
            r#"{"query":"boiler pressure","max_results":1,"time_range":"day"}"#.into()
        )
    );
}

#[tokio::test]
async fn searxng_is_asked_for_json() {
    let web = FakeWeb::start().await;
    let registry = registry(
        json!({ "provider": "searxng", "baseUrl": web.url("") }),
        None,
    );
    let result = search(
        &registry,
        json!({ "query": "boiler pressure", "freshness": "month" }),
    )
    .await;
    insta::assert_snapshot!(result.content);
    assert_eq!(
        web.requests()[0].uri,
        "/search?q=boiler+pressure&format=json&time_range=month"
    );
}

#[tokio::test]
async fn duckduckgo_is_the_default_and_its_html_page_is_read() {
    let web = FakeWeb::start().await;
    let registry = registry(json!({ "baseUrl": web.url("") }), None);
    let result = search(&registry, json!({ "query": "Hello", "count": 3 })).await;
    insta::assert_snapshot!(result.content);
    assert_eq!(web.requests()[0].uri, "/html/?q=Hello");
}

#[tokio::test]
async fn a_count_out_of_range_is_refused() {
    let registry = registry(json!({}), None);
    let result = search(&registry, json!({ "query": "x", "count": 11 })).await;
    assert_eq!(
        result.content,
        "Error: count 11 is out of range; allowed: 1 to 10"
    );
}
