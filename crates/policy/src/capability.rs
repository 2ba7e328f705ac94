//! What a tool call needs to be allowed to do, how risky it is, and the patterns grants are
//! written in.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The kinds of capability, named as they are written in config (`tools.grants`) and shown to
/// the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CapabilityKind {
    #[serde(rename = "fs.read")]
    FsRead,
    #[serde(rename = "fs.write")]
    FsWrite,
    #[serde(rename = "exec")]
    Exec,
    #[serde(rename = "net")]
    Net,
    #[serde(rename = "message")]
    Message,
    #[serde(rename = "spawn")]
    Spawn,
    #[serde(rename = "schedule")]
    Schedule,
    #[serde(rename = "memory.write")]
    MemoryWrite,
    #[serde(rename = "secret")]
    Secret,
    #[serde(rename = "mcp")]
    Mcp,
    #[serde(rename = "browser")]
    Browser,
}

impl CapabilityKind {
    pub const ALL: [Self; 11] = [
        Self::FsRead,
        Self::FsWrite,
        Self::Exec,
        Self::Net,
        Self::Message,
        Self::Spawn,
        Self::Schedule,
        Self::MemoryWrite,
        Self::Secret,
        Self::Mcp,
        Self::Browser,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::FsRead => "fs.read",
            Self::FsWrite => "fs.write",
            Self::Exec => "exec",
            Self::Net => "net",
            Self::Message => "message",
            Self::Spawn => "spawn",
            Self::Schedule => "schedule",
            Self::MemoryWrite => "memory.write",
            Self::Secret => "secret",
            Self::Mcp => "mcp",
            Self::Browser => "browser",
        }
    }

    /// Whether capabilities of this kind name a target (a path, a program, a host...).
    fn has_target(self) -> bool {
        match self {
            Self::FsRead
            | Self::FsWrite
            | Self::Exec
            | Self::Net
            | Self::Message
            | Self::Spawn
            | Self::Secret
            | Self::Mcp => true,
            Self::Schedule | Self::MemoryWrite | Self::Browser => false,
        }
    }

    fn is_path(self) -> bool {
        match self {
            Self::FsRead | Self::FsWrite => true,
            Self::Exec
            | Self::Net
            | Self::Message
            | Self::Spawn
            | Self::Schedule
            | Self::MemoryWrite
            | Self::Secret
            | Self::Mcp
            | Self::Browser => false,
        }
    }
}

/// One thing a tool call needs, as specific as the call allows: the resolved path it opens,
/// the program it runs, the host it connects to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    FsRead(PathBuf),
    FsWrite(PathBuf),
    /// A program, as the command names it.
    Exec(String),
    /// Connections to a host.
    Net(String),
    /// Sending to a chat, `channel:chat`.
    Message(String),
    /// Starting a subagent, or calling an agent offered as a tool, as the agent named:
    /// `spawn:research`. A grant of `spawn` alone covers every agent.
    Spawn(String),
    /// Creating or changing a scheduled job.
    Schedule,
    /// Changing the long-term memory files.
    MemoryWrite,
    /// Having a secret, by name, injected at the host boundary.
    Secret(String),
    /// Calling a tool of an MCP server, as `server:tool`.
    Mcp(String),
    /// Driving the agent's headless browser (the `browser` tool); where it may go is the
    /// address checks' business, not the grant's.
    Browser,
}

impl Capability {
    pub fn kind(&self) -> CapabilityKind {
        match self {
            Self::FsRead(_) => CapabilityKind::FsRead,
            Self::FsWrite(_) => CapabilityKind::FsWrite,
            Self::Exec(_) => CapabilityKind::Exec,
            Self::Net(_) => CapabilityKind::Net,
            Self::Message(_) => CapabilityKind::Message,
            Self::Spawn(_) => CapabilityKind::Spawn,
            Self::Schedule => CapabilityKind::Schedule,
            Self::MemoryWrite => CapabilityKind::MemoryWrite,
            Self::Secret(_) => CapabilityKind::Secret,
            Self::Mcp(_) => CapabilityKind::Mcp,
            Self::Browser => CapabilityKind::Browser,
        }
    }

    fn target(&self) -> Option<String> {
        match self {
            Self::FsRead(path) | Self::FsWrite(path) => Some(path.display().to_string()),
            Self::Exec(target)
            | Self::Net(target)
            | Self::Message(target)
            | Self::Spawn(target)
            | Self::Secret(target)
            | Self::Mcp(target) => Some(target.clone()),
            Self::Schedule | Self::MemoryWrite | Self::Browser => None,
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.target() {
            Some(target) => write!(f, "{}:{target}", self.kind().name()),
            None => f.write_str(self.kind().name()),
        }
    }
}

/// How much a call can hurt if the model was wrong or was talked into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Runs: it stays inside what the tool's own configuration already allows.
    Safe,
    /// Needs a standing grant, or one approval per session.
    Guarded,
    /// Needs a grant written in config, or an approval every time.
    Unsafe,
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Safe => "safe",
            Self::Guarded => "guarded",
            Self::Unsafe => "unsafe",
        })
    }
}

/// What one tool call asks for, worked out from its arguments before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub capabilities: Vec<Capability>,
    pub risk: Risk,
    /// One line for a human deciding on an approval: what will happen.
    pub summary: String,
}

impl Invocation {
    pub fn new(risk: Risk, summary: impl Into<String>, capabilities: Vec<Capability>) -> Self {
        Self {
            capabilities,
            risk,
            summary: summary.into(),
        }
    }
}

/// Which targets of one kind a grant covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    /// Every target (`exec`, `exec:*`), and the only form for kinds without a target.
    Any,
    Exact(String),
    /// `message:telegram:*`: targets starting with the text before the `*`.
    Prefix(String),
    /// `net:*.example.com`: the host itself and its subdomains.
    Domain(String),
    /// `fs.write:/srv/notes`: that path and everything under it.
    Under(PathBuf),
}

/// What a grant covers, as written in config: `kind` or `kind:target`, e.g. `exec:git`,
/// `net:*.github.com`, `fs.write:~/notes`, `message:telegram:*`, `spawn`, `mcp:github:*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CapabilityPattern {
    kind: CapabilityKind,
    target: Target,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("unknown capability `{0}`; known: {known}", known = known_kinds())]
    UnknownKind(String),
    #[error("`{0}` takes no target")]
    UnexpectedTarget(String),
    #[error("the path in `{0}` must be absolute or start with ~")]
    RelativePath(String),
    #[error("the target of `{0}` is empty")]
    EmptyTarget(String),
}

fn known_kinds() -> String {
    CapabilityKind::ALL
        .iter()
        .map(|kind| kind.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl CapabilityPattern {
    /// Parses a pattern; `~` in a path target is the user's `home`.
    pub fn parse(text: &str, home: Option<&Path>) -> Result<Self, PatternError> {
        let text = text.trim();
        let (name, target) = match text.split_once(':') {
            Some((name, target)) => (name, Some(target)),
            None => (text, None),
        };
        let kind = CapabilityKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| PatternError::UnknownKind(name.to_owned()))?;
        let target = match target {
            None | Some("*") => Target::Any,
            Some(_) if !kind.has_target() => {
                return Err(PatternError::UnexpectedTarget(text.to_owned()));
            }
            Some("") => return Err(PatternError::EmptyTarget(text.to_owned())),
            Some(path) if kind.is_path() => {
                let expanded = match (path.strip_prefix('~'), home) {
                    (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
                        home.join(rest.trim_start_matches('/'))
                    }
                    _ => PathBuf::from(path),
                };
                if !expanded.is_absolute() {
                    return Err(PatternError::RelativePath(text.to_owned()));
                }
                Target::Under(normalize(&expanded))
            }
            // `mcp:github` is every tool of the server `github`, as `mcp:github:*` is.
            Some(server) if kind == CapabilityKind::Mcp && !server.contains(':') => {
                Target::Prefix(format!("{server}:"))
            }
            Some(target) => match (target.strip_prefix("*."), target.strip_suffix('*')) {
                (Some(domain), _) if kind == CapabilityKind::Net => {
                    Target::Domain(domain.to_ascii_lowercase())
                }
                (_, Some(prefix)) => Target::Prefix(prefix.to_owned()),
                (_, None) if kind == CapabilityKind::Net => {
                    Target::Exact(target.to_ascii_lowercase())
                }
                (_, None) => Target::Exact(target.to_owned()),
            },
        };
        Ok(Self { kind, target })
    }

    /// A pattern that covers exactly `capability` (what "always allow" in an approval grants).
    pub fn exactly(capability: &Capability) -> Self {
        let target = match capability {
            Capability::FsRead(path) | Capability::FsWrite(path) => {
                Target::Exact(path.display().to_string())
            }
            Capability::Exec(target)
            | Capability::Net(target)
            | Capability::Message(target)
            | Capability::Spawn(target)
            | Capability::Secret(target)
            | Capability::Mcp(target) => Target::Exact(target.clone()),
            Capability::Schedule | Capability::MemoryWrite | Capability::Browser => Target::Any,
        };
        Self {
            kind: capability.kind(),
            target,
        }
    }

    pub fn covers(&self, capability: &Capability) -> bool {
        if capability.kind() != self.kind {
            return false;
        }
        match (&self.target, capability) {
            (Target::Any, _) => true,
            (Target::Under(root), Capability::FsRead(path) | Capability::FsWrite(path)) => {
                // Capabilities carry resolved paths; `..` could only appear in a hand-made one.
                normalize(path).starts_with(root)
            }
            (Target::Under(_), _) => false,
            (Target::Exact(exact), capability) => match capability {
                // `net:localhost` covers every port of the host, `net:localhost:8080` one.
                Capability::Net(target) => {
                    let (host, port) = host_and_port(target);
                    match host_and_port(exact) {
                        (exact_host, None) => host.eq_ignore_ascii_case(exact_host),
                        (exact_host, Some(exact_port)) => {
                            host.eq_ignore_ascii_case(exact_host) && port == Some(exact_port)
                        }
                    }
                }
                Capability::FsRead(path) | Capability::FsWrite(path) => {
                    path.as_os_str() == exact.as_str()
                }
                other => other.target().as_deref() == Some(exact.as_str()),
            },
            (Target::Prefix(prefix), capability) => capability
                .target()
                .is_some_and(|target| target.starts_with(prefix.as_str())),
            (Target::Domain(domain), Capability::Net(target)) => {
                let host = host_and_port(target).0.to_ascii_lowercase();
                host == *domain || host.ends_with(&format!(".{domain}"))
            }
            (Target::Domain(_), _) => false,
        }
    }
}

impl fmt::Display for CapabilityPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind.name();
        match &self.target {
            Target::Any if self.kind.has_target() => write!(f, "{name}:*"),
            Target::Any => f.write_str(name),
            Target::Exact(target) => write!(f, "{name}:{target}"),
            Target::Prefix(prefix) => write!(f, "{name}:{prefix}*"),
            Target::Domain(domain) => write!(f, "{name}:*.{domain}"),
            Target::Under(path) => write!(f, "{name}:{}", path.display()),
        }
    }
}

/// `example.com:8443` → (`example.com`, `8443`), `[::1]:80` → (`[::1]`, `80`); a target with
/// no port (`example.com`, `[::1]`, a bare `::1`) is all host.
fn host_and_port(target: &str) -> (&str, Option<&str>) {
    let port_at = match target.strip_prefix('[') {
        Some(rest) => rest.find(']').map(|end| end + 2),
        None => target
            .find(':')
            .filter(|_| target.matches(':').count() == 1),
    };
    match port_at.and_then(|at| Some((at, target.get(at..)?.strip_prefix(':')?))) {
        Some((at, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (&target[..at], Some(port))
        }
        Some(_) | None => (target, None),
    }
}

/// Removes `.` and folds `..` lexically, so `/srv/notes/../x` never counts as under `/srv/notes`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn pattern(text: &str) -> CapabilityPattern {
        CapabilityPattern::parse(text, Some(Path::new("/home/me"))).unwrap()
    }

    #[test]
    fn patterns_cover_what_they_name_and_nothing_else() {
        let cases: Vec<(&str, Capability, bool)> = vec![
            ("exec", Capability::Exec("rm".into()), true),
            ("exec:*", Capability::Exec("rm".into()), true),
            ("exec:git", Capability::Exec("git".into()), true),
            ("exec:git", Capability::Exec("gitk".into()), false),
            ("exec:git", Capability::Net("git".into()), false),
            (
                "net:*.github.com",
                Capability::Net("api.github.com".into()),
                true,
            ),
            (
                "net:*.github.com",
                Capability::Net("github.com".into()),
                true,
            ),
            (
                "net:*.github.com",
                Capability::Net("evilgithub.com".into()),
                false,
            ),
            (
                "net:Example.org",
                Capability::Net("example.ORG".into()),
                true,
            ),
            (
                "message:telegram:*",
                Capability::Message("telegram:42".into()),
                true,
            ),
            (
                "message:telegram:*",
                Capability::Message("slack:42".into()),
                false,
            ),
            (
                "fs.write:~/notes",
                Capability::FsWrite("/home/me/notes/a.md".into()),
                true,
            ),
            (
                "fs.write:~/notes",
                Capability::FsWrite("/home/me/notes".into()),
                true,
            ),
            (
                "fs.write:~/notes",
                Capability::FsWrite("/home/me/notesx".into()),
                false,
            ),
            (
                "fs.write:~/notes",
                Capability::FsWrite("/home/me/notes/../x".into()),
                false,
            ),
            (
                "fs.write:~/notes",
                Capability::FsRead("/home/me/notes/a".into()),
                false,
            ),
            ("fs.read", Capability::FsRead("/etc/passwd".into()), true),
            ("spawn", Capability::Spawn("research".into()), true),
            ("spawn:research", Capability::Spawn("research".into()), true),
            ("spawn:research", Capability::Spawn("main".into()), false),
            ("memory.write", Capability::Spawn("main".into()), false),
            ("mcp", Capability::Mcp("github:create_issue".into()), true),
            ("mcp:*", Capability::Mcp("github:create_issue".into()), true),
            (
                "mcp:github:*",
                Capability::Mcp("github:create_issue".into()),
                true,
            ),
            (
                "mcp:github",
                Capability::Mcp("github:create_issue".into()),
                true,
            ),
            (
                "mcp:github",
                Capability::Mcp("githubber:create_issue".into()),
                false,
            ),
            (
                "mcp:github:get_issue",
                Capability::Mcp("github:create_issue".into()),
                false,
            ),
            (
                "mcp:github:get_issue",
                Capability::Mcp("github:get_issue".into()),
                true,
            ),
            ("mcp:github:*", Capability::Exec("github".into()), false),
            (
                "net:localhost",
                Capability::Net("localhost:8080".into()),
                true,
            ),
            (
                "net:localhost:8080",
                Capability::Net("localhost:8080".into()),
                true,
            ),
            (
                "net:localhost:8080",
                Capability::Net("localhost:9090".into()),
                false,
            ),
            (
                "net:localhost:8080",
                Capability::Net("localhost".into()),
                false,
            ),
            (
                "net:*.home.arpa",
                Capability::Net("nas.home.arpa:5000".into()),
                true,
            ),
            ("net:[::1]", Capability::Net("[::1]:8080".into()), true),
            (
                "net:[::1]:8080",
                Capability::Net("[::1]:8081".into()),
                false,
            ),
            ("net:127.0.0.1", Capability::Net("127.0.0.10".into()), false),
        ];
        let wrong: Vec<_> = cases
            .iter()
            .filter(|(text, capability, expected)| pattern(text).covers(capability) != *expected)
            .map(|(text, capability, expected)| {
                format!("{text} covers {capability}: expected {expected}")
            })
            .collect();
        assert_eq!(wrong, Vec::<String>::new());
    }

    #[test]
    fn bad_patterns_say_what_is_wrong() {
        let errors: Vec<String> = ["exe:git", "schedule:x", "fs.read:notes", "net:"]
            .iter()
            .map(|text| {
                CapabilityPattern::parse(text, None)
                    .unwrap_err()
                    .to_string()
            })
            .collect();
        assert_eq!(
            errors,
            [
                "unknown capability `exe`; known: fs.read, fs.write, exec, net, message, spawn, schedule, memory.write, secret, mcp, browser",
                "`schedule:x` takes no target",
                "the path in `fs.read:notes` must be absolute or start with ~",
                "the target of `net:` is empty",
            ]
        );
    }

    #[test]
    fn patterns_print_as_they_are_written() {
        let printed: Vec<String> = [
            "exec",
            "net:*.github.com",
            "fs.write:~/notes",
            "spawn",
            "spawn:research",
            "message:tg*",
            "mcp:github",
            "mcp:github:get_issue",
        ]
        .iter()
        .map(|text| pattern(text).to_string())
        .collect();
        assert_eq!(
            printed,
            [
                "exec:*",
                "net:*.github.com",
                "fs.write:/home/me/notes",
                "spawn:*",
                "spawn:research",
                "message:tg*",
                "mcp:github:*",
                "mcp:github:get_issue"
            ]
        );
    }

    #[test]
    fn an_exact_pattern_covers_only_its_capability() {
        let capability = Capability::FsWrite("/srv/a".into());
        let exact = CapabilityPattern::exactly(&capability);
        assert!(exact.covers(&capability));
        assert!(!exact.covers(&Capability::FsWrite("/srv/a/b".into())));
        assert_eq!(capability.to_string(), "fs.write:/srv/a");
    }
}
