//! The agent reads a page and searches the web in one scripted turn of the real binary: the
//! fake web and its search provider on 127.0.0.1, the model's tool calls scripted.

use nanocrab_testkit::{FakeWeb, Reply};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, Wire, tool_results};

/// A home whose agent may reach the fake web on loopback (`allowPrivate`) and searches
/// DuckDuckGo there.
fn home_with_web(wire: Wire, web: &FakeWeb, allow_private: &[&str]) -> Home {
    let home = Home::new(wire);
    let mut config = home.base_config();
    config["tools"] = json!({ "web": {
        "allowPrivate": allow_private,
        "search": { "baseUrl": web.url("") },
    }});
    home.write_config(config);
    home
}

#[test]
fn what_does_this_page_say_is_answered_from_the_fetched_article() {
    let web = FakeWeb::spawn();
    for wire in Wire::ALL {
        let home = home_with_web(wire, &web, &["127.0.0.1"]);
        home.mock.push(Reply::tool_call(
            "call_fetch_1",
            "web_fetch",
            json!({ "url": web.url("/article") }),
        ));
        home.mock.push(Reply::text(
            "It says to bleed the radiator with its key until water drips, then check the boiler is near 1.5 bar.",
        ));

        let stdout = home.ask(&format!("what does {} say?", web.url("/article")));

        assert_eq!(
            stdout,
            "It says to bleed the radiator with its key until water drips, then check the boiler is near 1.5 bar.\n",
            "{wire:?}"
        );
        let requests = home.requests();
        // Anthropic names a tool at its top, OpenAI under `function`.
        let offered: Vec<String> = requests[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|tool| tool["name"].as_str().or(tool["function"]["name"].as_str()))
            .map(str::to_owned)
            .collect();
        assert!(
            offered.contains(&"web_fetch".to_owned()) && offered.contains(&"web_search".to_owned()),
            "{wire:?}: {offered:?}"
        );
        let results = tool_results(&requests[1].body);
        let (id, content, is_error) = &results[0];
        assert_eq!(
            (id.as_str(), *is_error),
            ("call_fetch_1", false),
            "{content}"
        );
        let fence = format!(
            "<untrusted-data source=\"web_fetch {}\">\nURL: {}\nContent-Type: text/html\nTitle: Bleeding radiators, step by step\n",
            web.url("/article"),
            web.url("/article")
        );
        assert!(content.starts_with(&fence), "{wire:?}: {content}");
        assert!(
            content.contains("Bleeding the radiator lets that air out"),
            "{content}"
        );
        assert!(
            !content.contains("Accept all") && !content.contains("TRACKER-ID"),
            "{content}"
        );
    }
}

#[test]
fn search_for_x_returns_titles_urls_and_snippets() {
    let web = FakeWeb::spawn();
    let home = home_with_web(Wire::Anthropic, &web, &[]);
    home.mock.push(Reply::tool_call(
        "call_search_1",
        "web_search",
        json!({ "query": "Hello", "count": 2 }),
    ));
    home.mock
        .push(Reply::text("Merriam-Webster defines hello as a greeting."));

    let stdout = home.ask("search for Hello");

    assert_eq!(stdout, "Merriam-Webster defines hello as a greeting.\n");
    assert_eq!(web.requests_to("/html/")[0].uri, "/html/?q=Hello");
    let results = tool_results(&home.requests()[1].body);
    assert_eq!(
        results,
        vec![(
            "call_search_1".to_owned(),
            "<untrusted-data source=\"web_search DuckDuckGo: Hello\">\nResults for \"Hello\" (DuckDuckGo):\n\n1. Hello | Definition of Hello by Merriam-Webster\n   https://www.merriam-webster.com/dictionary/hello\n   Hello definition is - an expression or gesture of greeting —used interjectionally in greeting, in answering the telephone, or to express surprise. How to use hello in a sentence.\n\n2. HELLO! - Daily royal, celebrity, fashion, beauty ...\n   https://www.hellomagazine.com/\n   HELLO! brings you the latest celebrity & royal news from the UK & around the world, magazine exclusives, fashion, beauty, lifestyle news, celeb babies, weddings, pregnancies and more!\n</untrusted-data>".to_owned(),
            false
        )]
    );
}

/// Without `allowPrivate` the same page, on loopback, is refused, and the model is told why.
#[test]
fn a_loopback_page_is_refused_without_allow_private() {
    let web = FakeWeb::spawn();
    let home = home_with_web(Wire::OpenAi, &web, &[]);
    home.mock.push(Reply::tool_call(
        "call_fetch_1",
        "web_fetch",
        json!({ "url": web.url("/article") }),
    ));
    home.mock.push(Reply::text("I cannot read that page."));

    home.ask("read it");

    let results = tool_results(&home.requests()[1].body);
    assert_eq!(
        results,
        vec![(
            "call_fetch_1".to_owned(),
            "Error: 127.0.0.1 is a loopback address: web_fetch reaches only public addresses unless the host is in tools.web.allowPrivate".to_owned(),
            true
        )]
    );
    assert_eq!(web.requests(), vec![]);
}
