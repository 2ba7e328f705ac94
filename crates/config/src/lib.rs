//! nanocrab's configuration: the types of `config.json`, and (in later modules) loading,
//! validation, migration and `${ENV}` placeholders.

mod types;

pub use types::*;
