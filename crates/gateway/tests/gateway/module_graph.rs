//! The gateway's modules form a pipeline: each imports only the stages after it, so none can
//! reach back into its caller. Read from the sources, so a new import that closes a circle
//! fails here, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the modules of this crate it imports (`use crate::x` and `crate::x::` paths).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|extension| extension != "rs") {
            continue;
        }
        let module = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let used: BTreeSet<String> = text
            .match_indices("crate::")
            .map(|(at, _)| {
                text[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .filter(|used| !used.is_empty() && *used != module)
            .collect();
        graph.insert(module, used);
    }
    graph
}

/// A circle through `from`, if there is one: the modules in import order.
fn circle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    if let Some(start) = path.iter().position(|m| m == from) {
        let mut found = path[start..].to_vec();
        found.push(from.to_owned());
        return Some(found);
    }
    path.push(from.to_owned());
    for next in graph.get(from).into_iter().flatten() {
        if let Some(found) = circle(graph, next, path) {
            return Some(found);
        }
    }
    path.pop();
    None
}

#[test]
fn no_module_imports_its_caller() {
    let graph = imports();
    assert!(graph.contains_key("intake") && graph["intake"].contains("turns"));
    for module in graph.keys() {
        if let Some(found) = circle(&graph, module, &mut Vec::new()) {
            panic!("an import circle: {}", found.join(" → "));
        }
    }
}

#[test]
fn the_stages_know_nothing_of_the_http_side() {
    let graph = imports();
    let http = [
        "server",
        "auth",
        "openai_api",
        "approvals_api",
        "heartbeat_api",
        "cron_api",
        "subagents_api",
        "web_api",
        "web_assets",
        "web_auth",
        "web_chat",
        "web_files",
        "web_state",
        "web_wire",
    ];
    for (module, used) in &graph {
        if http.contains(&module.as_str()) {
            continue;
        }
        for imported in used {
            assert!(
                !http.contains(&imported.as_str()),
                "{module} imports {imported}, of the HTTP side"
            );
        }
    }
}
