//! `tools.browser`: the `browser` tool's headless Chromium.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BrowserConfig {
    /// Offer the `browser` tool (held back for `tool_search` unless `tools.deferAbove` is
    /// `false`). Off by default; `true` in a binary built without the `browser` feature is an
    /// error naming it.
    #[serde(default)]
    pub enable: bool,
    /// The Chromium (or Chrome) program. Default: the first of `chromium`, `chromium-browser`,
    /// `google-chrome` on `PATH` (Debian's package is `chromium`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<PathBuf>,
    /// Minutes without a call after which the agent's browser is closed; the next call starts
    /// it again with the same profile (`state/browser/<agent>/`).
    #[serde(default = "default_idle_minutes")]
    pub idle_minutes: u64,
    /// Seconds an action may take: starting the browser, loading a page, `wait`.
    #[serde(default = "default_timeout_seconds")]
    pub timeout_seconds: u64,
    /// Characters of a snapshot returned; the rest is cut with a note.
    #[serde(default = "default_max_chars")]
    pub max_chars: usize,
    /// Start Chromium with `--no-sandbox`, which it needs when run as root or in a container
    /// without user namespaces. Pages are then not isolated from nanocrab's user.
    #[serde(default)]
    pub no_sandbox: bool,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            enable: false,
            executable: None,
            idle_minutes: default_idle_minutes(),
            timeout_seconds: default_timeout_seconds(),
            max_chars: default_max_chars(),
            no_sandbox: false,
        }
    }
}

fn default_idle_minutes() -> u64 {
    10
}

fn default_timeout_seconds() -> u64 {
    30
}

fn default_max_chars() -> usize {
    20_000
}
