//! From a model name in the config (`anthropic/claude-sonnet-4-5`, `claude-sonnet-4-5`,
//! `myproxy/qwen3`) to a provider ready to call.

use std::sync::Arc;

use nanocrab_config::{Config, ProviderConfig};

use crate::error::ProviderError;
use crate::http::{Endpoint, HttpProvider, RetryPolicy};
use crate::local::{LocalModels, LocalProvider};
use crate::profile::ModelProfile;
use crate::provider::LlmProvider;
use crate::registry::{PROVIDERS, Protocol, ProviderSpec, detect, spec, spec_for_model};

/// A provider ready to call, the model name to send it, and what that model accepts.
#[derive(Clone)]
pub struct ResolvedModel {
    pub provider: Arc<dyn LlmProvider>,
    /// The model name as the provider wants it (no `provider/` prefix).
    pub model: String,
    /// `provider/model`, as the user names it; recorded with every answer.
    pub label: String,
    pub profile: ModelProfile,
}

impl std::fmt::Debug for ResolvedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedModel")
            .field("label", &self.label)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

/// Splits `provider/model` into the provider's name and the model name; the model part may
/// itself contain `/` (`openrouter/anthropic/claude-sonnet-4.5`). A bare name is matched to
/// the provider whose models are named like it (`gpt-4.1` → `openai`).
pub fn split_model<'a>(
    model: &'a str,
    config: &Config,
) -> Result<(&'a str, &'a str), ProviderError> {
    let known = |name: &str| {
        name == crate::local::LOCAL || spec(name).is_some() || config.providers.contains_key(name)
    };
    match model.split_once('/') {
        Some((provider, name)) if !provider.is_empty() && !name.is_empty() && known(provider) => {
            Ok((provider, name))
        }
        Some((provider, name)) if !provider.is_empty() && !name.is_empty() => {
            // `meta-llama/llama-3`-style names belong to a gateway, never to no one.
            let mut names: Vec<String> = PROVIDERS
                .iter()
                .map(|s| s.name)
                .chain([crate::local::LOCAL])
                .map(str::to_owned)
                .collect();
            // A configured known provider (`providers.openai`) is listed once.
            for name in config.providers.keys() {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
            Err(ProviderError::UnknownProvider {
                name: provider.to_owned(),
                model: model.to_owned(),
                suggestion: nanocrab_config::did_you_mean(provider, &names),
                known: names,
            })
        }
        Some(_) => Err(ProviderError::BadModelName {
            model: model.to_owned(),
        }),
        None => match spec_for_model(model) {
            Some(spec) => Ok((spec.name, model)),
            None => Err(ProviderError::BadModelName {
                model: model.to_owned(),
            }),
        },
    }
}

/// How one provider name is reached: its spec (known, or recognised from the configured key
/// or endpoint) and its settings.
struct Route<'a> {
    /// What the provider's models accept and how it is spoken to.
    spec: &'static ProviderSpec,
    /// A known provider, as opposed to a user-named endpoint that only looks like one.
    known: bool,
    configured: Option<&'a ProviderConfig>,
    api_key: Option<String>,
}

fn route<'a>(
    name: &'a str,
    config: &'a Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Route<'a>> {
    let configured = config.providers.get(name);
    let config_key = configured
        .and_then(|p| p.api_key.clone())
        .filter(|k| !k.is_empty());
    match spec(name) {
        Some(found) if found.name != "custom" => Some(Route {
            spec: found,
            known: true,
            configured,
            api_key: config_key.or_else(|| found.api_key_env.and_then(env)),
        }),
        // `custom` and user-named providers: an OpenAI-compatible endpoint, unless its key or
        // address gives away which provider it really is (then that provider's quirks apply).
        Some(_) | None => {
            let configured_any = configured.or_else(|| (name == "custom").then_some(&EMPTY))?;
            let detected = detect(config_key.as_deref(), configured_any.api_base.as_deref());
            Some(Route {
                spec: detected.unwrap_or(custom_spec()),
                known: false,
                configured: Some(configured_any),
                api_key: config_key,
            })
        }
    }
}

static EMPTY: ProviderConfig = ProviderConfig {
    api_key: None,
    api_base: None,
    extra_headers: std::collections::BTreeMap::new(),
    api: None,
    prompt_caching: None,
    models: std::collections::BTreeMap::new(),
};

fn custom_spec() -> &'static ProviderSpec {
    PROVIDERS
        .iter()
        .find(|s| s.name == "custom")
        .unwrap_or(&PROVIDERS[0])
}

/// The profile of `model` on `provider` with the user's settings applied: what the model
/// accepts, and how the provider is spoken to.
pub fn model_profile(provider: &str, model: &str, config: &Config) -> ModelProfile {
    let Some(route) = route(provider, config, &|_| None) else {
        return custom_spec().model_profile(model);
    };
    profile_of(&route, model)
}

fn profile_of(route: &Route<'_>, model: &str) -> ModelProfile {
    let mut profile = route.spec.model_profile(model);
    if let Some(configured) = route.configured {
        // Caching can be switched off, never on where the provider has no such thing.
        if configured.prompt_caching == Some(false) {
            profile.prompt_caching = false;
        }
        if let Some(settings) = configured.models.get(model) {
            if let Some(vision) = settings.vision {
                profile.vision = vision;
            }
            if let Some(tools) = settings.tools {
                profile.tools = tools;
            }
        }
    }
    profile
}

/// Builds the provider for `model` from the config, taking the key from
/// `providers.<name>.apiKey` or else the provider's usual environment variable.
pub fn resolve_model(
    model: &str,
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
    retry: RetryPolicy,
    local: &LocalModels,
) -> Result<ResolvedModel, ProviderError> {
    let (name, model_name) = split_model(model, config)?;
    // `providers.local` with an `apiBase` is the user's endpoint and wins.
    if name == crate::local::LOCAL && crate::local::in_process(config) {
        return Ok(ResolvedModel {
            provider: Arc::new(LocalProvider::new(local.clone())),
            model: model_name.to_owned(),
            label: format!("{name}/{model_name}"),
            profile: local.profile(model_name)?,
        });
    }
    let route = route(name, config, env).ok_or_else(|| ProviderError::MissingApiBase {
        provider: name.to_owned(),
    })?;
    if route.known && route.spec.requires_key && route.api_key.is_none() {
        return Err(ProviderError::MissingKey {
            provider: name.to_owned(),
            model: model.to_owned(),
            env_var: route.spec.api_key_env.unwrap_or("API_KEY").to_owned(),
        });
    }
    let api_base = route
        .configured
        .and_then(|p| p.api_base.clone())
        .or_else(|| {
            route
                .known
                .then_some(route.spec.default_api_base)
                .flatten()
                .map(str::to_owned)
        })
        .ok_or_else(|| ProviderError::MissingApiBase {
            provider: name.to_owned(),
        })?;
    let protocol = route
        .configured
        .and_then(|p| p.api)
        .unwrap_or_else(|| route.spec.model_protocol(model_name));
    let profile = profile_of(&route, model_name);
    let endpoint = Endpoint {
        provider: name.to_owned(),
        api_base: api_base.trim_end_matches('/').to_owned(),
        api_key: route.api_key,
        api_key_env: route.known.then_some(route.spec.api_key_env).flatten(),
        extra_headers: route
            .configured
            .map(|p| p.extra_headers.clone().into_iter().collect())
            .unwrap_or_default(),
        retry,
        profile,
    };
    let provider: Arc<dyn LlmProvider> = match protocol {
        Protocol::AnthropicMessages => {
            Arc::new(HttpProvider::new(endpoint, crate::anthropic::Anthropic))
        }
        Protocol::OpenAiChat => Arc::new(HttpProvider::new(endpoint, crate::openai::OpenAi)),
        Protocol::OpenAiResponses => {
            Arc::new(HttpProvider::new(endpoint, crate::responses::Responses))
        }
        Protocol::Gemini => Arc::new(HttpProvider::new(endpoint, crate::gemini::Gemini)),
    };
    Ok(ResolvedModel {
        provider,
        model: model_name.to_owned(),
        label: format!("{name}/{model_name}"),
        profile,
    })
}

/// The state of one provider for `nanocrab status` and `providers list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// A key is needed and there is none.
    NoKey,
    /// An endpoint is needed and there is none.
    NoEndpoint,
}

/// One row of `nanocrab providers list`: a known provider, or an endpoint the user named.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderStatus {
    pub name: String,
    pub spec: &'static ProviderSpec,
    pub protocol: Protocol,
    pub api_base: Option<String>,
    pub readiness: Readiness,
    /// The configured key looks like another provider's (`sk-or-` under `openai`).
    pub key_looks_like: Option<&'static ProviderSpec>,
}

/// Every known provider, then every provider name the user added, with whether it can be used
/// as configured.
pub fn provider_statuses(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<ProviderStatus> {
    // `providers.local` without an `apiBase` holds settings of the in-process models, and
    // is no endpoint.
    let own = config.providers.keys().map(String::as_str).filter(|name| {
        spec(name).is_none() && !(*name == crate::local::LOCAL && crate::local::in_process(config))
    });
    let names = PROVIDERS.iter().map(|s| s.name).chain(own);
    names
        .map(|name| {
            let route = route(name, config, env);
            let (spec_used, known) = match &route {
                Some(r) => (r.spec, r.known),
                None => (custom_spec(), false),
            };
            let configured = config.providers.get(name);
            let api_base = configured.and_then(|p| p.api_base.clone()).or_else(|| {
                known
                    .then_some(spec_used.default_api_base)
                    .flatten()
                    .map(str::to_owned)
            });
            let api_key = route.as_ref().and_then(|r| r.api_key.clone());
            let readiness = match (&api_base, known && spec_used.requires_key, &api_key) {
                (None, _, _) => Readiness::NoEndpoint,
                (Some(_), true, None) => Readiness::NoKey,
                (Some(_), _, _) => Readiness::Ready,
            };
            let key_looks_like = configured
                .and_then(|p| p.api_key.as_deref())
                .and_then(|key| detect(Some(key), None))
                .filter(|detected| known && detected.name != name);
            ProviderStatus {
                name: name.to_owned(),
                spec: spec_used,
                protocol: configured.and_then(|p| p.api).unwrap_or(spec_used.protocol),
                api_base,
                readiness,
                key_looks_like,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn config(value: serde_json::Value) -> Config {
        serde_json::from_value(value).unwrap()
    }

    /// Local models over a store that is never read.
    fn no_local_models() -> LocalModels {
        LocalModels::new(
            nanocrab_models::ModelStore::new("/nonexistent/models"),
            nanocrab_models::Catalogue::builtin(),
            None,
        )
    }

    fn resolve_err(model: &str, config: &Config) -> String {
        match resolve_model(
            model,
            config,
            &|_| None,
            RetryPolicy::default(),
            &no_local_models(),
        ) {
            Ok(_) => panic!("{model} resolved"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn model_names_split_at_the_first_slash_or_are_recognised() {
        let config = Config::default();
        assert_eq!(
            split_model("openrouter/anthropic/claude-sonnet-4-5", &config).unwrap(),
            ("openrouter", "anthropic/claude-sonnet-4-5")
        );
        assert_eq!(
            split_model("gpt-4.1", &config).unwrap(),
            ("openai", "gpt-4.1")
        );
        assert_eq!(
            resolve_err("llama3", &config),
            "model \"llama3\" is not of the form provider/model (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, custom/qwen3)"
        );
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
            "unknown provider \"antropic\" in model \"antropic/claude\" (did you mean \"anthropic\"?); known providers: anthropic, openai, gemini, openrouter, deepseek, groq, mistral, xai, moonshot, zhipu, dashscope, minimax, together, fireworks, ollama, vllm, lmstudio, custom, local"
        );
        // A configured known provider is listed once; the user's own endpoints are added.
        let configured = config(json!({"providers": {
            "openai": {"apiKey": "sk-x"},
            "myproxy": {"apiBase": "http://10.0.0.2:4000/v1"},
        }}));
        assert_eq!(
            resolve_err("opnai/gpt-4.1", &configured),
            "unknown provider \"opnai\" in model \"opnai/gpt-4.1\" (did you mean \"openai\"?); known providers: anthropic, openai, gemini, openrouter, deepseek, groq, mistral, xai, moonshot, zhipu, dashscope, minimax, together, fireworks, ollama, vllm, lmstudio, custom, local, myproxy"
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
            &no_local_models(),
        )
        .unwrap();
        assert_eq!(
            (
                resolved.provider.name(),
                resolved.model.as_str(),
                resolved.label.as_str()
            ),
            ("openai", "gpt-4.1", "openai/gpt-4.1")
        );
        let ready: Vec<String> = provider_statuses(&Config::default(), &env)
            .into_iter()
            .filter(|s| s.readiness == Readiness::Ready)
            .map(|s| s.name)
            .collect();
        assert_eq!(ready, vec!["openai", "ollama", "vllm", "lmstudio"]);
    }

    #[test]
    fn user_named_endpoints_are_openai_compatible_unless_they_look_like_a_known_provider() {
        let config = config(json!({"providers": {
            "myproxy": {"apiBase": "http://10.0.0.2:4000/v1"},
            "work": {"apiBase": "https://openrouter.ai/api/v1", "apiKey": "k"},
            "claude-proxy": {"apiBase": "http://10.0.0.3", "api": "anthropic-messages"},
            "custom": {"apiBase": "http://h/v1", "apiKey": "sk-or-v1-x"},
        }}));
        let plain = resolve_model(
            "myproxy/qwen3",
            &config,
            &|_| None,
            RetryPolicy::default(),
            &no_local_models(),
        )
        .unwrap();
        assert_eq!(plain.profile, ModelProfile::GENERIC);
        let work = resolve_model(
            "work/anthropic/claude-sonnet-4.5",
            &config,
            &|_| None,
            RetryPolicy::default(),
            &no_local_models(),
        )
        .unwrap();
        assert!(work.profile.prompt_caching, "recognised as OpenRouter");
        let custom = model_profile("custom", "anthropic/claude-sonnet-4.5", &config);
        assert!(custom.prompt_caching, "an OpenRouter key under custom");
        let statuses = provider_statuses(&config, &|_| None);
        let claude_proxy = statuses.iter().find(|s| s.name == "claude-proxy").unwrap();
        assert_eq!(
            (claude_proxy.protocol, &claude_proxy.readiness),
            (Protocol::AnthropicMessages, &Readiness::Ready)
        );
    }

    #[test]
    fn settings_for_the_in_process_model_do_not_make_local_an_endpoint() {
        let priced = config(json!({"providers": {"local": {"models": {"smollm2-135m": {
            "price": {"input": 0, "output": 0}
        }}}}}));
        let names = |config: &Config| -> Vec<String> {
            provider_statuses(config, &|_| None)
                .into_iter()
                .filter(|s| s.name == "local")
                .map(|s| format!("{} {:?}", s.name, s.readiness))
                .collect()
        };
        assert_eq!(names(&priced), Vec::<String>::new());
        let endpoint = config(json!({"providers": {"local": {"apiBase": "http://10.0.0.2/v1"}}}));
        assert_eq!(names(&endpoint), ["local Ready"]);
    }

    #[test]
    fn user_settings_override_the_registry() {
        let config = config(json!({"providers": {
            "ollama": {"models": {"qwen3": {"vision": true, "tools": false}}},
            "anthropic": {"apiKey": "sk-or-v1-oops", "promptCaching": false},
        }}));
        let qwen = model_profile("ollama", "qwen3", &config);
        assert!(qwen.vision && !qwen.tools);
        assert!(!model_profile("anthropic", "claude-sonnet-4-5", &config).prompt_caching);
        let anthropic = provider_statuses(&config, &|_| None)
            .into_iter()
            .find(|s| s.name == "anthropic")
            .unwrap();
        assert_eq!(anthropic.key_looks_like.map(|s| s.name), Some("openrouter"));
    }
}
