//! The `browser` tool: a headless Chromium driven over the DevTools protocol (chromiumoxide),
//! one per agent with its profile in `state/browser/<agent>/`, started on first use and
//! closed when idle. Every connection it makes goes through a proxy of its own that checks the
//! host as `web_fetch` does (`nanocrab-web`) and connects only to the checked addresses.

mod proxy;
mod session;
mod snapshot;
mod tool;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nanocrab_config::{BrowserConfig, WebConfig};
use nanocrab_web::{Resolve, WebSetupError};

pub use proxy::{CheckingProxy, Refusal, Refusals};
pub use session::{AgentBrowser, LaunchError, Settings};
pub use snapshot::{Snapshot, render};
pub use tool::{Action, BrowserArgs, BrowserTool, Mode};

/// The agent's `browser` tool as `tools.browser` describes it, its hosts checked with
/// `tools.web`'s rules (`allowPrivate`); `profile` is `state/browser/<agent>/`.
pub fn browser_tool(
    config: &BrowserConfig,
    web: &WebConfig,
    profile: PathBuf,
    search_path: Vec<PathBuf>,
    resolver: Arc<dyn Resolve>,
) -> Result<BrowserTool, WebSetupError> {
    // Redirects are the browser's own business; each is checked at the proxy like any request.
    let web = WebConfig {
        require_grant: false,
        ..web.clone()
    };
    let checks = nanocrab_web::fetcher(&web, resolver)?;
    Ok(BrowserTool::new(AgentBrowser::new(
        Settings {
            executable: config.executable.clone(),
            search_path,
            profile,
            idle: Duration::from_secs(config.idle_minutes.saturating_mul(60)),
            timeout: Duration::from_secs(config.timeout_seconds.max(1)),
            max_chars: config.max_chars.max(1),
            no_sandbox: config.no_sandbox,
        },
        Arc::new(checks),
    )))
}
