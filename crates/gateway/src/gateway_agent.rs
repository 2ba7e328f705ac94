//! An agent as the gateway runs it.

use std::path::PathBuf;
use std::sync::Arc;

use nanocrab_core::Agent;

/// An agent as the gateway runs it: the agent, and the workspace attachments are saved into.
#[derive(Clone)]
pub struct GatewayAgent {
    pub agent: Arc<Agent>,
    pub workspace: PathBuf,
}
