//! Brave Search API: `GET /res/v1/web/search?q=&count=&freshness=` with the key in
//! `X-Subscription-Token`; results in `web.results[]` as `title`, `url`, `description`.

use serde::Deserialize;

use super::{Freshness, Hit, Query, plain, with_query};

pub fn request(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    query: &Query,
) -> reqwest::RequestBuilder {
    let count = query.count.to_string();
    let mut params = vec![("q", query.text.as_str()), ("count", count.as_str())];
    if let Some(freshness) = query.freshness {
        let code = match freshness {
            Freshness::Day => "pd",
            Freshness::Week => "pw",
            Freshness::Month => "pm",
            Freshness::Year => "py",
        };
        params.push(("freshness", code));
    }
    client
        .get(with_query(format!("{base}/res/v1/web/search"), &params))
        .header(reqwest::header::ACCEPT, "application/json")
        .header("X-Subscription-Token", key)
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    web: Option<Web>,
}

#[derive(Deserialize)]
struct Web {
    #[serde(default)]
    results: Vec<Result>,
}

#[derive(Deserialize)]
struct Result {
    title: String,
    url: String,
    #[serde(default)]
    description: String,
}

pub fn hits(body: &str) -> std::result::Result<Vec<Hit>, String> {
    let answer: Answer = serde_json::from_str(body).map_err(|err| err.to_string())?;
    Ok(answer
        .web
        .map(|web| web.results)
        .unwrap_or_default()
        .into_iter()
        .map(|result| Hit {
            title: plain(&result.title),
            url: result.url,
            snippet: plain(&result.description),
        })
        .collect())
}
