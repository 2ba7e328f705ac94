//! Lists the web page's files (`web/`) for `web_assets.rs`, which embeds them gzipped (a
//! third of their size in the binary, and what browsers are sent): adding a file to the page
//! needs no change to the code.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    // Sorted as the lookup compares them: by the path as written.
    let mut files: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|file| {
            let relative = file
                .strip_prefix(&root)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            (relative, file)
        })
        .collect();
    files.sort();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    let mut table = String::from("&[\n");
    for (i, (relative, file)) in files.iter().enumerate() {
        println!("cargo:rerun-if-changed={}", file.display());
        let content = match std::fs::read(file) {
            Ok(content) => content,
            Err(err) => panic!("cannot read {}: {err}", file.display()),
        };
        let gzipped = out_dir.join(format!("web-{i}.gz"));
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let written = encoder
            .write_all(&content)
            .and_then(|()| encoder.finish())
            .and_then(|bytes| std::fs::write(&gzipped, bytes));
        if let Err(err) = written {
            panic!("cannot write {}: {err}", gzipped.display());
        }
        // `{:?}` writes a Rust string literal, escapes included.
        let _ = writeln!(
            table,
            "    ({relative:?}, include_bytes!({:?}) as &[u8]),",
            gzipped.display().to_string()
        );
    }
    table.push_str("]\n");
    let out = out_dir.join("web_assets.rs");
    if let Err(err) = std::fs::write(&out, table) {
        panic!("cannot write {}: {err}", out.display());
    }
}

/// Every file under `dir`, leaving out hidden ones (editor swap files, `.DS_Store`).
fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(&path, files);
        } else {
            files.push(path);
        }
    }
}
