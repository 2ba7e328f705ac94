//! docs/skills.md against the binary: its example skill, put where the docs say, reaches the
//! prompt exactly as the docs show it, so the page cannot drift from the code.

use nanocrab_testkit::Reply;
use serde_json::json;

use crate::harness::{Home, Wire, system_prompt, tool_results};

/// The text of the fenced block of `doc` opened by `fence` (e.g. "```markdown") whose first
/// line starts with `starting`, with its last newline.
fn block<'a>(doc: &'a str, fence: &str, starting: &str) -> &'a str {
    let opening = format!("{fence}\n{starting}");
    let at = doc
        .find(&opening)
        .unwrap_or_else(|| panic!("no block {opening:?} in docs/skills.md"))
        + fence.len()
        + 1;
    let end = doc[at..].find("\n```\n").unwrap() + at;
    &doc[at..=end]
}

#[test]
fn the_documented_skill_reaches_the_prompt_as_documented() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/skills.md"),
    )
    .unwrap();
    let skill = block(&doc, "```markdown", "---\n");
    let prompt_part = block(&doc, "```", "## Skills\n");
    let home = Home::new(Wire::Anthropic);
    let skills = home.workspace().join("skills");
    std::fs::create_dir_all(skills.join("meeting-notes")).unwrap();
    std::fs::write(skills.join("meeting-notes/SKILL.md"), skill).unwrap();
    // The defaults the docs give: the folder's name, an empty description; no SKILL.md, no
    // skill.
    std::fs::create_dir_all(skills.join("plain")).unwrap();
    std::fs::write(skills.join("plain/SKILL.md"), "Just do it.\n").unwrap();
    std::fs::create_dir_all(skills.join("unfinished")).unwrap();
    home.mock.push(Reply::text("noted"));

    home.ask("note down the meeting");

    let system = system_prompt(&home.requests()[0].body);
    let listed = format!("{prompt_part}- plain:  (skills/plain/SKILL.md)");
    assert!(system.contains(&listed), "{listed}\nnot in:\n{system}");
    assert!(!system.contains("unfinished"), "{system}");
    assert!(
        !system.contains("Ask for what is missing"),
        "only the name and description reach the prompt"
    );
}

/// A `SKILL.md` as OpenClaw writes them: requirements under `metadata.openclaw`, in JSON.
const OPENCLAW_SKILL: &str = r#"---
name: standup
description: "Write the daily standup note from what the user says: use when asked for a standup"
metadata: {"openclaw": {"emoji": "📋", "requires": {"bins": ["sh"]}, "os": ["linux", "darwin"]}}
---
# Standup

Write `standup.md` with write_file: a line `# Standup`, then the user's items as a list.
"#;

#[test]
fn a_skill_copied_into_the_workspace_and_one_installed_are_read_by_their_index_paths_and_followed()
{
    let home = Home::new(Wire::Anthropic);
    let skills = home.workspace().join("skills");
    std::fs::create_dir_all(skills.join("standup")).unwrap();
    std::fs::write(skills.join("standup/SKILL.md"), OPENCLAW_SKILL).unwrap();
    // nanobot's shape, installed for every agent; and one whose program is missing.
    let installed = home.home().join("skills");
    std::fs::create_dir_all(installed.join("tone")).unwrap();
    std::fs::write(
        installed.join("tone/SKILL.md"),
        "---\nname: tone\ndescription: How to word replies\nmetadata: {\"nanobot\": {\"requires\": {\"bins\": [\"sh\"]}}}\n---\nAnswer in one short sentence.\n",
    )
    .unwrap();
    std::fs::create_dir_all(installed.join("needs-tool")).unwrap();
    std::fs::write(
        installed.join("needs-tool/SKILL.md"),
        "---\nname: needs-tool\ndescription: never offered\nrequires:\n  bins: [no-such-program-here]\n---\n",
    )
    .unwrap();
    home.mock.push(Reply::tool_calls(vec![
        (
            "c1".into(),
            "read_file".into(),
            json!({"path": "skills/standup/SKILL.md"}),
        ),
        (
            "c2".into(),
            "read_file".into(),
            // NANOCRAB_HOME is `~/home` here.
            json!({"path": "~/home/skills/tone/SKILL.md"}),
        ),
    ]));
    home.mock.push(Reply::tool_call(
        "c3",
        "write_file",
        json!({"path": "standup.md", "content": "# Standup\n- shipped skills\n"}),
    ));
    home.mock.push(Reply::text("Standup written."));
    let answer = home.ask("standup: shipped skills");

    assert_eq!(answer.trim(), "Standup written.");
    let requests = home.requests();
    let system = system_prompt(&requests[0].body);
    let index = &system[system.find("## Skills").unwrap()..];
    insta::assert_snapshot!(index, @r"
    ## Skills
    Read a skill's SKILL.md with read_file before using it.
    - standup: Write the daily standup note from what the user says: use when asked for a standup (skills/standup/SKILL.md)
    - tone: How to word replies (~/home/skills/tone/SKILL.md)
    ");
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].1.contains("Write `standup.md` with write_file"),
        "{results:?}"
    );
    assert!(
        results[1].1.contains("Answer in one short sentence."),
        "{results:?}"
    );
    assert!(
        results.iter().all(|(_, _, is_error)| !is_error),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("standup.md")).unwrap(),
        "# Standup\n- shipped skills\n"
    );
}

/// A zip archive of `entries`: (path, Some(symlink target) or None, contents).
fn zip_archive(entries: &[(&str, Option<&str>, &str)]) -> Vec<u8> {
    use std::io::Write as _;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    for (name, link, data) in entries {
        match link {
            Some(target) => zip.add_symlink(*name, *target, options).unwrap(),
            None => {
                zip.start_file(*name, options).unwrap();
                zip.write_all(data.as_bytes()).unwrap();
            }
        }
    }
    zip.finish().unwrap().into_inner()
}

#[test]
fn skills_are_installed_from_a_url_listed_checked_shown_and_removed() {
    let home = Home::new(Wire::Anthropic);
    let served = |path: &str, bytes: Vec<u8>| nanocrab_testkit::hub::HubFile {
        repo: "acme/skills".into(),
        revision: "main".into(),
        path: path.into(),
        bytes,
    };
    let hub = nanocrab_testkit::hub::FakeHub::spawn(vec![
        served(
            "standup.zip",
            zip_archive(&[
                ("standup/SKILL.md", None, OPENCLAW_SKILL),
                ("standup/template.md", None, "# Standup\n"),
            ]),
        ),
        served(
            "leaky.zip",
            zip_archive(&[
                ("SKILL.md", None, "---\nname: leaky\n---\n"),
                ("key", Some("../../.ssh/id_ed25519"), ""),
            ]),
        ),
        served(
            "needs-env.zip",
            zip_archive(&[(
                "needs-env/SKILL.md",
                None,
                "---\nname: needs-env\ndescription: Weather\nrequires:\n  env: [WEATHER_KEY]\n---\n",
            )]),
        ),
    ]);
    let url = |file: &str| format!("{}/acme/skills/resolve/main/{file}", hub.url());

    let run = home.run(
        home.nanocrab()
            .args(["skills", "install", &url("standup.zip")]),
    );
    assert!(run.success, "{run:?}");
    let installed = home.home().join("skills/standup");
    assert_eq!(
        run.stdout,
        format!(
            "Installed `standup` into {} (nothing in it was run).\nStatus: available\n",
            installed.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(installed.join("template.md")).unwrap(),
        "# Standup\n"
    );

    let run = home.run(
        home.nanocrab()
            .args(["skills", "install", &url("leaky.zip")]),
    );
    assert!(!run.success);
    assert_eq!(
        run.stderr,
        format!(
            "error: cannot install a skill from {}: refused: the symlink `key` points to `../../.ssh/id_ed25519`, outside the skill's folder\n",
            url("leaky.zip")
        )
    );
    assert!(!home.home().join("skills/leaky").exists());

    let run = home.run(
        home.nanocrab()
            .args(["skills", "install", &url("needs-env.zip")]),
    );
    assert!(run.success, "{run:?}");

    let run = home.run(home.nanocrab().args(["skills", "list"]));
    let listed = run
        .stdout
        .lines()
        .filter(|line| !line.contains("bundled"))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(listed, @r"
    Offered to the agent:
      standup        installed  Write the daily standup note from what the user says: use when asked for a standup
    Not offered:
      needs-env      installed  unavailable: environment variable WEATHER_KEY is not set
    ");
    let run = home.run(home.nanocrab().args(["skills", "list", "--json"]));
    let list: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let needs_env = list
        .as_array()
        .unwrap()
        .iter()
        .find(|skill| skill["name"] == "needs-env")
        .unwrap();
    pretty_assertions::assert_eq!(
        needs_env,
        &json!({
            "name": "needs-env",
            "description": "Weather",
            "source": "installed",
            "path": home.home().join("skills/needs-env/SKILL.md"),
            "status": "unavailable",
            "reasons": ["environment variable WEATHER_KEY is not set"],
            "always": false,
            "requires": {"bins": [], "anyBins": [], "env": ["WEATHER_KEY"], "config": [], "os": []},
            "capabilities": [],
        })
    );

    // An installed skill that cannot be offered fails the check; bundled ones waiting for
    // their program do not.
    let run = home.run(home.nanocrab().args(["skills", "check"]));
    assert!(!run.success);
    assert_eq!(
        (run.stdout.as_str(), run.stderr.as_str()),
        (
            "needs-env (~/home/skills/needs-env/SKILL.md): unavailable: environment variable WEATHER_KEY is not set\n",
            "error: 1 problem with skills; 1 skill offered\n"
        )
    );

    let run = home.run(home.nanocrab().args(["skills", "show", "standup"]));
    assert!(run.stdout.contains("status: available\n"), "{run:?}");
    assert!(
        run.stdout.contains("Write `standup.md` with write_file"),
        "{run:?}"
    );

    let run = home.run(home.nanocrab().args(["skills", "remove", "needs-env"]));
    assert!(run.success, "{run:?}");
    let run = home.run(home.nanocrab().args(["skills", "check"]));
    assert!(run.success, "{run:?}");
    // Only what was installed can be removed this way.
    let run = home.run(home.nanocrab().args(["skills", "remove", "github"]));
    assert!(!run.success);
    assert!(home.home().join("bundled-skills/github/SKILL.md").is_file());
}

#[test]
fn a_skills_grants_apply_to_the_calls_after_it_was_read() {
    let home = Home::new(Wire::Anthropic);
    let outside = home.user_home().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("data.txt"), "the data").unwrap();
    let skills = home.workspace().join("skills");
    std::fs::create_dir_all(skills.join("reader")).unwrap();
    std::fs::write(
        skills.join("reader/SKILL.md"),
        "---\nname: reader\ndescription: Read the data outside\ncapabilities: [\"fs.read:~/outside\"]\n---\nRead ~/outside/data.txt.\n",
    )
    .unwrap();
    let mut config = home.base_config();
    config["tools"] = json!({"restrictToWorkspace": false});
    config["skills"] = json!({"entries": {"reader": {"grants": ["fs.read:~/outside"]}}});
    home.write_config(config);
    let read = |id: &str, path: &str| Reply::tool_call(id, "read_file", json!({"path": path}));
    home.mock.push(read("c1", "~/outside/data.txt"));
    home.mock.push(read("c2", "skills/reader/SKILL.md"));
    home.mock.push(read("c3", "~/outside/data.txt"));
    home.mock.push(Reply::text("done"));

    home.ask("read the data");

    let requests = home.requests();
    let results: Vec<(String, bool)> = requests[1..]
        .iter()
        .map(|request| {
            let (_, text, is_error) = tool_results(&request.body).pop().unwrap();
            (text, is_error)
        })
        .collect();
    // Before the skill was read the call needs an approval nobody can give; after, the
    // skill's grant covers it.
    assert!(results[0].1, "{results:?}");
    assert!(results[0].0.contains("needs approval"), "{results:?}");
    assert!(!results[1].1, "{results:?}");
    assert!(!results[2].1, "{results:?}");
    assert!(results[2].0.contains("the data"), "{results:?}");
    // The skill's instructions come as they are, its other files and the rest as data.
    assert_eq!(
        results[1].0,
        "---\nname: reader\ndescription: Read the data outside\ncapabilities: [\"fs.read:~/outside\"]\n---\nRead ~/outside/data.txt.\n"
    );
    assert!(results[2].0.starts_with("<untrusted-data"), "{results:?}");
    let run = home.run(home.nanocrab().args(["audit", "list", "--json"]));
    assert!(
        run.stdout.contains("skills.entries.reader.grants[0]"),
        "{}",
        run.stdout
    );
}
