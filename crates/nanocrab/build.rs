//! How the release binary is linked, where the linker is the one Rust uses by default on
//! x86_64 Linux (its own lld). Each option changes the layout of the file, never the code:
//!
//! - `--symbol-ordering-file=link-order.txt`: the functions the gateway runs from its start
//!   through its first turns, placed together. The kernel maps the 64 KB around every page a
//!   process touches, so start-up code scattered over 21 MB of text kept 14 MB of the file
//!   resident in an idle gateway; together they keep 7 MB (`docs/benchmarks.md`, "Binary
//!   layout"). `python3 scripts/link-order.py` writes the file again; names it lists that
//!   the build lacks (after a dependency or toolchain upgrade) are skipped, so a stale list
//!   costs memory, never a failed build.
//! - `--icf=all`: identical functions (generic code instantiated for types of the same
//!   layout) kept once, 0.4 MB. Rust promises nothing about two functions' addresses
//!   differing, and lld folds only code, never data such as vtables.
//! - `-z pack-relative-relocs` (DT_RELR): the 55,000 pointers the loader fixes up at start
//!   described in 17 KB instead of 1.3 MB, which every start read. The loader of glibc 2.36
//!   and later understands it; a binary built so refuses to start under an older one, so it
//!   is used only when the glibc it is built against is new enough.
//!
//! A build that names its own linker (`RUSTC_LINKER`, or `-C linker`/`-fuse-ld` in its
//! flags) gets none of these: the options are lld's, and another linker may not know them.

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");

    // `release` for every profile that inherits from it (`profiling` too, so that a flame
    // graph sees the layout that ships); dev and test builds link as they always did.
    let release = env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let target = env::var("TARGET").unwrap_or_default();
    let own_linker = env::var_os("RUSTC_LINKER").is_some()
        || env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|flags| {
            flags
                .split('\x1f')
                .any(|flag| flag.contains("linker") || flag.contains("fuse-ld"))
        });
    if !release || target != "x86_64-unknown-linux-gnu" || own_linker {
        return;
    }

    let order = Path::new(env!("CARGO_MANIFEST_DIR")).join("link-order.txt");
    for arg in [
        format!("-Wl,--symbol-ordering-file={}", order.display()),
        "-Wl,--no-warn-symbol-ordering".to_owned(),
        "-Wl,--icf=all".to_owned(),
    ] {
        println!("cargo:rustc-link-arg-bin=nanocrab={arg}");
    }
    let native = env::var("HOST").is_ok_and(|host| host == target);
    if native && glibc_understands_relr() {
        println!("cargo:rustc-link-arg-bin=nanocrab=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc is 2.36 or later, from `getconf GNU_LIBC_VERSION` ("glibc
/// 2.36"); anything unexpected counts as no.
fn glibc_understands_relr() -> bool {
    let Ok(output) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (2, 36),
        _ => false,
    }
}
