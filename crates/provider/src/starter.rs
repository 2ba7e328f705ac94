//! A first model for each major cloud provider, for when the user has a key but has not
//! chosen a model: nanocrab then answers with that provider's model, as nanobot picks the
//! provider whose key is present, instead of failing on the default's missing key.

use nanocrab_config::Config;

use crate::registry::PROVIDERS;

/// In the order they are preferred when several keys are present.
const STARTER_MODELS: &[(&str, &str)] = &[
    ("anthropic", "claude-sonnet-4-5"),
    ("openai", "gpt-4.1"),
    ("gemini", "gemini-2.5-flash"),
    ("openrouter", "anthropic/claude-sonnet-4.5"),
    ("deepseek", "deepseek-chat"),
    ("mistral", "mistral-large"),
    ("xai", "grok-4"),
];

/// A provider whose key is at hand, and the model to start with on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedProvider {
    /// `provider/model`.
    pub model: String,
    /// Where the key was found: `OPENAI_API_KEY` or `providers.openai.apiKey`.
    pub key_source: String,
}

/// The first provider of [`STARTER_MODELS`] with a key in `providers.<name>.apiKey` or in its
/// usual environment variable.
pub fn keyed_provider(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<KeyedProvider> {
    STARTER_MODELS.iter().find_map(|(name, model)| {
        let configured = config
            .providers
            .get(*name)
            .and_then(|p| p.api_key.as_deref())
            .is_some_and(|key| !key.is_empty());
        let key_source = if configured {
            format!("providers.{name}.apiKey")
        } else {
            PROVIDERS
                .iter()
                .find(|spec| spec.name == *name)
                .and_then(|spec| spec.api_key_env)
                .filter(|var| env(var).is_some())?
                .to_owned()
        };
        Some(KeyedProvider {
            model: format!("{name}/{model}"),
            key_source,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn every_starter_names_a_known_provider() {
        for (name, _) in STARTER_MODELS {
            assert!(PROVIDERS.iter().any(|spec| spec.name == *name), "{name}");
        }
    }

    #[test]
    fn the_first_provider_with_a_key_is_chosen() {
        let config = Config::default();
        let env = |var: &str| matches!(var, "GEMINI_API_KEY" | "OPENAI_API_KEY").then(String::new);
        assert_eq!(
            keyed_provider(&config, &env),
            Some(KeyedProvider {
                model: "openai/gpt-4.1".to_owned(),
                key_source: "OPENAI_API_KEY".to_owned(),
            })
        );
        assert_eq!(keyed_provider(&config, &|_| None), None);
        let config: Config = serde_json::from_value(
            serde_json::json!({"providers": {"deepseek": {"apiKey": "sk-x"}}}),
        )
        .unwrap();
        assert_eq!(
            keyed_provider(&config, &|_| None),
            Some(KeyedProvider {
                model: "deepseek/deepseek-chat".to_owned(),
                key_source: "providers.deepseek.apiKey".to_owned(),
            })
        );
    }
}
