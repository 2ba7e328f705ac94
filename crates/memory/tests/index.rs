//! The memory index over a real workspace on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use nanocrab_memory::{EmbeddingSetup, MemoryIndex, SearchHit, SearchOptions, SyncReport};
use pretty_assertions::assert_eq;

fn write(workspace: &Path, path: &str, content: impl AsRef<[u8]>) {
    let path = workspace.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    write(
        &ws,
        "memory/MEMORY.md",
        "# People\n- Ada is my sister; she lives in Lisbon.\n\n# Health\n- Dentist: Dr. Okafor, every March.\n",
    );
    write(
        &ws,
        "memory/2026-03-14.md",
        "# 2026-03-14\nBooked the dentist for 9:30 on Tuesday.\n",
    );
    write(
        &ws,
        "knowledge/recipes/bread.md",
        "# Sourdough\nFeed the starter the night before; bake at 240 °C.\n",
    );
    write(
        &ws,
        "knowledge/notes.txt",
        "Plain text notes: the bike lock code is in the drawer.\n",
    );
    // Not sources: other folders and other endings.
    write(&ws, "notes/secret.md", "dentist dentist dentist\n");
    write(&ws, "knowledge/photo.png", "dentist");
    dir
}

fn paths(hits: &[SearchHit]) -> Vec<String> {
    hits.iter()
        .map(|h| format!("{}:{}-{}", h.path, h.start_line, h.end_line))
        .collect()
}

/// Where the ten best hits for `query` are (`path:first-last`).
async fn found(index: &mut MemoryIndex, query: &str) -> Vec<String> {
    paths(
        &index
            .search(query, &SearchOptions::new(10))
            .await
            .unwrap()
            .hits,
    )
}

fn counts(report: &SyncReport) -> (usize, usize, usize, usize) {
    (report.files, report.added, report.changed, report.removed)
}

#[tokio::test]
async fn memory_files_and_documents_are_found_by_their_words_with_path_and_lines() {
    let dir = workspace();
    let ws = dir.path().join("workspace");
    let mut index = MemoryIndex::open(&dir.path().join("state/memory-index.sqlite"), &ws)
        .await
        .unwrap();
    let report = index.sync().await.unwrap();
    assert_eq!(counts(&report), (4, 4, 0, 0));

    let hits = index
        .search("when is the dentist?", &SearchOptions::new(10))
        .await
        .unwrap()
        .hits;
    assert_eq!(
        paths(&hits),
        vec!["memory/MEMORY.md:4-5", "memory/2026-03-14.md:1-2"]
    );
    assert_eq!(hits[0].heading, "Health");
    assert_eq!(
        hits[0].snippet,
        "# Health\n- Dentist: Dr. Okafor, every March."
    );
    assert_eq!(hits[0].score, 1.0);
    assert!(
        hits[1].score > 0.0 && hits[1].score <= 1.0,
        "{}",
        hits[1].score
    );

    // Stemming and headings: "baking" finds "bake", "sourdough" the heading.
    assert_eq!(
        found(&mut index, "baking sourdough").await,
        vec!["knowledge/recipes/bread.md:1-2"]
    );
    assert_eq!(
        found(&mut index, "lock code").await,
        vec!["knowledge/notes.txt:1-1"]
    );
    // FTS5 syntax in a question is just words.
    assert_eq!(
        index
            .search(
                r#"sister" OR NOT (Lisbon) AND -x:y*"#,
                &SearchOptions::new(10)
            )
            .await
            .unwrap()
            .hits
            .len(),
        1
    );
    assert!(found(&mut index, "?!").await.is_empty());
    // A floor relative to the best hit keeps only the close ones.
    let all = index
        .search("dentist march", &SearchOptions::new(10))
        .await
        .unwrap()
        .hits;
    let close = index
        .search(
            "dentist march",
            &SearchOptions {
                min_score: 0.9,
                ..SearchOptions::new(10)
            },
        )
        .await
        .unwrap()
        .hits;
    assert!(close.len() < all.len() && !close.is_empty(), "{all:?}");
}

#[tokio::test]
async fn only_changed_files_are_indexed_again_and_deleted_ones_leave() {
    let dir = workspace();
    let ws = dir.path().join("workspace");
    let db = dir.path().join("state/memory-index.sqlite");
    let mut index = MemoryIndex::open(&db, &ws).await.unwrap();
    index.sync().await.unwrap();
    assert_eq!(counts(&index.sync().await.unwrap()), (4, 0, 0, 0));

    // Rewritten with the same bytes: a new mtime (set, not waited for), no new chunks.
    let memory = std::fs::read_to_string(ws.join("memory/MEMORY.md")).unwrap();
    write(&ws, "memory/MEMORY.md", &memory);
    std::fs::File::options()
        .write(true)
        .open(ws.join("memory/MEMORY.md"))
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000))
        .unwrap();
    let report = index.sync().await.unwrap();
    assert_eq!((counts(&report), report.chunks), ((4, 0, 0, 0), 0));

    write(&ws, "memory/MEMORY.md", "# People\n- Ada moved to Porto.\n");
    std::fs::remove_file(ws.join("knowledge/notes.txt")).unwrap();
    write(&ws, "memory/2026-03-15.md", "Called Ada about Porto.\n");
    let report = index.sync().await.unwrap();
    assert_eq!(counts(&report), (4, 1, 1, 1));
    assert_eq!(
        found(&mut index, "Porto").await.len(),
        2,
        "the edit and the new note"
    );
    assert!(found(&mut index, "Lisbon").await.is_empty());
    assert!(found(&mut index, "lock").await.is_empty());

    let status = index.status().unwrap();
    assert_eq!(
        (status.files, status.per_source.clone()),
        (4, vec![("memory", 3), ("knowledge", 1)])
    );
    assert!(status.updated.is_some());
    // A sync that finds nothing changed writes nothing, not even when it looked.
    assert_eq!(counts(&index.sync().await.unwrap()), (4, 0, 0, 0));
    assert_eq!(index.status().unwrap().updated, status.updated);

    // Another process (the CLI while the agent runs) sees the same index.
    let mut other = MemoryIndex::open(&db, &ws).await.unwrap();
    assert_eq!(found(&mut other, "Porto").await.len(), 2);
}

#[tokio::test]
async fn a_damaged_index_is_rebuilt_from_the_files_and_a_rebuild_replaces_it_whole() {
    let dir = workspace();
    let ws = dir.path().join("workspace");
    let db = dir.path().join("state/memory-index.sqlite");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::write(&db, b"this is not a database, it is a crash's leftovers").unwrap();

    let mut index = MemoryIndex::open(&db, &ws).await.unwrap();
    assert_eq!(index.status().unwrap().files, 4, "rebuilt on open");
    assert_eq!(
        index
            .search("Lisbon", &SearchOptions::new(10))
            .await
            .unwrap()
            .hits
            .len(),
        1
    );
    drop(index);

    write(&ws, "memory/MEMORY.md", "# People\n- Ada moved to Porto.\n");
    let (mut index, report) = MemoryIndex::rebuild(&db, &ws, None, EmbeddingSetup::default())
        .await
        .unwrap();
    assert_eq!(counts(&report), (4, 4, 0, 0));
    assert!(found(&mut index, "Lisbon").await.is_empty());
    assert_eq!(
        index
            .search("Porto", &SearchOptions::new(10))
            .await
            .unwrap()
            .hits
            .len(),
        1
    );
    let leftovers: Vec<String> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("rebuild"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}

#[tokio::test]
async fn an_index_whose_sync_was_cut_short_is_the_last_complete_one() {
    let dir = workspace();
    let ws = dir.path().join("workspace");
    let db = dir.path().join("state/memory-index.sqlite");
    let mut index = MemoryIndex::open(&db, &ws).await.unwrap();
    index.sync().await.unwrap();
    // A second writer that dies mid-transaction (as a killed indexer does) commits nothing.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("BEGIN; DELETE FROM chunks; DELETE FROM postings;")
            .unwrap();
    }
    assert_eq!(
        index
            .search("Lisbon", &SearchOptions::new(10))
            .await
            .unwrap()
            .hits
            .len(),
        1
    );
    assert_eq!(counts(&index.sync().await.unwrap()), (4, 0, 0, 0));
}

#[tokio::test]
async fn html_documents_are_indexed_as_their_text() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    write(
        &ws,
        "knowledge/house/boiler.html",
        "<html><head><script>var tracking = 'dentist';</script></head><body><h1>Boiler</h1><p>Serviced by Ravi in May; next service due in May.</p></body></html>",
    );
    let mut index = MemoryIndex::open(&dir.path().join("index.sqlite"), &ws)
        .await
        .unwrap();
    index.sync().await.unwrap();
    let hits = index
        .search("boiler service", &SearchOptions::new(5))
        .await
        .unwrap()
        .hits;
    assert_eq!(paths(&hits), vec!["knowledge/house/boiler.html:1-3"]);
    assert_eq!(
        hits[0].snippet,
        "# Boiler\n\nServiced by Ravi in May; next service due in May."
    );
    assert!(
        index
            .search("tracking", &SearchOptions::new(5))
            .await
            .unwrap()
            .hits
            .is_empty(),
        "scripts are not text"
    );
}

/// A scanned letter: one page with a picture on it (a filled square here) and no text.
fn scan_pdf() -> Vec<u8> {
    use lopdf::{Document, Object, Stream, dictionary};
    let mut doc = Document::with_version("1.7");
    let pages = doc.new_object_id();
    let content = doc.add_object(Stream::new(
        dictionary! {},
        b"q 0 0 1 rg 72 72 300 400 re f Q".to_vec(),
    ));
    let page = doc.add_object(dictionary! {
        "Type" => "Page", "Parent" => pages, "Contents" => content,
        "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
    });
    doc.objects.insert(
        pages,
        Object::Dictionary(
            dictionary! { "Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1 },
        ),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages });
    doc.trailer.set("Root", catalog);
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    bytes
}

#[tokio::test]
async fn pdf_documents_are_indexed_as_their_text_and_unreadable_ones_as_nothing() {
    let dir = workspace();
    let ws = dir.path().join("workspace");
    // Two pages made by LibreOffice from tests/data/boiler.html.
    let pdf =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/boiler.pdf")).unwrap();
    write(&ws, "knowledge/house/boiler.pdf", &pdf);
    // A download cut short, and a scan with no text.
    write(
        &ws,
        "knowledge/house/boiler-copy.pdf",
        &pdf[..pdf.len() / 2],
    );
    write(&ws, "knowledge/letters/scan.PDF", scan_pdf());
    let mut index = MemoryIndex::open(&dir.path().join("index.sqlite"), &ws)
        .await
        .unwrap();
    let report = index.sync().await.unwrap();
    assert_eq!((counts(&report), report.chunks), ((7, 7, 0, 0), 6));

    // The lines are those of the text, a blank one between the pages, as memory_get shows it.
    let hits = index
        .search("warranty installer", &SearchOptions::new(5))
        .await
        .unwrap()
        .hits;
    assert_eq!(paths(&hits), vec!["knowledge/house/boiler.pdf:1-6"]);
    assert_eq!(
        hits[0].snippet,
        "Boiler manual\n\
         The boiler was serviced by Ravi in May.\n\
         Water pressure should sit near 1.5 bar; bleed the radiators in October.\n\
         \n\
         Warranty\n\
         The warranty ends in March 2031. Zoë at the installer files the claims."
    );
    // The unreadable ones stopped nothing: the other files are all there.
    assert_eq!(
        paths(
            &index
                .search("dentist", &SearchOptions::new(5))
                .await
                .unwrap()
                .hits
        ),
        vec!["memory/MEMORY.md:4-5", "memory/2026-03-14.md:1-2"]
    );
    assert_eq!(
        index.status().unwrap().per_source,
        vec![("memory", 2), ("knowledge", 5)]
    );

    // Indexed as nothing, not forgotten: unchanged, they are not read again; once whole, the
    // copy is.
    assert_eq!(counts(&index.sync().await.unwrap()), (7, 0, 0, 0));
    write(&ws, "knowledge/house/boiler-copy.pdf", &pdf);
    assert_eq!(counts(&index.sync().await.unwrap()), (7, 0, 1, 0));
    let mut found = paths(
        &index
            .search("warranty", &SearchOptions::new(5))
            .await
            .unwrap()
            .hits,
    );
    found.sort();
    assert_eq!(
        found,
        vec![
            "knowledge/house/boiler-copy.pdf:1-6",
            "knowledge/house/boiler.pdf:1-6"
        ]
    );
}

#[tokio::test]
async fn transcripts_are_searched_when_asked_and_their_lines_are_the_files() {
    let dir = workspace();
    let ws = dir.path().join("workspace");
    let sessions = dir.path().join("sessions");
    let store = nanocrab_sessions::SessionStore::new(&sessions);
    let key = nanocrab_schema::SessionKey::parse("telegram:42").unwrap();
    store
        .append(
            &key,
            &[
                nanocrab_sessions::SessionEntry::now(nanocrab_schema::LlmMessage::user(
                    "remember the plumber's number",
                )),
                nanocrab_sessions::SessionEntry::now(nanocrab_schema::LlmMessage::assistant(
                    "The plumber, Kwame, is on 0117 496 0321.",
                )),
            ],
        )
        .unwrap();
    let db = dir.path().join("index.sqlite");
    let mut index = MemoryIndex::open(&db, &ws)
        .await
        .unwrap()
        .with_sessions(Some(sessions.clone()));
    assert_eq!(counts(&index.sync().await.unwrap()), (5, 5, 0, 0));
    // Line 1 is the transcript's metadata; the user spoke on line 2, the assistant on line 3.
    assert_eq!(
        paths(
            &index
                .search("plumber Kwame", &SearchOptions::new(5))
                .await
                .unwrap()
                .hits
        ),
        vec!["sessions/telegram:42.jsonl:2-3"]
    );
    assert_eq!(
        index.status().unwrap().per_source,
        vec![("memory", 2), ("knowledge", 2), ("sessions", 1)]
    );
    // Turned off again: the transcripts leave the index.
    let mut index = MemoryIndex::open(&db, &ws).await.unwrap();
    assert_eq!(counts(&index.sync().await.unwrap()), (4, 0, 0, 1));
    assert!(
        index
            .search("plumber", &SearchOptions::new(5))
            .await
            .unwrap()
            .hits
            .is_empty()
    );
}

/// `memory/MEMORY.md` as `nanocrab onboard` writes it, with one fact filled in.
const MEMORY_TEMPLATE: &str = "# Long-term memory\n\n## About the user\n\n## Preferences\n- Tea, no sugar.\n\n## Projects\n\n## Decisions and facts\n";

#[tokio::test]
async fn headings_with_nothing_under_them_are_never_hits() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    write(&ws, "memory/MEMORY.md", MEMORY_TEMPLATE);
    let mut index = MemoryIndex::open(&dir.path().join("state/memory-index.sqlite"), &ws)
        .await
        .unwrap();
    assert_eq!(index.sync().await.unwrap().chunks, 1);
    for query in ["about the user", "projects", "decisions and facts"] {
        assert_eq!(
            paths(
                &index
                    .search(query, &SearchOptions::new(10))
                    .await
                    .unwrap()
                    .hits
            ),
            Vec::<String>::new(),
            "{query}"
        );
    }
    // The filled-in section is found by its heading's words, and by its parent's.
    for query in ["preferences", "long-term memory", "tea"] {
        assert_eq!(
            paths(
                &index
                    .search(query, &SearchOptions::new(10))
                    .await
                    .unwrap()
                    .hits
            ),
            vec!["memory/MEMORY.md:5-6"],
            "{query}"
        );
    }
}

#[tokio::test]
async fn an_index_from_before_empty_headings_were_left_out_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    write(&ws, "memory/MEMORY.md", MEMORY_TEMPLATE);
    let db = dir.path().join("state/memory-index.sqlite");
    MemoryIndex::open(&db, &ws)
        .await
        .unwrap()
        .sync()
        .await
        .unwrap();
    // What the version 2 chunker made of the template: a chunk for each heading.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "UPDATE meta SET value = '2' WHERE key = 'schema_version';
             INSERT INTO chunks (path, start_line, end_line, heading, text, hash)
               VALUES ('memory/MEMORY.md', 8, 8, 'Long-term memory > Projects', '## Projects', 'h');",
        )
        .unwrap();
    }
    let mut index = MemoryIndex::open(&db, &ws).await.unwrap();
    assert_eq!(found(&mut index, "projects").await, Vec::<String>::new());
    assert_eq!(index.status().unwrap().chunks, 1);
}

/// Waits until `watch` has seen a change (the kernel's events arrive on their own thread).
fn seen(watch: &nanocrab_memory::ChangeWatch) {
    let start = std::time::Instant::now();
    while !watch.has_changes() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no file event arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[tokio::test]
async fn with_a_watch_a_search_syncs_only_the_files_that_changed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    for i in 0..20_000 {
        write(
            &ws,
            &format!("memory/notes/{i:05}.md"),
            format!("# Note {i}\nnothing here {i}\n"),
        );
    }
    let setup = nanocrab_memory::IndexSetup {
        database: dir.path().join("index.sqlite"),
        workspace: ws.clone(),
        sessions: None,
        embeddings: EmbeddingSetup::KeywordOnly("keyword search in this test".into()),
        watch: Some(nanocrab_memory::ChangeWatch::start(&ws, None).unwrap()),
    };
    let mut index = setup.open().await.unwrap();
    // The first search after the start does not know what changed before: everything.
    let first = setup.refresh(&mut index).await.unwrap();
    assert_eq!((first.files, first.read), (20_000, 20_000));

    // One note edited: that one is looked at and read, no other. Saved by a rename, as
    // editors save: one event, where a write in place makes two (truncate, write) and the
    // second could arrive after the refresh below and make the idle one look at it.
    write(
        &ws,
        "memory/notes/12345.md.swp",
        "# Note 12345\nthe heron came back\n",
    );
    std::fs::rename(
        ws.join("memory/notes/12345.md.swp"),
        ws.join("memory/notes/12345.md"),
    )
    .unwrap();
    seen(setup.watch.as_ref().unwrap());
    let edited = setup.refresh(&mut index).await.unwrap();
    assert_eq!((edited.files, edited.read, edited.changed), (1, 1, 1));
    assert_eq!(
        found(&mut index, "heron").await,
        ["memory/notes/12345.md:1-2"]
    );

    // Nothing changed: nothing is looked at.
    let idle = setup.refresh(&mut index).await.unwrap();
    assert_eq!((idle.files, idle.read), (0, 0));

    // A note removed leaves the index; nothing is read for it.
    std::fs::remove_file(ws.join("memory/notes/12345.md")).unwrap();
    seen(setup.watch.as_ref().unwrap());
    let removed = setup.refresh(&mut index).await.unwrap();
    assert_eq!((removed.read, removed.removed), (0, 1));
    assert!(found(&mut index, "heron").await.is_empty());

    // A folder made after the start is watched from then on.
    write(&ws, "knowledge/birds.md", "# Birds\nthe kingfisher\n");
    seen(setup.watch.as_ref().unwrap());
    setup.refresh(&mut index).await.unwrap();
    assert_eq!(
        found(&mut index, "kingfisher").await,
        ["knowledge/birds.md:1-2"]
    );
    write(
        &ws,
        "knowledge/birds.md",
        "# Birds\nthe kingfisher and the dipper\n",
    );
    seen(setup.watch.as_ref().unwrap());
    let inside = setup.refresh(&mut index).await.unwrap();
    assert_eq!((inside.files, inside.read), (1, 1));
    assert_eq!(
        found(&mut index, "dipper").await,
        ["knowledge/birds.md:1-2"]
    );

    // Without a watch (a one-shot command) every file is looked at, and only the changed one
    // read.
    write(&ws, "memory/notes/00007.md", "# Note 7\nthe otter\n");
    let mut plain = nanocrab_memory::IndexSetup {
        watch: None,
        ..setup.clone()
    }
    .open()
    .await
    .unwrap();
    let full = plain.sync().await.unwrap();
    assert_eq!((full.files, full.read), (20_000, 1));
}

/// A one-shot search (no watch) looks at every file beside searching the index as it is: the
/// answer is the same as a sync then a search, whether anything changed or not.
#[tokio::test(flavor = "current_thread")]
async fn a_search_without_a_watch_finds_what_changed_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    write(&ws, "memory/MEMORY.md", "# Birds\nthe heron by the mill\n");
    let setup = nanocrab_memory::IndexSetup {
        database: dir.path().join("index.sqlite"),
        workspace: ws.clone(),
        sessions: None,
        embeddings: EmbeddingSetup::KeywordOnly("keyword search in this test".into()),
        watch: None,
    };
    let search = |query: &'static str| {
        let setup = setup.clone();
        async move {
            paths(
                &setup
                    .search(query, &SearchOptions::new(10))
                    .await
                    .unwrap()
                    .hits,
            )
        }
    };
    // A new index: built by the look beside the first search.
    assert_eq!(search("heron").await, ["memory/MEMORY.md:1-2"]);
    // Nothing changed: the index as it was answers.
    assert_eq!(search("heron").await, ["memory/MEMORY.md:1-2"]);
    // Edited, and a note added, since: found by the search that follows.
    write(
        &ws,
        "memory/MEMORY.md",
        "# Birds\nthe kingfisher by the mill\n",
    );
    write(&ws, "knowledge/heron.md", "# Herons\nthe heron came back\n");
    assert_eq!(search("kingfisher").await, ["memory/MEMORY.md:1-2"]);
    assert_eq!(search("heron").await, ["knowledge/heron.md:1-2"]);
}
