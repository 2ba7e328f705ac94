//! What the web API's handlers share: the agents the page shows, the reports the binary
//! makes, the running turns to stop, and the small helpers every route uses.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use nanocrab_core::Agent;
use nanocrab_memory::IndexSetup;
use nanocrab_policy::PathGuard;
use nanocrab_schema::SessionKey;
use nanocrab_tools::WorkspaceHistory;
use tokio_util::sync::CancellationToken;

use crate::approvals::Approvals;
use crate::bus::OutboundBus;
use crate::server::ServerState;
use crate::web_auth::WebAuth;
use crate::web_wire::{ApiError, SessionView, WEB_CHANNEL, key_parts};

/// The page's sign-ins and CSRF secret, in the state folder (`state/web-sign-ins.json`).
pub const SIGN_INS_FILE: &str = "web-sign-ins.json";

/// `GET /api/events` streams open at once.
pub(crate) const MAX_LIVE_STREAMS: usize = 32;

/// What the page shows of an agent beyond its turns.
#[derive(Clone)]
pub struct WorkbenchAgent {
    pub workspace: PathBuf,
    /// The agent's file policy: the page edits what its tools could, and no more.
    pub guard: PathGuard,
    /// Its memory index, brought up to date after the page saves a file.
    pub index: Option<IndexSetup>,
    /// Where changed instruction files keep their earlier versions.
    pub history: Option<WorkspaceHistory>,
}

/// Reports whose sources the binary owns (prices, the audit log's place, the skill folders,
/// the scheduled jobs): each the same JSON as the CLI's `--json` output.
pub trait Reports: Send + Sync {
    /// `nanocrab skills list --json` for `agent`.
    fn skills(&self, agent: &str) -> Result<serde_json::Value, String>;
    /// `nanocrab usage --json`, of the calls since `since` when given.
    fn usage(&self, since: Option<jiff::Timestamp>) -> Result<serde_json::Value, String>;
    /// `nanocrab audit list --json` with at most `limit` records.
    fn audit(&self, limit: usize) -> Result<serde_json::Value, String>;
    /// `nanocrab cron list --json`.
    fn cron(&self) -> Result<serde_json::Value, String>;
}

/// The API's state; clones share it.
#[derive(Clone)]
pub struct Workbench {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) server: ServerState,
    pub(crate) agents: BTreeMap<String, WorkbenchAgent>,
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) bus: OutboundBus,
    pub(crate) auth: Arc<WebAuth>,
    pub(crate) reports: Arc<dyn Reports>,
    /// The page's turns running now, to stop from the page.
    pub(crate) running: Mutex<HashMap<SessionKey, CancellationToken>>,
    /// Room for `GET /api/events` streams.
    pub(crate) live_streams: Arc<tokio::sync::Semaphore>,
    /// Told when the page's API changed the list of sessions or answered an approval, for the
    /// live streams of the other tabs.
    pub(crate) sessions_changed: tokio::sync::broadcast::Sender<()>,
}

impl Workbench {
    pub fn new(
        server: ServerState,
        agents: BTreeMap<String, WorkbenchAgent>,
        approvals: Arc<Approvals>,
        bus: OutboundBus,
        reports: Arc<dyn Reports>,
        state_dir: Option<&std::path::Path>,
    ) -> Self {
        let auth = WebAuth::new(server.token(), state_dir.map(|dir| dir.join(SIGN_INS_FILE)));
        Self {
            shared: Arc::new(Shared {
                server,
                agents,
                approvals,
                bus,
                auth,
                reports,
                running: Mutex::default(),
                live_streams: Arc::new(tokio::sync::Semaphore::new(MAX_LIVE_STREAMS)),
                sessions_changed: tokio::sync::broadcast::channel(16).0,
            }),
        }
    }

    /// The agent with id `id`, or 404.
    pub(crate) fn agent(&self, id: &str) -> Result<&Arc<Agent>, ApiError> {
        self.shared
            .server
            .turns()
            .agent(id)
            .ok_or_else(|| ApiError::not_found(format!("no agent `{id}`")))
    }

    pub(crate) fn workbench_agent(&self, id: &str) -> Result<&WorkbenchAgent, ApiError> {
        self.shared
            .agents
            .get(id)
            .ok_or_else(|| ApiError::not_found(format!("no agent `{id}`")))
    }

    /// The session `id` names and its agent; 404 unless its transcript exists.
    pub(crate) fn session(&self, id: &str) -> Result<(SessionKey, &Arc<Agent>), ApiError> {
        let key =
            SessionKey::parse(id).map_err(|_| ApiError::not_found(format!("no session `{id}`")))?;
        let (agent_id, _) = key_parts(&key);
        let agent = self.agent(&agent_id)?;
        if !agent.store().exists(&key) {
            return Err(ApiError::not_found(format!("no session `{id}`")));
        }
        Ok((key, agent))
    }

    pub(crate) fn view(&self, key: &SessionKey, agent: &Agent) -> Result<SessionView, ApiError> {
        let summary = agent.store().summary(key).map_err(ApiError::internal)?;
        Ok(SessionView::new(summary, self.is_busy(key)))
    }

    /// Tells the other tabs' live streams that the list of sessions changed.
    pub(crate) fn sessions_changed(&self) {
        // Nobody listening is fine.
        let _ = self.shared.sessions_changed.send(());
    }

    pub(crate) fn is_busy(&self, key: &SessionKey) -> bool {
        self.shared
            .server
            .turns()
            .activity()
            .iter()
            .any(|a| a.session == *key && (a.running || a.waiting > 0))
    }
}

/// A JSON body, or 400 naming what is wrong with it.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|err| ApiError::bad_request(format!("bad JSON body: {err}")))
}

/// Makes session `key`'s transcript exist, with only its first line, so it is listed before
/// its first message.
pub(crate) fn create_transcript(agent: &Agent, key: &SessionKey) -> Result<(), ApiError> {
    agent.store().append(key, &[]).map_err(ApiError::internal)
}

/// A new session of the page for `agent`: `agent:<agent>:web:<random>`.
pub(crate) fn new_session_key(agent: &str) -> Result<SessionKey, ApiError> {
    let name = uuid::Uuid::new_v4().simple().to_string();
    SessionKey::parse(&format!("agent:{agent}:{WEB_CHANNEL}:{}", &name[..12]))
        .map_err(|err| ApiError::bad_request(err.to_string()))
}
