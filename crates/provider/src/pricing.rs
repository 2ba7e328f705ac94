//! What a model call cost: a built-in price table, the user's own prices from `config.json`,
//! and free local servers.
//!
//! The built-in prices are **estimates**, copied from the providers' public price lists on
//! [`PRICES_AS_OF`]. Providers change them, bill some requests differently (long prompts,
//! batch, regional endpoints) and resellers charge their own; a price set at
//! `providers.<provider>.models.<model>.price` in `config.json` always wins over the table.

use nanocrab_config::{Config, Price};
use nanocrab_schema::Usage;

/// The day the built-in prices were taken from the providers' price lists.
pub const PRICES_AS_OF: &str = "2025-11-24";

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    /// Prompt tokens billed at the full rate.
    pub input: f64,
    /// Output tokens, reasoning included.
    pub output: f64,
    /// Prompt tokens served from the prompt cache.
    pub cache_read: f64,
    /// Prompt tokens written to the prompt cache.
    pub cache_write: f64,
}

impl ModelPrice {
    pub const FREE: Self = Self {
        input: 0.0,
        output: 0.0,
        cache_read: 0.0,
        cache_write: 0.0,
    };

    /// US dollars for `usage`. The four counts never overlap, so each is billed once.
    pub fn cost(&self, usage: &Usage) -> f64 {
        (usage.input_tokens as f64 * self.input
            + usage.output_tokens as f64 * self.output
            + usage.cache_read_tokens as f64 * self.cache_read
            + usage.cache_write_tokens as f64 * self.cache_write)
            / 1_000_000.0
    }
}

impl From<Price> for ModelPrice {
    /// A provider that does not price cache traffic separately bills it as plain input.
    fn from(price: Price) -> Self {
        Self {
            input: price.input,
            output: price.output,
            cache_read: price.cache_read.unwrap_or(price.input),
            cache_write: price.cache_write.unwrap_or(price.input),
        }
    }
}

/// Where a model's price came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceSource {
    /// `providers.<provider>.models.<model>.price` in `config.json`.
    Config(ModelPrice),
    /// The built-in table; `prefix` is the entry that matched.
    BuiltIn {
        prefix: &'static str,
        price: ModelPrice,
    },
    /// A model served by a local provider (`ollama`, `vllm`, `lmstudio`: the registry's
    /// `local` ones), or run in-process (`local/<model>`).
    Local,
    /// No price: the cost is unknown, never assumed to be zero.
    Unknown,
}

impl PriceSource {
    pub fn price(&self) -> Option<ModelPrice> {
        match self {
            Self::Config(price) | Self::BuiltIn { price, .. } => Some(*price),
            Self::Local => Some(ModelPrice::FREE),
            Self::Unknown => None,
        }
    }
}

/// The price of one model as a transcript names it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPricing {
    pub source: PriceSource,
    /// The `config.json` key that sets (or set) this model's price, e.g.
    /// `providers.anthropic.models.claude-sonnet-4-5.price`. `<provider>` stands in for a
    /// provider that neither the model name nor the config names.
    pub config_key: String,
}

/// The price of `model`, which is either a configured `provider/model` label
/// (`anthropic/claude-sonnet-4-5`, `openrouter/anthropic/claude-sonnet-4.5`) or, in older
/// transcripts, the bare name the provider reported (`claude-sonnet-4-5-20250929`).
///
/// In order: the user's price for that provider and model; the user's price for that exact
/// name under any provider (bare names, and the `vendor/model` names OpenRouter reports);
/// free for a local provider and the in-process model; the built-in table, matched on the part after the last `/`,
/// longest prefix first; otherwise unknown.
pub fn model_pricing(model: &str, config: &Config) -> ModelPricing {
    let user_price = |provider: &str, name: &str| {
        config
            .providers
            .get(provider)
            .and_then(|p| p.models.get(name))
            .and_then(|m| m.price)
    };
    let labelled = model
        .split_once('/')
        .filter(|(provider, name)| !provider.is_empty() && !name.is_empty());
    if let Some((provider, name)) = labelled
        && let Some(price) = user_price(provider, name)
    {
        return ModelPricing {
            source: PriceSource::Config(price.into()),
            config_key: price_key(provider, name),
        };
    }
    if let Some((provider, price)) = config
        .providers
        .iter()
        .find_map(|(provider, _)| Some((provider, user_price(provider, model)?)))
    {
        return ModelPricing {
            source: PriceSource::Config(price.into()),
            config_key: price_key(provider, model),
        };
    }
    // A bare name belongs to whichever provider the config uses it with.
    let (provider, name) = match labelled {
        Some((provider, name)) => (Some(provider), name),
        None => {
            let configured = config
                .providers
                .iter()
                .find(|(_, p)| p.models.contains_key(model))
                .map(|(provider, _)| provider.as_str());
            let defaults = &config.agents.defaults;
            let in_use = std::iter::once(&defaults.model)
                .chain(&defaults.fallback_models)
                .filter_map(|label| label.split_once('/'))
                .find(|(_, name)| *name == model)
                .map(|(provider, _)| provider);
            (configured.or(in_use), model)
        }
    };
    let config_key = price_key(provider.unwrap_or("<provider>"), name);
    // A server on the user's own machine costs nothing, nor does the in-process model.
    if provider.is_some_and(|provider| {
        (provider == crate::local::LOCAL && crate::local::in_process(config))
            || crate::registry::spec(provider).is_some_and(|s| s.local)
    }) {
        return ModelPricing {
            source: PriceSource::Local,
            config_key,
        };
    }
    let bare = normalise(model.rsplit('/').next().unwrap_or(model));
    let source = BUILT_IN
        .iter()
        .filter(|(prefix, _)| {
            let prefix = normalise(prefix);
            // A prefix must end at a word boundary: `gpt-4.1` is not a prefix of
            // `gpt-4-1106-preview` once dots read as dashes.
            bare.strip_prefix(&prefix)
                .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map_or(PriceSource::Unknown, |(prefix, price)| {
            PriceSource::BuiltIn {
                prefix,
                price: *price,
            }
        });
    ModelPricing { source, config_key }
}

fn price_key(provider: &str, model: &str) -> String {
    format!("providers.{provider}.models.{model}.price")
}

/// Vendors and resellers spell versions with dots or dashes (`claude-sonnet-4.5` on
/// OpenRouter, `claude-sonnet-4-5` at Anthropic); both read the same.
fn normalise(name: &str) -> String {
    name.to_ascii_lowercase().replace('.', "-")
}

/// Anthropic: cache writes (5-minute) cost 1.25x input, cache reads 0.1x.
const fn anthropic(input: f64, output: f64) -> ModelPrice {
    ModelPrice {
        input,
        output,
        cache_read: input / 10.0,
        cache_write: input * 1.25,
    }
}

/// A provider with a cheaper price for cached prompt tokens and no charge for writing them.
const fn cached(input: f64, output: f64, cache_read: f64) -> ModelPrice {
    ModelPrice {
        input,
        output,
        cache_read,
        cache_write: input,
    }
}

/// A provider with no separate cache prices.
const fn flat(input: f64, output: f64) -> ModelPrice {
    cached(input, output, input)
}

/// Model-name prefixes and their prices in US$ per million tokens, as of [`PRICES_AS_OF`].
/// Prices for prompts over a provider's long-context threshold are not modelled.
const BUILT_IN: &[(&str, ModelPrice)] = &[
    // Anthropic
    ("claude-opus-4-5", anthropic(5.0, 25.0)),
    ("claude-opus-4", anthropic(15.0, 75.0)),
    ("claude-sonnet-4-5", anthropic(3.0, 15.0)),
    ("claude-sonnet-4", anthropic(3.0, 15.0)),
    ("claude-haiku-4-5", anthropic(1.0, 5.0)),
    ("claude-3-7-sonnet", anthropic(3.0, 15.0)),
    ("claude-3-5-sonnet", anthropic(3.0, 15.0)),
    ("claude-3-5-haiku", anthropic(0.8, 4.0)),
    ("claude-3-opus", anthropic(15.0, 75.0)),
    ("claude-3-sonnet", anthropic(3.0, 15.0)),
    ("claude-3-haiku", anthropic(0.25, 1.25)),
    // OpenAI: cached input as OpenAI prices it; writing to the cache is free.
    ("gpt-5", cached(1.25, 10.0, 0.125)),
    ("gpt-5-mini", cached(0.25, 2.0, 0.025)),
    ("gpt-5-nano", cached(0.05, 0.4, 0.005)),
    ("gpt-5-pro", flat(15.0, 120.0)),
    ("gpt-4.1", cached(2.0, 8.0, 0.5)),
    ("gpt-4.1-mini", cached(0.4, 1.6, 0.1)),
    ("gpt-4.1-nano", cached(0.1, 0.4, 0.025)),
    ("gpt-4o", cached(2.5, 10.0, 1.25)),
    ("gpt-4o-2024-05-13", flat(5.0, 15.0)),
    ("gpt-4o-mini", cached(0.15, 0.6, 0.075)),
    ("o1", cached(15.0, 60.0, 7.5)),
    ("o1-mini", cached(1.1, 4.4, 0.55)),
    ("o1-pro", flat(150.0, 600.0)),
    ("o3", cached(2.0, 8.0, 0.5)),
    ("o3-mini", cached(1.1, 4.4, 0.55)),
    ("o3-pro", flat(20.0, 80.0)),
    ("o4-mini", cached(1.1, 4.4, 0.275)),
    // Google Gemini (prompts up to 200k tokens; cache storage per hour is not modelled).
    ("gemini-3-pro", cached(2.0, 12.0, 0.2)),
    ("gemini-2.5-pro", cached(1.25, 10.0, 0.125)),
    ("gemini-2.5-flash", cached(0.3, 2.5, 0.03)),
    ("gemini-2.5-flash-lite", cached(0.1, 0.4, 0.01)),
    ("gemini-2.0-flash", cached(0.1, 0.4, 0.025)),
    ("gemini-2.0-flash-lite", flat(0.075, 0.3)),
    // DeepSeek: input at the cache-miss price, cache reads at the cache-hit price.
    ("deepseek-chat", cached(0.28, 0.42, 0.028)),
    ("deepseek-reasoner", cached(0.28, 0.42, 0.028)),
    // xAI
    ("grok-4", cached(3.0, 15.0, 0.75)),
    ("grok-4-fast", cached(0.2, 0.5, 0.05)),
    ("grok-code-fast", cached(0.2, 1.5, 0.02)),
    ("grok-3", cached(3.0, 15.0, 0.75)),
    ("grok-3-mini", cached(0.3, 0.5, 0.075)),
    // Mistral
    ("mistral-large", flat(2.0, 6.0)),
    ("mistral-medium", flat(0.4, 2.0)),
    ("mistral-small", flat(0.1, 0.3)),
    ("codestral", flat(0.3, 0.9)),
    ("devstral", flat(0.1, 0.3)),
    ("devstral-medium", flat(0.4, 2.0)),
    // Moonshot
    ("kimi-k2", cached(0.6, 2.5, 0.15)),
    ("kimi-k2-turbo", cached(1.15, 8.0, 0.15)),
    ("kimi-k2-thinking", cached(0.6, 2.5, 0.15)),
    ("kimi-k2-thinking-turbo", cached(1.15, 8.0, 0.15)),
    // Zhipu
    ("glm-4.6", cached(0.6, 2.2, 0.11)),
    ("glm-4.5", cached(0.6, 2.2, 0.11)),
    ("glm-4.5-air", cached(0.2, 1.1, 0.03)),
    // Qwen (Alibaba Cloud international): implicit cache hits at 20% of input.
    ("qwen3-max", cached(1.2, 6.0, 0.24)),
    ("qwen-max", cached(1.6, 6.4, 0.32)),
    ("qwen-plus", cached(0.4, 1.2, 0.08)),
    ("qwen-turbo", cached(0.05, 0.2, 0.01)),
    ("qwen-flash", cached(0.05, 0.4, 0.01)),
    // MiniMax
    (
        "minimax-m2",
        ModelPrice {
            input: 0.3,
            output: 1.2,
            cache_read: 0.03,
            cache_write: 0.375,
        },
    ),
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn config(json: serde_json::Value) -> Config {
        serde_json::from_value(json).unwrap()
    }

    fn built_in(prefix: &'static str) -> PriceSource {
        let price = BUILT_IN
            .iter()
            .find(|(p, _)| *p == prefix)
            .map(|(_, price)| *price)
            .unwrap();
        PriceSource::BuiltIn { prefix, price }
    }

    #[test]
    fn dated_and_relabelled_names_match_their_family() {
        let config = Config::default();
        for (model, prefix, key) in [
            (
                "claude-sonnet-4-5-20250929",
                "claude-sonnet-4-5",
                "providers.<provider>.models.claude-sonnet-4-5-20250929.price",
            ),
            (
                "anthropic/claude-sonnet-4-5",
                "claude-sonnet-4-5",
                "providers.anthropic.models.claude-sonnet-4-5.price",
            ),
            (
                "openrouter/anthropic/claude-sonnet-4.5",
                "claude-sonnet-4-5",
                "providers.openrouter.models.anthropic/claude-sonnet-4.5.price",
            ),
            (
                "gpt-4o-2024-08-06",
                "gpt-4o",
                "providers.<provider>.models.gpt-4o-2024-08-06.price",
            ),
            (
                "gemini/gemini-2.5-flash-preview-09-2025",
                "gemini-2.5-flash",
                "providers.gemini.models.gemini-2.5-flash-preview-09-2025.price",
            ),
            (
                "openrouter/minimax/MiniMax-M2",
                "minimax-m2",
                "providers.openrouter.models.minimax/MiniMax-M2.price",
            ),
        ] {
            assert_eq!(
                model_pricing(model, &config),
                ModelPricing {
                    source: built_in(prefix),
                    config_key: key.to_owned(),
                },
                "{model}"
            );
        }
    }

    #[test]
    fn the_longest_prefix_wins() {
        let config = Config::default();
        for (model, prefix) in [
            ("openai/gpt-4.1-mini", "gpt-4.1-mini"),
            ("openai/gpt-4.1-2025-04-14", "gpt-4.1"),
            ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
            ("openai/o3-mini", "o3-mini"),
            ("openai/o3", "o3"),
            ("claude-opus-4-5-20251101", "claude-opus-4-5"),
            ("claude-opus-4-1-20250805", "claude-opus-4"),
            ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
            ("xai/grok-4-fast-reasoning", "grok-4-fast"),
        ] {
            assert_eq!(
                model_pricing(model, &config).source,
                built_in(prefix),
                "{model}"
            );
        }
    }

    #[test]
    fn a_prefix_ends_at_a_word_boundary() {
        let config = Config::default();
        for model in ["gpt-4-1106-preview", "o1x", "gpt-4", "claude-2.1"] {
            assert_eq!(
                model_pricing(model, &config).source,
                PriceSource::Unknown,
                "{model}"
            );
        }
    }

    #[test]
    fn the_users_price_wins_over_the_table() {
        let config = config(serde_json::json!({
            "providers": {
                "anthropic": { "models": { "claude-sonnet-4-5": {
                    "price": { "input": 2.0, "output": 10.0, "cacheRead": 0.5 }
                }}},
                "openrouter": { "models": { "anthropic/claude-sonnet-4.5": {
                    "price": { "input": 3.3, "output": 16.5 }
                }}},
                "custom": { "models": { "my-model": { "price": { "input": 1.0, "output": 2.0 } } } },
            }
        }));
        let user = ModelPrice {
            input: 2.0,
            output: 10.0,
            cache_read: 0.5,
            cache_write: 2.0,
        };
        let openrouter = ModelPrice {
            input: 3.3,
            output: 16.5,
            cache_read: 3.3,
            cache_write: 3.3,
        };
        let mine = ModelPrice {
            input: 1.0,
            output: 2.0,
            cache_read: 1.0,
            cache_write: 1.0,
        };
        for (model, source, key) in [
            (
                "anthropic/claude-sonnet-4-5",
                PriceSource::Config(user),
                "providers.anthropic.models.claude-sonnet-4-5.price",
            ),
            // A bare name finds the price under whichever provider lists it.
            (
                "claude-sonnet-4-5",
                PriceSource::Config(user),
                "providers.anthropic.models.claude-sonnet-4-5.price",
            ),
            (
                "my-model",
                PriceSource::Config(mine),
                "providers.custom.models.my-model.price",
            ),
            (
                "openrouter/anthropic/claude-sonnet-4.5",
                PriceSource::Config(openrouter),
                "providers.openrouter.models.anthropic/claude-sonnet-4.5.price",
            ),
            // What OpenRouter itself reports, stored by older versions.
            (
                "anthropic/claude-sonnet-4.5",
                PriceSource::Config(openrouter),
                "providers.openrouter.models.anthropic/claude-sonnet-4.5.price",
            ),
            // Only the exact name: a dated one still takes the table's price.
            (
                "claude-sonnet-4-5-20250929",
                built_in("claude-sonnet-4-5"),
                "providers.<provider>.models.claude-sonnet-4-5-20250929.price",
            ),
        ] {
            assert_eq!(
                model_pricing(model, &config),
                ModelPricing {
                    source,
                    config_key: key.to_owned(),
                },
                "{model}"
            );
        }
    }

    #[test]
    fn local_models_are_free_unless_priced() {
        let config = config(serde_json::json!({
            "agents": { "defaults": { "model": "ollama/qwen3" } },
            "providers": { "vllm": { "models": { "big": {
                "price": { "input": 0.5, "output": 0.5 }
            }}}},
        }));
        for (model, source, key) in [
            (
                "ollama/qwen3",
                PriceSource::Local,
                "providers.ollama.models.qwen3.price",
            ),
            (
                "lmstudio/gpt-4o",
                PriceSource::Local,
                "providers.lmstudio.models.gpt-4o.price",
            ),
            // An older transcript names the model alone; the config says who serves it.
            (
                "qwen3",
                PriceSource::Local,
                "providers.ollama.models.qwen3.price",
            ),
            // The in-process model.
            (
                "local/smollm2-135m",
                PriceSource::Local,
                "providers.local.models.smollm2-135m.price",
            ),
            (
                "vllm/big",
                PriceSource::Config(ModelPrice {
                    input: 0.5,
                    output: 0.5,
                    cache_read: 0.5,
                    cache_write: 0.5,
                }),
                "providers.vllm.models.big.price",
            ),
        ] {
            assert_eq!(
                model_pricing(model, &config),
                ModelPricing {
                    source,
                    config_key: key.to_owned(),
                },
                "{model}"
            );
        }
        assert_eq!(PriceSource::Local.price(), Some(ModelPrice::FREE));
        // `providers.local` with an endpoint is a server of the user's, priced like any other.
        let endpoint = self::config(serde_json::json!({
            "providers": { "local": { "apiBase": "http://10.0.0.2:8080/v1" } },
        }));
        assert_eq!(
            model_pricing("local/smollm2-135m", &endpoint).source,
            PriceSource::Unknown
        );
    }

    #[test]
    fn an_unknown_model_has_no_price_and_says_where_to_set_one() {
        let config = config(serde_json::json!({
            "agents": { "defaults": { "model": "anthropic/mock-model" } },
        }));
        for (model, key) in [
            ("mock-model", "providers.anthropic.models.mock-model.price"),
            ("custom/qwen3", "providers.custom.models.qwen3.price"),
            ("llama3", "providers.<provider>.models.llama3.price"),
        ] {
            let pricing = model_pricing(model, &config);
            assert_eq!(
                pricing,
                ModelPricing {
                    source: PriceSource::Unknown,
                    config_key: key.to_owned(),
                },
                "{model}"
            );
            assert_eq!(pricing.source.price(), None);
        }
    }

    #[test]
    fn cost_bills_each_count_at_its_own_rate() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 2_000_000,
            cache_write_tokens: 400_000,
        };
        // 3.00 + 1.50 + 0.60 + 1.50
        let cost = anthropic(3.0, 15.0).cost(&usage);
        assert!((cost - 6.6).abs() < 1e-9, "{cost}");
        assert_eq!(ModelPrice::FREE.cost(&usage), 0.0);
    }

    #[test]
    fn every_entry_is_lowercase_and_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for (prefix, _) in BUILT_IN {
            assert_eq!(*prefix, prefix.to_ascii_lowercase());
            assert!(seen.insert(normalise(prefix)), "{prefix} twice");
        }
    }
}
