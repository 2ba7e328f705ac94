//! What loading the config cannot check, because only this crate knows the providers.

use std::path::Path;

use nanocrab_config::{Config, ConfigError, did_you_mean};

use crate::local::LOCAL;
use crate::registry::{PROVIDERS, spec};

/// Checks that every `providers.<name>` is a provider nanocrab knows, or an endpoint of the
/// user's own, which needs an `apiBase`: a misspelt `providers.opnai` would otherwise be kept
/// and never used. `path` is the config file, for the error.
pub fn check_config(config: &Config, path: &Path) -> Result<(), ConfigError> {
    let unknown = config
        .providers
        .iter()
        .find(|(name, provider)| {
            *name != LOCAL && spec(name).is_none() && provider.api_base.is_none()
        })
        .map(|(name, _)| name);
    let Some(name) = unknown else {
        return Ok(());
    };
    let known: Vec<&str> = PROVIDERS.iter().map(|s| s.name).chain([LOCAL]).collect();
    let message = match did_you_mean(name, &known) {
        Some(suggestion) => format!(
            "unknown provider; did you mean `{suggestion}`? (a provider of your own needs apiBase)"
        ),
        None => format!(
            "unknown provider (known: {}; a provider of your own needs apiBase)",
            known.join(", ")
        ),
    };
    Err(ConfigError::InvalidValue {
        path: path.to_path_buf(),
        key: format!("providers.{name}"),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn check(providers: serde_json::Value) -> Result<(), String> {
        let config: Config = serde_json::from_value(json!({ "providers": providers })).unwrap();
        check_config(&config, Path::new("/h/config.json")).map_err(|err| err.to_string())
    }

    #[test]
    fn a_provider_name_is_known_or_has_an_endpoint() {
        assert_eq!(
            check(json!({"opnai": {"apiKey": "sk-x"}})),
            Err("/h/config.json: `providers.opnai`: unknown provider; did you mean `openai`? (a provider of your own needs apiBase)".to_owned())
        );
        assert_eq!(
            check(json!({"zzz": {}})),
            Err("/h/config.json: `providers.zzz`: unknown provider (known: anthropic, openai, gemini, openrouter, deepseek, groq, mistral, xai, moonshot, zhipu, dashscope, minimax, together, fireworks, ollama, vllm, lmstudio, custom, local; a provider of your own needs apiBase)".to_owned())
        );
        assert_eq!(
            check(json!({
                "openai": {"apiKey": "sk-x"},
                "custom": {},
                "local": {"models": {"smollm2-135m": {"price": {"input": 0, "output": 0}}}},
                "myproxy": {"apiBase": "http://10.0.0.2:4000/v1"},
            })),
            Ok(())
        );
    }
}
