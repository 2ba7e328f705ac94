//! The user's hooks in a real agent loop: real `sh` and `python3` scripts in a temp dir, the
//! mock LLM recording every request, a tool that needs approval, an approver that records what
//! it was asked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nanocrab_config::{Config, HooksConfig, ProviderConfig, SandboxConfig, SandboxMode};
use nanocrab_core::{Agent, AgentSettings, ContextBuilder};
use nanocrab_hooks::{CommandHooks, HookSetup};
use nanocrab_policy::{
    ApprovalAnswer, ApprovalError, ApprovalReply, ApprovalRequest, Approver, AuditLog, Capability,
    HookDecision, Invocation, Redactor, Risk,
};
use nanocrab_provider::{ModelChain, RetryPolicy};
use nanocrab_schema::{SessionKey, ToolDef};
use nanocrab_sessions::SessionStore;
use nanocrab_testkit::{MockLlm, Reply};
use nanocrab_tools::{
    PreparedCall, Tool, ToolContext, ToolError, ToolOutput, ToolPolicy, ToolRegistry,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// A stand-in for `exec`: guarded, needing `exec:sh`, which nothing grants, so that it runs
/// only when approved (by a human or a hook).
struct FakeExec {
    ran: AtomicUsize,
}

impl Tool for FakeExec {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "exec".into(),
            description: "Run a command.".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        }
    }

    fn prepare<'a>(
        &'a self,
        input: Value,
        _: &'a ToolContext,
    ) -> Result<PreparedCall<'a>, ToolError> {
        let command = input["command"].as_str().unwrap_or_default().to_owned();
        let invocation = Invocation::new(
            Risk::Guarded,
            format!("run `{command}`"),
            vec![Capability::Exec("sh".into())],
        );
        Ok(PreparedCall::new(invocation, async move {
            self.ran.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutput::trusted(format!("ran {command}")))
        }))
    }
}

/// Approves everything once, and keeps the questions.
#[derive(Default)]
struct Recorder {
    asked: Mutex<Vec<ApprovalRequest>>,
}

#[async_trait]
impl Approver for Recorder {
    async fn ask(&self, request: &ApprovalRequest) -> Result<ApprovalReply, ApprovalError> {
        self.asked.lock().unwrap().push(request.clone());
        Ok(ApprovalReply {
            answer: ApprovalAnswer::Once,
            by: "tester".into(),
        })
    }
}

struct Harness {
    dir: tempfile::TempDir,
    mock: MockLlm,
    agent: Agent,
    audit: Arc<AuditLog>,
    exec: Arc<FakeExec>,
    approver: Arc<Recorder>,
    key: SessionKey,
}

impl Harness {
    /// An agent whose `hooks` are this (Claude Code's shape; `$DIR` is the temp dir, where
    /// `scripts` are written, by name).
    async fn new(hooks: Value, scripts: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in scripts {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let hooks = hooks
            .to_string()
            .replace("$DIR", &dir.path().display().to_string());
        let hooks: HooksConfig = serde_json::from_str(&hooks).unwrap();
        let mock = MockLlm::start().await;
        let mut config = Config::default();
        config.providers.insert(
            "anthropic".to_owned(),
            ProviderConfig {
                api_key: Some("sk-test-hooks".to_owned()),
                api_base: Some(mock.anthropic_base()),
                ..ProviderConfig::default()
            },
        );
        let model = nanocrab_provider::resolve_model(
            "anthropic/mock-model",
            &config,
            &|_| None,
            RetryPolicy {
                max_retries: 0,
                ..RetryPolicy::default()
            },
            &nanocrab_provider::LocalModels::new(
                nanocrab_models::ModelStore::new(dir.path().join("models")),
                nanocrab_models::Catalogue::builtin(),
                None,
            ),
        )
        .unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let audit = Arc::new(
            AuditLog::open(&dir.path().join("audit.sqlite"), Redactor::default()).unwrap(),
        );
        let approver = Arc::new(Recorder::default());
        let exec = Arc::new(FakeExec {
            ran: AtomicUsize::new(0),
        });
        let mut tools = ToolRegistry::new().with_policy(ToolPolicy {
            approver: Some(approver.clone()),
            audit: Some(audit.clone()),
            ..ToolPolicy::default()
        });
        tools.register(exec.clone());
        let hooks = CommandHooks::new(
            &hooks,
            HookSetup {
                // The test binary is no sandbox launcher; the sandbox itself is tested with
                // the real binary (tests/e2e of nanocrab).
                sandbox: &SandboxConfig {
                    mode: SandboxMode::Off,
                    ..SandboxConfig::default()
                },
                launcher: None,
                base_env: std::env::vars_os().collect(),
                audit: Some(audit.clone()),
                redactor: Redactor::default(),
            },
        )
        .unwrap();
        let agent = Agent::new(
            ModelChain::new(model, Vec::new()),
            tools,
            SessionStore::new(dir.path().join("sessions")),
            ContextBuilder::new(&workspace),
            AgentSettings {
                max_tokens: 1024,
                temperature: None,
                max_tool_iterations: 6,
                context_window_tokens: 65_536,
            },
        )
        .with_hooks(Arc::new(hooks));
        Self {
            dir,
            mock,
            agent,
            audit,
            exec,
            approver,
            key: SessionKey::parse("cli:test").unwrap(),
        }
    }

    async fn turn(&self, text: &str) -> String {
        self.agent
            .run_turn(&self.key, text, &mut |_| {})
            .await
            .unwrap()
            .text
    }

    /// The messages of every request the model got, without the prompt caching marks
    /// (Anthropic's `cache_control`, on the last block).
    fn messages(&self) -> Vec<Value> {
        fn unmarked(value: &mut Value) {
            match value {
                Value::Object(fields) => {
                    fields.remove("cache_control");
                    fields.values_mut().for_each(unmarked);
                }
                Value::Array(items) => items.iter_mut().for_each(unmarked),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
            }
        }
        self.mock
            .requests()
            .into_iter()
            .map(|request| {
                let mut messages = request.body["messages"].clone();
                unmarked(&mut messages);
                messages
            })
            .collect()
    }

    /// (event, decision, reason) of every hook run, oldest first.
    fn hook_runs(&self) -> Vec<(String, HookDecision, Option<String>)> {
        let mut runs: Vec<_> = self
            .audit
            .hook_runs(100)
            .unwrap()
            .into_iter()
            .map(|r| (r.event, r.decision, r.reason))
            .collect();
        runs.reverse();
        runs
    }
}

/// The tool call `call_1` of `exec ls`, then the answer `Done.`.
fn script_exec(mock: &MockLlm) {
    mock.push(Reply::tool_call("call_1", "exec", json!({"command": "ls"})));
    mock.push(Reply::text("Done."));
}

/// The messages of the second request: the question, the call, and its result as given.
fn after_call(result: Value) -> Value {
    json!([
        {"role": "user", "content": [{"type": "text", "text": "list files"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "exec", "input": {"command": "ls"}}
        ]},
        {"role": "user", "content": [result]},
    ])
}

fn pre_tool_use(command: &str) -> Value {
    json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": command, "timeout": 5}]}]})
}

#[tokio::test]
async fn an_allowing_hook_lets_a_call_run_that_would_need_approval() {
    let h = Harness::new(
        pre_tool_use(r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'"#),
        &[],
    )
    .await;
    script_exec(&h.mock);
    assert_eq!(h.turn("list files").await, "Done.");
    assert_eq!(h.exec.ran.load(Ordering::SeqCst), 1);
    assert!(h.approver.asked.lock().unwrap().is_empty());
    assert_eq!(
        h.messages()[1],
        after_call(json!({"type": "tool_result", "tool_use_id": "call_1", "content": "ran ls"}))
    );
    assert_eq!(
        h.hook_runs(),
        [("PreToolUse".to_owned(), HookDecision::Allow, None)]
    );
    let calls = h.audit.list(&Default::default()).unwrap();
    assert_eq!(
        calls[0].approval.as_ref().and_then(|a| a.by.clone()),
        Some(format!(
            "hook {}",
            r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'"#
        ))
    );
}

#[tokio::test]
async fn a_denying_hook_refuses_the_call_and_the_model_reads_why() {
    let h = Harness::new(
        pre_tool_use("sh $DIR/deny.sh"),
        &[(
            "deny.sh",
            "#!/bin/sh\ncat > /dev/null\necho 'ls is not for you' >&2\nexit 2\n",
        )],
    )
    .await;
    script_exec(&h.mock);
    assert_eq!(h.turn("list files").await, "Done.");
    assert_eq!(h.exec.ran.load(Ordering::SeqCst), 0);
    let dir = h.dir.path().display().to_string();
    assert_eq!(
        h.messages()[1],
        after_call(json!({
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": format!("Error: the PreToolUse hook `sh {dir}/deny.sh` denied exec: ls is not for you"),
            "is_error": true,
        }))
    );
    assert_eq!(
        h.hook_runs(),
        [(
            "PreToolUse".to_owned(),
            HookDecision::Deny,
            Some("ls is not for you".to_owned())
        )]
    );
}

#[tokio::test]
async fn an_asking_hook_puts_the_call_to_a_human_with_its_reason() {
    let h = Harness::new(
        pre_tool_use(r#"echo '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "ls reads the disk"}}'"#),
        &[],
    )
    .await;
    script_exec(&h.mock);
    assert_eq!(h.turn("list files").await, "Done.");
    assert_eq!(h.exec.ran.load(Ordering::SeqCst), 1);
    let asked = h.approver.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0].summary,
        format!(
            "run `ls` (the hook `{}` asks: ls reads the disk)",
            r#"echo '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "ls reads the disk"}}'"#
        )
    );
}

#[tokio::test]
async fn a_prompt_hook_adds_context_the_model_sees() {
    let h = Harness::new(
        json!({
            "SessionStart": [{"matcher": "startup", "hooks": [{"command": "echo 'Branch: main'"}]}],
            "UserPromptSubmit": [{"hooks": [{"command": "python3 $DIR/context.py"}]}],
        }),
        &[(
            "context.py",
            "import json, sys\nhook = json.load(sys.stdin)\nprint(json.dumps({'hookSpecificOutput': {'hookEventName': hook['hook_event_name'], 'additionalContext': 'The user asked: ' + hook['prompt']}}))\n",
        )],
    )
    .await;
    h.mock.push(Reply::text("Hi."));
    h.mock.push(Reply::text("Again."));
    assert_eq!(h.turn("hello").await, "Hi.");
    assert_eq!(h.turn("more").await, "Again.");
    let messages = h.messages();
    assert_eq!(
        messages[0],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "hello"},
            {"type": "text", "text": "\n\n[Context from the user's hooks]\nBranch: main\n\nThe user asked: hello"},
        ]}])
    );
    // The session started once: the second turn has the prompt hook's context only.
    assert_eq!(
        messages[1][2],
        json!({"role": "user", "content": [
            {"type": "text", "text": "more"},
            {"type": "text", "text": "\n\n[Context from the user's hooks]\nThe user asked: more"},
        ]})
    );
}

#[tokio::test]
async fn a_blocking_prompt_hook_stops_the_message_before_the_model() {
    let h = Harness::new(
        json!({"UserPromptSubmit": [{"hooks": [{"command": r#"echo '{"decision": "block", "reason": "no passwords in chat"}'"#}]}]}),
        &[],
    )
    .await;
    assert_eq!(
        h.turn("my password is hunter2").await,
        format!(
            "Your message was blocked by the UserPromptSubmit hook `{}`: no passwords in chat",
            r#"echo '{"decision": "block", "reason": "no passwords in chat"}'"#
        )
    );
    assert!(h.mock.requests().is_empty());
    assert!(h.agent.store().load(&h.key).unwrap().entries.is_empty());
}

#[tokio::test]
async fn a_hook_that_times_out_is_killed_and_denies() {
    let h = Harness::new(
        json!({"PreToolUse": [{"hooks": [{"command": "sleep 30", "timeout": 1}]}]}),
        &[],
    )
    .await;
    script_exec(&h.mock);
    assert_eq!(h.turn("list files").await, "Done.");
    assert_eq!(h.exec.ran.load(Ordering::SeqCst), 0);
    let reason = "timed out after 1 s (its `timeout`) and was killed";
    assert_eq!(
        h.messages()[1],
        after_call(json!({
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": format!("Error: the PreToolUse hook `sleep 30` denied exec: the hook failed ({reason}), which denies the call"),
            "is_error": true,
        }))
    );
    assert_eq!(
        h.hook_runs(),
        [(
            "PreToolUse".to_owned(),
            HookDecision::Error,
            Some(reason.to_owned())
        )]
    );
    assert!(h.audit.hook_runs(1).unwrap()[0].timed_out);
}

#[tokio::test]
async fn a_hook_that_crashes_or_prints_broken_json_denies_and_is_reported() {
    let h = Harness::new(
        json!({"PreToolUse": [{"hooks": [
            {"command": "echo boom >&2; exit 1"},
            {"command": "echo '{\"hookSpecificOutput\": '"},
        ]}]}),
        &[],
    )
    .await;
    script_exec(&h.mock);
    assert_eq!(h.turn("list files").await, "Done.");
    assert_eq!(h.exec.ran.load(Ordering::SeqCst), 0);
    let broken =
        "its output is not the JSON of a hook: EOF while parsing a value at line 1 column 22";
    assert_eq!(
        h.messages()[1],
        after_call(json!({
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": format!("Error: the PreToolUse hook `echo boom >&2; exit 1` denied exec: the hook failed (exit code 1: boom), which denies the call; the hook failed ({broken}), which denies the call"),
            "is_error": true,
        }))
    );
    assert_eq!(
        h.hook_runs()
            .into_iter()
            .map(|(_, decision, reason)| (decision, reason))
            .collect::<Vec<_>>(),
        [
            (HookDecision::Error, Some("exit code 1: boom".to_owned())),
            (HookDecision::Error, Some(broken.to_owned())),
        ]
    );
}

#[tokio::test]
async fn a_post_tool_hook_gives_the_model_feedback_on_the_result() {
    let h = Harness::new(
        json!({
            "PreToolUse": [{"matcher": "exec", "hooks": [{"command": "echo '{\"decision\": \"approve\"}'"}]}],
            "PostToolUse": [{"matcher": "Bash|Write", "hooks": [{"command": "echo '{\"decision\": \"block\", \"reason\": \"run the tests next\", \"hookSpecificOutput\": {\"additionalContext\": \"3 files\"}}'"}]}],
        }),
        &[],
    )
    .await;
    script_exec(&h.mock);
    assert_eq!(h.turn("list files").await, "Done.");
    assert_eq!(
        h.messages()[1],
        after_call(json!({
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": "ran ls\n\n[PostToolUse hook] 3 files\n\n[The PostToolUse hook `echo '{\"decision\": \"block\", \"reason\": \"run the tests next\", \"hookSpecificOutput\": {\"additionalContext\": \"3 files\"}}'` says] run the tests next",
        }))
    );
}

#[tokio::test]
async fn a_stop_hook_has_the_agent_continue_a_bounded_number_of_times() {
    let h = Harness::new(
        json!({"Stop": [{"hooks": [{"command": "python3 $DIR/stop.py"}]}]}),
        &[(
            "stop.py",
            "import json, sys\nhook = json.load(sys.stdin)\nprint(json.dumps({'decision': 'block', 'reason': 'active=%s' % hook['stop_hook_active']}))\n",
        )],
    )
    .await;
    for n in 1..=4 {
        h.mock.push(Reply::text(format!("Answer {n}.")));
    }
    assert_eq!(h.turn("go").await, "Answer 4.");
    let dir = h.dir.path().display().to_string();
    let nudge = |active: &str| json!({"role": "user", "content": [{"type": "text", "text": format!("[The Stop hook `python3 {dir}/stop.py` asks you to continue] active={active}")}]});
    assert_eq!(
        h.messages()[3],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Answer 1."}]},
            nudge("False"),
            {"role": "assistant", "content": [{"type": "text", "text": "Answer 2."}]},
            nudge("True"),
            {"role": "assistant", "content": [{"type": "text", "text": "Answer 3."}]},
            nudge("True"),
        ])
    );
}

#[tokio::test]
async fn the_hook_reads_claude_codes_input_on_stdin() {
    let h = Harness::new(
        json!({"PreToolUse": [{"hooks": [{"command": "cat > $DIR/input.json"}]}]}),
        &[],
    )
    .await;
    script_exec(&h.mock);
    h.turn("list files").await;
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(h.dir.path().join("input.json")).unwrap())
            .unwrap();
    let dir = h.dir.path().display().to_string();
    assert_eq!(
        input,
        json!({
            "session_id": "cli:test",
            "transcript_path": format!("{dir}/sessions/cli:test.jsonl"),
            "cwd": format!("{dir}/workspace"),
            "hook_event_name": "PreToolUse",
            "agent_id": "main",
            "tool_name": "exec",
            "tool_input": {"command": "ls"},
            "tool_use_id": "call_1",
        })
    );
}
