use std::sync::Arc;

use nanocrab_config::Config;

use crate::error::ProviderError;
use crate::http::{Endpoint, RetryPolicy};
use crate::provider::LlmProvider;

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    AnthropicMessages,
    OpenAiChat,
    Gemini,
}

/// What nanocrab knows about a provider without any configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderSpec {
    pub name: &'static str,
    pub protocol: Protocol,
    /// As the official SDKs take it: OpenAI-style bases include `/v1`, Anthropic's is the host
    /// root. `None`: the user must set `apiBase`.
    pub default_api_base: Option<&'static str>,
    pub api_key_env: Option<&'static str>,
    /// Local servers need no key.
    pub requires_key: bool,
}

pub const PROVIDERS: &[ProviderSpec] = &[
    ProviderSpec {
        name: "anthropic",
        protocol: Protocol::AnthropicMessages,
        default_api_base: Some("https://api.anthropic.com"),
        api_key_env: Some("ANTHROPIC_API_KEY"),
        requires_key: true,
    },
    ProviderSpec {
        name: "openai",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.openai.com/v1"),
        api_key_env: Some("OPENAI_API_KEY"),
        requires_key: true,
    },
    ProviderSpec {
        name: "gemini",
        protocol: Protocol::Gemini,
        default_api_base: Some("https://generativelanguage.googleapis.com"),
        api_key_env: Some("GEMINI_API_KEY"),
        requires_key: true,
    },
    ProviderSpec {
        name: "openrouter",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://openrouter.ai/api/v1"),
        api_key_env: Some("OPENROUTER_API_KEY"),
        requires_key: true,
    },
    ProviderSpec {
        name: "deepseek",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.deepseek.com/v1"),
        api_key_env: Some("DEEPSEEK_API_KEY"),
        requires_key: true,
    },
    ProviderSpec {
        name: "groq",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.groq.com/openai/v1"),
        api_key_env: Some("GROQ_API_KEY"),
        requires_key: true,
    },
    ProviderSpec {
        name: "ollama",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("http://localhost:11434/v1"),
        api_key_env: None,
        requires_key: false,
    },
    ProviderSpec {
        name: "vllm",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("http://localhost:8000/v1"),
        api_key_env: None,
        requires_key: false,
    },
    ProviderSpec {
        name: "lmstudio",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("http://localhost:1234/v1"),
        api_key_env: None,
        requires_key: false,
    },
    ProviderSpec {
        name: "custom",
        protocol: Protocol::OpenAiChat,
        default_api_base: None,
        api_key_env: None,
        requires_key: false,
    },
];

pub fn spec(name: &str) -> Option<&'static ProviderSpec> {
    PROVIDERS.iter().find(|s| s.name == name)
}

/// A provider ready to call, and the model name to send it.
#[derive(Clone)]
pub struct ResolvedModel {
    pub provider: Arc<dyn LlmProvider>,
    pub model: String,
}

/// Splits `provider/model`; the model part may itself contain `/`
/// (`openrouter/anthropic/claude-sonnet-4-5`).
pub fn split_model(model: &str) -> Result<(&str, &str), ProviderError> {
    match model.split_once('/') {
        Some((provider, name)) if !provider.is_empty() && !name.is_empty() => Ok((provider, name)),
        Some(_) | None => Err(ProviderError::BadModelName {
            model: model.to_owned(),
        }),
    }
}

/// Builds the provider for `model` from the config, taking the key from
/// `providers.<name>.apiKey` or else the provider's usual environment variable.
pub fn resolve_model(
    model: &str,
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
    retry: RetryPolicy,
) -> Result<ResolvedModel, ProviderError> {
    let (name, model_name) = split_model(model)?;
    let spec = spec(name).ok_or_else(|| {
        let known: Vec<String> = PROVIDERS.iter().map(|s| s.name.to_owned()).collect();
        let suggestion = nanocrab_config::did_you_mean(name, &known);
        ProviderError::UnknownProvider {
            name: name.to_owned(),
            model: model.to_owned(),
            suggestion,
            known,
        }
    })?;
    let configured = config.providers.get(name);
    let api_key = configured
        .and_then(|p| p.api_key.clone())
        .filter(|k| !k.is_empty())
        .or_else(|| spec.api_key_env.and_then(env));
    if spec.requires_key && api_key.is_none() {
        return Err(ProviderError::MissingKey {
            provider: name.to_owned(),
            model: model.to_owned(),
            env_var: spec.api_key_env.unwrap_or("API_KEY").to_owned(),
        });
    }
    let api_base = configured
        .and_then(|p| p.api_base.clone())
        .or_else(|| spec.default_api_base.map(str::to_owned))
        .ok_or_else(|| ProviderError::MissingApiBase {
            provider: name.to_owned(),
        })?;
    let endpoint = Endpoint {
        provider: name.to_owned(),
        api_base: api_base.trim_end_matches('/').to_owned(),
        api_key,
        api_key_env: spec.api_key_env,
        extra_headers: configured
            .map(|p| p.extra_headers.clone().into_iter().collect())
            .unwrap_or_default(),
        retry,
    };
    let provider: Arc<dyn LlmProvider> = match spec.protocol {
        Protocol::AnthropicMessages => Arc::new(crate::http::HttpProvider::new(
            endpoint,
            crate::anthropic::Anthropic,
        )),
        Protocol::OpenAiChat => Arc::new(crate::http::HttpProvider::new(
            endpoint,
            crate::openai::OpenAi,
        )),
        Protocol::Gemini => Arc::new(crate::http::HttpProvider::new(
            endpoint,
            crate::gemini::Gemini,
        )),
    };
    Ok(ResolvedModel {
        provider,
        model: model_name.to_owned(),
    })
}

/// Every known provider and whether it can be used as configured (has a key, or needs none
/// and has an endpoint).
pub fn configured_providers(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(&'static ProviderSpec, bool)> {
    PROVIDERS
        .iter()
        .map(|spec| {
            let configured = config.providers.get(spec.name);
            let has_key = configured
                .and_then(|p| p.api_key.as_deref())
                .is_some_and(|k| !k.is_empty())
                || spec.api_key_env.and_then(env).is_some();
            let has_base = spec.default_api_base.is_some()
                || configured.and_then(|p| p.api_base.as_deref()).is_some();
            let ready = if spec.requires_key {
                has_key
            } else {
                has_base && (configured.is_some() || spec.name != "custom")
            };
            (spec, ready && has_base)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn resolve_err(model: &str, config: &Config) -> String {
        match resolve_model(model, config, &|_| None, RetryPolicy::default()) {
            Ok(_) => panic!("{model} resolved"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn model_names_split_at_the_first_slash() {
        assert_eq!(
            split_model("openrouter/anthropic/claude-sonnet-4-5").unwrap(),
            ("openrouter", "anthropic/claude-sonnet-4-5")
        );
        assert!(split_model("gpt-4.1").is_err());
    }

    #[test]
    fn a_missing_key_says_how_to_configure_one() {
        insta::assert_snapshot!(resolve_err(
            "anthropic/claude-sonnet-4-5",
            &Config::default()
        ));
    }

    #[test]
    fn unknown_providers_get_a_suggestion() {
        assert_eq!(
            resolve_err("antropic/claude", &Config::default()),
            "unknown provider \"antropic\" in model \"antropic/claude\" (did you mean \"anthropic\"?); known providers: anthropic, openai, gemini, openrouter, deepseek, groq, ollama, vllm, lmstudio, custom"
        );
        assert_eq!(
            resolve_err("custom/qwen3", &Config::default()),
            "custom needs an endpoint: set providers.custom.apiBase in config.json (e.g. http://localhost:11434/v1 for Ollama)"
        );
    }

    #[test]
    fn keys_fall_back_to_the_environment() {
        let env = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-env".to_owned());
        let resolved = resolve_model(
            "openai/gpt-4.1",
            &Config::default(),
            &env,
            RetryPolicy::default(),
        )
        .unwrap();
        assert_eq!(
            (resolved.provider.name(), resolved.model.as_str()),
            ("openai", "gpt-4.1")
        );
        let ready: Vec<&str> = configured_providers(&Config::default(), &env)
            .into_iter()
            .filter(|(_, ready)| *ready)
            .map(|(spec, _)| spec.name)
            .collect();
        assert_eq!(ready, vec!["openai", "ollama", "vllm", "lmstudio"]);
    }
}
