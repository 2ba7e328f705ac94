//! docs/skills.md against the binary: its example skill, put where the docs say, reaches the
//! prompt exactly as the docs show it, so the page cannot drift from the code.

use nanocrab_testkit::Reply;

use crate::harness::{Home, Wire, system_prompt};

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
