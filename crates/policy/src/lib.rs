//! Policy: what tools may do. Capabilities and risk say what a call needs; grants (from config
//! and approvals) say what a run may do; the path guard and the exec policy check files and
//! commands; the audit log records every call; the redactor keeps secrets out of all of it.

mod approval;
mod audit;
mod audit_hooks;
mod audit_runs;
mod capability;
mod exec_policy;
mod grant;
mod path_guard;
mod program_rules;
mod redact;
mod shell_word;

pub use approval::{
    APPROVAL_ID_LEN, ApprovalAnswer, ApprovalError, ApprovalReply, ApprovalRequest, ApprovalResult,
    Approver,
};
pub use audit::{ApprovalRecord, AuditError, AuditLog, AuditQuery, AuditRecord, CallStatus};
pub use audit_hooks::{HookDecision, HookRecord};
pub use audit_runs::{RunQuery, RunRecord, RunStatus};
pub use capability::{
    Capability, CapabilityKind, CapabilityPattern, Invocation, PatternError, Risk,
};
pub use exec_policy::{DEFAULT_SAFE_BINS, Denial, ExecPlan, ExecPolicy, ExecPolicyError};
pub use grant::{CapabilityGrant, GrantSource, Grants, Verdict, decide};
pub use path_guard::{INSTRUCTION_PATHS, PathDenial, PathGuard, PathGuardError};
pub use redact::{MIN_SECRET_LEN, Redactor};
