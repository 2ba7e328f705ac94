//! A SearXNG instance: `GET /search?q=&format=json&time_range=`; results in `results[]` as
//! `title`, `url`, `content`. The instance must allow the `json` format (`search.formats` in
//! its settings.yml), or it answers 403.

use serde::Deserialize;

use super::{Freshness, Hit, Query, plain, with_query};

pub fn request(client: &reqwest::Client, base: &str, query: &Query) -> reqwest::RequestBuilder {
    let mut params = vec![("q", query.text.as_str()), ("format", "json")];
    if let Some(freshness) = query.freshness {
        params.push((
            "time_range",
            match freshness {
                Freshness::Day => "day",
                Freshness::Week => "week",
                Freshness::Month => "month",
                Freshness::Year => "year",
            },
        ));
    }
    client
        .get(with_query(format!("{base}/search"), &params))
        .header(reqwest::header::ACCEPT, "application/json")
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Result>,
}

#[derive(Deserialize)]
struct Result {
    #[serde(default)]
    title: String,
    url: String,
    #[serde(default)]
    content: Option<String>,
}

pub fn hits(body: &str) -> std::result::Result<Vec<Hit>, String> {
    let answer: Answer = serde_json::from_str(body).map_err(|err| err.to_string())?;
    Ok(answer
        .results
        .into_iter()
        .map(|result| Hit {
            title: plain(&result.title),
            url: result.url,
            snippet: plain(result.content.as_deref().unwrap_or_default()),
        })
        .collect())
}
