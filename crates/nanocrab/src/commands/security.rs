//! `nanocrab security audit [--fix]`: the settings and file permissions that expose the agent
//! more than the defaults do, each with what to change. `--fix` tightens file permissions; the
//! config is the user's to change.

use std::net::ToSocketAddrs as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

use anyhow::Context as _;
use nanocrab_config::{
    Config, DmPolicy, ExecConfig, ExecMode, GroupPolicy, SandboxMode, WorkspaceAccess,
};

use super::Env;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Severity {
    /// Someone else can use or read what is yours.
    Risk,
    /// Looser than it needs to be.
    Warning,
}

#[derive(Debug)]
struct Finding {
    severity: Severity,
    /// The config key or the file it is about.
    place: String,
    what: String,
    fix: String,
}

/// Prints the findings; an error (and so a failing exit status, for scripts) when a risk
/// remains.
pub fn audit(env: &Env, fix: bool) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    let mut findings = settings(&config);
    let mut fixed = Vec::new();
    for (path, mode, secret) in files(env, &config) {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let current = meta.permissions().mode() & 0o777;
        if current & 0o077 == 0 {
            continue;
        }
        if fix {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("cannot change the permissions of {}", path.display()))?;
            fixed.push(format!("{} {current:o} → {mode:o}", path.display()));
            continue;
        }
        findings.push(Finding {
            severity: if secret {
                Severity::Risk
            } else {
                Severity::Warning
            },
            place: path.display().to_string(),
            what: format!(
                "readable by other users of this machine (mode {current:o}){}",
                if secret {
                    "; it may hold keys and tokens"
                } else {
                    ""
                }
            ),
            fix: format!(
                "chmod {mode:o} {} (or `nanocrab security audit --fix`)",
                path.display()
            ),
        });
    }
    findings.sort_by_key(|f| f.severity);
    for line in &fixed {
        outln!("fixed    {line}")?;
    }
    if findings.is_empty() {
        outln!("no risky settings found in {}", env.config_path.display())?;
        return Ok(());
    }
    for finding in &findings {
        let label = match finding.severity {
            Severity::Risk => "RISK   ",
            Severity::Warning => "warning",
        };
        outln!(
            "{label}  {}: {}\n         fix: {}",
            finding.place,
            finding.what,
            finding.fix
        )?;
    }
    let risks = findings
        .iter()
        .filter(|f| f.severity == Severity::Risk)
        .count();
    if risks > 0 {
        anyhow::bail!("{risks} risk(s) found; see above");
    }
    Ok(())
}

/// Whether other machines can reach the gateway at `gateway.host` (it then needs a token).
pub fn exposed(gateway: &nanocrab_config::GatewayConfig) -> bool {
    (gateway.host.as_str(), gateway.port)
        .to_socket_addrs()
        .map(|mut addresses| addresses.any(|a| !a.ip().is_loopback()))
        // A host that does not resolve is not loopback either.
        .unwrap_or(true)
}

/// What in the config opens the agent up more than the defaults.
fn settings(config: &Config) -> Vec<Finding> {
    let mut findings: Vec<Finding> = config
        .unresolved
        .iter()
        .map(|unresolved| Finding {
            severity: Severity::Warning,
            place: unresolved.key.clone(),
            what: format!(
                "uses ${{{}}}, which is not set: the commands that need it refuse, and this audit cannot check its value",
                unresolved.var
            ),
            fix: format!(
                "export {}=... where nanocrab runs, or remove the key",
                unresolved.var
            ),
        })
        .collect();
    let gateway = &config.gateway;
    let token = gateway
        .auth
        .token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    match (exposed(gateway), token) {
        (true, None) => findings.push(Finding {
            severity: Severity::Risk,
            place: "gateway.host".into(),
            what: format!(
                "{} is reachable from other machines and gateway.auth.token is not set: the web page (with its file editor), /api and /v1 would be open to anyone who can reach the port (the gateway refuses to start like this)",
                gateway.host
            ),
            fix: "set gateway.auth.token to a long random string, or gateway.host to 127.0.0.1"
                .into(),
        }),
        (true, Some(token)) if token.chars().count() < 24 => findings.push(Finding {
            severity: Severity::Warning,
            place: "gateway.auth.token".into(),
            what: format!(
                "{} characters guard a gateway reachable from other machines",
                token.chars().count()
            ),
            fix: "use at least 24 random characters (e.g. `openssl rand -hex 24`)".into(),
        }),
        (true, Some(_)) | (false, _) => {}
    }
    let mut tools = vec![("tools".to_owned(), &config.tools)];
    for (id, entry) in &config.agents.entries {
        if let Some(entry_tools) = &entry.tools {
            tools.push((format!("agents.entries.{id}.tools"), entry_tools));
        }
    }
    // Asked once: the kernel is the same for every agent.
    let missing = nanocrab_sandbox::probe().err().map(|err| err.to_string());
    let gaps = tools
        .iter()
        .any(|(_, tools)| sandboxed(&tools.exec, missing.as_deref()))
        .then(SandboxGaps::of_this_machine);
    for (key, tools) in tools {
        findings.extend(sandbox_finding(&key, &tools.exec, missing.as_deref()));
        if let Some(gaps) = gaps
            .as_ref()
            .filter(|_| sandboxed(&tools.exec, missing.as_deref()))
        {
            findings.extend(gaps.findings(&key, tools));
        }
        match tools.exec.mode {
            ExecMode::Full => findings.push(Finding {
                severity: Severity::Risk,
                place: format!("{key}.exec.mode"),
                what: "`full`: the model may run any command through a shell, including ones a prompt injection asks for".into(),
                fix: "use `allowlist` (the default) and add the programs you need to safeBins".into(),
            }),
            ExecMode::Allowlist | ExecMode::Deny => {}
        }
        let web = &tools.web;
        if web.enable && web.fetch.enabled && !web.allow_private.is_empty() {
            findings.push(Finding {
                severity: Severity::Warning,
                place: format!("{key}.web.allowPrivate"),
                what: format!(
                    "web_fetch may reach {} on your own network, and a page or message the model reads can ask it to",
                    web.allow_private.join(", ")
                ),
                fix: "keep only the hosts the agent needs, or set web.requireGrant so each host needs a grant or a yes".into(),
            });
        }
        if !tools.restrict_to_workspace {
            findings.push(Finding {
                severity: Severity::Warning,
                place: format!("{key}.restrictToWorkspace"),
                what: "false: the file tools and exec may act anywhere your user can".into(),
                fix: "set it to true and list the folders you need in allowedPaths".into(),
            });
        }
    }
    // Each chat channel's policies, as (name, dmPolicy, groupPolicy, what a group is there).
    let mut policies = Vec::new();
    if let Some(telegram) = config.channels.telegram.as_ref().filter(|t| t.enabled) {
        policies.push((
            "telegram",
            telegram.dm_policy,
            telegram.group_policy,
            "any group the bot is added to",
            "list the groups in groups",
        ));
    }
    if let Some(discord) = config.channels.discord.as_ref().filter(|d| d.enabled) {
        policies.push((
            "discord",
            discord.dm_policy,
            discord.group_policy,
            "any server the bot is invited to",
            "list the servers or channels in guilds",
        ));
    }
    for (channel, dm_policy, group_policy, groups, listing) in policies {
        match dm_policy {
            DmPolicy::Open => findings.push(Finding {
                severity: Severity::Risk,
                place: format!("channels.{channel}.dmPolicy"),
                what: "`open`: anyone who finds the bot can talk to your agent and use its tools"
                    .into(),
                fix: "use `pairing` (the default) or `allowlist` with allowFrom".into(),
            }),
            DmPolicy::Pairing | DmPolicy::Allowlist | DmPolicy::Disabled => {}
        }
        match group_policy {
            GroupPolicy::Open => findings.push(Finding {
                severity: Severity::Warning,
                place: format!("channels.{channel}.groupPolicy"),
                what: format!("`open`: {groups} can talk to your agent"),
                fix: format!("use `allowlist` (the default) and {listing}"),
            }),
            GroupPolicy::Allowlist | GroupPolicy::Disabled => {}
        }
    }
    if let Some(slack) = config.channels.slack.as_ref().filter(|s| s.enabled) {
        match slack.dm_policy {
            DmPolicy::Open => findings.push(Finding {
                severity: Severity::Risk,
                place: "channels.slack.dmPolicy".into(),
                what: "`open`: anyone in the workspace (and any shared channel's guests) can talk to your agent and use its tools"
                    .into(),
                fix: "use `pairing` (the default) or `allowlist` with allowFrom".into(),
            }),
            DmPolicy::Pairing | DmPolicy::Allowlist | DmPolicy::Disabled => {}
        }
        match slack.group_policy {
            GroupPolicy::Open => findings.push(Finding {
                severity: Severity::Warning,
                place: "channels.slack.groupPolicy".into(),
                what: "`open`: any channel the app is invited to can talk to your agent".into(),
                fix: "use `allowlist` (the default) and list the channel ids in groups".into(),
            }),
            GroupPolicy::Allowlist | GroupPolicy::Disabled => {}
        }
    }
    if let Some(email) = config.channels.email.as_ref().filter(|e| e.enabled) {
        match email.dm_policy {
            DmPolicy::Open => findings.push(Finding {
                severity: Severity::Risk,
                place: "channels.email.dmPolicy".into(),
                what: "`open`: anyone who mails the address, or forges a From line, can talk to your agent and use its tools"
                    .into(),
                fix: "use `allowlist` (the default) with allowFrom".into(),
            }),
            DmPolicy::Pairing => findings.push(Finding {
                severity: Severity::Warning,
                place: "channels.email.dmPolicy".into(),
                what: "`pairing`: every stranger's mail, spam and forged senders among them, is answered with a pairing code"
                    .into(),
                fix: "use `allowlist` (the default) with allowFrom".into(),
            }),
            DmPolicy::Allowlist | DmPolicy::Disabled => {}
        }
        if !email.require_auth_results {
            findings.push(Finding {
                severity: Severity::Warning,
                place: "channels.email.requireAuthResults".into(),
                what: "false: a mail whose From line names an allowFrom address is answered even when someone else wrote it (a From line is easy to forge)".into(),
                fix: "set it to true and authservId to your mail server's name in its Authentication-Results headers".into(),
            });
        }
    }
    findings
}

/// What `exec` under `key` risks from its sandbox setting, given what this kernel lacks for the
/// sandbox (`missing`).
fn sandbox_finding(key: &str, exec: &ExecConfig, missing: Option<&str>) -> Option<Finding> {
    let place = format!("{key}.exec.sandbox.mode");
    let kernel_fix =
        "run nanocrab on a kernel with Landlock (Linux 5.13+, `landlock` in the active LSMs)";
    match (exec.mode, exec.sandbox.mode, missing) {
        (ExecMode::Deny, _, _)
        | (ExecMode::Allowlist | ExecMode::Full, SandboxMode::Auto | SandboxMode::Required, None) => {
            None
        }
        (ExecMode::Allowlist | ExecMode::Full, SandboxMode::Off, _) => Some(Finding {
            severity: Severity::Risk,
            place,
            what: "`off`: commands run without the OS sandbox, so they may write anywhere your user can and open network connections".into(),
            fix: "use `auto` (the default) or `required`".into(),
        }),
        (ExecMode::Allowlist | ExecMode::Full, SandboxMode::Auto, Some(missing)) => Some(Finding {
            severity: Severity::Warning,
            place,
            what: format!("`auto`, but {missing}: exec commands run unsandboxed"),
            fix: format!("{kernel_fix}, or set it to `required` to refuse exec instead"),
        }),
        (ExecMode::Allowlist | ExecMode::Full, SandboxMode::Required, Some(missing)) => {
            Some(Finding {
                severity: Severity::Warning,
                place,
                what: format!("`required`, but {missing}: every exec call is refused"),
                fix: format!("{kernel_fix}, or set exec.mode to `deny`"),
            })
        }
    }
}

/// Whether `exec` runs commands, in the OS sandbox.
fn sandboxed(exec: &ExecConfig, missing: Option<&str>) -> bool {
    match (exec.mode, exec.sandbox.mode, missing) {
        (ExecMode::Allowlist | ExecMode::Full, SandboxMode::Auto | SandboxMode::Required, None) => {
            true
        }
        (ExecMode::Deny, _, _)
        | (ExecMode::Allowlist | ExecMode::Full, SandboxMode::Off, _)
        | (
            ExecMode::Allowlist | ExecMode::Full,
            SandboxMode::Auto | SandboxMode::Required,
            Some(_),
        ) => false,
    }
}

/// What the sandbox cannot do on this machine although Landlock works: each a reason.
#[derive(Debug, Default)]
struct SandboxGaps {
    /// bubblewrap missing or unable to make namespaces here: no PID namespace.
    bubblewrap: Option<String>,
    /// The launcher alone (without bubblewrap) cannot bind paths read-only.
    launcher_read_only: Option<String>,
}

impl SandboxGaps {
    /// Trial runs of bubblewrap and the launcher, as the first command would make them.
    fn of_this_machine() -> Self {
        use nanocrab_sandbox::SandboxProvider as _;

        let launcher = match std::env::current_exe() {
            Ok(launcher) => launcher,
            Err(err) => {
                let reason = format!("cannot find the nanocrab binary to try it: {err}");
                return Self {
                    bubblewrap: Some(reason.clone()),
                    launcher_read_only: Some(reason),
                };
            }
        };
        let path = std::env::var_os("PATH");
        Self {
            bubblewrap: match nanocrab_sandbox::BwrapProvider::find(path.as_deref(), &launcher) {
                None => Some("bubblewrap (`bwrap`) is not on the PATH".to_owned()),
                Some(bwrap) => bwrap.check().err().map(|err| err.to_string()),
            },
            launcher_read_only: nanocrab_sandbox::LandlockProvider::new(&launcher)
                .check_read_only()
                .err()
                .map(|err| err.to_string()),
        }
    }

    /// The gaps that matter to the agents configured by `tools` at `key`.
    fn findings(&self, key: &str, tools: &nanocrab_config::ToolsConfig) -> Vec<Finding> {
        let sandbox = &tools.exec.sandbox;
        let mut findings = Vec::new();
        let no_pid_namespace = "commands share nanocrab's PID namespace: they see every process \
                                of the machine with its command line, and what they start in the \
                                background outlives them";
        let bubblewrap_gap = match (&self.bubblewrap, sandbox.bubblewrap) {
            (_, false) => Some(Finding {
                severity: Severity::Warning,
                place: format!("{key}.exec.sandbox.bubblewrap"),
                what: format!("false: {no_pid_namespace}"),
                fix: "set it to true (the default), with bubblewrap installed".into(),
            }),
            (Some(reason), true) => Some(Finding {
                severity: Severity::Warning,
                place: format!("{key}.exec.sandbox.bubblewrap"),
                what: format!("{reason}: {no_pid_namespace}"),
                fix: "install bubblewrap where nanocrab runs (Debian and Ubuntu: `apt install \
                      bubblewrap`)"
                    .into(),
            }),
            (None, true) => None,
        };
        let uses_bubblewrap = bubblewrap_gap.is_none();
        findings.extend(bubblewrap_gap);
        let writable_workspace = match sandbox.workspace_access {
            WorkspaceAccess::ReadWrite => true,
            WorkspaceAccess::ReadOnly | WorkspaceAccess::None => false,
        };
        // bubblewrap makes the read-only binds itself.
        if let Some(reason) = self
            .launcher_read_only
            .as_ref()
            .filter(|_| writable_workspace && !uses_bubblewrap)
        {
            findings.push(Finding {
                severity: Severity::Warning,
                place: format!("{key}.protectedPaths"),
                what: format!(
                    "{reason}: exec commands can write the protected paths and the agent's \
                     instructions (the file tools still guard them)"
                ),
                fix: "install bubblewrap, or let unprivileged users create user namespaces \
                      (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu \
                      kernel.apparmor_restrict_unprivileged_userns=0), or set \
                      exec.sandbox.workspaceAccess to `ro`"
                    .into(),
            });
        }
        findings
    }
}

/// The files and folders to keep private, the mode each should have, and whether it may hold
/// secrets (keys, tokens, conversations).
fn files(env: &Env, config: &Config) -> Vec<(PathBuf, u32, bool)> {
    let state = env.paths.state_dir();
    vec![
        (env.config_path.clone(), 0o600, true),
        (env.paths.home().to_path_buf(), 0o700, false),
        (state.clone(), 0o700, true),
        (state.join("pairing.json"), 0o600, true),
        (env.paths.sessions_dir(), 0o700, true),
        (env.workspace(config), 0o700, false),
        (env.workspace(config).join("memory"), 0o700, true),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use nanocrab_config::SandboxConfig;

    use super::*;

    fn exec(mode: ExecMode, sandbox: SandboxMode) -> ExecConfig {
        ExecConfig {
            mode,
            sandbox: SandboxConfig {
                mode: sandbox,
                ..SandboxConfig::default()
            },
            ..ExecConfig::default()
        }
    }

    const MISSING: &str = "the OS sandbox is unavailable: Landlock is not available in this kernel";

    #[test]
    fn auto_on_a_kernel_without_the_sandbox_is_a_warning_saying_what_is_missing() {
        let finding = sandbox_finding(
            "tools",
            &exec(ExecMode::Allowlist, SandboxMode::Auto),
            Some(MISSING),
        )
        .unwrap();
        assert_eq!(finding.severity, Severity::Warning);
        assert_eq!(finding.place, "tools.exec.sandbox.mode");
        assert_eq!(
            finding.what,
            format!("`auto`, but {MISSING}: exec commands run unsandboxed")
        );
        let required = sandbox_finding(
            "agents.entries.ops.tools",
            &exec(ExecMode::Full, SandboxMode::Required),
            Some(MISSING),
        )
        .unwrap();
        assert_eq!(required.place, "agents.entries.ops.tools.exec.sandbox.mode");
        assert!(
            required.what.ends_with("every exec call is refused"),
            "{}",
            required.what
        );
    }

    #[test]
    fn each_gap_of_the_machine_is_a_warning_naming_the_key_and_the_reason() {
        let tools = |bubblewrap: bool, access: WorkspaceAccess| {
            let mut tools = nanocrab_config::ToolsConfig::default();
            tools.exec.sandbox.bubblewrap = bubblewrap;
            tools.exec.sandbox.workspace_access = access;
            tools
        };
        let gaps = SandboxGaps {
            bubblewrap: Some("bubblewrap (`bwrap`) is not on the PATH".into()),
            launcher_read_only: Some("no user namespaces".into()),
        };
        let found = |gaps: &SandboxGaps, tools| {
            gaps.findings("tools", &tools)
                .into_iter()
                .map(|f| (f.severity, f.place, f.what))
                .collect::<Vec<_>>()
        };
        let pid = "commands share nanocrab's PID namespace: they see every process of the \
                   machine with its command line, and what they start in the background \
                   outlives them";
        let read_only = "no user namespaces: exec commands can write the protected paths and \
                         the agent's instructions (the file tools still guard them)";
        assert_eq!(
            found(&gaps, tools(true, WorkspaceAccess::ReadWrite)),
            [
                (
                    Severity::Warning,
                    "tools.exec.sandbox.bubblewrap".to_owned(),
                    format!("bubblewrap (`bwrap`) is not on the PATH: {pid}")
                ),
                (
                    Severity::Warning,
                    "tools.protectedPaths".to_owned(),
                    read_only.to_owned()
                ),
            ]
        );
        // Nothing to keep read-only in a workspace commands cannot write.
        assert_eq!(
            found(&gaps, tools(true, WorkspaceAccess::ReadOnly)).len(),
            1
        );

        let with_bwrap = SandboxGaps {
            bubblewrap: None,
            launcher_read_only: Some("no user namespaces".into()),
        };
        assert_eq!(
            found(&with_bwrap, tools(true, WorkspaceAccess::ReadWrite)),
            []
        );
        assert_eq!(
            found(&with_bwrap, tools(false, WorkspaceAccess::ReadWrite)),
            [
                (
                    Severity::Warning,
                    "tools.exec.sandbox.bubblewrap".to_owned(),
                    format!("false: {pid}")
                ),
                (
                    Severity::Warning,
                    "tools.protectedPaths".to_owned(),
                    read_only.to_owned()
                ),
            ]
        );
        assert_eq!(
            found(
                &SandboxGaps::default(),
                tools(true, WorkspaceAccess::ReadWrite)
            ),
            []
        );
    }

    #[test]
    fn private_hosts_for_web_fetch_are_a_warning_naming_them() {
        let mut config = Config::default();
        assert!(
            settings(&config)
                .iter()
                .all(|finding| !finding.place.contains("web")),
            "the default reaches public hosts only"
        );
        config.tools.web.allow_private = vec!["nas.home.arpa".into(), "localhost:8080".into()];
        let findings = settings(&config);
        let web: Vec<_> = findings
            .iter()
            .filter(|finding| finding.place.contains("web"))
            .map(|finding| {
                (
                    finding.severity,
                    finding.place.as_str(),
                    finding.what.as_str(),
                )
            })
            .collect();
        assert_eq!(
            web,
            [(
                Severity::Warning,
                "tools.web.allowPrivate",
                "web_fetch may reach nas.home.arpa, localhost:8080 on your own network, and a page or message the model reads can ask it to"
            )]
        );
    }

    #[test]
    fn a_working_sandbox_or_denied_exec_is_no_finding() {
        for mode in [SandboxMode::Auto, SandboxMode::Required] {
            assert!(sandbox_finding("tools", &exec(ExecMode::Full, mode), None).is_none());
        }
        for mode in [SandboxMode::Auto, SandboxMode::Required, SandboxMode::Off] {
            let denied = exec(ExecMode::Deny, mode);
            assert!(sandbox_finding("tools", &denied, Some(MISSING)).is_none());
        }
        let off = sandbox_finding("tools", &exec(ExecMode::Allowlist, SandboxMode::Off), None);
        assert_eq!(off.unwrap().severity, Severity::Risk);
    }
}
