//! A gateway over real agents talking to the mock LLM (which echoes by default), with fake
//! channels, in a temporary home.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use nanocrab_channels::Channel;
use nanocrab_config::{Config, DmPolicy, GroupPolicy, ProviderConfig, QueueMode};
use nanocrab_core::{Agent, AgentSettings, ContextBuilder};
use nanocrab_gateway::{
    Access, AccessRules, Approvals, Gateway, GatewayAgent, INBOX_FILE, Journal, OutboundBus,
    PairingStore, TurnMessages, Turns,
};
use nanocrab_provider::{ModelChain, RetryPolicy};
use nanocrab_schema::{
    ChatType, InboundMessage, LlmMessage, Media, MediaKind, OutboundMessage, Sender, SessionKey,
};
use nanocrab_sessions::SessionStore;
use nanocrab_testkit::{MockLlm, Reply};
use tempfile::TempDir;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fake_channel::FakeChannel;

pub struct Harness {
    pub mock: MockLlm,
    dir: TempDir,
    pub config: Config,
    pub channel: Arc<FakeChannel>,
    /// Channels besides `channel`.
    pub more_channels: Vec<Arc<dyn Channel>>,
    pub agent_ids: Vec<String>,
    pub access: Option<Access>,
    /// The bus every gateway of this harness publishes on; tests subscribe to watch.
    pub bus: OutboundBus,
    /// The agents have a housekeeping model: the mock LLM too.
    pub housekeeping: bool,
    /// The agents have the `message` tool, under these standing grants (`tools.grants`).
    pub message_tool: Option<Vec<String>>,
}

/// A gateway running in the background.
pub struct Running {
    pub turns: Turns,
    pub heartbeats: nanocrab_gateway::Heartbeats,
    pub status: Arc<nanocrab_gateway::Status>,
    pub shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    /// Cancels the shutdown token and waits until the gateway has stopped.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }

    /// Waits until the gateway has stopped (after the test cancelled the token).
    pub async fn stopped(self) {
        self.task.await.unwrap();
    }
}

impl Harness {
    /// One fake Telegram channel, the default agent, everyone allowed, collect mode.
    pub async fn new() -> Self {
        let mock = MockLlm::start().await;
        mock.set_fallback(Reply::echo());
        let mut config = Config::default();
        config.providers.insert(
            "anthropic".to_owned(),
            ProviderConfig {
                api_key: Some("sk-test-gateway".to_owned()),
                api_base: Some(mock.anthropic_base()),
                ..ProviderConfig::default()
            },
        );
        config.gateway.queue.mode = QueueMode::Collect;
        Self {
            mock,
            dir: tempfile::tempdir().unwrap(),
            config,
            channel: Arc::new(FakeChannel::new("telegram", "default")),
            more_channels: Vec::new(),
            agent_ids: vec!["main".to_owned()],
            access: None,
            bus: OutboundBus::new(),
            housekeeping: false,
            message_tool: None,
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn sessions(&self) -> SessionStore {
        SessionStore::new(self.dir.path().join("sessions"))
    }

    pub fn workspace(&self, agent_id: &str) -> PathBuf {
        self.dir.path().join(format!("workspace-{agent_id}"))
    }

    /// The history of session `key` as the model would get it.
    pub fn history(&self, key: &str) -> Vec<LlmMessage> {
        self.sessions()
            .load(&SessionKey::parse(key).unwrap())
            .unwrap()
            .messages()
    }

    /// The session files, by key.
    pub fn session_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = std::fs::read_dir(self.dir.path().join("sessions"))
            .unwrap()
            .filter_map(|entry| {
                entry
                    .unwrap()
                    .file_name()
                    .to_str()
                    .unwrap()
                    .strip_suffix(".jsonl")
                    .map(str::to_owned)
            })
            .collect();
        keys.sort();
        keys
    }

    /// The journal's unfinished messages, as the next start would replay them.
    pub fn unfinished_messages(&self) -> Vec<InboundMessage> {
        Journal::open(&self.state_dir().join(INBOX_FILE), 1000)
            .unwrap()
            .1
            .into_iter()
            .map(|entry| entry.message)
            .collect()
    }

    pub fn agent(&self, id: &str) -> GatewayAgent {
        self.agent_with(id, None)
    }

    /// Agent `id`, with the `message` tool over `messages` when the harness says so.
    fn agent_with(&self, id: &str, messages: Option<&TurnMessages>) -> GatewayAgent {
        let model = nanocrab_provider::resolve_model(
            "anthropic/mock-model",
            &self.config,
            &|_| None,
            RetryPolicy {
                max_retries: 0,
                ..RetryPolicy::default()
            },
            // Never read: the gateway's agents here answer through the mock LLM.
            &nanocrab_provider::LocalModels::new(
                nanocrab_models::ModelStore::new(self.dir.path().join("models")),
                nanocrab_models::Catalogue::builtin(),
                None,
            ),
        )
        .unwrap();
        let workspace = self.workspace(id);
        std::fs::create_dir_all(&workspace).unwrap();
        let housekeeping = self.housekeeping.then(|| model.clone());
        let tools = match (messages, &self.message_tool) {
            (Some(messages), Some(grants)) => {
                let mut tools =
                    nanocrab_tools::ToolRegistry::new().with_policy(nanocrab_tools::ToolPolicy {
                        grants: nanocrab_tools::grants_from_config(grants, "tools.grants", None)
                            .unwrap(),
                        ..nanocrab_tools::ToolPolicy::default()
                    });
                let guard = nanocrab_policy::PathGuard::new(
                    &workspace,
                    &nanocrab_config::ToolsConfig::default(),
                    None,
                )
                .unwrap();
                tools.register(Arc::new(nanocrab_tools::MessageTool::new(
                    Arc::new(messages.clone()),
                    Arc::new(guard),
                )));
                tools
            }
            (Some(_) | None, _) => nanocrab_tools::ToolRegistry::new(),
        };
        let agent = Agent::new(
            ModelChain::new(model, Vec::new()),
            tools,
            self.sessions(),
            ContextBuilder::new(&workspace),
            AgentSettings {
                max_tokens: 1024,
                temperature: None,
                max_tool_iterations: 4,
                context_window_tokens: 65_536,
            },
        );
        let agent = match housekeeping {
            Some(model) => agent.with_housekeeping(model),
            None => agent,
        };
        GatewayAgent {
            agent: Arc::new(agent),
            workspace,
        }
    }

    /// Everyone may talk, in DMs and in any group, without mentioning the bot.
    pub fn open_access(&self) -> Access {
        let rules = AccessRules {
            allow_from: Vec::new(),
            dm_policy: DmPolicy::Open,
            group_policy: GroupPolicy::Open,
            groups: BTreeMap::new(),
            require_mention: false,
        };
        let channels = self
            .channels()
            .iter()
            .map(|c| (c.name().to_owned(), rules.clone()))
            .collect();
        Access::new(channels, PairingStore::new(&self.state_dir()))
    }

    fn channels(&self) -> Vec<Arc<dyn Channel>> {
        std::iter::once(Arc::clone(&self.channel) as Arc<dyn Channel>)
            .chain(self.more_channels.iter().cloned())
            .collect()
    }

    /// Why a gateway given only the agents `ids` (no channels) refuses to start.
    pub fn gateway_refusal(&self, ids: &[&str]) -> String {
        let agents = ids
            .iter()
            .map(|id| ((*id).to_owned(), self.agent(id)))
            .collect();
        let bus = OutboundBus::new();
        match Gateway::new(
            &self.config,
            agents,
            Vec::new(),
            &self.state_dir(),
            self.open_access(),
            Approvals::new(bus.clone()),
            TurnMessages::new(bus.clone(), Vec::new()),
            bus,
            None,
        ) {
            Ok(_) => panic!("the gateway started"),
            Err(err) => err.to_string(),
        }
    }

    pub fn gateway(&self) -> Gateway {
        let bus = self.bus.clone();
        let channels = self.channels();
        let messages = TurnMessages::new(
            bus.clone(),
            channels
                .iter()
                .map(|c| (c.name().to_owned(), c.account().to_owned()))
                .collect(),
        );
        let agents = self
            .agent_ids
            .iter()
            .map(|id| (id.clone(), self.agent_with(id, Some(&messages))))
            .collect();
        Gateway::new(
            &self.config,
            agents,
            channels,
            &self.state_dir(),
            self.access.clone().unwrap_or_else(|| self.open_access()),
            Approvals::new(bus.clone()),
            messages,
            bus,
            // `tools.transcription` of the config, as the binary reads it.
            nanocrab_provider::Transcriber::from_config(&self.config, &|_| None).unwrap(),
        )
        .unwrap()
    }

    pub fn start(&self) -> Running {
        self.start_gateway(self.gateway())
    }

    /// Runs `gateway` (one of [`Harness::gateway`], given more) in the background.
    pub fn start_gateway(&self, gateway: Gateway) -> Running {
        let shutdown = CancellationToken::new();
        let turns = gateway.turns().clone();
        let heartbeats = gateway.heartbeats().clone();
        let status = Arc::clone(gateway.status());
        let task = tokio::spawn(gateway.run(shutdown.clone()));
        Running {
            turns,
            heartbeats,
            status,
            shutdown,
            task,
        }
    }
}

pub fn dm(sender: &str, id: &str, text: &str) -> InboundMessage {
    let message = nanocrab_testkit::inbound_dm(sender, id, text);
    InboundMessage {
        sender: Sender {
            display_name: Some(format!("User {sender}")),
            ..message.sender.clone()
        },
        timestamp: 1_700_000_000,
        ..message
    }
}

pub fn group(
    chat: &str,
    thread: Option<&str>,
    sender: &str,
    id: &str,
    text: &str,
) -> InboundMessage {
    InboundMessage {
        chat_id: chat.to_owned(),
        chat_type: ChatType::Group,
        chat_title: Some(format!("Group {chat}")),
        thread_id: thread.map(str::to_owned),
        ..dm(sender, id, text)
    }
}

/// `message` with a document whose download waits for [`FakeChannel::release`] and then
/// fails (no bytes are registered for it).
pub fn held(mut message: InboundMessage) -> InboundMessage {
    message.media.push(Media {
        kind: MediaKind::Document,
        file_id: format!("held-{}", message.message_id),
        mime_type: None,
        file_name: None,
        size: None,
    });
    message
}

/// The line a held document adds to a message for the model.
pub const HELD_NOTE: &str = "[a document was attached, but it could not be downloaded]";

/// What the gateway answers to `message` with `text`.
pub fn answer(message: &InboundMessage, text: &str) -> OutboundMessage {
    OutboundMessage {
        chat: message.chat(),
        text: text.to_owned(),
        reply_to_message_id: (message.chat_type == ChatType::Group)
            .then(|| message.message_id.clone()),
        file: None,
    }
}

/// Sorts sent messages by chat, for comparing what concurrent sessions got.
pub fn by_chat(mut sent: Vec<OutboundMessage>) -> Vec<OutboundMessage> {
    sent.sort_by(|a, b| {
        (&a.chat.chat_id, &a.chat.thread_id, &a.text).cmp(&(
            &b.chat.chat_id,
            &b.chat.thread_id,
            &b.text,
        ))
    });
    sent
}

/// Waits until `condition` holds, looking every few milliseconds: for states nothing signals.
pub async fn until(mut condition: impl FnMut() -> bool) {
    while !condition() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
