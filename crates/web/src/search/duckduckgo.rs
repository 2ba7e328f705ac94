//! DuckDuckGo's HTML endpoint: `GET /html/?q=&df=`; each result a `div.result` with the title
//! in `a.result__a` and the snippet in `.result__snippet`. Links are the target itself or
//! DuckDuckGo's redirect `//duckduckgo.com/l/?uddg=<target>`; ads (`.result--ad`) are left out.
//! When it takes a query for a bot it answers 202 with a challenge page and no results.

use super::{Freshness, Hit, Query, SearchError, with_query};

pub fn request(client: &reqwest::Client, base: &str, query: &Query) -> reqwest::RequestBuilder {
    let mut params = vec![("q", query.text.as_str())];
    if let Some(freshness) = query.freshness {
        params.push((
            "df",
            match freshness {
                Freshness::Day => "d",
                Freshness::Week => "w",
                Freshness::Month => "m",
                Freshness::Year => "y",
            },
        ));
    }
    client.get(with_query(format!("{base}/html/"), &params))
}

pub fn hits(body: &str, status: u16) -> Result<Vec<Hit>, SearchError> {
    let document = dom_query::Document::from(body);
    if status == 202 || document.select(".anomaly-modal__modal").exists() {
        return Err(SearchError::Challenged(status));
    }
    let mut hits = Vec::new();
    for result in document.select("div.result").iter() {
        if result.has_class("result--ad") {
            continue;
        }
        let link = result.select("a.result__a");
        let Some(href) = link.attr("href") else {
            continue;
        };
        let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        hits.push(Hit {
            title: words(&link.text()),
            url: target(&href),
            snippet: words(&result.select(".result__snippet").text()),
        });
    }
    Ok(hits)
}

/// The address a result link leads to: `uddg` of a redirect link, or the link itself.
fn target(href: &str) -> String {
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else if href.starts_with('/') {
        format!("https://duckduckgo.com{href}")
    } else {
        href.to_owned()
    };
    url::Url::parse(&absolute)
        .ok()
        .filter(|url| url.path() == "/l/")
        .and_then(|url| {
            url.query_pairs()
                .find(|(name, _)| name == "uddg")
                .map(|(_, value)| value.into_owned())
        })
        .unwrap_or(absolute)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// No citable recording of the redirect form was found; the shape is the one public
    /// parsers of the endpoint unwrap (`//duckduckgo.com/l/?uddg=…&rut=…`).
    #[test]
    fn redirect_links_lead_to_their_target() {
        assert_eq!(
            target("//duckduckgo.com/l/?uddg=https%3A%2F%2Fvgdb.uk%2Fmario%2Dgolf&rut=b6b8"),
            "https://vgdb.uk/mario-golf"
        );
        assert_eq!(
            target("https://www.merriam-webster.com/dictionary/hello"),
            "https://www.merriam-webster.com/dictionary/hello"
        );
    }
}
