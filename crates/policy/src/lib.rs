//! Policy: what tools may touch and run. The path guard decides which files the file tools and
//! `exec` may use; the exec policy decides which commands `exec` may run.

mod exec_policy;
mod path_guard;
mod program_rules;
mod shell_word;

pub use exec_policy::{DEFAULT_SAFE_BINS, Denial, ExecPlan, ExecPolicy, ExecPolicyError};
pub use path_guard::{PathDenial, PathGuard, PathGuardError};
