//! `cron`: whether the gateway runs scheduled jobs, and what a job that missed its time while
//! the gateway was down does by default.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CronConfig {
    /// The gateway runs the jobs of `nanocrab cron` and the `cron` tool; `false` keeps them
    /// stored but idle, and the agent gets no `cron` tool.
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// What a job whose time passed while the gateway was not running does, unless the job
    /// says otherwise: `once` runs it once now (however many times were missed), `skip` waits
    /// for its next time.
    #[serde(default)]
    pub catch_up: CatchUp,
}

impl Default for CronConfig {
    fn default() -> Self {
        Self {
            enabled: default_enabled(),
            catch_up: CatchUp::default(),
        }
    }
}

fn default_enabled() -> bool {
    true
}

/// What a job does about the runs it missed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CatchUp {
    /// Run once now, however many runs were missed.
    #[default]
    Once,
    /// Run at the next time the schedule gives.
    Skip,
}

impl CatchUp {
    pub fn name(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Skip => "skip",
        }
    }

    /// `once` or `skip`; the error says what is allowed.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "once" => Ok(Self::Once),
            "skip" => Ok(Self::Skip),
            other => Err(format!(
                "{other:?} is not a catch-up mode; allowed: once, skip"
            )),
        }
    }
}
