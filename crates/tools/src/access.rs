//! The capabilities and risk of the file tools' calls, from the path the guard resolved.

use std::path::PathBuf;

use nanocrab_policy::{Capability, Invocation, PathGuard, Risk};

/// Inside the granted roots a file call is safe; anywhere else it is guarded. A skill folder
/// the prompt points to is safe too: the guard lets nothing but reads reach it.
fn risk(guard: &PathGuard, path: &std::path::Path) -> Risk {
    if guard.is_in_granted_roots(path) || guard.is_in_skill_folder(path) {
        Risk::Safe
    } else {
        Risk::Guarded
    }
}

/// A read of `path`, as the guard resolved it: safe inside the granted roots, guarded elsewhere.
pub fn reading(guard: &PathGuard, verb: &str, path: PathBuf) -> Invocation {
    Invocation::new(
        risk(guard, &path),
        format!("{verb} {}", path.display()),
        vec![Capability::FsRead(path)],
    )
}

/// A write to `memory/` also changes long-term memory, which the audit log should show.
pub(crate) fn writing(guard: &PathGuard, verb: &str, path: PathBuf) -> Invocation {
    let mut capabilities = Vec::with_capacity(2);
    if is_memory_file(guard, &path) {
        capabilities.push(Capability::MemoryWrite);
    }
    let summary = format!("{verb} {}", path.display());
    // A bootstrap file or skill is an instruction to every later session, so a model talked
    // into writing one must not do it alone: it takes a grant or a human's yes.
    let (risk, summary) = match guard.instruction_file(&path) {
        Some(_) => (
            risk(guard, &path).max(Risk::Guarded),
            format!("{summary}, an instruction file every later session follows"),
        ),
        None => (risk(guard, &path), summary),
    };
    capabilities.insert(0, Capability::FsWrite(path));
    Invocation::new(risk, summary, capabilities)
}

/// Files under the workspace's `memory/`: long-term memory, curated by the user and the agent.
pub(crate) fn is_memory_file(guard: &PathGuard, path: &std::path::Path) -> bool {
    path.starts_with(guard.workspace().join("memory"))
}
