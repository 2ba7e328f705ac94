//! The Slack [`Channel`]: Socket Mode in, rendered and split Web API messages out.

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::{SinkExt as _, StreamExt as _};
use nanocrab_config::SlackConfig;
use nanocrab_schema::{ChatRef, InboundMessage, Media, OutboundMessage};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_util::sync::CancellationToken;

use super::api::{CHANNEL, CallError, Token, WebApi};
use super::normalize::{Normalized, normalize_command, normalize_event};
use super::render::markdown_to_mrkdwn;
use super::socket::{Socket, connect};
use super::split::{MESSAGE_LIMIT, split_mrkdwn};
use super::types::{
    AuthTest, ConnectionsOpen, Done, EventCallback, FileInfo, Frame as Envelope, Posted,
    SlashCommand, UploadUrl,
};
use crate::backoff::Backoff;
use crate::{Channel, ChannelCapabilities, ChannelError, InboundSink, SentMessage};

/// The most a download may be: files past it are described to the model, not fetched.
const DOWNLOAD_LIMIT: u64 = 50 * 1024 * 1024;

/// A 429 asking for a longer pause than this fails the call instead of holding up the turn.
const MAX_RETRY_AFTER: u64 = 60;

/// How many times a call that failed for now (429, 5xx, no answer) is tried in all.
const CALL_ATTEMPTS: u32 = 4;

/// How many delivered events are remembered to recognise Slack's redeliveries.
const REMEMBERED_EVENTS: usize = 2048;

/// Everything a [`SlackChannel`] needs, the tokens already resolved.
#[derive(Clone)]
pub struct SlackSettings {
    /// Which Slack app this is (`default` with one).
    pub account: String,
    /// `xoxb-…`.
    pub bot_token: String,
    /// `xapp-…`.
    pub app_token: String,
    /// `https://slack.com/api`, or a test double.
    pub api_base: String,
    /// How long the socket may stay silent (Slack pings it every few seconds) before it is
    /// deemed dead and replaced.
    pub idle_timeout: Duration,
    /// The first pause before a failed connection or call is tried again; it doubles with
    /// each try.
    pub retry_pause: Duration,
    /// The most characters of one message; Slack's 40,000 unless a test wants less.
    pub message_limit: usize,
}

impl SlackSettings {
    /// The settings of the account `account` of `config`, with its tokens resolved by the
    /// caller (the config's own, or the environment's).
    pub fn from_config(
        config: &SlackConfig,
        account: &str,
        bot_token: String,
        app_token: String,
    ) -> Self {
        Self {
            account: account.to_owned(),
            bot_token,
            app_token,
            api_base: config.api_base.clone(),
            idle_timeout: Duration::from_secs(120),
            retry_pause: Duration::from_secs(1),
            message_limit: MESSAGE_LIMIT,
        }
    }
}

// The tokens must never reach a log through Debug.
impl std::fmt::Debug for SlackSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSettings")
            .field("account", &self.account)
            .field("bot_token", &"[redacted]")
            .field("app_token", &"[redacted]")
            .field("api_base", &self.api_base)
            .field("idle_timeout", &self.idle_timeout)
            .field("retry_pause", &self.retry_pause)
            .field("message_limit", &self.message_limit)
            .finish()
    }
}

/// One Slack app, connected over Socket Mode.
#[derive(Debug)]
pub struct SlackChannel {
    account: String,
    idle_timeout: Duration,
    retry_pause: Duration,
    message_limit: usize,
    api: WebApi,
    /// Events delivered lately, by event id: Slack delivers one again when its
    /// acknowledgement did not arrive (a socket dropped in between).
    delivered: Mutex<Remembered>,
}

/// The last [`REMEMBERED_EVENTS`] ids, oldest first.
#[derive(Debug, Default)]
struct Remembered {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl Remembered {
    fn insert(&mut self, id: String) {
        if self.ids.insert(id.clone()) {
            self.order.push_back(id);
        }
        while self.order.len() > REMEMBERED_EVENTS {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
    }
}

/// Why one Socket Mode connection ended.
enum Ended {
    /// Shut down, or the gateway stopped taking messages: the receive loop ends.
    Stop,
    /// Slack asked for a new connection (`disconnect`).
    Replaced(String),
}

/// What to do with one envelope, once read.
enum Handling {
    Deliver(Box<InboundMessage>),
    /// Acknowledge only: seen before, or nothing to answer.
    Acknowledge,
}

impl SlackChannel {
    /// Fails only when the HTTP client cannot be built; the tokens are first tried when
    /// [`Channel::run`] starts.
    pub fn new(settings: SlackSettings) -> Result<Self, ChannelError> {
        Ok(Self {
            api: WebApi::new(&settings.api_base, &settings.bot_token, &settings.app_token)?,
            account: settings.account,
            idle_timeout: settings.idle_timeout,
            retry_pause: settings.retry_pause,
            message_limit: settings.message_limit,
            delivered: Mutex::new(Remembered::default()),
        })
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, Remembered> {
        self.delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls `method` until it answers, pausing between tries. `Ok(None)` when shut down
    /// meanwhile; an error when the token is rejected.
    async fn call_until_ok<T: DeserializeOwned>(
        &self,
        method: &str,
        token: Token,
        backoff: &mut Backoff,
        shutdown: &CancellationToken,
    ) -> Result<Option<T>, ChannelError> {
        let nothing = json!({});
        loop {
            let called = tokio::select! {
                () = shutdown.cancelled() => return Ok(None),
                called = self.api.call::<T>(method, token, &nothing) => called,
            };
            let err = match called {
                Ok(answer) => return Ok(Some(answer)),
                Err(err) if err.is_auth() => return Err(err.into_channel_error(method)),
                Err(err) => err,
            };
            let pause = match &err {
                CallError::Api {
                    retry_after: Some(seconds),
                    ..
                } => Duration::from_secs(*seconds),
                CallError::Api { .. } | CallError::Transport(_) => backoff.next(),
            };
            tracing::warn!(method, error = %err, ?pause, "slack: call failed; trying again");
            tokio::select! {
                () = shutdown.cancelled() => return Ok(None),
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Calls `method`, trying again after a 429 (as long as it asks) or a failure that may
    /// pass, up to [`CALL_ATTEMPTS`] tries.
    async fn retrying<T, F, Fut>(&self, method: &str, call: F) -> Result<T, ChannelError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        let mut backoff = Backoff::new(self.retry_pause);
        let mut attempt = 1;
        loop {
            let err = match call().await {
                Ok(answer) => return Ok(answer),
                Err(err) => err,
            };
            if attempt >= CALL_ATTEMPTS || !err.is_transient() {
                return Err(err.into_channel_error(method));
            }
            let pause = match &err {
                CallError::Api {
                    retry_after: Some(seconds),
                    ..
                } if *seconds > MAX_RETRY_AFTER => return Err(err.into_channel_error(method)),
                CallError::Api {
                    retry_after: Some(seconds),
                    ..
                } => Duration::from_secs(*seconds),
                CallError::Api { .. } | CallError::Transport(_) => backoff.next(),
            };
            tracing::warn!(method, error = %err, ?pause, attempt, "slack: call failed; trying again");
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// One Socket Mode connection, from its opening to its end; an error says why it broke.
    async fn session(
        &self,
        socket: &mut Socket,
        bot_user: &str,
        sink: &InboundSink,
        shutdown: &CancellationToken,
    ) -> Result<Ended, String> {
        loop {
            let next = tokio::select! {
                () = shutdown.cancelled() => return Ok(Ended::Stop),
                next = tokio::time::timeout(self.idle_timeout, socket.next()) => next,
            };
            let text = match next {
                Err(_) => {
                    return Err(format!(
                        "nothing heard for {}s",
                        self.idle_timeout.as_secs()
                    ));
                }
                Ok(None) => return Err("the socket ended".to_owned()),
                Ok(Some(Err(err))) => return Err(format!("the socket failed: {err}")),
                Ok(Some(Ok(Frame::Text(text)))) => text,
                Ok(Some(Ok(Frame::Close(close)))) => {
                    return Err(format!(
                        "Slack closed the socket{}",
                        close.map_or_else(String::new, |close| format!(
                            ": {}",
                            close.reason.as_str()
                        ))
                    ));
                }
                // tungstenite answers pings itself.
                Ok(Some(Ok(
                    Frame::Ping(_) | Frame::Pong(_) | Frame::Binary(_) | Frame::Frame(_),
                ))) => {
                    continue;
                }
            };
            let envelope: Envelope = match serde_json::from_str(text.as_str()) {
                Ok(envelope) => envelope,
                Err(err) => {
                    tracing::warn!(error = %err, "slack: unreadable frame skipped");
                    continue;
                }
            };
            let envelope_id = match (envelope.kind.as_str(), &envelope.envelope_id) {
                ("hello", _) => {
                    tracing::info!(account = %self.account, "slack: connected");
                    continue;
                }
                ("disconnect", _) => {
                    return Ok(Ended::Replaced(
                        envelope
                            .reason
                            .unwrap_or_else(|| "no reason given".to_owned()),
                    ));
                }
                (_, Some(id)) => id.clone(),
                (kind, None) => {
                    tracing::debug!(kind, "slack: frame without an envelope skipped");
                    continue;
                }
            };
            let (handling, seen_as) = self.handle(&envelope, &envelope_id, bot_user);
            if let Handling::Deliver(message) = handling {
                let delivered = tokio::select! {
                    biased;
                    delivered = sink.deliver(*message) => delivered.is_ok(),
                    () = shutdown.cancelled() => false,
                };
                // Not acknowledged: Slack delivers it again after the restart.
                if !delivered {
                    tracing::info!(
                        "slack: receiving stops; an event not yet delivered comes again after a restart"
                    );
                    return Ok(Ended::Stop);
                }
                self.remembered().insert(seen_as);
            }
            // Acknowledged only once delivered: a crash before leaves it to Slack to send again.
            socket
                .send(Frame::text(json!({"envelope_id": envelope_id}).to_string()))
                .await
                .map_err(|err| format!("cannot acknowledge an event: {err}"))?;
        }
    }

    /// What to do with `envelope`, and the id its redeliveries will carry.
    fn handle(&self, envelope: &Envelope, envelope_id: &str, bot_user: &str) -> (Handling, String) {
        match envelope.kind.as_str() {
            "events_api" => {
                let callback: EventCallback = match serde_json::from_value(envelope.payload.clone())
                {
                    Ok(callback) => callback,
                    Err(err) => {
                        tracing::warn!(error = %err, "slack: unreadable event skipped");
                        return (Handling::Acknowledge, envelope_id.to_owned());
                    }
                };
                let event_id = callback
                    .event_id
                    .clone()
                    .unwrap_or_else(|| envelope_id.to_owned());
                if self.remembered().ids.contains(&event_id) {
                    tracing::debug!(%event_id, attempt = envelope.retry_attempt,
                        "slack: a redelivery of an event already delivered");
                    return (Handling::Acknowledge, event_id);
                }
                match normalize_event(&callback, bot_user, &self.account) {
                    Normalized::Deliver(message) => (Handling::Deliver(message), event_id),
                    Normalized::Skip(reason) => {
                        tracing::debug!(%event_id, reason, "slack: event skipped");
                        (Handling::Acknowledge, event_id)
                    }
                }
            }
            "slash_commands" => {
                match serde_json::from_value::<SlashCommand>(envelope.payload.clone()) {
                    Ok(command) => {
                        let message = normalize_command(&command, envelope_id, &self.account);
                        let seen_as = message.message_id.clone();
                        if self.remembered().ids.contains(&seen_as) {
                            return (Handling::Acknowledge, seen_as);
                        }
                        (Handling::Deliver(Box::new(message)), seen_as)
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "slack: unreadable slash command skipped");
                        (Handling::Acknowledge, envelope_id.to_owned())
                    }
                }
            }
            kind => {
                tracing::debug!(kind, "slack: a kind of envelope not answered");
                (Handling::Acknowledge, envelope_id.to_owned())
            }
        }
    }

    /// Uploads the file at `path` into `chat` (Slack's two-step external upload).
    async fn send_file(&self, chat: &ChatRef, path: &Path) -> Result<String, ChannelError> {
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|err| ChannelError::File {
                channel: CHANNEL.to_owned(),
                path: path.to_owned(),
                message: err.to_string(),
            })?;
        let file_name = path.file_name().map_or_else(
            || "file".to_owned(),
            |name| name.to_string_lossy().into_owned(),
        );
        let fields = [
            ("filename", file_name.clone()),
            ("length", bytes.len().to_string()),
        ];
        let target: UploadUrl = self
            .retrying("files.getUploadURLExternal", || {
                self.api.call_form("files.getUploadURLExternal", &fields)
            })
            .await?;
        self.retrying("upload", || self.api.upload(&target.upload_url, &bytes))
            .await?;
        let mut body = json!({
            "files": [{"id": target.file_id, "title": file_name}],
            "channel_id": chat.chat_id,
        });
        if let Some(thread) = &chat.thread_id {
            body["thread_ts"] = json!(thread);
        }
        self.retrying("files.completeUploadExternal", || {
            self.api
                .call::<Done>("files.completeUploadExternal", Token::Bot, &body)
        })
        .await?;
        Ok(target.file_id)
    }
}

#[async_trait]
impl Channel for SlackChannel {
    fn name(&self) -> &str {
        CHANNEL
    }

    fn account(&self) -> &str {
        &self.account
    }

    fn capabilities(&self) -> ChannelCapabilities {
        ChannelCapabilities {
            edit: true,
            // A bot has no typing indicator in the Web API.
            typing: false,
            // Slack reacts with emoji names (`thumbsup`), not the characters the gateway has.
            reactions: false,
            threads: true,
            media: true,
        }
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        let mut backoff = Backoff::new(self.retry_pause);
        let Some(me) = self
            .call_until_ok::<AuthTest>("auth.test", Token::Bot, &mut backoff, &shutdown)
            .await?
        else {
            return Ok(());
        };
        tracing::info!(account = %self.account, team = ?me.team, team_id = ?me.team_id,
            "slack: the bot token works");
        loop {
            let Some(open) = self
                .call_until_ok::<ConnectionsOpen>(
                    "apps.connections.open",
                    Token::App,
                    &mut backoff,
                    &shutdown,
                )
                .await?
            else {
                return Ok(());
            };
            let connected = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                connected = connect(&open.url) => connected,
            };
            let error = match connected {
                Ok(mut socket) => {
                    let ended = self
                        .session(&mut socket, &me.user_id, &sink, &shutdown)
                        .await;
                    // The socket may be broken already; closing is a courtesy.
                    let _ = socket.close(None).await;
                    match ended {
                        Ok(Ended::Stop) => return Ok(()),
                        Ok(Ended::Replaced(reason)) => {
                            tracing::info!(%reason, "slack: Slack asked for a new connection");
                            backoff.reset();
                            continue;
                        }
                        Err(error) => error,
                    }
                }
                Err(error) => error,
            };
            let pause = backoff.next();
            tracing::warn!(account = %self.account, error = %self.api.redact(&error), ?pause,
                "slack: Socket Mode connection lost; connecting again");
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let text = markdown_to_mrkdwn(&message.text);
        let mut sent = SentMessage::default();
        // Slack refuses an empty message: a blank answer sends no text.
        for part in split_mrkdwn(&text, self.message_limit) {
            let mut body = json!({"channel": message.chat.chat_id, "text": part});
            if let Some(thread) = &message.chat.thread_id {
                body["thread_ts"] = json!(thread);
            }
            let posted: Posted = self
                .retrying("chat.postMessage", || {
                    self.api.call("chat.postMessage", Token::Bot, &body)
                })
                .await?;
            sent.message_ids.push(posted.ts);
        }
        if let Some(path) = &message.file {
            sent.message_ids
                .push(self.send_file(&message.chat, path).await?);
        }
        Ok(sent)
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), ChannelError> {
        Err(ChannelError::Unsupported {
            channel: CHANNEL.to_owned(),
            capability: "show typing",
        })
    }

    async fn edit(&self, chat: &ChatRef, message_id: &str, text: &str) -> Result<(), ChannelError> {
        let text = markdown_to_mrkdwn(text);
        let mut parts = split_mrkdwn(&text, self.message_limit);
        // One message is replaced by one: what does not fit is cut, and says so.
        let text = if parts.len() > 1 {
            parts = split_mrkdwn(&text, self.message_limit - 1);
            format!("{}…", parts.swap_remove(0))
        } else {
            parts.pop().unwrap_or_default()
        };
        let body = json!({"channel": chat.chat_id, "ts": message_id, "text": text});
        self.retrying("chat.update", || {
            self.api.call::<Done>("chat.update", Token::Bot, &body)
        })
        .await
        .map(drop)
    }

    async fn react(
        &self,
        _chat: &ChatRef,
        _message_id: &str,
        _emoji: &str,
    ) -> Result<(), ChannelError> {
        Err(ChannelError::Unsupported {
            channel: CHANNEL.to_owned(),
            capability: "react",
        })
    }

    async fn download(&self, media: &Media) -> Result<Vec<u8>, ChannelError> {
        let too_large = |size: u64| ChannelError::TooLarge {
            channel: CHANNEL.to_owned(),
            file: media
                .file_name
                .clone()
                .unwrap_or_else(|| media.file_id.clone()),
            size,
            limit: DOWNLOAD_LIMIT,
        };
        if let Some(size) = media.size.filter(|size| *size > DOWNLOAD_LIMIT) {
            return Err(too_large(size));
        }
        let fields = [("file", media.file_id.clone())];
        let info: FileInfo = self
            .retrying("files.info", || self.api.call_form("files.info", &fields))
            .await?;
        let Some(url) = info.file.url_private_download.or(info.file.url_private) else {
            return Err(ChannelError::Transport {
                channel: CHANNEL.to_owned(),
                method: "files.info".to_owned(),
                message: "the file has no address to download it from".to_owned(),
            });
        };
        self.api.download(&url, DOWNLOAD_LIMIT).await
    }
}
