//! The Discord [`Channel`]: the gateway WebSocket in, REST out.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use nanocrab_config::{DiscordConfig, EditedMessages};
use nanocrab_schema::{ChatRef, Media, OutboundMessage};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use twilight_gateway::{ConfigBuilder, Intents, Message as WsMessage, Session, Shard, ShardId};
use twilight_http::error::ErrorType;
use twilight_http::request::channel::reaction::RequestReactionType;
use twilight_model::channel::Message;
use twilight_model::channel::message::AllowedMentions;
use twilight_model::gateway::event::GatewayEventDeserializer;
use twilight_model::http::attachment::Attachment;
use twilight_model::id::Id;
use twilight_model::id::marker::{ChannelMarker, MessageMarker};

use super::markdown::{MESSAGE_LIMIT, render, split};
use super::normalize::{BotIdentity, CHANNEL, Normalized, Place, normalize};
use super::session::{SavedSession, SessionFile};
use crate::error_text::with_causes;
use crate::{Channel, ChannelCapabilities, ChannelError, InboundSink, SentMessage};

/// Messages in servers and DMs, with their text: Message Content is a privileged intent,
/// switched on in the Developer Portal, without which guild messages arrive empty.
const INTENTS: Intents = Intents::GUILD_MESSAGES
    .union(Intents::DIRECT_MESSAGES)
    .union(Intents::MESSAGE_CONTENT);

/// The most a bot may upload without a boosted server.
const UPLOAD_LIMIT: u64 = 10 * 1024 * 1024;

/// Attachments larger than this are not fetched.
const DOWNLOAD_LIMIT: u64 = 25 * 1024 * 1024;

/// Where attachments live; a download from anywhere else is refused, so a message cannot
/// make the bot fetch an address of its choosing.
const ATTACHMENT_HOSTS: [&str; 2] = ["cdn.discordapp.com", "media.discordapp.net"];

/// Gateway close codes after which reconnecting cannot help.
const AUTHENTICATION_FAILED: u16 = 4004;
const INVALID_INTENTS: u16 = 4013;
const DISALLOWED_INTENTS: u16 = 4014;

/// Everything a [`DiscordChannel`] needs, the token already resolved.
#[derive(Clone)]
pub struct DiscordSettings {
    /// Which bot account this is (`default` for the section's own token).
    pub account: String,
    pub token: String,
    /// `https://discord.com`, or a proxy or test double (`http://` for plain HTTP).
    pub api_base: String,
    /// `wss://gateway.discord.gg`, or a proxy or test double (`ws://`).
    pub gateway_url: String,
    pub edited_messages: EditedMessages,
    /// Where the gateway session is kept for resuming after a restart.
    pub state_dir: PathBuf,
}

impl DiscordSettings {
    /// The settings of `config`'s bot `account`, whose token the caller resolved.
    pub fn from_config(
        config: &DiscordConfig,
        account: &str,
        token: String,
        state_dir: PathBuf,
    ) -> Self {
        Self {
            account: account.to_owned(),
            token,
            api_base: config.api_base.clone(),
            gateway_url: config.gateway_url.clone(),
            edited_messages: config.edited_messages,
            state_dir,
        }
    }
}

// The token must never reach a log through Debug.
impl std::fmt::Debug for DiscordSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSettings")
            .field("account", &self.account)
            .field("token", &"[redacted]")
            .field("api_base", &self.api_base)
            .field("gateway_url", &self.gateway_url)
            .field("edited_messages", &self.edited_messages)
            .field("state_dir", &self.state_dir)
            .finish()
    }
}

/// One Discord bot.
pub struct DiscordChannel {
    account: String,
    token: String,
    gateway_url: String,
    /// The REST API's origin (`https://discord.com`), the one other place attachments may be
    /// fetched from (a proxy or a test double serving them).
    api_origin: String,
    edited_messages: EditedMessages,
    http: twilight_http::Client,
    downloads: reqwest::Client,
    sessions: SessionFile,
    /// Guild channels seen: `Some(parent)` for a thread, `None` for a channel of its own.
    threads: Mutex<HashMap<Id<ChannelMarker>, Option<Id<ChannelMarker>>>>,
}

impl std::fmt::Debug for DiscordChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordChannel")
            .field("account", &self.account)
            .field("gateway_url", &self.gateway_url)
            .finish_non_exhaustive()
    }
}

/// The dispatch payload of a gateway event, the rest of the envelope being read already.
#[derive(Deserialize)]
struct Dispatch<T> {
    d: T,
}

impl DiscordChannel {
    /// Fails only when `api_base` is not an `http(s)://host[:port]` address; the token is
    /// first tried when [`Channel::run`] starts.
    pub fn new(settings: DiscordSettings) -> Result<Self, ChannelError> {
        let client_error = |message: String| ChannelError::Transport {
            channel: CHANNEL.to_owned(),
            method: "client".to_owned(),
            message,
        };
        nanocrab_config::http::install_tls_provider();
        let api_base = settings.api_base.trim_end_matches('/');
        let (plain, host) = match (
            api_base.strip_prefix("http://"),
            api_base.strip_prefix("https://"),
        ) {
            (Some(host), _) => (true, host),
            (None, Some(host)) => (false, host),
            (None, None) => {
                return Err(client_error(format!(
                    "apiBase {api_base:?} is not an http:// or https:// address"
                )));
            }
        };
        if host.is_empty() || host.contains('/') {
            return Err(client_error(format!(
                "apiBase {api_base:?} must be a bare origin, without a path"
            )));
        }
        let mut http = twilight_http::Client::builder().token(settings.token.clone());
        if plain || host != "discord.com" {
            http = http.proxy(host.to_owned(), plain);
        }
        let downloads = nanocrab_config::http::client_builder(nanocrab_config::http::Timeouts {
            connect: Duration::from_secs(10),
            read: Some(Duration::from_secs(60)),
            total: Some(Duration::from_secs(300)),
        })
        // A redirect could lead anywhere; attachments are served where they are.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| client_error(err.to_string()))?;
        Ok(Self {
            sessions: SessionFile::new(&settings.state_dir, &settings.account),
            account: settings.account,
            token: settings.token,
            gateway_url: settings.gateway_url.trim_end_matches('/').to_owned(),
            api_origin: api_base.to_owned(),
            edited_messages: settings.edited_messages,
            http: http.build(),
            downloads,
            threads: Mutex::new(HashMap::new()),
        })
    }

    /// Where `message` was posted: its channel, or for a thread the parent channel and the
    /// thread. Discord says whether a channel is a thread only when asked, so each guild
    /// channel is looked up once.
    async fn place(&self, message: &Message) -> Place {
        let channel = message.channel_id;
        let plain = Place {
            chat_id: channel.to_string(),
            thread_id: None,
        };
        if message.guild_id.is_none() {
            return plain;
        }
        let known = self
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&channel)
            .copied();
        let parent = match known {
            Some(parent) => parent,
            None => match self.rest(self.http.channel(channel), "getChannel").await {
                Ok(found) => {
                    let parent = found.parent_id.filter(|_| found.kind.is_thread());
                    self.threads
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(channel, parent);
                    parent
                }
                Err(err) => {
                    tracing::warn!(error = %err, %channel,
                        "discord: cannot tell whether the channel is a thread; taking it as a channel");
                    None
                }
            },
        };
        match parent {
            Some(parent) => Place {
                chat_id: parent.to_string(),
                thread_id: Some(channel.to_string()),
            },
            None => plain,
        }
    }

    /// Makes a REST call and reads its answer. twilight-http waits out Discord's rate limits
    /// itself: before a call, the route's bucket as Discord's headers last described it; after
    /// a 429, its `retry_after`.
    async fn rest<T, R>(&self, request: R, method: &str) -> Result<T, ChannelError>
    where
        R: std::future::IntoFuture<
                Output = Result<twilight_http::Response<T>, twilight_http::Error>,
            >,
        T: serde::de::DeserializeOwned + Unpin + Send,
    {
        let response = request.await.map_err(|err| channel_error(&err, method))?;
        response
            .model()
            .await
            .map_err(|err| ChannelError::Transport {
                channel: CHANNEL.to_owned(),
                method: method.to_owned(),
                message: format!("unreadable answer: {err}"),
            })
    }

    /// Makes a REST call whose answer has no body worth reading.
    async fn rest_call<T, R>(&self, request: R, method: &str) -> Result<(), ChannelError>
    where
        R: std::future::IntoFuture<
                Output = Result<twilight_http::Response<T>, twilight_http::Error>,
            >,
    {
        request
            .await
            .map(drop)
            .map_err(|err| channel_error(&err, method))
    }

    /// Whether `url` is where Discord keeps attachments (or the configured API origin).
    fn is_attachment_address(&self, url: &str) -> bool {
        let origin_of = |url: &str| -> Option<String> {
            let (scheme, rest) = url.split_once("://")?;
            let host = rest.split(['/', '?', '#']).next()?;
            Some(format!("{scheme}://{host}"))
        };
        let Some(origin) = origin_of(url) else {
            return false;
        };
        origin == self.api_origin
            || ATTACHMENT_HOSTS
                .iter()
                .any(|host| origin == format!("https://{host}"))
    }
}

/// A twilight-http error as a [`ChannelError`]; neither carries the token.
fn channel_error(err: &twilight_http::Error, method: &str) -> ChannelError {
    match err.kind() {
        ErrorType::Unauthorized => ChannelError::Unauthorized {
            channel: CHANNEL.to_owned(),
            message: "Discord answered 401 Unauthorized".to_owned(),
        },
        ErrorType::Response { status, error, .. } if status.get() == 401 => {
            ChannelError::Unauthorized {
                channel: CHANNEL.to_owned(),
                message: error.to_string(),
            }
        }
        ErrorType::Response { status, error, .. } => ChannelError::Api {
            channel: CHANNEL.to_owned(),
            method: method.to_owned(),
            status: Some(status.get()),
            message: error.to_string(),
        },
        ErrorType::Validation => ChannelError::Api {
            channel: CHANNEL.to_owned(),
            method: method.to_owned(),
            status: None,
            message: std::error::Error::source(err)
                .map_or_else(|| err.to_string(), ToString::to_string),
        },
        // No answer, or one that could not be read; the enum is open to new kinds. The cause
        // says which (twilight's own message only says "parsing or receiving … failed").
        _ => ChannelError::Transport {
            channel: CHANNEL.to_owned(),
            method: method.to_owned(),
            message: with_causes(err),
        },
    }
}

fn id_of<T>(id: &str, what: &str, method: &str) -> Result<Id<T>, ChannelError> {
    id.parse().map_err(|_| ChannelError::Api {
        channel: CHANNEL.to_owned(),
        method: method.to_owned(),
        status: None,
        message: format!("{what} {id:?} is not a Discord id"),
    })
}

/// Where to post into `chat`: a thread is a channel of its own.
fn target(chat: &ChatRef, method: &str) -> Result<Id<ChannelMarker>, ChannelError> {
    id_of(
        chat.thread_id.as_deref().unwrap_or(&chat.chat_id),
        "channel",
        method,
    )
}

#[async_trait]
impl Channel for DiscordChannel {
    fn name(&self) -> &str {
        CHANNEL
    }

    fn account(&self) -> &str {
        &self.account
    }

    fn capabilities(&self) -> ChannelCapabilities {
        ChannelCapabilities {
            edit: true,
            typing: true,
            reactions: true,
            threads: true,
            media: true,
        }
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        // The token is tried over REST first: a wrong one is a clear error at once, where the
        // gateway would only close the socket.
        let me = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            me = self.rest(self.http.current_user(), "getCurrentUser") => me?,
        };
        let bot = BotIdentity {
            id: me.id,
            name: me.name,
        };
        let mut config =
            ConfigBuilder::new(self.token.clone(), INTENTS).proxy_url(self.gateway_url.clone());
        if let Some(saved) = self.sessions.load().await {
            tracing::info!(account = %self.account, sequence = saved.sequence,
                "discord: resuming the saved gateway session");
            config = config
                .session(Session::new(saved.sequence, saved.session_id))
                .resume_url(saved.resume_url);
        }
        let mut shard = Shard::with_config(ShardId::ONE, config.build());
        tracing::info!(bot = %bot.name, account = %self.account, "discord: connecting to the gateway");
        loop {
            // Dropping the shard leaves the session resumable: the next start picks it up.
            let item = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                item = shard.next() => item,
            };
            let json = match item {
                Some(Ok(WsMessage::Text(json))) => json,
                Some(Ok(WsMessage::Close(frame))) => {
                    let code = frame.as_ref().map(|frame| frame.code);
                    match code {
                        Some(AUTHENTICATION_FAILED) => {
                            return Err(ChannelError::Unauthorized {
                                channel: CHANNEL.to_owned(),
                                message: "the gateway closed with 4004 (authentication failed)"
                                    .to_owned(),
                            });
                        }
                        Some(INVALID_INTENTS | DISALLOWED_INTENTS) => {
                            return Err(ChannelError::Api {
                                channel: CHANNEL.to_owned(),
                                method: "gateway".to_owned(),
                                status: code,
                                message: "the intents were refused: switch on the Message Content intent under Bot in the Developer Portal".to_owned(),
                            });
                        }
                        Some(_) | None => {
                            tracing::info!(
                                ?code,
                                "discord: the gateway connection closed; reconnecting"
                            );
                            continue;
                        }
                    }
                }
                Some(Err(err)) => {
                    // The shard reconnects (resuming when it can) on the next poll.
                    tracing::warn!(error = %err, "discord: gateway error; reconnecting");
                    continue;
                }
                None => {
                    return Err(ChannelError::Transport {
                        channel: CHANNEL.to_owned(),
                        method: "gateway".to_owned(),
                        message: "the gateway closed the connection for good".to_owned(),
                    });
                }
            };
            let Some(envelope) = GatewayEventDeserializer::from_json(&json) else {
                tracing::warn!("discord: a gateway frame without an opcode skipped");
                continue;
            };
            let (op, sequence, kind) = envelope.into_parts();
            let edited = match (op, kind.as_deref()) {
                (0, Some("MESSAGE_CREATE")) => false,
                (0, Some("MESSAGE_UPDATE")) => true,
                (0, Some("READY")) => {
                    tracing::info!(bot = %bot.name, account = %self.account, "discord: connected");
                    continue;
                }
                (0, Some("RESUMED")) => {
                    tracing::info!(account = %self.account, "discord: session resumed");
                    continue;
                }
                _ => continue,
            };
            let message = match serde_json::from_str::<Dispatch<Message>>(&json) {
                Ok(dispatch) => dispatch.d,
                Err(err) => {
                    tracing::warn!(?sequence, error = %err, "discord: unreadable message skipped");
                    continue;
                }
            };
            let place = self.place(&message).await;
            match normalize(
                &message,
                edited,
                place,
                &bot,
                &self.account,
                self.edited_messages,
            ) {
                Normalized::Deliver(inbound) => {
                    let delivered = tokio::select! {
                        biased;
                        delivered = sink.deliver(*inbound) => delivered.is_ok(),
                        () = shutdown.cancelled() => false,
                    };
                    if !delivered {
                        // Not saved as handled: the resumed session replays it.
                        return Ok(());
                    }
                }
                Normalized::Skip(reason) => {
                    tracing::debug!(id = %message.id, reason, "discord: message skipped");
                }
            }
            let (Some(session), Some(resume_url), Some(sequence)) =
                (shard.session(), shard.resume_url(), sequence)
            else {
                continue;
            };
            let saved = SavedSession {
                session_id: session.id().to_owned(),
                sequence,
                resume_url: resume_url.to_owned(),
            };
            if let Err(err) = self.sessions.save(&saved).await {
                tracing::warn!(error = %err,
                    "discord: cannot save the gateway session; a restart may miss messages");
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let channel = target(&message.chat, "createMessage")?;
        // The model's text never pings: no @everyone, roles or users, only the reply's author.
        let mentions = AllowedMentions {
            replied_user: true,
            ..AllowedMentions::default()
        };
        let reply_to: Option<Id<MessageMarker>> = message
            .reply_to_message_id
            .as_deref()
            .and_then(|id| id.parse().ok());
        let mut sent = SentMessage::default();
        let rendered = render(&message.text);
        for (index, part) in split(&rendered, MESSAGE_LIMIT).iter().enumerate() {
            let mut request = self
                .http
                .create_message(channel)
                .content(part)
                .allowed_mentions(Some(&mentions));
            // Only the first part answers; the rest follow it.
            if let Some(reply_to) = reply_to.filter(|_| index == 0) {
                request = request.reply(reply_to).fail_if_not_exists(false);
            }
            let posted = self.rest(request, "createMessage").await?;
            sent.message_ids.push(posted.id.to_string());
        }
        if let Some(path) = &message.file {
            let file_error = |message: String| ChannelError::File {
                channel: CHANNEL.to_owned(),
                path: path.clone(),
                message,
            };
            let size = tokio::fs::metadata(path)
                .await
                .map_err(|err| file_error(err.to_string()))?
                .len();
            if size > UPLOAD_LIMIT {
                return Err(file_error(format!(
                    "{size} bytes is more than the {UPLOAD_LIMIT} Discord takes from a bot"
                )));
            }
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|err| file_error(err.to_string()))?;
            let file_name = path.file_name().map_or_else(
                || "file".to_owned(),
                |name| name.to_string_lossy().into_owned(),
            );
            let attachments = [Attachment::from_bytes(file_name, bytes, 0)];
            let request = self
                .http
                .create_message(channel)
                .attachments(&attachments)
                .allowed_mentions(Some(&mentions));
            let posted = self.rest(request, "createMessage").await?;
            sent.message_ids.push(posted.id.to_string());
        }
        Ok(sent)
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), ChannelError> {
        let channel = target(chat, "triggerTyping")?;
        self.rest_call(self.http.create_typing_trigger(channel), "triggerTyping")
            .await
    }

    async fn edit(&self, chat: &ChatRef, message_id: &str, text: &str) -> Result<(), ChannelError> {
        let channel = target(chat, "editMessage")?;
        let id = id_of(message_id, "message", "editMessage")?;
        let mut parts = split(&render(text), MESSAGE_LIMIT);
        // One message is replaced by one: what does not fit is cut, and says so.
        let content = if parts.len() > 1 {
            tracing::warn!(
                parts = parts.len(),
                "discord: an edit longer than one message is cut"
            );
            parts = split(&render(text), MESSAGE_LIMIT - 1);
            format!("{}…", parts.swap_remove(0))
        } else {
            parts.pop().unwrap_or_default()
        };
        self.rest_call(
            self.http
                .update_message(channel, id)
                .content(Some(content.as_str())),
            "editMessage",
        )
        .await
    }

    async fn react(
        &self,
        chat: &ChatRef,
        message_id: &str,
        emoji: &str,
    ) -> Result<(), ChannelError> {
        let channel = target(chat, "createReaction")?;
        let id = id_of(message_id, "message", "createReaction")?;
        let emoji = RequestReactionType::Unicode { name: emoji };
        self.rest_call(
            self.http.create_reaction(channel, id, &emoji),
            "createReaction",
        )
        .await
    }

    async fn download(&self, media: &Media) -> Result<Vec<u8>, ChannelError> {
        let file = media
            .file_name
            .clone()
            .unwrap_or_else(|| "attachment".to_owned());
        let too_large = |size: u64| ChannelError::TooLarge {
            channel: CHANNEL.to_owned(),
            file: file.clone(),
            size,
            limit: DOWNLOAD_LIMIT,
        };
        if let Some(size) = media.size.filter(|size| *size > DOWNLOAD_LIMIT) {
            return Err(too_large(size));
        }
        let failed = |message: String| ChannelError::Transport {
            channel: CHANNEL.to_owned(),
            method: "download".to_owned(),
            message,
        };
        if !self.is_attachment_address(&media.file_id) {
            return Err(failed(format!(
                "{file} is not on Discord's attachment servers"
            )));
        }
        let mut response = self
            .downloads
            .get(&media.file_id)
            .send()
            .await
            .map_err(|err| failed(err.without_url().to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(ChannelError::Api {
                channel: CHANNEL.to_owned(),
                method: "download".to_owned(),
                status: Some(status.as_u16()),
                message: format!("{file} could not be fetched"),
            });
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| failed(err.without_url().to_string()))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > DOWNLOAD_LIMIT {
                return Err(too_large(bytes.len() as u64));
            }
        }
        Ok(bytes)
    }
}
