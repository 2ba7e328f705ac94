//! Installing a skill into `~/.nanocrab/skills/` from a folder or a `.zip`/`.tar.gz` archive.
//! Nothing of it is run: files are copied, entry by entry, after checking that none lands
//! outside the skill's folder and no symlink points out of it.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::front_matter;

/// More than this, unpacked, is refused: a skill is instructions and a few small files.
const MAX_UNPACKED_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is neither a folder nor a .zip, .tar.gz or .tgz archive")]
    UnknownKind(PathBuf),
    #[error("the archive is not readable: {0}")]
    Archive(String),
    #[error("refused: the entry `{0}` would be written outside the skill's folder")]
    EscapingEntry(String),
    #[error("refused: the symlink `{entry}` points to `{target}`, outside the skill's folder")]
    EscapingLink { entry: String, target: String },
    #[error("refused: the entry `{0}` is neither a file, a folder nor a symlink")]
    SpecialEntry(String),
    #[error("refused: the skill unpacks to more than {} MiB", MAX_UNPACKED_BYTES / 1024 / 1024)]
    TooLarge,
    #[error("no SKILL.md at the top of the skill (nor in its only folder)")]
    NoSkillFile,
    #[error("SKILL.md: {0}")]
    FrontMatter(#[from] front_matter::FrontMatterError),
    #[error(
        "`{0}` cannot be a skill's folder name: only letters, digits, `-`, `_` and `.`, not starting with `.`"
    )]
    BadName(String),
    #[error("a skill named `{name}` is already installed at {}: remove it first (nanocrab skills remove {name})", path.display())]
    AlreadyInstalled { name: String, path: PathBuf },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A skill that was installed: its name and where it now is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub name: String,
    pub folder: PathBuf,
}

/// Whether `name` may be a folder of `~/.nanocrab/skills/`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Installs the skill at `source` (a folder, or an archive file whose kind its name tells)
/// into `root`, as `root/<name>/`, `<name>` being its front matter's `name` or else its
/// folder's (or the archive's stem).
pub fn install(source: &Path, root: &Path) -> Result<Installed, InstallError> {
    std::fs::create_dir_all(root).map_err(io(root))?;
    // Unpacked beside its destination, so that the final move is one rename.
    let staging = tempfile::Builder::new()
        .prefix(".install-")
        .tempdir_in(root)
        .map_err(io(root))?;
    let unpacked = staging.path().join("unpacked");
    let file_name = source
        .file_name()
        .map(|name| name.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let stem = if source.is_dir() {
        copy_folder(source, &unpacked)?;
        file_name.clone()
    } else if let Some(stem) = file_name.strip_suffix(".zip") {
        unzip(source, &unpacked)?;
        stem.to_owned()
    } else if let Some(stem) = file_name
        .strip_suffix(".tar.gz")
        .or_else(|| file_name.strip_suffix(".tgz"))
    {
        untar(source, &unpacked)?;
        stem.to_owned()
    } else {
        return Err(InstallError::UnknownKind(source.to_path_buf()));
    };
    // An archive usually holds the skill's folder rather than its files.
    let (top, folder_name) = if unpacked.join("SKILL.md").is_file() {
        (unpacked.clone(), stem)
    } else {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&unpacked)
            .map_err(io(&unpacked))?
            .flatten()
            .map(|entry| entry.path())
            .collect();
        match (entries.pop(), entries.is_empty()) {
            (Some(only), true) if only.join("SKILL.md").is_file() => {
                let name = only
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (only, name)
            }
            _ => return Err(InstallError::NoSkillFile),
        }
    };
    let skill_file = top.join("SKILL.md");
    let text = std::fs::read_to_string(&skill_file).map_err(io(&skill_file))?;
    let meta = front_matter::parse(&text)?;
    let name = meta.name.unwrap_or(folder_name);
    if !valid_name(&name) {
        return Err(InstallError::BadName(name));
    }
    let destination = root.join(&name);
    if destination.exists() {
        return Err(InstallError::AlreadyInstalled {
            name,
            path: destination,
        });
    }
    std::fs::rename(&top, &destination).map_err(io(&destination))?;
    Ok(Installed {
        name,
        folder: destination,
    })
}

/// `entry` (a path inside an archive) made relative and checked: no root, no `..` above the
/// top.
fn inside(entry: &str) -> Result<PathBuf, InstallError> {
    let mut relative = PathBuf::new();
    for component in Path::new(entry).components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !relative.pop() {
                    return Err(InstallError::EscapingEntry(entry.to_owned()));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(InstallError::EscapingEntry(entry.to_owned()));
            }
        }
    }
    Ok(relative)
}

/// Checks that a symlink at `entry` with `target` points below its own folder: a relative
/// target with no `..` at all. Judging `..` by the text is not enough: the kernel follows each
/// link on the way (`x -> y/y/../..` with `y -> .` reads as inside and is not).
fn check_link(entry: &Path, target: &Path) -> Result<(), InstallError> {
    let below = target
        .components()
        .all(|component| matches!(component, Component::Normal(_) | Component::CurDir));
    if below {
        Ok(())
    } else {
        Err(InstallError::EscapingLink {
            entry: entry.display().to_string(),
            target: target.display().to_string(),
        })
    }
}

/// Writes the symlinks an unpacking collected, once every file and folder is written: no
/// entry is ever written through a link of the same archive.
fn write_links(top: &Path, links: Vec<(PathBuf, PathBuf)>) -> Result<(), InstallError> {
    for (entry, target) in links {
        write_link(top, &entry, &target)?;
    }
    Ok(())
}

/// Writes a symlink, after [`check_link`].
fn write_link(top: &Path, entry: &Path, target: &Path) -> Result<(), InstallError> {
    check_link(entry, target)?;
    let path = top.join(entry);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(target, &path).map_err(io(&path))
    }
    #[cfg(not(unix))]
    {
        // Without symlinks, the file it names is copied once everything else is unpacked; a
        // link inside a skill is rare enough to refuse instead.
        Err(InstallError::SpecialEntry(entry.display().to_string()))
    }
}

/// Writes a regular file of `size` bytes from `reader`, counting against `budget`.
fn write_file(
    top: &Path,
    entry: &Path,
    reader: &mut dyn Read,
    budget: &mut u64,
) -> Result<(), InstallError> {
    let path = top.join(entry);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let mut file = std::fs::File::create(&path).map_err(io(&path))?;
    // One byte over the budget is enough to know it is too large.
    let copied = std::io::copy(&mut reader.take(*budget + 1), &mut file).map_err(io(&path))?;
    if copied > *budget {
        return Err(InstallError::TooLarge);
    }
    *budget -= copied;
    Ok(())
}

fn copy_folder(source: &Path, top: &Path) -> Result<(), InstallError> {
    let mut budget = MAX_UNPACKED_BYTES;
    let mut pending = vec![PathBuf::new()];
    let mut links = Vec::new();
    std::fs::create_dir_all(top).map_err(io(top))?;
    while let Some(relative) = pending.pop() {
        let dir = source.join(&relative);
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let entry = entry.map_err(io(&dir))?;
            let entry_path = relative.join(entry.file_name());
            let file_type = entry.file_type().map_err(io(&entry.path()))?;
            if file_type.is_symlink() {
                let target = std::fs::read_link(entry.path()).map_err(io(&entry.path()))?;
                check_link(&entry_path, &target)?;
                links.push((entry_path, target));
            } else if file_type.is_dir() {
                std::fs::create_dir_all(top.join(&entry_path))
                    .map_err(io(&top.join(&entry_path)))?;
                pending.push(entry_path);
            } else if file_type.is_file() {
                let mut file = std::fs::File::open(entry.path()).map_err(io(&entry.path()))?;
                write_file(top, &entry_path, &mut file, &mut budget)?;
            } else {
                return Err(InstallError::SpecialEntry(entry_path.display().to_string()));
            }
        }
    }
    write_links(top, links)
}

fn unzip(archive: &Path, top: &Path) -> Result<(), InstallError> {
    let file = std::fs::File::open(archive).map_err(io(archive))?;
    let mut zip =
        zip::ZipArchive::new(file).map_err(|err| InstallError::Archive(err.to_string()))?;
    let mut budget = MAX_UNPACKED_BYTES;
    let mut links = Vec::new();
    std::fs::create_dir_all(top).map_err(io(top))?;
    for index in 0..zip.len() {
        let mut entry = zip
            .by_index(index)
            .map_err(|err| InstallError::Archive(err.to_string()))?;
        let name = entry
            .name()
            .map_err(|err| InstallError::Archive(err.to_string()))?
            .into_owned();
        let relative = inside(&name)?;
        if entry.is_symlink() {
            let mut target = String::new();
            entry
                .read_to_string(&mut target)
                .map_err(|err| InstallError::Archive(err.to_string()))?;
            check_link(&relative, Path::new(&target))?;
            links.push((relative, PathBuf::from(target)));
        } else if entry.is_dir() {
            std::fs::create_dir_all(top.join(&relative)).map_err(io(&top.join(&relative)))?;
        } else if entry.is_file() {
            write_file(top, &relative, &mut entry, &mut budget)?;
        } else {
            return Err(InstallError::SpecialEntry(name));
        }
    }
    write_links(top, links)
}

fn untar(archive: &Path, top: &Path) -> Result<(), InstallError> {
    let file = std::fs::File::open(archive).map_err(io(archive))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut budget = MAX_UNPACKED_BYTES;
    let mut links = Vec::new();
    std::fs::create_dir_all(top).map_err(io(top))?;
    let unreadable = |err: std::io::Error| InstallError::Archive(err.to_string());
    for entry in tar.entries().map_err(unreadable)? {
        let mut entry = entry.map_err(unreadable)?;
        let name = entry.path().map_err(unreadable)?.display().to_string();
        let relative = inside(&name)?;
        let kind = entry.header().entry_type();
        if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(unreadable)?
                .ok_or_else(|| InstallError::SpecialEntry(name.clone()))?
                .into_owned();
            check_link(&relative, &target)?;
            links.push((relative, target));
        } else if kind.is_dir() {
            std::fs::create_dir_all(top.join(&relative)).map_err(io(&top.join(&relative)))?;
        } else if kind.is_file() {
            write_file(top, &relative, &mut entry, &mut budget)?;
        } else if kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
            // Metadata for the entries, not an entry.
        } else {
            return Err(InstallError::SpecialEntry(name));
        }
    }
    write_links(top, links)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::io::Write as _;

    const SKILL: &str = "---\nname: weather\ndescription: Forecasts\n---\nUse curl.\n";

    fn tar_gz(path: &Path, entries: &[(&str, tar::EntryType, &str)]) {
        let file = std::fs::File::create(path).unwrap();
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::fast(),
        ));
        for (name, kind, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            if kind.is_symlink() {
                header.set_size(0);
                // `set_link_name` refuses `..`, which is what is being tested: written raw.
                let gnu = header.as_gnu_mut().unwrap();
                gnu.linkname[..data.len()].copy_from_slice(data.as_bytes());
                // The path is written raw for the same reason.
                gnu.name[..name.len()].copy_from_slice(name.as_bytes());
                header.set_cksum();
                builder.append(&header, std::io::empty()).unwrap();
            } else {
                header.set_size(data.len() as u64);
                let gnu = header.as_gnu_mut().unwrap();
                gnu.name[..name.len()].copy_from_slice(name.as_bytes());
                header.set_cksum();
                builder.append(&header, data.as_bytes()).unwrap();
            }
        }
        builder.into_inner().unwrap().finish().unwrap();
    }

    fn zip_file(path: &Path, entries: &[(&str, Option<&str>, &str)]) {
        let file = std::fs::File::create(path).unwrap();
        let mut zip = zip::ZipWriter::new(file);
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
        zip.finish().unwrap();
    }

    #[test]
    fn a_tar_gz_with_the_skill_in_a_folder_installs_under_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("download.tar.gz");
        tar_gz(
            &archive,
            &[
                ("weather-main/", tar::EntryType::Directory, ""),
                ("weather-main/SKILL.md", tar::EntryType::Regular, SKILL),
                (
                    "weather-main/scripts/get.sh",
                    tar::EntryType::Regular,
                    "curl wttr.in\n",
                ),
                (
                    "weather-main/latest.sh",
                    tar::EntryType::Symlink,
                    "scripts/get.sh",
                ),
            ],
        );
        let root = dir.path().join("skills");
        let installed = install(&archive, &root).unwrap();
        assert_eq!(
            installed,
            Installed {
                name: "weather".into(),
                folder: root.join("weather"),
            }
        );
        assert_eq!(
            std::fs::read_to_string(root.join("weather/latest.sh")).unwrap(),
            "curl wttr.in\n"
        );
        // Nothing left behind but the skill.
        let left: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("weather")]);
        // A second install of the same name is refused, naming the way out.
        let err = install(&archive, &root).unwrap_err();
        assert!(
            matches!(err, InstallError::AlreadyInstalled { .. }),
            "{err}"
        );
    }

    #[test]
    fn archives_with_entries_or_symlinks_escaping_the_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        type Entries<'a> = Vec<(&'a str, tar::EntryType, &'a str)>;
        let cases: Vec<(&str, Entries, &str)> = vec![
            (
                "dotdot.tar.gz",
                vec![
                    ("SKILL.md", tar::EntryType::Regular, SKILL),
                    ("../evil.sh", tar::EntryType::Regular, "rm -rf ~"),
                ],
                "refused: the entry `../evil.sh` would be written outside the skill's folder",
            ),
            (
                "absolute.tgz",
                vec![("/tmp/evil", tar::EntryType::Regular, "x")],
                "refused: the entry `/tmp/evil` would be written outside the skill's folder",
            ),
            (
                "link.tar.gz",
                vec![
                    ("s/SKILL.md", tar::EntryType::Regular, SKILL),
                    ("s/key", tar::EntryType::Symlink, "../../.ssh/id_ed25519"),
                ],
                "refused: the symlink `s/key` points to `../../.ssh/id_ed25519`, outside the skill's folder",
            ),
            (
                // Each link reads as inside by its text, but the kernel follows `y` at every
                // step: `x` would be the folder four levels up, and `x/planted` written there.
                "chained.tar.gz",
                vec![
                    ("s/SKILL.md", tar::EntryType::Regular, SKILL),
                    ("s/y", tar::EntryType::Symlink, "."),
                    ("s/x", tar::EntryType::Symlink, "y/y/y/y/../../../.."),
                    ("s/x/planted", tar::EntryType::Regular, "owned"),
                ],
                "refused: the symlink `s/x` points to `y/y/y/y/../../../..`, outside the skill's folder",
            ),
            (
                "abslink.tar.gz",
                vec![("key", tar::EntryType::Symlink, "/etc/passwd")],
                "refused: the symlink `key` points to `/etc/passwd`, outside the skill's folder",
            ),
            (
                "hardlink.tar.gz",
                vec![("key", tar::EntryType::Link, "/etc/passwd")],
                "refused: the entry `key` is neither a file, a folder nor a symlink",
            ),
        ];
        for (name, entries, message) in cases {
            let archive = dir.path().join(name);
            tar_gz(&archive, &entries);
            let err = install(&archive, &root).unwrap_err();
            assert_eq!(err.to_string(), message, "{name}");
        }
        let archive = dir.path().join("link.zip");
        zip_file(
            &archive,
            &[("SKILL.md", None, SKILL), ("key", Some("../outside"), "")],
        );
        assert_eq!(
            install(&archive, &root).unwrap_err().to_string(),
            "refused: the symlink `key` points to `../outside`, outside the skill's folder"
        );
        let archive = dir.path().join("dotdot.zip");
        zip_file(
            &archive,
            &[("SKILL.md", None, SKILL), ("a/../../x", None, "")],
        );
        assert_eq!(
            install(&archive, &root).unwrap_err().to_string(),
            "refused: the entry `a/../../x` would be written outside the skill's folder"
        );
        // Nothing was installed, and no staging folder is left.
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
        assert!(!dir.path().join("evil.sh").exists());
        assert!(!dir.path().join("planted").exists());
    }

    #[test]
    fn a_folder_with_a_symlink_out_is_refused_and_a_zip_installs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        let source = dir.path().join("my-skill");
        std::fs::create_dir_all(source.join("ref")).unwrap();
        std::fs::write(source.join("SKILL.md"), "no front matter\n").unwrap();
        std::fs::write(source.join("ref/a.md"), "a").unwrap();
        assert_eq!(
            install(&source, &root).unwrap(),
            Installed {
                name: "my-skill".into(),
                folder: root.join("my-skill"),
            }
        );
        assert_eq!(
            std::fs::read_to_string(root.join("my-skill/ref/a.md")).unwrap(),
            "a"
        );
        #[cfg(unix)]
        {
            let source = dir.path().join("leaky");
            std::fs::create_dir_all(&source).unwrap();
            std::fs::write(source.join("SKILL.md"), SKILL).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", source.join("passwd")).unwrap();
            assert_eq!(
                install(&source, &root).unwrap_err().to_string(),
                "refused: the symlink `passwd` points to `/etc/passwd`, outside the skill's folder"
            );
        }
        let archive = dir.path().join("Weather.zip");
        zip_file(
            &archive,
            &[("SKILL.md", None, SKILL), ("notes/x.txt", None, "x")],
        );
        assert_eq!(install(&archive, &root).unwrap().name, "weather");
        let bad = dir.path().join("bad.zip");
        zip_file(&bad, &[("SKILL.md", None, "---\nname: ../up\n---\n")]);
        assert_eq!(
            install(&bad, &root).unwrap_err().to_string(),
            "`../up` cannot be a skill's folder name: only letters, digits, `-`, `_` and `.`, not starting with `.`"
        );
        let none = dir.path().join("none.zip");
        zip_file(&none, &[("README.md", None, "")]);
        assert!(matches!(
            install(&none, &root),
            Err(InstallError::NoSkillFile)
        ));
    }
}
