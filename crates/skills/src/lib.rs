//! Skills: folders with a `SKILL.md` (YAML front matter and Markdown instructions) that tell
//! the agent how to do one kind of task. This crate finds them in their four sources, reads
//! their front matter in nanocrab's, OpenClaw's and nanobot's shapes, checks their
//! requirements against the machine, and installs them from folders and archives.

mod bundled;
mod catalog;
mod front_matter;
mod install;

pub use bundled::{BUNDLED, write_bundled};
pub use catalog::{Host, Missing, Skill, SkillRoots, SkillSource, Status};
pub use front_matter::{FrontMatterError, Requirements, SkillMeta, parse, split};
pub use install::{InstallError, Installed, install, valid_name};
