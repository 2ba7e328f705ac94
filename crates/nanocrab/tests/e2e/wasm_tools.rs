//! A WASM tool dropped into the workspace, through the real binary: refused at load while
//! config does not grant what its manifest asks for, then offered to the model and run within
//! its grant. The guest is the complete example of docs/tools.md.

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, tool_names, tool_results};

/// The first fenced `language` block after `heading` in docs/tools.md.
fn docs_block(heading: &str, language: &str) -> String {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/tools.md"),
    )
    .unwrap();
    let after = &docs[docs.find(heading).unwrap()..];
    let start = after.find(&format!("```{language}\n")).unwrap() + language.len() + 4;
    after[start..start + after[start..].find("```").unwrap()].to_owned()
}

#[test]
fn a_wasm_tool_is_refused_until_granted_and_then_runs_within_its_grant() {
    let home = Home::new(Wire::OpenAi);
    let dir = home.workspace().join("tools/motd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("tool.json"),
        docs_block("### A complete example", "json"),
    )
    .unwrap();
    let wasm = wat::parse_str(docs_block("### A complete example", "wat")).unwrap();
    std::fs::write(dir.join("tool.wasm"), wasm).unwrap();
    std::fs::write(home.workspace().join("motd.txt"), "Hello").unwrap();

    home.mock.push(Reply::text("no tool for that"));
    let refused = home.agent("what is the message of the day?", &[]);
    assert!(refused.success, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "the WASM tool `motd` was refused: it asks for `fs.read:{}`, which config does not grant",
            home.workspace().canonicalize().unwrap().display()
        )),
        "{}",
        refused.stderr
    );
    assert!(!tool_names(&home.requests()[0].body).contains(&"motd".to_owned()));

    let mut config = home.base_config();
    config["tools"] = json!({"grants": ["fs.read"]});
    home.write_config(config);
    home.mock
        .push(Reply::tool_call("call_1", "motd", json!({})));
    home.mock.push(Reply::text("It says Hello."));
    assert_eq!(
        home.ask("what is the message of the day?"),
        "It says Hello.\n"
    );
    let requests = home.requests();
    assert!(tool_names(&requests[1].body).contains(&"motd".to_owned()));
    assert_eq!(
        tool_results(&requests[2].body),
        [(
            "call_1".to_owned(),
            "<untrusted-data source=\"WASM tool motd\">\n{\"content\":\"Hello\"}\n</untrusted-data>"
                .to_owned(),
            false
        )]
    );
    let audit = home.run(home.nanocrab().args(["audit", "list", "--json"]));
    let record: Value = serde_json::from_str(audit.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            &record["tool"],
            &record["status"],
            &record["requested"],
            &record["granted"]
        ),
        (
            &json!("motd"),
            &json!("ok"),
            &json!([format!(
                "fs.read:{}",
                home.workspace().canonicalize().unwrap().display()
            )]),
            &json!(["fs.read:* (config tools.grants[0])"])
        )
    );
}
