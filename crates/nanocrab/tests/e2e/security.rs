//! `nanocrab security audit`: risky settings and private files others can read, each with its
//! fix; `--fix` tightens the permissions.

use std::os::unix::fs::PermissionsExt as _;

use serde_json::json;

use crate::harness::{Home, Wire};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The config, the home and the workspace as `audit --fix` would leave them, so that only
/// settings are found.
fn make_private(home: &Home) {
    for (path, mode) in [
        (home.config_path(), 0o600),
        (home.home(), 0o700),
        (home.workspace(), 0o700),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

#[test]
fn the_audit_names_each_risk_with_its_fix_and_fix_makes_private_files_private() {
    let home = Home::new(Wire::Anthropic);
    let mut config = home.base_config();
    config["gateway"] = json!({"host": "0.0.0.0", "auth": {"token": "short"}});
    config["tools"] = json!({"exec": {"mode": "full"}, "restrictToWorkspace": false});
    config["channels"] =
        json!({"telegram": {"token": "123:abc", "dmPolicy": "open", "groupPolicy": "open"}});
    home.write_config(config.clone());
    std::fs::set_permissions(home.config_path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let state = home.home().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();

    let run = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(!run.success);
    assert!(run.stderr.contains("4 risk(s) found"), "{}", run.stderr);
    let printed = run
        .stdout
        .replace(&home.workspace().display().to_string(), "<workspace>")
        .replace(&home.home().display().to_string(), "<home>");
    insta::assert_snapshot!(printed);

    let fixed = home.run(home.nanocrab().args(["security", "audit", "--fix"]));
    assert_eq!(mode(&home.config_path()), 0o600);
    assert_eq!(mode(&state), 0o700);
    assert!(
        fixed.stdout.contains("config.json 644 → 600"),
        "{}",
        fixed.stdout
    );
    // The settings are the user's to change: they are still reported.
    assert!(!fixed.success);
    assert!(fixed.stderr.contains("2 risk(s) found"), "{}", fixed.stderr);

    home.write_config(home.base_config());
    std::fs::set_permissions(home.config_path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let clean = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(clean.success, "{}\n{}", clean.stdout, clean.stderr);
    assert!(
        clean.stdout.contains("no risky settings found"),
        "{}",
        clean.stdout
    );
}

#[test]
fn the_audit_flags_open_discord_policies() {
    let home = Home::new(Wire::Anthropic);
    make_private(&home);
    let mut config = home.base_config();
    config["channels"] = json!({"discord": {
        "token": "${DISCORD_BOT_TOKEN}", "dmPolicy": "open", "groupPolicy": "open",
    }});
    home.write_config(config);
    let run = home.run(
        home.nanocrab()
            .env("DISCORD_BOT_TOKEN", "MTAx.secret")
            .args(["security", "audit"]),
    );
    assert!(!run.success);
    assert!(!run.stdout.contains("MTAx.secret"));
    for needle in [
        "channels.discord.dmPolicy",
        "`open`: anyone who finds the bot can talk to your agent and use its tools",
        "channels.discord.groupPolicy",
        "`open`: any server the bot is invited to can talk to your agent",
    ] {
        assert!(
            run.stdout.contains(needle),
            "{needle} missing:\n{}",
            run.stdout
        );
    }
}

#[test]
fn the_audit_flags_a_web_page_reachable_from_the_network_without_a_token() {
    let home = Home::new(Wire::Anthropic);
    make_private(&home);
    let mut config = home.base_config();
    config["gateway"] = json!({"host": "0.0.0.0"});
    home.write_config(config);
    let run = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(!run.success);
    let finding = run
        .stdout
        .lines()
        .find(|l| l.contains("gateway.host"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(
        finding
            .contains("the web page (with its file editor), /api and /v1 would be open to anyone"),
        "{finding}"
    );
}

#[test]
fn the_audit_calls_an_exec_sandbox_turned_off_a_risk_unless_exec_is_denied() {
    let home = Home::new(Wire::Anthropic);
    make_private(&home);
    let mut config = home.base_config();
    config["tools"] = json!({"exec": {"sandbox": {"mode": "off"}}});
    home.write_config(config.clone());

    let run = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(!run.success);
    assert_eq!(
        run.stdout,
        "RISK     tools.exec.sandbox.mode: `off`: commands run without the OS sandbox, so they \
         may write anywhere your user can and open network connections\n         fix: use \
         `auto` (the default) or `required`\n"
    );

    config["tools"] = json!({"exec": {"mode": "deny", "sandbox": {"mode": "off"}}});
    home.write_config(config);
    let denied = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(denied.success, "{}\n{}", denied.stdout, denied.stderr);
}

#[test]
fn the_audit_warns_when_commands_would_get_no_pid_namespace() {
    let home = Home::new(Wire::Anthropic);
    make_private(&home);
    let mut config = home.base_config();
    config["tools"] = json!({"exec": {"sandbox": {"bubblewrap": false}}});
    home.write_config(config);

    let run = home.run(home.nanocrab().args(["security", "audit"]));

    // A warning: the audit still passes. The launcher alone keeps the protected paths
    // read-only on this machine, so that is no finding.
    assert!(run.success, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout,
        "warning  tools.exec.sandbox.bubblewrap: false: commands share nanocrab's PID \
         namespace: they see every process of the machine with its command line, and what \
         they start in the background outlives them\n         fix: set it to true (the \
         default), with bubblewrap installed\n"
    );
}
