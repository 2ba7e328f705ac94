#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every call goes through the policy: grants decide, a human approves what they don't cover,
//! nothing runs on silence, and the audit log records it all.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nanocrab_config::{ExecMode, ToolsConfig};
use nanocrab_policy::{
    ApprovalAnswer, ApprovalError, ApprovalRecord, ApprovalReply, ApprovalRequest, ApprovalResult,
    Approver, AuditLog, AuditQuery, CallStatus, Capability, Invocation, Redactor, Risk,
};
use nanocrab_schema::{SessionKey, ToolCall, ToolDef, ToolResult};
use nanocrab_tools::{
    PreparedCall, Tool, ToolContext, ToolError, ToolOutput, ToolPolicy, ToolRegistry,
    builtin_registry, grants_from_config, wrap_untrusted,
};
use pretty_assertions::assert_eq;
use serde_json::json;

/// Answers each request with the next scripted answer, or never when none is left; keeps
/// what it was asked.
#[derive(Default)]
struct Scripted {
    answers: Mutex<Vec<ApprovalAnswer>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Scripted {
    fn new(answers: Vec<ApprovalAnswer>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers),
            asked: Mutex::default(),
        })
    }

    fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Approver for Scripted {
    async fn ask(&self, request: &ApprovalRequest) -> Result<ApprovalReply, ApprovalError> {
        self.asked.lock().unwrap().push(request.clone());
        let next = {
            let mut answers = self.answers.lock().unwrap();
            (!answers.is_empty()).then(|| answers.remove(0))
        };
        match next {
            Some(answer) => Ok(ApprovalReply {
                answer,
                by: "tester".into(),
            }),
            None => std::future::pending().await,
        }
    }
}

/// A stand-in for `exec` inside the OS sandbox: a guarded call that needs `exec:sh`, run with
/// `sh -c` for real. (The tests run no sandbox launcher, so the real exec is unsandboxed and
/// unsafe here.)
struct Shell;

impl Tool for Shell {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "shell".into(),
            description: "Run a shell command.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn prepare<'a>(
        &'a self,
        input: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let command = input["command"].as_str().unwrap_or_default().to_owned();
        let invocation = Invocation::new(
            Risk::Guarded,
            format!("run `{command}`"),
            vec![Capability::Exec("sh".into())],
        );
        Ok(PreparedCall::new(invocation, async move {
            let output = std::process::Command::new("sh")
                .arg("-c")
                .arg(&command)
                .current_dir(&ctx.workspace)
                .output()
                .unwrap();
            Ok(ToolOutput::untrusted(
                format!("shell {command}"),
                String::from_utf8(output.stdout).unwrap(),
            ))
        }))
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    audit: Arc<AuditLog>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        let audit = Arc::new(
            AuditLog::open(
                &dir.path().join("state/audit.sqlite"),
                Redactor::new([("OPENAI_API_KEY".to_owned(), "sk-test-123456789".to_owned())]),
            )
            .unwrap(),
        );
        Self { dir, audit }
    }

    fn ws(&self) -> std::path::PathBuf {
        self.dir.path().join("ws").canonicalize().unwrap()
    }

    /// The built-in tools with exec in full mode, and [`Shell`], under `grants` from config and
    /// `approver`.
    fn registry(&self, grants: &[&str], approver: Option<Arc<dyn Approver>>) -> ToolRegistry {
        let mut config = ToolsConfig {
            grants: grants.iter().map(|g| g.to_string()).collect(),
            ..ToolsConfig::default()
        };
        config.exec.mode = ExecMode::Full;
        config.approvals.timeout = 1;
        let mut channel_grants = std::collections::BTreeMap::new();
        channel_grants.insert(
            "telegram".to_owned(),
            grants_from_config(&["exec:sh".into()], "channels.telegram.grants", None).unwrap(),
        );
        let mut tools = builtin_registry(
            &config,
            &self.ws(),
            None,
            None,
            ToolPolicy {
                channel_grants,
                approver,
                audit: Some(Arc::clone(&self.audit)),
                redactor: Redactor::new([(
                    "OPENAI_API_KEY".to_owned(),
                    "sk-test-123456789".to_owned(),
                )]),
                ..ToolPolicy::default()
            },
            |_| Vec::new(),
        )
        .unwrap();
        tools.register(Arc::new(Shell));
        tools
    }

    fn ctx(&self) -> ToolContext {
        ToolContext {
            session: Some(SessionKey::parse("cli:test").unwrap()),
            ..ToolContext::new(self.ws())
        }
    }

    fn exec(&self, command: &str) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: "exec".into(),
            input: json!({"command": command}),
        }
    }

    fn shell(&self, command: &str) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: "shell".into(),
            input: json!({"command": command}),
        }
    }

    fn ran(&self, command: &str, output: &str) -> ToolResult {
        ToolResult::ok(
            "call_1",
            wrap_untrusted(&format!("shell {command}"), output),
        )
    }

    fn approvals(&self) -> Vec<(CallStatus, Option<ApprovalRecord>, Vec<String>)> {
        let mut records = self.audit.list(&AuditQuery::default()).unwrap();
        records.reverse();
        records
            .into_iter()
            .map(|r| (r.status, r.approval, r.granted))
            .collect()
    }
}

#[tokio::test]
async fn an_unsandboxed_shell_command_without_a_grant_or_a_human_is_denied_and_recorded() {
    let fx = Fixture::new();
    let tools = fx.registry(&[], None);
    let result = tools.execute(&fx.exec("echo hi"), &fx.ctx()).await;
    assert_eq!(
        result,
        ToolResult::error(
            "call_1",
            "Error: exec needs approval (unsafe) for exec:sh, net:*, and no one can approve it in \
             this run. Do without it, or tell the user it must be granted in config \
             (tools.grants)."
        )
    );
    let records = fx.audit.list(&AuditQuery::default()).unwrap();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(
        (
            record.tool.as_str(),
            record.status,
            record.risk,
            record.requested.clone(),
            record.approval.as_ref().map(|a| (a.result, a.by.clone())),
            record.summary.clone(),
        ),
        (
            "exec",
            CallStatus::Denied,
            Risk::Unsafe,
            vec!["exec:sh".to_owned(), "net:*".to_owned()],
            Some((ApprovalResult::Unavailable, None)),
            format!("run `echo hi` (sh -c, no sandbox) in {}", fx.ws().display()),
        )
    );
}

#[tokio::test]
async fn a_config_grant_lets_it_run_without_asking() {
    let fx = Fixture::new();
    let approver = Scripted::new(vec![]);
    let tools = fx.registry(&["exec:sh", "net"], Some(approver.clone()));
    assert_eq!(
        tools.execute(&fx.exec("echo hi"), &fx.ctx()).await,
        ToolResult::ok("call_1", wrap_untrusted("exec echo hi", "[stdout]\nhi\n"))
    );
    assert_eq!(approver.asked(), vec![]);
    assert_eq!(
        fx.approvals(),
        [(
            CallStatus::Ok,
            None,
            vec![
                "exec:sh (config tools.grants[0])".to_owned(),
                "net:* (config tools.grants[1])".to_owned()
            ]
        )]
    );
}

#[tokio::test]
async fn a_channel_grant_applies_only_to_runs_from_that_channel() {
    let fx = Fixture::new();
    let tools = fx.registry(&[], None);
    let from_telegram = ToolContext {
        channel: Some("telegram".into()),
        ..fx.ctx()
    };
    assert_eq!(
        tools.execute(&fx.shell("echo hi"), &from_telegram).await,
        fx.ran("echo hi", "hi\n")
    );
    assert!(
        tools
            .execute(&fx.shell("echo hi"), &fx.ctx())
            .await
            .is_error
    );
}

#[tokio::test]
async fn approved_once_runs_once_and_always_runs_for_the_rest_of_the_session() {
    let fx = Fixture::new();
    let approver = Scripted::new(vec![ApprovalAnswer::Once, ApprovalAnswer::Session]);
    let tools = fx.registry(&[], Some(approver.clone()));
    for _ in 0..4 {
        assert_eq!(
            tools.execute(&fx.shell("echo hi"), &fx.ctx()).await,
            fx.ran("echo hi", "hi\n")
        );
    }
    let asked = approver.asked();
    assert_eq!(
        asked.len(),
        2,
        "once, then always; the rest ran on the session grant"
    );
    assert_eq!(
        (
            asked[0].missing.clone(),
            asked[0].risk,
            asked[0].session_grant_offered
        ),
        (vec![Capability::Exec("sh".into())], Risk::Guarded, true)
    );
    let results: Vec<_> = fx
        .approvals()
        .into_iter()
        .map(|(status, approval, granted)| {
            (
                status,
                approval.map(|a| a.result),
                granted
                    .iter()
                    .map(|g| g.split(" (").next().unwrap().to_owned())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let sh = || vec!["exec:sh".to_owned()];
    assert_eq!(
        results,
        [
            (CallStatus::Ok, Some(ApprovalResult::AllowedOnce), sh()),
            (
                CallStatus::Ok,
                Some(ApprovalResult::AllowedForSession),
                sh()
            ),
            (CallStatus::Ok, None, sh()),
            (CallStatus::Ok, None, sh()),
        ]
    );
    // Another session starts without the grant.
    let other = ToolContext {
        session: Some(SessionKey::parse("cli:other").unwrap()),
        ..fx.ctx()
    };
    assert!(tools.execute(&fx.shell("echo hi"), &other).await.is_error);
}

#[tokio::test]
async fn a_denial_or_no_answer_in_time_stops_the_call() {
    let fx = Fixture::new();
    let marker = fx.ws().join("ran");
    let command = format!("touch {}", marker.display());
    let approver = Scripted::new(vec![ApprovalAnswer::Deny]);
    let tools = fx.registry(&[], Some(approver.clone()));
    let denied = tools.execute(&fx.shell(&command), &fx.ctx()).await;
    let id = approver.asked()[0].id.clone();
    assert_eq!(
        denied,
        ToolResult::error(
            "call_1",
            format!(
                "Error: tester denied shell (approval {id}). Do not retry it; ask the user what \
                 to do instead."
            )
        )
    );
    // The script has no answer left: the approver never replies.
    let silent = tools.execute(&fx.shell(&command), &fx.ctx()).await;
    let id = approver.asked()[1].id.clone();
    assert_eq!(
        silent,
        ToolResult::error(
            "call_1",
            format!(
                "Error: approval {id} for shell (exec:sh) got no answer within 1 s, which counts \
                 as denied."
            )
        )
    );
    assert!(!marker.exists());
    let results: Vec<_> = fx
        .approvals()
        .into_iter()
        .map(|(status, approval, _)| (status, approval.map(|a| (a.result, a.by))))
        .collect();
    assert_eq!(
        results,
        [
            (
                CallStatus::Denied,
                Some((ApprovalResult::Denied, Some("tester".into())))
            ),
            (CallStatus::Denied, Some((ApprovalResult::TimedOut, None))),
        ]
    );
}

#[tokio::test]
async fn output_is_redacted_and_fenced_and_the_log_keeps_no_secret() {
    let fx = Fixture::new();
    let tools = fx.registry(&["exec:sh", "net"], None);
    let command = "echo key=sk-test-123456789";
    assert_eq!(
        tools.execute(&fx.exec(command), &fx.ctx()).await,
        ToolResult::ok(
            "call_1",
            wrap_untrusted(
                "exec echo key=[redacted: OPENAI_API_KEY]",
                "[stdout]\nkey=[redacted: OPENAI_API_KEY]\n"
            )
        )
    );
    let record = &fx.audit.list(&AuditQuery::default()).unwrap()[0];
    assert_eq!(
        record.summary,
        format!(
            "run `echo key=[redacted: OPENAI_API_KEY]` (sh -c, no sandbox) in {}",
            fx.ws().display()
        )
    );
    let raw = std::fs::read(fx.dir.path().join("state/audit.sqlite")).unwrap();
    assert!(!String::from_utf8_lossy(&raw).contains("sk-test-123456789"));
}

#[tokio::test]
async fn safe_calls_run_without_grants_and_bad_ones_are_recorded_as_denied() {
    let fx = Fixture::new();
    let approver = Scripted::new(vec![]);
    let tools = fx.registry(&[], Some(approver.clone()));
    let ctx = fx.ctx();
    let write = ToolCall {
        id: "call_1".into(),
        name: "write_file".into(),
        input: json!({"path": "memory/MEMORY.md", "content": "- likes tea\n"}),
    };
    assert!(!tools.execute(&write, &ctx).await.is_error);
    let escape = ToolCall {
        id: "call_2".into(),
        name: "read_file".into(),
        input: json!({"path": "/etc/passwd"}),
    };
    assert!(tools.execute(&escape, &ctx).await.is_error);
    assert_eq!(approver.asked(), vec![]);
    let mut records = fx.audit.list(&AuditQuery::default()).unwrap();
    records.reverse();
    let summary: Vec<_> = records
        .iter()
        .map(|r| (r.tool.as_str(), r.status, r.risk, r.requested.clone()))
        .collect();
    let memory = fx.ws().join("memory/MEMORY.md");
    assert_eq!(
        summary,
        [
            (
                "write_file",
                CallStatus::Ok,
                Risk::Safe,
                vec![
                    format!("fs.write:{}", memory.display()),
                    "memory.write".to_owned()
                ]
            ),
            ("read_file", CallStatus::Denied, Risk::Safe, vec![]),
        ]
    );
    let ids = (&records[0], &records[1]);
    assert_eq!(
        ids.0.run_id, ids.1.run_id,
        "both calls belong to the same run"
    );
    assert_ne!(ids.0.step_id, ids.1.step_id, "each call is its own step");
}

#[tokio::test]
async fn a_skills_grants_apply_in_a_run_once_it_read_the_skill_and_approvals_name_it() {
    let fx = Fixture::new();
    for skill in ["shell-helper", "other"] {
        std::fs::create_dir_all(fx.ws().join("skills").join(skill)).unwrap();
        std::fs::write(fx.ws().join("skills").join(skill).join("SKILL.md"), "x").unwrap();
    }
    let skill_grants = [("shell-helper", "exec:sh"), ("other", "net:example.com")]
        .map(|(skill, grant)| nanocrab_tools::SkillGrants {
            skill: skill.into(),
            file: fx.ws().join("skills").join(skill).join("SKILL.md"),
            grants: grants_from_config(
                &[grant.into()],
                &format!("skills.entries.{skill}.grants"),
                None,
            )
            .unwrap(),
        })
        .to_vec();
    let approver = Scripted::new(vec![ApprovalAnswer::Deny; 3]);
    let mut config = ToolsConfig::default();
    config.approvals.timeout = 1;
    let mut tools = builtin_registry(
        &config,
        &fx.ws(),
        None,
        None,
        ToolPolicy {
            approver: Some(approver.clone()),
            skill_grants,
            ..ToolPolicy::default()
        },
        |_| Vec::new(),
    )
    .unwrap();
    tools.register(Arc::new(Shell));
    let read = |skill: &str| ToolCall {
        id: "call_1".into(),
        name: "read_file".into(),
        input: json!({"path": format!("skills/{skill}/SKILL.md")}),
    };
    let run = fx.ctx();

    assert!(tools.execute(&fx.shell("echo hi"), &run).await.is_error);
    assert!(!tools.execute(&read("other"), &run).await.is_error);
    assert!(tools.execute(&fx.shell("echo hi"), &run).await.is_error);
    assert!(!tools.execute(&read("shell-helper"), &run).await.is_error);
    assert_eq!(
        tools.execute(&fx.shell("echo hi"), &run).await,
        fx.ran("echo hi", "hi\n")
    );
    // Another run (the next turn) has read no skill.
    assert!(
        tools
            .execute(&fx.shell("echo hi"), &fx.ctx())
            .await
            .is_error
    );
    let asked: Vec<String> = approver.asked().into_iter().map(|r| r.summary).collect();
    assert_eq!(
        asked,
        [
            "run `echo hi`",
            "run `echo hi` (following the skill other)",
            "run `echo hi`"
        ]
    );
}
