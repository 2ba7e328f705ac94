//! `nanocrab memory search` in a freshly onboarded home: the templates' empty headings are
//! never hits.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire};

#[test]
fn memory_search_in_a_fresh_home_never_returns_an_empty_template_heading() {
    let home = Home::new(Wire::Anthropic);
    std::fs::remove_file(home.config_path()).unwrap();
    let onboard = home.run(
        home.nanocrab()
            .args(["onboard", "--model", "openai/gpt-4.1"]),
    );
    assert!(onboard.success, "{}", onboard.stderr);
    let memory = home.home().join("workspace/memory/MEMORY.md");
    let template = std::fs::read_to_string(&memory).unwrap();
    assert!(template.contains("## Preferences\n"), "{template}");

    let search = |query: &str| -> Value {
        let run = home.run(home.nanocrab().args(["memory", "search", query, "--json"]));
        assert!(run.success, "{}", run.stderr);
        serde_json::from_str(&run.stdout).unwrap()
    };
    for query in [
        "preferences",
        "about the user",
        "projects",
        "decisions and facts",
    ] {
        assert_eq!(search(query)["hits"], json!([]), "{query}");
    }

    // Filled in, the section is a hit, found by its heading's words too.
    std::fs::write(
        &memory,
        template.replace("## Preferences\n", "## Preferences\n- Tea, no sugar.\n"),
    )
    .unwrap();
    let hits = search("preferences")["hits"].clone();
    assert_eq!(hits.as_array().unwrap().len(), 1, "{hits}");
    assert_eq!(hits[0]["heading"], "Long-term memory > Preferences");
    assert_eq!(hits[0]["snippet"], "## Preferences\n- Tea, no sugar.");
}
