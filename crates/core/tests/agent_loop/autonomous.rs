//! Runs nobody asked for: who started them is kept in the transcript and the audit log, and
//! a run may be held to fewer iterations and tools than its agent has.

use nanocrab_core::UserInput;
use nanocrab_policy::{AuditLog, AuditQuery, Redactor, RunQuery, RunRecord, RunStatus};
use nanocrab_schema::RunSource;
use nanocrab_tools::ToolPolicy;
use pretty_assertions::assert_eq;

use super::*;

fn input(text: &str, source: RunSource) -> UserInput {
    UserInput {
        source,
        ..UserInput::from(text)
    }
}

#[tokio::test]
async fn an_autonomous_run_is_audited_whole_and_its_question_names_its_source() {
    let setup = setup(
        vec![
            call("c1", json!({"text": "hi"})),
            answer("done", StopReason::EndTurn),
            answer("hello back", StopReason::EndTurn),
        ],
        40,
    );
    let log = Arc::new(
        AuditLog::open(
            &setup.dir.path().join("state/audit.sqlite"),
            Redactor::default(),
        )
        .unwrap(),
    );
    let mut tools = ToolRegistry::new().with_policy(ToolPolicy {
        audit: Some(Arc::clone(&log)),
        ..ToolPolicy::default()
    });
    tools.register(setup.echo.clone());
    let agent = agent_for(
        &setup.dir,
        setup.dir.path().join("workspace"),
        ModelChain::new(
            resolved(&setup.provider, "m1", ModelProfile::GENERIC),
            Vec::new(),
        ),
        tools,
    );
    let cron = RunSource::Cron { job: "j1".into() };
    let key = SessionKey::parse("agent:main:cron:j1").unwrap();
    agent
        .run_turn(&key, input("check the feed", cron.clone()), &mut |_| {})
        .await
        .unwrap();
    // A chat's turn is not a run of its own in the log; its tool calls are.
    agent
        .run_turn(&setup.key, "hello", &mut |_| {})
        .await
        .unwrap();

    let runs = log.runs(&RunQuery::default()).unwrap();
    let [run] = runs.as_slice() else {
        panic!("one run expected: {runs:?}")
    };
    let calls = log.list(&AuditQuery::default()).unwrap();
    assert_eq!(
        *run,
        RunRecord {
            id: 1,
            source: cron.clone(),
            agent: "main".into(),
            session: key.to_string(),
            trace_id: calls[0].trace_id.clone(),
            run_id: calls[0].run_id.clone(),
            started_at_ms: run.started_at_ms,
            ended_at_ms: run.ended_at_ms,
            status: RunStatus::Ok,
            error: None,
            model_calls: 2,
            usage: Usage {
                input_tokens: 20,
                output_tokens: 10,
                ..Usage::default()
            },
            tool_calls: 1,
        }
    );
    assert_eq!(calls[0].source, cron);

    let question = |key: &SessionKey| agent.store().load(key).unwrap().entries[0].source.clone();
    assert_eq!(question(&key), Some(cron));
    assert_eq!(question(&setup.key), None);
}

#[tokio::test]
async fn a_run_can_be_held_to_fewer_iterations_and_tools_than_its_agent() {
    let setup = setup(
        vec![
            call("c1", json!({"text": "one"})),
            call("c2", json!({"text": "two"})),
            answer("never asked for", StopReason::EndTurn),
        ],
        40,
    );
    let held = UserInput {
        max_iterations: Some(2),
        ..input("work", RunSource::Heartbeat)
    };
    let outcome = setup
        .agent
        .run_turn(&setup.key, held, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(
        (outcome.text.as_str(), outcome.iterations),
        (
            "I stopped after 2 tool iterations, the limit of this run, without finishing.",
            2
        )
    );
    assert_eq!(setup.echo.calls.load(Ordering::SeqCst), 2);

    // Offered none of its tools, the run's request carries none and its prompt lists none.
    let without_tools = UserInput {
        tools: Some(Vec::new()),
        ..UserInput::from("just talk")
    };
    setup
        .agent
        .run_turn(&setup.key, without_tools, &mut |_| {})
        .await
        .unwrap();
    let requests = setup.provider.requests.lock().unwrap();
    let last = requests.last().unwrap();
    assert_eq!(last.tools.len(), 0);
    assert!(last.system.contains("- Tools: none"), "{}", last.system);
    assert_eq!(requests[0].tools.len(), 1);
}
