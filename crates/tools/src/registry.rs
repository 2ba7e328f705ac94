use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nanocrab_config::DeferLimits;
use nanocrab_policy::{
    APPROVAL_ID_LEN, ApprovalAnswer, ApprovalRecord, ApprovalRequest, ApprovalResult, Approver,
    AuditLog, AuditRecord, CallStatus, Capability, CapabilityGrant, CapabilityPattern, GrantSource,
    Grants, Invocation, Redactor, Risk, Verdict, decide,
};
use nanocrab_schema::{
    Image, InstructionsChange, RunId, SessionKey, StepId, ToolCall, ToolDef, ToolResult,
};
use tracing::Instrument as _;

use crate::tool::{Provenance, Tool, ToolContext, ToolError};
use crate::tool_search::ToolSearch;
use crate::untrusted::wrap_untrusted;
use crate::workspace_history::WorkspaceHistory;

/// How long a call waits for a human when config says nothing.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// What every call of a registry is checked against and recorded in.
#[derive(Clone)]
pub struct ToolPolicy {
    /// Standing grants from the agent's config (`tools.grants`).
    pub grants: Grants,
    /// Standing grants for runs from one channel (`channels.<name>.grants`), by channel name.
    pub channel_grants: BTreeMap<String, Grants>,
    /// Who is asked when a call needs approval; without one such calls are denied.
    pub approver: Option<Arc<dyn Approver>>,
    /// After this the call is denied.
    pub approval_timeout: Duration,
    pub audit: Option<Arc<AuditLog>>,
    pub redactor: Redactor,
    /// Where the built-in file tools keep what a change to an instruction file (a bootstrap
    /// file or a skill) replaced; without it nothing is kept.
    pub workspace_history: Option<WorkspaceHistory>,
    /// Folders of skills outside the workspace, which the file tools may read, never write.
    pub skill_folders: Vec<std::path::PathBuf>,
    /// Grants of skills (`skills.entries.<name>.grants`), for the rest of a run once it read
    /// the skill.
    pub skill_grants: Vec<SkillGrants>,
}

/// What config grants one skill.
#[derive(Debug, Clone)]
pub struct SkillGrants {
    pub skill: String,
    /// Its `SKILL.md`, resolved as the file tools resolve a path (symlinks followed): reading
    /// this file with `read_file` is what puts the grants in force.
    pub file: std::path::PathBuf,
    pub grants: Grants,
}

/// How many (run, skill) pairs are remembered: more than the runs at once of a busy gateway.
const SKILLS_READ_KEPT: usize = 256;

impl Default for ToolPolicy {
    fn default() -> Self {
        Self {
            grants: Grants::default(),
            channel_grants: BTreeMap::new(),
            approver: None,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            audit: None,
            redactor: Redactor::default(),
            workspace_history: None,
            skill_folders: Vec::new(),
            skill_grants: Vec::new(),
        }
    }
}

/// The tools one agent may call, by name, and the policy point every call goes through.
/// Cheap to clone (each turn takes its own copy): the tools, their definitions and the policy
/// are shared until one of them changes.
#[derive(Clone)]
pub struct ToolRegistry {
    tools: Arc<Vec<Registered>>,
    /// The tools' definitions, in the same order, each built once when its tool is
    /// registered: deriving a schema is not free, and the model is sent them every call.
    definitions: Arc<Vec<ToolDef>>,
    /// Past these (`tools.deferAbove`) the deferrable tools are held back; `None`: never.
    defer_above: Option<DeferLimits>,
    policy: Arc<ToolPolicy>,
    /// "Always allow for this session" grants; they live as long as the process.
    session_grants: Arc<Mutex<HashMap<SessionKey, Grants>>>,
    /// The skills with grants each recent run has read, oldest first.
    skills_read: Arc<Mutex<VecDeque<(RunId, String)>>>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self {
            tools: Arc::default(),
            definitions: Arc::default(),
            defer_above: Some(DeferLimits::default()),
            policy: Arc::default(),
            session_grants: Arc::default(),
            skills_read: Arc::default(),
        }
    }
}

/// One call as it ended: the result for the model, the change it made to an instruction file
/// (a bootstrap file or a skill), which the run reports to the user, and the images it
/// returned, which go to the model after the results.
#[derive(Debug, Clone, PartialEq)]
pub struct Executed {
    pub result: ToolResult,
    pub change: Option<InstructionsChange>,
    pub images: Vec<Image>,
}

/// A tool as registered.
#[derive(Clone)]
struct Registered {
    tool: Arc<dyn Tool>,
    offered: Offered,
    /// Characters of its definition as sent (its JSON).
    schema_chars: usize,
}

/// Whether a tool is sent with every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offered {
    /// A built-in tool: always sent.
    Always,
    /// An extension's (a WASM or MCP tool): held back, for `tool_search` to find, when the
    /// tools on offer are past `tools.deferAbove`.
    Deferrable,
    /// A large tool few turns need (the browser): held back for `tool_search` whenever
    /// deferring is on (`tools.deferAbove` not `false`), past the limits or not.
    Deferred,
}

/// What the user's `PreToolUse` hooks decided about a call before the policy looks at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallGate {
    /// No hook had a say: the policy decides alone.
    Policy,
    /// A hook allowed the call: what would need a human's approval runs without asking, as if
    /// approved once by `by`. What the policy refuses outright (a path outside the grant, a
    /// command the exec policy rejects) stays refused.
    Allowed { by: String },
    /// A hook wants a human to decide, even where the grants allow the call.
    Ask { by: String, reason: String },
    /// A hook refused the call; the model gets `reason` as the call's error.
    Denied { by: String, reason: String },
}

/// How the policy let a call through.
struct Clearance {
    granted: Vec<CapabilityGrant>,
    approval: Option<ApprovalRecord>,
}

/// Why a call never ran.
struct Refusal {
    message: String,
    approval: Option<ApprovalRecord>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_policy(mut self, policy: ToolPolicy) -> Self {
        self.policy = Arc::new(policy);
        self
    }

    pub fn policy(&self) -> &ToolPolicy {
        &self.policy
    }

    /// Who to ask for approvals from now on: the binary knows whether a human is there.
    pub fn set_approver(&mut self, approver: Option<Arc<dyn Approver>>) {
        Arc::make_mut(&mut self.policy).approver = approver;
    }

    /// Past `limits` (`tools.deferAbove`) the deferrable tools are held back from the
    /// requests; `None` sends every tool with every request.
    pub fn with_defer_above(mut self, limits: Option<DeferLimits>) -> Self {
        self.defer_above = limits;
        self
    }

    /// Adds a built-in tool, sent with every request; a later tool with the same name
    /// replaces the earlier one.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.add(tool, Offered::Always);
    }

    /// Adds an extension's tool (a WASM or MCP tool), which is held back for `tool_search`
    /// when the tools on offer are past `tools.deferAbove`; a later tool with the same name
    /// replaces the earlier one.
    pub fn register_deferrable(&mut self, tool: Arc<dyn Tool>) {
        self.add(tool, Offered::Deferrable);
    }

    /// Adds a large built-in tool few turns need (the browser), held back for `tool_search`
    /// unless `tools.deferAbove` is `false`; a later tool with the same name replaces the
    /// earlier one.
    pub fn register_deferred(&mut self, tool: Arc<dyn Tool>) {
        self.add(tool, Offered::Deferred);
    }

    fn add(&mut self, tool: Arc<dyn Tool>, offered: Offered) {
        let definition = tool.definition();
        self.unregister(&definition.name);
        // A definition is a name, a description and a JSON value: it always serializes.
        let schema_chars = serde_json::to_string(&definition).map_or(0, |json| json.len());
        Arc::make_mut(&mut self.tools).push(Registered {
            tool,
            offered,
            schema_chars,
        });
        Arc::make_mut(&mut self.definitions).push(definition);
    }

    /// Holds back the deferred tools, and when the tools on offer are past `tools.deferAbove`
    /// (more tools, or more characters of definitions as one JSON list) every deferrable
    /// tool too: registers
    /// `tool_search`, which finds and loads them, and returns it. `None`: every tool is sent
    /// (within the limits, or nothing deferrable). Meant for a turn's own copy.
    pub fn defer(&mut self) -> Option<Arc<ToolSearch>> {
        let limits = self.defer_above?;
        // As one JSON list: the brackets and a comma between two.
        let schema_chars = self.tools.iter().map(|t| t.schema_chars).sum::<usize>()
            + self.tools.len().saturating_sub(1)
            + 2;
        let past = self.tools.len() > limits.tools || schema_chars > limits.schema_chars;
        let deferred: Vec<ToolDef> = self
            .tools
            .iter()
            .zip(self.definitions.iter())
            .filter(|(registered, _)| match registered.offered {
                Offered::Always => false,
                Offered::Deferrable => past,
                Offered::Deferred => true,
            })
            .map(|(_, definition)| definition.clone())
            .collect();
        if deferred.is_empty() {
            return None;
        }
        let search = Arc::new(ToolSearch::new(deferred));
        self.register(search.clone());
        Some(search)
    }

    /// The definitions a request sends: all of them, or, when `search` holds the deferrable
    /// tools back, the built-in ones (with `tool_search`) and those it has loaded, in the
    /// order it loaded them.
    pub fn offered(&self, search: Option<&ToolSearch>) -> Cow<'_, [ToolDef]> {
        let Some(search) = search else {
            return Cow::Borrowed(self.definitions.as_slice());
        };
        let mut offered: Vec<ToolDef> = self
            .tools
            .iter()
            .zip(self.definitions.iter())
            .filter(|(registered, _)| registered.offered == Offered::Always)
            .map(|(_, definition)| definition.clone())
            .collect();
        offered.extend(search.loaded());
        Cow::Owned(offered)
    }

    /// Removes the tool called `name`; says whether there was one.
    pub fn unregister(&mut self, name: &str) -> bool {
        let Some(index) = self.definitions.iter().position(|d| d.name == name) else {
            return false;
        };
        Arc::make_mut(&mut self.tools).remove(index);
        Arc::make_mut(&mut self.definitions).remove(index);
        true
    }

    /// Definitions in registration order, as sent to the model.
    pub fn definitions(&self) -> &[ToolDef] {
        &self.definitions
    }

    pub fn names(&self) -> Vec<String> {
        self.definitions.iter().map(|d| d.name.clone()).collect()
    }

    /// Runs one call through the policy: works out what it needs, checks that against the
    /// run's grants, asks a human when the risk calls for it, runs the tool, labels untrusted
    /// output, redacts secrets, and appends the call to the audit log. Every failure (unknown
    /// tool, bad arguments, denied, the tool's own error) becomes an error result for the model,
    /// never a dropped call.
    pub async fn execute(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        self.execute_reporting(call, ctx).await.result
    }

    /// [`Self::execute`], with the rest of what the call returned: the change it made to an
    /// instruction file (a bootstrap file or a skill), which the run reports to the user, and
    /// the images it returned.
    pub async fn execute_reporting(&self, call: &ToolCall, ctx: &ToolContext) -> Executed {
        self.execute_gated(call, ctx, &CallGate::Policy).await
    }

    /// [`Self::execute_reporting`] with what the call's hooks decided (`gate`) weighed in.
    pub async fn execute_gated(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        gate: &CallGate,
    ) -> Executed {
        let step_id = StepId::new();
        let span = tracing::info_span!(
            "tool_call",
            tool = %call.name,
            trace_id = %ctx.trace_id,
            run_id = %ctx.run_id,
            step_id = %step_id,
        );
        self.execute_step(call, ctx, gate, step_id)
            .instrument(span)
            .await
    }

    async fn execute_step(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        gate: &CallGate,
        step_id: StepId,
    ) -> Executed {
        let started_at_ms = now_ms();
        let mut record = AuditRecord {
            id: 0,
            trace_id: ctx.trace_id.to_string(),
            task_id: ctx.task_id.to_string(),
            run_id: ctx.run_id.to_string(),
            step_id: step_id.to_string(),
            agent: ctx.agent.clone(),
            session: ctx.session.as_ref().map(ToString::to_string),
            source: ctx.source.clone(),
            tool: call.name.clone(),
            call_id: call.id.clone(),
            arguments_digest: digest(&call.input),
            summary: String::new(),
            risk: Risk::Safe,
            requested: Vec::new(),
            granted: Vec::new(),
            approval: None,
            started_at_ms,
            ended_at_ms: started_at_ms,
            status: CallStatus::Denied,
            error: None,
        };
        let mut change = None;
        let mut images = Vec::new();
        let result = self
            .run(call, ctx, gate, &mut record, &mut change, &mut images)
            .await;
        let result = ToolResult {
            content: self.policy.redactor.redact(&result.content).into_owned(),
            ..result
        };
        record.ended_at_ms = now_ms();
        if result.is_error {
            record.error = Some(result.content.clone());
        }
        if let Some(audit) = &self.policy.audit
            && let Err(err) = audit.append(&record)
        {
            // The call has happened; failing it now would only hide that from the model.
            tracing::error!(
                "cannot append tool call {} to the audit log: {err}",
                call.id
            );
        }
        Executed {
            result,
            change,
            images,
        }
    }

    async fn run(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        gate: &CallGate,
        record: &mut AuditRecord,
        change: &mut Option<InstructionsChange>,
        images: &mut Vec<Image>,
    ) -> ToolResult {
        let Some(tool) = self
            .definitions
            .iter()
            .position(|d| d.name == call.name)
            .map(|index| &self.tools[index].tool)
        else {
            record.status = CallStatus::Error;
            return ToolResult::error(
                &call.id,
                format!(
                    "Error: unknown tool '{}'. Available tools: {}",
                    call.name,
                    self.names().join(", ")
                ),
            );
        };
        let prepared = match tool.prepare(call.input.clone(), ctx) {
            Ok(prepared) => prepared,
            Err(err) => {
                record.status = match err {
                    ToolError::PathDenied(_) | ToolError::ExecDenied(_) => CallStatus::Denied,
                    ToolError::InvalidArguments(_)
                    | ToolError::Io { .. }
                    | ToolError::BinaryFile { .. }
                    | ToolError::Rejected(_)
                    | ToolError::Spawn { .. }
                    | ToolError::TimedOut { .. }
                    | ToolError::Wasm { .. }
                    | ToolError::Mcp(_) => CallStatus::Error,
                };
                return ToolResult::error(&call.id, format!("Error: {err}"));
            }
        };
        let invocation = &prepared.invocation;
        record.summary = invocation.summary.clone();
        record.risk = invocation.risk;
        record.requested = invocation
            .capabilities
            .iter()
            .map(ToString::to_string)
            .collect();
        match self.clear(&call.name, invocation, ctx, gate).await {
            Ok(clearance) => {
                record.granted = clearance.granted.iter().map(ToString::to_string).collect();
                record.approval = clearance.approval;
            }
            Err(refusal) => {
                record.approval = refusal.approval;
                record.status = CallStatus::Denied;
                return ToolResult::error(&call.id, refusal.message);
            }
        }
        let read_skill = self
            .policy
            .skill_grants
            .iter()
            .find(|skill| {
                call.name == "read_file"
                    && invocation
                        .capabilities
                        .iter()
                        .any(|c| matches!(c, Capability::FsRead(path) if *path == skill.file))
            })
            .map(|skill| skill.skill.clone());
        match prepared.run.await {
            Ok(output) => {
                if let Some(skill) = read_skill {
                    let mut read = self
                        .skills_read
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let entry = (ctx.run_id.clone(), skill);
                    if !read.contains(&entry) {
                        if read.len() == SKILLS_READ_KEPT {
                            read.pop_front();
                        }
                        read.push_back(entry);
                    }
                }
                record.status = CallStatus::Ok;
                *change = output.instructions_change;
                *images = output.images;
                let text = match &output.provenance {
                    Provenance::Trusted => output.text,
                    Provenance::Untrusted { source } => wrap_untrusted(source, &output.text),
                };
                ToolResult::ok(&call.id, text)
            }
            Err(err) => {
                record.status = CallStatus::Error;
                ToolResult::error(&call.id, format!("Error: {err}"))
            }
        }
    }

    /// Decides a call against config and session grants, asking a human when needed.
    async fn clear(
        &self,
        tool: &str,
        invocation: &Invocation,
        ctx: &ToolContext,
        gate: &CallGate,
    ) -> Result<Clearance, Refusal> {
        if let CallGate::Denied { by, reason } = gate {
            return Err(Refusal {
                message: format!("Error: the PreToolUse hook `{by}` denied {tool}: {reason}"),
                approval: None,
            });
        }
        let mut standing = self.policy.grants.clone();
        if let Some(grants) = ctx
            .channel
            .as_ref()
            .and_then(|channel| self.policy.channel_grants.get(channel))
        {
            standing.extend(grants);
        }
        // The skills this run has read, whose grants now apply; an approval names them.
        let following: Vec<&SkillGrants> = {
            let read = self
                .skills_read
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.policy
                .skill_grants
                .iter()
                .filter(|skill| {
                    read.iter()
                        .any(|(run, name)| *run == ctx.run_id && *name == skill.skill)
                })
                .collect()
        };
        for skill in &following {
            standing.extend(&skill.grants);
        }
        let session = ctx
            .session
            .as_ref()
            .and_then(|key| {
                self.session_grants
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(key)
                    .cloned()
            })
            .unwrap_or_default();
        let (granted_so_far, missing, session_grant_offered) =
            match (decide(invocation, &standing, &session), gate) {
                (Verdict::Allowed { granted }, CallGate::Ask { .. }) => {
                    (granted, Vec::new(), false)
                }
                (
                    Verdict::Allowed { granted },
                    CallGate::Policy | CallGate::Allowed { .. } | CallGate::Denied { .. },
                ) => {
                    return Ok(Clearance {
                        granted,
                        approval: None,
                    });
                }
                (
                    Verdict::NeedsApproval {
                        granted, missing, ..
                    },
                    CallGate::Allowed { by },
                ) => {
                    let id = approval_id();
                    let source = GrantSource::Once {
                        request: id.clone(),
                        by: format!("hook {by}"),
                    };
                    return Ok(Clearance {
                        granted: granted
                            .into_iter()
                            .chain(missing.iter().map(|capability| CapabilityGrant {
                                pattern: CapabilityPattern::exactly(capability),
                                source: source.clone(),
                            }))
                            .collect(),
                        approval: Some(ApprovalRecord {
                            id,
                            result: ApprovalResult::AllowedOnce,
                            by: Some(format!("hook {by}")),
                        }),
                    });
                }
                (
                    Verdict::NeedsApproval {
                        granted,
                        missing,
                        session_grant_offered,
                    },
                    CallGate::Policy | CallGate::Ask { .. } | CallGate::Denied { .. },
                ) => (granted, missing, session_grant_offered),
            };
        let request = ApprovalRequest {
            id: approval_id(),
            agent: ctx.agent.clone(),
            session: ctx.session.clone(),
            tool: tool.to_owned(),
            summary: {
                let summary = self.policy.redactor.redact(&invocation.summary);
                let summary = if following.is_empty() {
                    summary.into_owned()
                } else {
                    let names: Vec<&str> = following.iter().map(|s| s.skill.as_str()).collect();
                    format!("{summary} (following the skill {})", names.join(", "))
                };
                match gate {
                    CallGate::Ask { by, reason } => format!(
                        "{summary} (the hook `{by}` asks: {})",
                        self.policy.redactor.redact(reason)
                    ),
                    CallGate::Policy | CallGate::Allowed { .. } | CallGate::Denied { .. } => {
                        summary
                    }
                }
            },
            risk: invocation.risk,
            missing: missing.clone(),
            session_grant_offered: session_grant_offered && ctx.session.is_some(),
        };
        let needs = if missing.is_empty() {
            "what a PreToolUse hook asks about".to_owned()
        } else {
            missing
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let refuse = |result: ApprovalResult, by: Option<String>, message: String| Refusal {
            message,
            approval: Some(ApprovalRecord {
                id: request.id.clone(),
                result,
                by,
            }),
        };
        let Some(approver) = &self.policy.approver else {
            return Err(refuse(
                ApprovalResult::Unavailable,
                None,
                format!(
                    "Error: {tool} needs approval ({risk}) for {needs}, and no one can approve \
                     it in this run. Do without it, or tell the user it must be granted in \
                     config (tools.grants).",
                    risk = invocation.risk
                ),
            ));
        };
        tracing::info!(approval = %request.id, "{tool} waits for approval of {needs}");
        let reply = match tokio::time::timeout(self.policy.approval_timeout, approver.ask(&request))
            .await
        {
            Ok(Ok(reply)) => reply,
            Ok(Err(err)) => {
                return Err(refuse(
                    ApprovalResult::Unavailable,
                    None,
                    format!(
                        "Error: {tool} needs approval ({risk}) for {needs}, and {err}. Do \
                         without it, or tell the user it must be granted in config \
                         (tools.grants).",
                        risk = invocation.risk
                    ),
                ));
            }
            Err(_) => {
                return Err(refuse(
                    ApprovalResult::TimedOut,
                    None,
                    format!(
                        "Error: approval {id} for {tool} ({needs}) got no answer within {secs} s, \
                         which counts as denied.",
                        id = request.id,
                        secs = self.policy.approval_timeout.as_secs()
                    ),
                ));
            }
        };
        let answer = match reply.answer {
            ApprovalAnswer::Session if !request.session_grant_offered => ApprovalAnswer::Once,
            answer @ (ApprovalAnswer::Once | ApprovalAnswer::Session | ApprovalAnswer::Deny) => {
                answer
            }
        };
        let (result, source) = match answer {
            ApprovalAnswer::Deny => {
                return Err(refuse(
                    ApprovalResult::Denied,
                    Some(reply.by.clone()),
                    format!(
                        "Error: {by} denied {tool} (approval {id}). Do not retry it; ask the \
                         user what to do instead.",
                        by = reply.by,
                        id = request.id
                    ),
                ));
            }
            ApprovalAnswer::Once => (
                ApprovalResult::AllowedOnce,
                GrantSource::Once {
                    request: request.id.clone(),
                    by: reply.by.clone(),
                },
            ),
            ApprovalAnswer::Session => (
                ApprovalResult::AllowedForSession,
                GrantSource::Session {
                    request: request.id.clone(),
                    by: reply.by.clone(),
                },
            ),
        };
        let approved: Vec<CapabilityGrant> = missing
            .iter()
            .map(|capability| CapabilityGrant {
                pattern: CapabilityPattern::exactly(capability),
                source: source.clone(),
            })
            .collect();
        if result == ApprovalResult::AllowedForSession
            && let Some(key) = &ctx.session
        {
            let mut sessions = self
                .session_grants
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let grants = sessions.entry(key.clone()).or_default();
            for grant in &approved {
                grants.push(grant.clone());
            }
        }
        Ok(Clearance {
            granted: granted_so_far.into_iter().chain(approved).collect(),
            approval: Some(ApprovalRecord {
                id: request.id,
                result,
                by: Some(reply.by),
            }),
        })
    }
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn digest(input: &serde_json::Value) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(input.to_string().as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Random and short enough to type in `approve ID`; two requests pending at once do not
/// collide in practice.
fn approval_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..APPROVAL_ID_LEN].to_owned()
}
