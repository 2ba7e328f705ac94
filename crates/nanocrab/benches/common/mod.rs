//! What the benches that run the `nanocrab` binary share.

use std::path::Path;
use std::process::Command;

/// The binary with only PATH, HOME and NANOCRAB_HOME (`dir/home`): no credentials, config or
/// log level of the machine running the bench leak in.
pub fn clean_command(bin: &Path, dir: &Path) -> Command {
    let mut command = Command::new(bin);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("NANOCRAB_HOME", dir.join("home"));
    command
}
