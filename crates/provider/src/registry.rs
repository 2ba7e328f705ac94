//! Every provider nanocrab knows, as data: protocol, endpoint, key, how to recognise its keys,
//! endpoints and model names, and what its models accept. Adding a provider is adding a row.

pub use nanocrab_config::Protocol;

use crate::profile::{
    MaxTokensField, ModelProfile, ModelRule, ProfilePatch, ReasoningEcho, Temperature,
    ToolCallContent, ToolCallIds,
};

/// What nanocrab knows about a provider without any configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProviderSpec {
    /// As used in `provider/model` and `providers.<name>`.
    pub name: &'static str,
    pub display_name: &'static str,
    pub protocol: Protocol,
    /// As the official SDKs take it: OpenAI-style bases include `/v1`, Anthropic's and
    /// Google's are the host root. `None`: the user must set `apiBase`.
    pub default_api_base: Option<&'static str>,
    pub api_key_env: Option<&'static str>,
    /// Local servers need no key.
    pub requires_key: bool,
    /// Runs on the user's machine: no key, no cost.
    pub local: bool,
    /// Serves other vendors' models, named `vendor/model` (`anthropic/claude-sonnet-4.5`);
    /// the vendor's capabilities apply.
    pub gateway: bool,
    /// Prefixes of this provider's API keys, to recognise a key put under the wrong provider
    /// or an endpoint configured as `custom`.
    pub key_prefixes: &'static [&'static str],
    /// Substrings of this provider's endpoints (`openrouter.ai`), for the same purpose.
    pub base_keywords: &'static [&'static str],
    /// Model names this provider serves natively (`claude`), so that a bare model name
    /// finds its provider and a gateway's `vendor/model` finds the vendor's capabilities.
    pub model_prefixes: &'static [&'static str],
    /// What its models accept, unless a rule says otherwise.
    pub profile: ModelProfile,
    /// Per-model overrides: every rule whose prefix the model name starts with applies, in
    /// order, so a more specific rule goes after a general one and wins.
    pub model_rules: &'static [ModelRule],
}

const fn profile(tools: bool, vision: bool) -> ModelProfile {
    ModelProfile {
        tools,
        vision,
        ..ModelProfile::GENERIC
    }
}

const fn vision(prefix: &'static str) -> ModelRule {
    ModelRule {
        prefix,
        patch: ProfilePatch {
            vision: Some(true),
            ..ProfilePatch::NONE
        },
    }
}

const fn text_only(prefix: &'static str) -> ModelRule {
    ModelRule {
        prefix,
        patch: ProfilePatch {
            vision: Some(false),
            ..ProfilePatch::NONE
        },
    }
}

/// OpenAI's reasoning models accept only the default temperature and reject `max_tokens`.
const fn openai_reasoning(prefix: &'static str) -> ModelRule {
    ModelRule {
        prefix,
        patch: ProfilePatch {
            reasoning: Some(true),
            temperature: Some(Temperature::Omit),
            max_tokens_field: Some(MaxTokensField::MaxCompletionTokens),
            ..ProfilePatch::NONE
        },
    }
}

const fn fixed_temperature(prefix: &'static str, value: f32) -> ModelRule {
    ModelRule {
        prefix,
        patch: ProfilePatch {
            temperature: Some(Temperature::Fixed(value)),
            ..ProfilePatch::NONE
        },
    }
}

pub const PROVIDERS: &[ProviderSpec] = &[
    ProviderSpec {
        name: "anthropic",
        display_name: "Anthropic",
        protocol: Protocol::AnthropicMessages,
        default_api_base: Some("https://api.anthropic.com"),
        api_key_env: Some("ANTHROPIC_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &["sk-ant-"],
        base_keywords: &["api.anthropic.com"],
        model_prefixes: &["claude"],
        profile: ModelProfile {
            prompt_caching: true,
            ..profile(true, true)
        },
        model_rules: &[],
    },
    ProviderSpec {
        name: "openai",
        display_name: "OpenAI",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.openai.com/v1"),
        api_key_env: Some("OPENAI_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &["sk-proj-", "sk-svcacct-", "sk-admin-"],
        base_keywords: &["api.openai.com"],
        model_prefixes: &["gpt-", "chatgpt-", "o1", "o3", "o4", "codex-"],
        profile: ModelProfile {
            // OpenAI deprecated `max_tokens` for every model; its reasoning models reject it.
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            ..profile(true, true)
        },
        model_rules: &[
            text_only("gpt-3.5"),
            openai_reasoning("o1"),
            openai_reasoning("o3"),
            openai_reasoning("o4"),
            openai_reasoning("gpt-5"),
            // The non-reasoning GPT-5 variant takes a temperature again.
            ModelRule {
                prefix: "gpt-5-chat",
                patch: ProfilePatch {
                    reasoning: Some(false),
                    temperature: Some(Temperature::AsConfigured),
                    ..ProfilePatch::NONE
                },
            },
            // Codex models are served over the Responses API only.
            ModelRule {
                prefix: "gpt-5-codex",
                patch: ProfilePatch {
                    protocol: Some(Protocol::OpenAiResponses),
                    ..ProfilePatch::NONE
                },
            },
            ModelRule {
                prefix: "codex-",
                patch: ProfilePatch {
                    reasoning: Some(true),
                    temperature: Some(Temperature::Omit),
                    protocol: Some(Protocol::OpenAiResponses),
                    ..ProfilePatch::NONE
                },
            },
        ],
    },
    ProviderSpec {
        name: "gemini",
        display_name: "Google Gemini",
        protocol: Protocol::Gemini,
        default_api_base: Some("https://generativelanguage.googleapis.com"),
        api_key_env: Some("GEMINI_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &["AIza"],
        base_keywords: &["generativelanguage.googleapis.com"],
        model_prefixes: &["gemini", "gemma"],
        profile: profile(true, true),
        model_rules: &[ModelRule {
            // Gemma on the Gemini API has no function calling.
            prefix: "gemma",
            patch: ProfilePatch {
                tools: Some(false),
                ..ProfilePatch::NONE
            },
        }],
    },
    ProviderSpec {
        name: "openrouter",
        display_name: "OpenRouter",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://openrouter.ai/api/v1"),
        api_key_env: Some("OPENROUTER_API_KEY"),
        requires_key: true,
        local: false,
        gateway: true,
        key_prefixes: &["sk-or-"],
        base_keywords: &["openrouter.ai"],
        model_prefixes: &[],
        profile: profile(true, false),
        model_rules: &[],
    },
    ProviderSpec {
        name: "deepseek",
        display_name: "DeepSeek",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.deepseek.com/v1"),
        api_key_env: Some("DEEPSEEK_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &["api.deepseek.com"],
        model_prefixes: &["deepseek"],
        profile: ModelProfile {
            reasoning_echo: ReasoningEcho::ReasoningContent,
            ..profile(true, false)
        },
        model_rules: &[],
    },
    ProviderSpec {
        name: "groq",
        display_name: "Groq",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.groq.com/openai/v1"),
        api_key_env: Some("GROQ_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &["gsk_"],
        base_keywords: &["api.groq.com"],
        model_prefixes: &[],
        profile: profile(true, false),
        model_rules: &[vision("meta-llama/llama-4")],
    },
    ProviderSpec {
        name: "mistral",
        display_name: "Mistral AI",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.mistral.ai/v1"),
        api_key_env: Some("MISTRAL_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &["api.mistral.ai"],
        model_prefixes: &[
            "mistral",
            "magistral",
            "codestral",
            "devstral",
            "ministral",
            "pixtral",
            "open-mistral",
            "open-mixtral",
        ],
        profile: ModelProfile {
            // Mistral validates strictly: unknown fields and foreign tool-call ids are 4xx.
            stream_usage: false,
            tool_call_ids: ToolCallIds::Alphanumeric9,
            ..profile(true, false)
        },
        model_rules: &[
            vision("pixtral"),
            vision("mistral-medium"),
            vision("mistral-small"),
            vision("magistral-medium"),
        ],
    },
    ProviderSpec {
        name: "xai",
        display_name: "xAI",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.x.ai/v1"),
        api_key_env: Some("XAI_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &["xai-"],
        base_keywords: &["api.x.ai"],
        model_prefixes: &["grok"],
        profile: profile(true, false),
        model_rules: &[vision("grok-4"), vision("grok-2-vision")],
    },
    ProviderSpec {
        name: "moonshot",
        display_name: "Moonshot AI (Kimi)",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.moonshot.ai/v1"),
        api_key_env: Some("MOONSHOT_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &["api.moonshot.ai", "api.moonshot.cn"],
        model_prefixes: &["kimi", "moonshot"],
        profile: ModelProfile {
            reasoning_echo: ReasoningEcho::ReasoningContent,
            ..profile(true, false)
        },
        model_rules: &[
            // The K2.5 API rejects any temperature but 1.0; the thinking models want 1.0.
            fixed_temperature("kimi-k2.5", 1.0),
            fixed_temperature("kimi-k2-thinking", 1.0),
            vision("kimi-k2.5"),
            vision("kimi-latest"),
            vision("moonshot-v1-8k-vision"),
            vision("moonshot-v1-32k-vision"),
            vision("moonshot-v1-128k-vision"),
        ],
    },
    ProviderSpec {
        name: "zhipu",
        display_name: "Zhipu AI / Z.ai (GLM)",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://open.bigmodel.cn/api/paas/v4"),
        api_key_env: Some("ZHIPUAI_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &["bigmodel.cn", "api.z.ai"],
        model_prefixes: &["glm"],
        profile: profile(true, false),
        model_rules: &[vision("glm-4v"), vision("glm-4.1v"), vision("glm-4.5v")],
    },
    ProviderSpec {
        name: "dashscope",
        display_name: "Alibaba DashScope (Qwen)",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://dashscope.aliyuncs.com/compatible-mode/v1"),
        api_key_env: Some("DASHSCOPE_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &["dashscope"],
        model_prefixes: &["qwen", "qwq"],
        profile: profile(true, false),
        model_rules: &[
            vision("qwen-vl"),
            vision("qwen2.5-vl"),
            vision("qwen3-vl"),
            vision("qwen-omni"),
            vision("qwen3-omni"),
        ],
    },
    ProviderSpec {
        name: "minimax",
        display_name: "MiniMax",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.minimax.io/v1"),
        api_key_env: Some("MINIMAX_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &["api.minimax.io", "api.minimaxi.com"],
        model_prefixes: &["minimax", "abab"],
        profile: ModelProfile {
            reasoning_echo: ReasoningEcho::ThinkTags,
            ..profile(true, false)
        },
        model_rules: &[],
    },
    ProviderSpec {
        name: "together",
        display_name: "Together AI",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.together.xyz/v1"),
        api_key_env: Some("TOGETHER_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &["tgp_v1_"],
        base_keywords: &["api.together.xyz", "api.together.ai"],
        model_prefixes: &[],
        profile: profile(true, false),
        model_rules: &[vision("meta-llama/llama-4"), vision("qwen/qwen2.5-vl")],
    },
    ProviderSpec {
        name: "fireworks",
        display_name: "Fireworks AI",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("https://api.fireworks.ai/inference/v1"),
        api_key_env: Some("FIREWORKS_API_KEY"),
        requires_key: true,
        local: false,
        gateway: false,
        key_prefixes: &["fw_"],
        base_keywords: &["api.fireworks.ai"],
        model_prefixes: &[],
        profile: profile(true, false),
        model_rules: &[vision("accounts/fireworks/models/llama4")],
    },
    ProviderSpec {
        name: "ollama",
        display_name: "Ollama (local)",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("http://localhost:11434/v1"),
        api_key_env: None,
        requires_key: false,
        local: true,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &[":11434"],
        model_prefixes: &[],
        profile: ModelProfile {
            tool_call_content: ToolCallContent::EmptyString,
            ..profile(true, false)
        },
        model_rules: &[
            vision("llava"),
            vision("llama3.2-vision"),
            vision("gemma3"),
            vision("qwen2.5vl"),
            vision("minicpm-v"),
        ],
    },
    ProviderSpec {
        name: "vllm",
        display_name: "vLLM (local)",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("http://localhost:8000/v1"),
        api_key_env: None,
        requires_key: false,
        local: true,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &[],
        model_prefixes: &[],
        profile: profile(true, false),
        model_rules: &[],
    },
    ProviderSpec {
        name: "lmstudio",
        display_name: "LM Studio (local)",
        protocol: Protocol::OpenAiChat,
        default_api_base: Some("http://localhost:1234/v1"),
        api_key_env: None,
        requires_key: false,
        local: true,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &[":1234"],
        model_prefixes: &[],
        profile: profile(true, false),
        model_rules: &[],
    },
    ProviderSpec {
        name: "custom",
        display_name: "Any OpenAI-compatible endpoint",
        protocol: Protocol::OpenAiChat,
        default_api_base: None,
        api_key_env: None,
        requires_key: false,
        local: false,
        gateway: false,
        key_prefixes: &[],
        base_keywords: &[],
        model_prefixes: &[],
        profile: ModelProfile::GENERIC,
        model_rules: &[],
    },
];

/// The provider called `name`.
pub fn spec(name: &str) -> Option<&'static ProviderSpec> {
    PROVIDERS.iter().find(|s| s.name == name)
}

/// The provider whose models are named like `model` (`claude-sonnet-4-5` → anthropic).
pub fn spec_for_model(model: &str) -> Option<&'static ProviderSpec> {
    let model = model.to_ascii_lowercase();
    PROVIDERS
        .iter()
        .find(|spec| spec.model_prefixes.iter().any(|p| model.starts_with(p)))
}

/// The provider an API key or an endpoint belongs to, recognised by the key's prefix (the
/// longest matching one wins: `sk-or-` is OpenRouter's, not OpenAI's) or a keyword of the
/// endpoint's address.
pub fn detect(api_key: Option<&str>, api_base: Option<&str>) -> Option<&'static ProviderSpec> {
    let by_key = api_key.and_then(|key| {
        PROVIDERS
            .iter()
            .flat_map(|spec| spec.key_prefixes.iter().map(move |p| (spec, *p)))
            .filter(|(_, prefix)| key.starts_with(prefix))
            .max_by_key(|(_, prefix)| prefix.len())
            .map(|(spec, _)| spec)
    });
    by_key.or_else(|| {
        let base = api_base?.to_ascii_lowercase();
        PROVIDERS
            .iter()
            .find(|spec| spec.base_keywords.iter().any(|k| base.contains(k)))
    })
}

impl ProviderSpec {
    /// The profile of `model` on this provider, before the user's settings.
    pub fn model_profile(&self, model: &str) -> ModelProfile {
        let mut profile = self.profile;
        // A gateway's `vendor/model` gets the vendor's capabilities and per-model rules; the
        // wire stays the gateway's own.
        if self.gateway {
            let bare = model.rsplit('/').next().unwrap_or(model);
            if let Some(vendor) = spec_for_model(bare) {
                let vendor_profile = vendor.model_profile(bare);
                profile.tools = vendor_profile.tools;
                profile.vision = vendor_profile.vision;
                profile.prompt_caching = vendor_profile.prompt_caching;
                profile.temperature = vendor_profile.temperature;
            }
        }
        for rule in self.rules(model) {
            profile.apply(&rule.patch);
        }
        profile
    }

    /// The protocol `model` is served over: a model rule may name another one.
    pub fn model_protocol(&self, model: &str) -> Protocol {
        self.rules(model)
            .filter_map(|rule| rule.patch.protocol)
            .last()
            .unwrap_or(self.protocol)
    }

    /// The rules that apply to `model`, in order.
    fn rules(&self, model: &str) -> impl Iterator<Item = &'static ModelRule> {
        let model = model.to_ascii_lowercase();
        self.model_rules
            .iter()
            .filter(move |rule| model.starts_with(rule.prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_are_unique_and_every_remote_provider_has_an_endpoint_and_a_key_variable() {
        let mut names: Vec<&str> = PROVIDERS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PROVIDERS.len());
        for spec in PROVIDERS {
            assert_eq!(
                spec.requires_key,
                spec.api_key_env.is_some(),
                "{}",
                spec.name
            );
            assert_eq!(
                spec.default_api_base.is_none(),
                spec.name == "custom",
                "{}",
                spec.name
            );
            for rule in spec.model_rules {
                assert_eq!(rule.prefix, rule.prefix.to_ascii_lowercase());
            }
        }
    }

    #[test]
    fn keys_and_endpoints_are_recognised() {
        let name = |key: Option<&str>, base: Option<&str>| detect(key, base).map(|s| s.name);
        assert_eq!(name(Some("sk-or-v1-abc"), None), Some("openrouter"));
        assert_eq!(name(Some("sk-ant-api03-x"), None), Some("anthropic"));
        assert_eq!(name(Some("sk-proj-x"), None), Some("openai"));
        assert_eq!(name(Some("gsk_x"), None), Some("groq"));
        assert_eq!(name(Some("AIzaSy"), None), Some("gemini"));
        // A bare `sk-` key could be anyone's: DeepSeek, Moonshot, DashScope, old OpenAI keys.
        assert_eq!(name(Some("sk-0123"), None), None);
        assert_eq!(
            name(Some("sk-0123"), Some("https://API.deepseek.com/v1")),
            Some("deepseek")
        );
        assert_eq!(
            name(None, Some("http://127.0.0.1:11434/v1")),
            Some("ollama")
        );
        assert_eq!(name(None, Some("http://10.0.0.5:9000/v1")), None);
    }

    #[test]
    fn bare_model_names_find_their_provider() {
        let name = |model: &str| spec_for_model(model).map(|s| s.name);
        assert_eq!(name("claude-sonnet-4-5"), Some("anthropic"));
        assert_eq!(name("gpt-4.1"), Some("openai"));
        assert_eq!(name("o3-mini"), Some("openai"));
        assert_eq!(name("gemini-2.5-flash"), Some("gemini"));
        assert_eq!(name("deepseek-chat"), Some("deepseek"));
        assert_eq!(name("Kimi-K2.5"), Some("moonshot"));
        assert_eq!(name("glm-4.6"), Some("zhipu"));
        assert_eq!(name("qwen3-max"), Some("dashscope"));
        assert_eq!(name("MiniMax-M2"), Some("minimax"));
        assert_eq!(name("grok-4"), Some("xai"));
        assert_eq!(name("devstral-medium"), Some("mistral"));
        assert_eq!(name("llama3"), None);
    }

    #[test]
    fn model_rules_and_gateway_vendors_shape_the_profile() {
        let openai = spec("openai").unwrap();
        let o3 = openai.model_profile("o3-mini");
        assert_eq!(o3.temperature(Some(0.1)), None);
        assert_eq!(o3.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        assert_eq!(
            openai.model_profile("gpt-4.1").temperature(Some(0.1)),
            Some(0.1)
        );
        assert_eq!(
            openai
                .model_profile("gpt-5-chat-latest")
                .temperature(Some(0.1)),
            Some(0.1)
        );
        assert_eq!(openai.model_profile("gpt-5.1").temperature(Some(0.1)), None);
        assert!(!openai.model_profile("gpt-3.5-turbo").vision);
        assert_eq!(
            openai.model_protocol("gpt-5-codex"),
            Protocol::OpenAiResponses
        );
        assert_eq!(openai.model_protocol("gpt-5"), Protocol::OpenAiChat);

        let kimi = spec("moonshot").unwrap().model_profile("kimi-k2.5");
        assert_eq!(kimi.temperature(Some(0.1)), Some(1.0));
        assert_eq!(kimi.reasoning_echo, ReasoningEcho::ReasoningContent);

        let openrouter = spec("openrouter").unwrap();
        let claude = openrouter.model_profile("anthropic/claude-sonnet-4.5");
        assert!(claude.prompt_caching && claude.vision);
        let kimi = openrouter.model_profile("moonshotai/kimi-k2.5");
        assert_eq!(kimi.temperature(Some(0.1)), Some(1.0));
        let llama = openrouter.model_profile("meta-llama/llama-3.3-70b-instruct");
        assert!(!llama.prompt_caching && !llama.vision);

        let mistral = spec("mistral")
            .unwrap()
            .model_profile("mistral-large-latest");
        assert_eq!(mistral.tool_call_ids, ToolCallIds::Alphanumeric9);
        assert!(!mistral.stream_usage);
    }
}
