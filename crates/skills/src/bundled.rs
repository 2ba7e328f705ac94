//! The skills shipped with nanocrab. They are written out to a folder of their own so that the
//! agent reads them with `read_file` like any other skill.

use std::path::Path;

/// `(folder, SKILL.md)` of each bundled skill.
pub const BUNDLED: [(&str, &str); 3] = [
    (
        "daily-notes",
        include_str!("../bundled/daily-notes/SKILL.md"),
    ),
    ("github", include_str!("../bundled/github/SKILL.md")),
    (
        "summarize-url",
        include_str!("../bundled/summarize-url/SKILL.md"),
    ),
];

/// Writes the bundled skills into `dir` where they differ from what is there (another version
/// of nanocrab wrote them, or someone edited them), each through a temporary file and a rename
/// so that a reader never sees half a file.
pub fn write_bundled(dir: &Path) -> std::io::Result<()> {
    for (folder, text) in BUNDLED {
        let folder = dir.join(folder);
        let file = folder.join("SKILL.md");
        if std::fs::read_to_string(&file).is_ok_and(|current| current == text) {
            continue;
        }
        std::fs::create_dir_all(&folder)?;
        let mut temporary = tempfile::NamedTempFile::new_in(&folder)?;
        std::io::Write::write_all(&mut temporary, text.as_bytes())?;
        temporary.persist(&file).map_err(|err| err.error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Host, SkillRoots, SkillSource, Status};
    use pretty_assertions::assert_eq;

    #[test]
    fn bundled_skills_are_written_once_and_parse() {
        let dir = tempfile::tempdir().unwrap();
        write_bundled(dir.path()).unwrap();
        std::fs::write(dir.path().join("github/SKILL.md"), "edited").unwrap();
        write_bundled(dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("github/SKILL.md")).unwrap(),
            BUNDLED[1].1
        );
        let roots = SkillRoots {
            folders: vec![(SkillSource::Bundled, dir.path().to_path_buf())],
            ..SkillRoots::default()
        };
        let found: Vec<(String, String)> = roots
            .discover(&Host::default())
            .into_iter()
            .map(|skill| (skill.name, skill.status.to_string()))
            .collect();
        // A fresh install offers none: two wait to be switched on, one for `gh`.
        assert_eq!(
            found,
            vec![
                (
                    "daily-notes".to_owned(),
                    "unavailable: switched off; add skills.entries.daily-notes to the config to switch it on (`\"daily-notes\": {}` under skills.entries)".to_owned()
                ),
                (
                    "github".to_owned(),
                    "unavailable: `gh` is not on PATH".to_owned()
                ),
                (
                    "summarize-url".to_owned(),
                    "unavailable: `curl` is not on PATH; switched off; add skills.entries.summarize-url to the config to switch it on (`\"summarize-url\": {}` under skills.entries)".to_owned()
                ),
            ]
        );
        let switched_on = Host {
            config: ["skills.entries.daily-notes".to_owned()].into(),
            ..Host::default()
        };
        assert_eq!(roots.discover(&switched_on)[0].status, Status::Available);
    }
}
