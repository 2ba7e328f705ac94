//! `local/<model>`: a chat model of the model store (`nanocrab models pull`), run in-process
//! on the CPU. No key, no network, no cost.
//!
//! A model is loaded on first use and shared by every agent of the process; calls to one
//! model take turns, since it keeps the evaluated prompt between calls. In the gateway a model
//! idle for `unload_after` is dropped and loaded again when next asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nanocrab_models::{
    Catalogue, ChatModel, ChatRole, ChatTurn, FinishReason, GenerateOptions, MAX_CHAT_CONTEXT,
    ModelError, ModelKind, ModelStore,
};
use nanocrab_schema::{ContentBlock, LlmMessage, Role, StopReason, Usage};

use crate::error::ProviderError;
use crate::local_tool_calls as tool_calls;
use crate::profile::ModelProfile;
use crate::provider::{ChatRequest, ChatResponse, DeltaSink, LlmProvider, ProviderDelta};

/// The provider's name in `local/<model>`.
pub const LOCAL: &str = "local";

/// Whether `local/<model>` is the in-process model store: always, unless the user made
/// `providers.local` an endpoint of their own by giving it an `apiBase`. Other settings there
/// (a model's `price`, say) never turn it into a remote provider.
pub(crate) fn in_process(config: &nanocrab_config::Config) -> bool {
    config
        .providers
        .get(LOCAL)
        .is_none_or(|p| p.api_base.is_none())
}

/// The model that answers when no provider is configured, and that `onboard` offers.
pub const DEFAULT_LOCAL_MODEL: &str = "smollm2-135m";

/// The answer never takes less than this many tokens of the window, so a prompt that leaves
/// fewer is reported as too long rather than answered with a word.
const MIN_ANSWER_TOKENS: usize = 16;

/// The local chat models of one process: where they are installed, and those loaded now.
#[derive(Clone)]
pub struct LocalModels {
    shared: Arc<Shared>,
}

struct Shared {
    store: ModelStore,
    catalogue: Catalogue,
    unload_after: Option<Duration>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

/// One model: loaded or not, and a queue so that one call uses it at a time.
struct Slot {
    name: String,
    turn: tokio::sync::Mutex<()>,
    model: Arc<Mutex<Option<ChatModel>>>,
    /// On tokio's clock, as the idle watcher's sleeps are, so that a test can move both.
    last_used: Mutex<tokio::time::Instant>,
}

impl LocalModels {
    /// `unload_after`: drop a model unused this long (the gateway); `None` keeps it for the
    /// life of the process (a CLI run).
    pub fn new(store: ModelStore, catalogue: Catalogue, unload_after: Option<Duration>) -> Self {
        Self {
            shared: Arc::new(Shared {
                store,
                catalogue,
                unload_after,
                slots: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// What the agent should know about `local/<name>`: no tools unless its catalogue entry
    /// offers them, its own window, and the short prompt a small model can follow.
    /// In a build without the runtime this is where asking for a local model fails, with the
    /// missing feature's name.
    pub fn profile(&self, name: &str) -> Result<ModelProfile, ProviderError> {
        nanocrab_models::runtime_built().map_err(|source| local(name, source))?;
        let spec = self
            .shared
            .catalogue
            .find(name)
            .map_err(|source| local(name, source))?;
        match spec.kind {
            ModelKind::Chat {
                tools,
                context_tokens,
            } => Ok(ModelProfile {
                tools,
                vision: false,
                prompt_caching: false,
                reasoning: false,
                stream_usage: false,
                context_window: Some(
                    u32::try_from(context_tokens.min(MAX_CHAT_CONTEXT)).unwrap_or(u32::MAX),
                ),
                compact_prompt: true,
                ..ModelProfile::GENERIC
            }),
            ModelKind::Embedding { .. } => Err(ProviderError::NotAChatModel {
                model: name.to_owned(),
            }),
        }
    }

    /// Whether `name` is installed, without loading it.
    pub fn is_installed(&self, name: &str) -> bool {
        self.shared
            .catalogue
            .find(name)
            .is_ok_and(|spec| self.shared.store.installed_dir(spec).is_ok())
    }

    /// Whether `name` is in memory now.
    pub fn is_loaded(&self, name: &str) -> bool {
        let slot = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        slot.is_some_and(|slot| {
            slot.model
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        })
    }

    fn slot(&self, name: &str) -> Arc<Slot> {
        let mut slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slots
            .entry(name.to_owned())
            .or_insert_with(|| {
                Arc::new(Slot {
                    name: name.to_owned(),
                    turn: tokio::sync::Mutex::new(()),
                    model: Arc::new(Mutex::new(None)),
                    last_used: Mutex::new(tokio::time::Instant::now()),
                })
            })
            .clone()
    }

    /// Drops the model once it has been idle for `unload_after`, checking again whenever it
    /// was used meanwhile. Ends when the model is dropped or the process's models are.
    fn watch_idle(slot: &Arc<Slot>, unload_after: Duration) {
        let slot: Weak<Slot> = Arc::downgrade(slot);
        tokio::spawn(async move {
            let mut wait = unload_after;
            loop {
                tokio::time::sleep(wait).await;
                let Some(slot) = slot.upgrade() else { return };
                let idle = slot
                    .last_used
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .elapsed();
                if idle < unload_after {
                    wait = unload_after - idle;
                    continue;
                }
                // In use right now: look again a full period after this call.
                let Ok(_turn) = slot.turn.try_lock() else {
                    wait = unload_after;
                    continue;
                };
                let unloaded = slot
                    .model
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                    .is_some();
                if unloaded {
                    tracing::info!(
                        "local model {} unloaded after {} s idle",
                        slot.name,
                        idle.as_secs()
                    );
                }
                return;
            }
        });
    }
}

/// `local/<name>` for the agent: the shared models and the name of one.
pub(crate) struct LocalProvider {
    models: LocalModels,
}

impl LocalProvider {
    pub(crate) fn new(models: LocalModels) -> Self {
        Self { models }
    }
}

#[async_trait]
impl LlmProvider for LocalProvider {
    fn name(&self) -> &str {
        LOCAL
    }

    async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        let name = request.model.to_string();
        let shared = &self.models.shared;
        let spec = shared
            .catalogue
            .find(&name)
            .map_err(|source| local(&name, source))?;
        let gguf = match (&spec.kind, spec.gguf()) {
            (ModelKind::Chat { .. }, Some(file)) => {
                let dir = shared
                    .store
                    .installed_dir(spec)
                    .map_err(|source| local(&name, source))?;
                dir.join(&file.name)
            }
            (ModelKind::Chat { .. } | ModelKind::Embedding { .. }, _) => {
                return Err(ProviderError::NotAChatModel { model: name });
            }
        };
        // The agent sends tools only when the catalogue entry says the model calls them.
        let offers_tools = !request.tools.is_empty();
        let turns = turns(request, offers_tools);
        let options = GenerateOptions {
            max_tokens: request.max_tokens,
            temperature: request.temperature.unwrap_or(0.0),
            tools: tool_calls::definitions(&request.tools),
            ..GenerateOptions::default()
        };

        let slot = self.models.slot(&name);
        // Waiting here is cancellable: a caller that gives up leaves the queue.
        let turn = slot.turn.lock().await;
        let model = slot.model.clone();
        let load_name = name.clone();
        let (pieces, mut received) = tokio::sync::mpsc::unbounded_channel::<String>();
        let (loaded_now, generation) = {
            let work = tokio::task::spawn_blocking(move || {
                let mut guard = model.lock().unwrap_or_else(PoisonError::into_inner);
                let loaded_now = guard.is_none();
                if loaded_now {
                    let started = Instant::now();
                    *guard = Some(ChatModel::load(&gguf)?);
                    tracing::info!(
                        "local model {load_name} loaded in {:.1} s",
                        started.elapsed().as_secs_f64()
                    );
                }
                let Some(chat_model) = guard.as_mut() else {
                    return Err(ModelError::NotInstalled { name: load_name });
                };
                let mut visible = tool_calls::Visible::default();
                let mut on_text = |text: &str| {
                    let shown = if offers_tools {
                        visible.push(text)
                    } else {
                        Some(text.to_owned())
                    };
                    // The caller is gone when nobody receives: stop generating for it.
                    match shown.map(|shown| pieces.send(shown)) {
                        Some(Ok(())) | None => std::ops::ControlFlow::Continue(()),
                        Some(Err(_)) => std::ops::ControlFlow::Break(()),
                    }
                };
                // The agent's limit may not fit what the prompt leaves of the window: the
                // answer then gets the rest of it. The overflow is found before anything is
                // generated, so only that rare call renders and tokenizes twice.
                let generation = match chat_model.generate(&turns, &options, &mut on_text) {
                    Err(ModelError::ContextOverflow {
                        prompt_tokens,
                        context_tokens,
                        ..
                    }) if context_tokens.saturating_sub(prompt_tokens) >= MIN_ANSWER_TOKENS => {
                        let room = context_tokens - prompt_tokens;
                        let fitted = GenerateOptions {
                            max_tokens: u32::try_from(room).unwrap_or(u32::MAX),
                            ..options
                        };
                        chat_model.generate(&turns, &fitted, &mut on_text)
                    }
                    other => other,
                }?;
                Ok((loaded_now, generation))
            });
            while let Some(piece) = received.recv().await {
                on_delta(ProviderDelta::Text(piece));
            }
            work.await
                .map_err(|err| ProviderError::Stream {
                    provider: LOCAL.to_owned(),
                    detail: err.to_string(),
                })?
                .map_err(|source| local(&name, source))?
        };
        *slot
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = tokio::time::Instant::now();
        drop(turn);
        if loaded_now && let Some(unload_after) = shared.unload_after {
            LocalModels::watch_idle(&slot, unload_after);
        }
        let (text, calls) = if offers_tools {
            tool_calls::split(&generation.text, &call_id_prefix())
        } else {
            (generation.text, Vec::new())
        };
        let stop_reason = match generation.finish {
            _ if !calls.is_empty() => StopReason::ToolUse,
            FinishReason::Stop | FinishReason::Cancelled => StopReason::EndTurn,
            FinishReason::Length => StopReason::MaxTokens,
        };
        let mut content = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() || calls.is_empty() {
            content.push(ContentBlock::text(text));
        }
        content.extend(calls.into_iter().map(ContentBlock::ToolUse));
        Ok(ChatResponse {
            content,
            stop_reason,
            usage: Usage {
                input_tokens: u64::from(generation.prompt_tokens),
                output_tokens: u64::from(generation.completion_tokens),
                ..Usage::default()
            },
            model: format!("{LOCAL}/{name}"),
        })
    }
}

fn local(model: &str, source: ModelError) -> ProviderError {
    ProviderError::Local {
        model: model.to_owned(),
        source: Box::new(source),
    }
}

/// Ids for one answer's calls, unique in the process so that calls of different answers
/// never pair with each other's results.
fn call_id_prefix() -> String {
    static ANSWERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let answer = ANSWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_millis())
        .unwrap_or_default();
    format!("local-{started:x}-{answer}")
}

/// The conversation as plain chat turns. Tool calls and results are written as a model that
/// calls tools writes and reads them; for one that does not (they came from another model
/// earlier in the conversation) they become short notes, like images.
fn turns(request: &ChatRequest<'_>, offers_tools: bool) -> Vec<ChatTurn> {
    let mut turns = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.trim().is_empty() {
        turns.push(ChatTurn {
            role: ChatRole::System,
            content: request.system.to_string(),
        });
    }
    for message in request.messages.iter() {
        let content = text_of(message, offers_tools);
        if content.is_empty() {
            continue;
        }
        let role = match message.role {
            Role::User => ChatRole::User,
            Role::Assistant => ChatRole::Assistant,
        };
        turns.push(ChatTurn { role, content });
    }
    turns
}

fn text_of(message: &LlmMessage, offers_tools: bool) -> String {
    let parts: Vec<String> = message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.clone()),
            ContentBlock::Image(image) => Some(format!(
                "[an image ({}) this model cannot see]",
                image.media_type
            )),
            ContentBlock::ToolUse(call) if offers_tools => Some(tool_calls::call_text(call)),
            ContentBlock::ToolUse(call) => Some(format!("[called {} {}]", call.name, call.input)),
            ContentBlock::ToolResult(result) if offers_tools => {
                Some(tool_calls::response_text(&result.content))
            }
            ContentBlock::ToolResult(result) => Some(format!("[tool result: {}]", result.content)),
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => None,
        })
        .filter(|part| !part.trim().is_empty())
        .collect();
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nanocrab_schema::{ToolCall, ToolResult};
    use pretty_assertions::assert_eq;

    #[test]
    fn the_conversation_becomes_plain_turns_with_notes_for_what_the_model_cannot_take() {
        let request = ChatRequest {
            model: "smollm2-135m".into(),
            system: "Be brief.".into(),
            messages: vec![
                LlmMessage::user("list my files"),
                LlmMessage {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolUse(ToolCall {
                        id: "1".into(),
                        name: "list_dir".into(),
                        input: serde_json::json!({"path": "."}),
                    })],
                },
                LlmMessage {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResult {
                        tool_use_id: "1".into(),
                        content: "notes.md".into(),
                        is_error: false,
                    })],
                },
                LlmMessage {
                    role: Role::Assistant,
                    content: vec![ContentBlock::Thinking {
                        thinking: "hm".into(),
                        signature: None,
                        origin: None,
                    }],
                },
            ]
            .into(),
            tools: Vec::new().into(),
            max_tokens: 100,
            temperature: None,
        };
        let turn = |role, content: &str| ChatTurn {
            role,
            content: content.to_owned(),
        };
        assert_eq!(
            turns(&request, false),
            vec![
                turn(ChatRole::System, "Be brief."),
                turn(ChatRole::User, "list my files"),
                turn(ChatRole::Assistant, "[called list_dir {\"path\":\".\"}]"),
                turn(ChatRole::User, "[tool result: notes.md]"),
            ]
        );
    }
}
