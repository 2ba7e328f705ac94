//! The reports of the web page (`/api/skills`, `/api/usage`, `/api/audit`, the jobs in
//! `/api/status`): the same JSON the CLI prints with `--json`, made by the same code.

use nanocrab_config::Config;
use nanocrab_gateway::{CronControl, Reports};
use nanocrab_policy::{AuditLog, AuditQuery, Redactor};

use super::Env;
use crate::cli::UsageArgs;

pub struct WebReports {
    pub env: Env,
    pub config: Config,
    pub cron: Option<CronControl>,
}

fn said(err: anyhow::Error) -> String {
    format!("{err:#}")
}

impl Reports for WebReports {
    fn skills(&self, agent: &str) -> Result<serde_json::Value, String> {
        super::skills::list_json(&self.env, agent).map_err(said)
    }

    fn usage(&self, since: Option<jiff::Timestamp>) -> Result<serde_json::Value, String> {
        let mut out = Vec::new();
        let args = UsageArgs {
            session: None,
            since,
            json: true,
        };
        super::usage::report(&self.env, &self.config, args, &mut out).map_err(said)?;
        serde_json::from_slice(&out).map_err(|err| err.to_string())
    }

    fn audit(&self, limit: usize) -> Result<serde_json::Value, String> {
        let path = self.env.paths.audit_log();
        if !path.exists() {
            return Ok(serde_json::json!([]));
        }
        // Reading needs no redactor: what was stored is already redacted.
        let log = AuditLog::open(&path, Redactor::default()).map_err(|err| err.to_string())?;
        let records = log
            .list(&AuditQuery {
                limit: Some(limit),
                ..AuditQuery::default()
            })
            .map_err(|err| err.to_string())?;
        serde_json::to_value(records).map_err(|err| err.to_string())
    }

    fn cron(&self) -> Result<serde_json::Value, String> {
        match &self.cron {
            Some(control) => super::cron::list_json(control).map_err(said),
            None => Err("scheduled jobs are off (cron.enabled is false)".to_owned()),
        }
    }
}
