//! One agent's browser: Chromium started on first use with the agent's profile
//! (`state/browser/<agent>/`) and the checking proxy as its only way out, one page, closed
//! after `idleMinutes` without a call (and killed with nanocrab: the child is killed when
//! dropped).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::page::Page;
use futures::StreamExt as _;
use nanocrab_web::Fetcher;
use tokio::sync::{Mutex, MutexGuard, watch};

use crate::proxy::{CheckingProxy, Refusals};

/// How the agent's browser is started and kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `tools.browser.executable`; `None` looks for Chromium on `search_path`.
    pub executable: Option<PathBuf>,
    /// Where programs are looked for (the process's `PATH`, split).
    pub search_path: Vec<PathBuf>,
    /// The agent's profile, `state/browser/<agent>/`.
    pub profile: PathBuf,
    pub idle: Duration,
    pub timeout: Duration,
    pub max_chars: usize,
    pub no_sandbox: bool,
}

/// The programs looked for, in order, when `tools.browser.executable` is not set.
const PROGRAMS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "the browser needs Chromium, and {0} is not a program: install Debian's `chromium` \
         package (`apt install chromium`) or set tools.browser.executable"
    )]
    Missing(String),
    #[error(
        "the browser needs Chromium, and none of {searched} is on PATH: install Debian's \
         `chromium` package (`apt install chromium`) or set tools.browser.executable",
        searched = PROGRAMS.join(", ")
    )]
    NotFound,
    #[error("cannot create the browser profile {}: {source}", path.display())]
    Profile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the browser's proxy: {0}")]
    Proxy(std::io::Error),
    #[error("cannot start {} : {reason}{hint}", program.display())]
    Start {
        program: PathBuf,
        reason: String,
        hint: &'static str,
    },
}

/// A started browser: the process, its one page, the proxy it goes out through and the
/// numbered elements of the last snapshot.
pub struct Running {
    browser: Browser,
    pub page: Page,
    handler: tokio::task::JoinHandle<()>,
    _proxy: CheckingProxy,
    /// The backend DOM node of each `[n]` of the last snapshot, `[1]` first.
    pub refs: Vec<i64>,
}

impl Running {
    async fn close(self) {
        shut(self.browser, self.handler).await;
    }
}

/// Asks Chromium to close, waits for it to exit, and stops reading its connection.
async fn shut(mut browser: Browser, handler: tokio::task::JoinHandle<()>) {
    if let Err(err) = browser.close().await {
        tracing::debug!("closing the browser: {err}");
        if let Some(Err(err)) = browser.kill().await {
            tracing::warn!("cannot kill the browser: {err}");
        }
    }
    if let Err(err) = browser.wait().await {
        tracing::debug!("waiting for the browser to exit: {err}");
    }
    handler.abort();
}

/// Closes the browser once `idle` has passed since the last call; ends when the browser is
/// closed by anyone, or the agent's browser is gone.
async fn close_when_idle(shared: Weak<Shared>, idle: Duration) {
    let mut open = match shared.upgrade() {
        Some(shared) => shared.open.subscribe(),
        None => return,
    };
    loop {
        let since = match shared.upgrade() {
            Some(shared) => shared
                .last_used
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .elapsed(),
            None => return,
        };
        if since >= idle {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let mut running = shared.running.lock().await;
            // A call may have come in while this waited for the lock.
            let since = shared
                .last_used
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .elapsed();
            if since < idle {
                continue;
            }
            if let Some(running) = running.take() {
                tracing::info!("closing the browser after {} s unused", idle.as_secs());
                running.close().await;
            }
            shared.open.send_replace(false);
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(idle - since) => {}
            changed = open.wait_for(|open| !*open) => {
                // Closed by a call, or the sender is gone: nothing left to watch.
                drop(changed);
                return;
            }
        }
    }
}

struct Shared {
    running: Mutex<Option<Running>>,
    last_used: std::sync::Mutex<Instant>,
    /// Whether a browser is running, for whoever waits for the idle close (tests).
    open: watch::Sender<bool>,
}

/// The agent's browser, started when first asked for.
pub struct AgentBrowser {
    settings: Settings,
    checks: Arc<Fetcher>,
    refusals: Refusals,
    shared: Arc<Shared>,
}

impl AgentBrowser {
    /// `checks`: how every host the browser reaches is resolved and checked.
    pub fn new(settings: Settings, checks: Arc<Fetcher>) -> Self {
        Self {
            settings,
            checks,
            refusals: Refusals::default(),
            shared: Arc::new(Shared {
                running: Mutex::new(None),
                last_used: std::sync::Mutex::new(Instant::now()),
                open: watch::channel(false).0,
            }),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn checks(&self) -> &Fetcher {
        &self.checks
    }

    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }

    /// `true` while a browser runs; changes when one starts or closes.
    pub fn watch_open(&self) -> watch::Receiver<bool> {
        self.shared.open.subscribe()
    }

    /// The running browser, if any, held for one action.
    pub async fn current(&self) -> MutexGuard<'_, Option<Running>> {
        self.touch();
        self.shared.running.lock().await
    }

    /// The running browser, started first if there is none.
    pub async fn started(&self) -> Result<MutexGuard<'_, Option<Running>>, LaunchError> {
        let mut running = self.current().await;
        if running.is_none() {
            *running = Some(self.launch().await?);
            self.shared.open.send_replace(true);
            tokio::spawn(close_when_idle(
                Arc::downgrade(&self.shared),
                self.settings.idle,
            ));
        }
        Ok(running)
    }

    /// Closes the browser now; `false` when none was running.
    pub async fn close(&self) -> bool {
        let running = self.shared.running.lock().await.take();
        let was = running.is_some();
        if let Some(running) = running {
            running.close().await;
        }
        self.shared.open.send_replace(false);
        was
    }

    fn touch(&self) {
        *self
            .shared
            .last_used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    fn program(&self) -> Result<PathBuf, LaunchError> {
        match &self.settings.executable {
            Some(path) if path.is_file() => Ok(path.clone()),
            Some(path) => Err(LaunchError::Missing(path.display().to_string())),
            None => PROGRAMS
                .iter()
                .flat_map(|name| {
                    self.settings
                        .search_path
                        .iter()
                        .map(move |dir| dir.join(name))
                })
                .find(|path| path.is_file())
                .ok_or(LaunchError::NotFound),
        }
    }

    async fn launch(&self) -> Result<Running, LaunchError> {
        let program = self.program()?;
        let profile = &self.settings.profile;
        std::fs::create_dir_all(profile).map_err(|source| LaunchError::Profile {
            path: profile.clone(),
            source,
        })?;
        let proxy = CheckingProxy::start(Arc::clone(&self.checks), self.refusals.clone())
            .await
            .map_err(LaunchError::Proxy)?;
        let start_error = |reason: String| LaunchError::Start {
            program: program.clone(),
            hint: if self.settings.no_sandbox || !reason.contains("sandbox") {
                ""
            } else {
                " (as root or in a container Chromium needs tools.browser.noSandbox)"
            },
            reason,
        };
        let config =
            browser_config(&program, profile, &proxy, &self.settings).map_err(&start_error)?;
        let (browser, mut handler) = Browser::launch(config)
            .await
            .map_err(|err| start_error(err.to_string()))?;
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(err) = event {
                    tracing::debug!("browser connection: {err}");
                }
            }
        });
        let page = match browser.new_page("about:blank").await {
            Ok(page) => page,
            Err(err) => {
                shut(browser, handler).await;
                return Err(start_error(err.to_string()));
            }
        };
        Ok(Running {
            browser,
            page,
            handler,
            _proxy: proxy,
            refs: Vec::new(),
        })
    }
}

fn browser_config(
    program: &Path,
    profile: &Path,
    proxy: &CheckingProxy,
    settings: &Settings,
) -> Result<BrowserConfig, String> {
    let mut builder = BrowserConfig::builder()
        .chrome_executable(program)
        .user_data_dir(profile)
        // Certificate errors are errors: chromiumoxide would ignore them by default.
        .respect_https_errors()
        .launch_timeout(settings.timeout)
        .request_timeout(settings.timeout)
        .window_size(1280, 800)
        .viewport(Viewport {
            width: 1280,
            height: 800,
            ..Viewport::default()
        })
        // Every request through the checking proxy, loopback too (Chromium would go
        // straight to loopback otherwise).
        .arg(("proxy-server", proxy.url().as_str()))
        .arg(("proxy-bypass-list", "<-loopback>"))
        // No name is resolved by Chromium itself: only the proxy's address is reachable
        // without the proxy, whatever path a request would take around it.
        .arg(("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"))
        // WebRTC's UDP would go around an HTTP proxy.
        .arg(("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"))
        .arg(("webrtc-ip-handling-policy", "disable_non_proxied_udp"))
        .arg("disable-quic")
        // Chromium's own downloads of components, which nobody asked for.
        .arg("disable-component-update");
    if settings.no_sandbox {
        builder = builder.no_sandbox();
    }
    builder.build()
}
