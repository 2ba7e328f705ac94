//! Tavily: `POST /search` with `{"query", "max_results", "time_range"}` and the key as a bearer
//! token; results in `results[]` as `title`, `url`, `content`.

use serde::Deserialize;

use super::{Freshness, Hit, Query, plain};

pub fn request(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    query: &Query,
) -> reqwest::RequestBuilder {
    let mut body = serde_json::json!({
        "query": query.text,
        "max_results": query.count,
    });
    if let Some(freshness) = query.freshness {
        body["time_range"] = serde_json::Value::from(match freshness {
            Freshness::Day => "day",
            Freshness::Week => "week",
            Freshness::Month => "month",
            Freshness::Year => "year",
        });
    }
    client
        .post(format!("{base}/search"))
        .bearer_auth(key)
        .json(&body)
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Result>,
}

#[derive(Deserialize)]
struct Result {
    title: String,
    url: String,
    #[serde(default)]
    content: String,
}

pub fn hits(body: &str) -> std::result::Result<Vec<Hit>, String> {
    let answer: Answer = serde_json::from_str(body).map_err(|err| err.to_string())?;
    Ok(answer
        .results
        .into_iter()
        .map(|result| Hit {
            title: plain(&result.title),
            url: result.url,
            snippet: plain(&result.content),
        })
        .collect())
}
