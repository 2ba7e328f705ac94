//! The memory tools for whoever assembles an agent's tool set: `nanocrab-tools` builds the
//! built-in set without them, since this crate, which owns the index, depends on that one.

use std::sync::Arc;

use nanocrab_config::MemoryConfig;
use nanocrab_policy::PathGuard;
use nanocrab_tools::Tool;

use crate::index_setup::IndexSetup;
use crate::memory_get::MemoryGetTool;
use crate::memory_search::MemorySearchTool;
use crate::ranking::SearchOptions;

/// memory_search and memory_get, in that order, over the workspace of `guard`: searching
/// `index` (whose workspace is the guard's) ranked as `config` says, reading through `guard`.
pub fn memory_tools(
    config: &MemoryConfig,
    index: &IndexSetup,
    guard: &Arc<PathGuard>,
) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(MemorySearchTool::new(
            IndexSetup {
                workspace: guard.workspace().to_path_buf(),
                ..index.clone()
            },
            SearchOptions::from_config(config),
        )),
        Arc::new(MemoryGetTool::new(Arc::clone(guard))),
    ]
}
