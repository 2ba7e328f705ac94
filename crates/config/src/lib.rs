//! nanocrab's configuration: the types of `config.json`, loading with validation, migration
//! and `${ENV}` placeholders, the default file, the JSON Schema, and where files live.

mod browser;
mod channels;
mod cron;
mod error;
mod heartbeat;
mod hooks;
#[cfg(feature = "http")]
pub mod http;
mod job_schedule;
mod load;
mod nanobot;
mod paths;
mod routing;
mod transcription;
mod types;
mod web;
mod write;

pub use browser::BrowserConfig;
pub use channels::*;
pub use cron::{CatchUp, CronConfig};
pub use error::{ConfigError, UnknownKey};
pub use heartbeat::{
    ActiveHours, ActiveWindow, DeliveryTarget, HeartbeatConfig, HeartbeatPlan, Schedule,
    parse_interval,
};
pub use hooks::{
    DEFAULT_HOOK_TIMEOUT_SECS, HookCommand, HookEvent, HookKind, HookMatcher, HooksConfig,
    matches_everything,
};
pub use job_schedule::{CronSpec, JobSchedule, ScheduleError, format_interval, job_interval};
pub use load::{Loaded, did_you_mean, load, migrate, parse};
pub use nanobot::NanobotNote;
pub use paths::{Paths, expand_home};
pub use routing::*;
pub use transcription::TranscriptionConfig;
pub use types::*;
pub use web::{MAX_REDIRECTS, SearchProvider, WebConfig, WebFetchConfig, WebSearchConfig};
pub use write::{WriteOutcome, json_schema, write_config_if_missing};
