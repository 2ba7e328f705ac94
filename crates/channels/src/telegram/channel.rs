//! The Telegram [`Channel`]: long polling in, rendered and split messages out.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use nanocrab_config::{EditedMessages, TelegramConfig};
use nanocrab_schema::{ChatRef, Media, OutboundMessage};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::api::{BotApi, CHANNEL, CallError};
use super::normalize::{BotIdentity, Normalized, normalize};
use super::offset::OffsetFile;
use super::render::markdown_to_html;
use super::split::{MESSAGE_LIMIT, plain_text, split_html};
use super::types::{File, Message, Update, User};
use crate::backoff::Backoff;
use crate::{Channel, ChannelCapabilities, ChannelError, InboundSink, SentMessage};

/// The update kinds asked for; anything else Telegram might still send is skipped.
const ALLOWED_UPDATES: [&str; 4] = [
    "message",
    "edited_message",
    "channel_post",
    "edited_channel_post",
];

/// The most the Bot API lets a bot download.
const DOWNLOAD_LIMIT: u64 = 20 * 1024 * 1024;

/// A 429 asking for a longer pause than this fails the call instead of holding up the turn.
const MAX_RETRY_AFTER: u64 = 60;

/// How many times a call that failed for now (429, 5xx, no answer) is tried in all.
const CALL_ATTEMPTS: u32 = 4;

/// The first pause after a failed call; it doubles up to 30 s.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// Everything a [`TelegramChannel`] needs, the token already resolved.
#[derive(Clone)]
pub struct TelegramSettings {
    /// Which bot account this is (`default` with one).
    pub account: String,
    pub token: String,
    /// `https://api.telegram.org`, or a local Bot API server or test double.
    pub api_base: String,
    pub proxy: Option<String>,
    /// How long one `getUpdates` waits for news.
    pub poll_timeout: Duration,
    /// How much longer than `poll_timeout` a poll may take before it is deemed stalled,
    /// abandoned and started again.
    pub stall_grace: Duration,
    /// The first pause before a call that failed for now (no answer, 5xx) is tried again;
    /// it doubles with each try.
    pub retry_pause: Duration,
    pub edited_messages: EditedMessages,
    /// Where the last confirmed update offset is kept.
    pub state_dir: PathBuf,
}

impl TelegramSettings {
    /// The settings of `config`'s bot, with `token` resolved by the caller (the config's own,
    /// or the environment's) and `state_dir` for the update offset.
    pub fn from_config(config: &TelegramConfig, token: String, state_dir: PathBuf) -> Self {
        Self {
            account: "default".to_owned(),
            token,
            api_base: config.api_base.clone(),
            proxy: config.proxy.clone(),
            poll_timeout: Duration::from_secs(u64::from(config.poll_timeout)),
            stall_grace: Duration::from_secs(10),
            retry_pause: Duration::from_secs(1),
            edited_messages: config.edited_messages,
            state_dir,
        }
    }
}

// The token, and a proxy's credentials, must never reach a log through Debug.
impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("account", &self.account)
            .field("token", &"[redacted]")
            .field("api_base", &self.api_base)
            .field("proxy", &self.proxy.as_ref().map(|_| "[redacted]"))
            .field("poll_timeout", &self.poll_timeout)
            .field("stall_grace", &self.stall_grace)
            .field("retry_pause", &self.retry_pause)
            .field("edited_messages", &self.edited_messages)
            .field("state_dir", &self.state_dir)
            .finish()
    }
}

/// One Telegram bot, polling for updates with `getUpdates`.
#[derive(Debug)]
pub struct TelegramChannel {
    account: String,
    poll_timeout: Duration,
    stall_grace: Duration,
    retry_pause: Duration,
    edited_messages: EditedMessages,
    api: BotApi,
    offsets: OffsetFile,
}

impl TelegramChannel {
    /// Fails only when the HTTP client cannot be built (a malformed proxy address); the
    /// token is first tried when [`Channel::run`] starts.
    pub fn new(settings: TelegramSettings) -> Result<Self, ChannelError> {
        Ok(Self {
            api: BotApi::new(
                &settings.api_base,
                &settings.token,
                settings.proxy.as_deref(),
            )?,
            offsets: OffsetFile::new(&settings.state_dir, &settings.account),
            account: settings.account,
            // `timeout=0` is short polling: the loop would call Telegram without a pause.
            poll_timeout: settings.poll_timeout.max(Duration::from_secs(1)),
            stall_grace: settings.stall_grace,
            retry_pause: settings.retry_pause,
            edited_messages: settings.edited_messages,
        })
    }

    /// Calls `method` until it succeeds, pausing between attempts; `None` once shut down.
    async fn call_until_ok<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
        backoff: &mut Backoff,
        shutdown: &CancellationToken,
    ) -> Result<Option<T>, ChannelError> {
        loop {
            let result = tokio::select! {
                () = shutdown.cancelled() => return Ok(None),
                result = self.api.call(method, body) => result,
            };
            match result {
                Ok(value) => {
                    backoff.reset();
                    return Ok(Some(value));
                }
                Err(err) => {
                    if !wait_to_retry(method, err, backoff, shutdown).await? {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Calls `method`, waiting out 429s that ask for a reasonable pause, and trying again
    /// after a pause that doubles when Telegram could not be reached or failed on its side
    /// (5xx): an answer is worth a rare duplicate, a lost one is not.
    async fn call_with_retries<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
    ) -> Result<T, CallError> {
        self.retrying(method, || self.api.call(method, body)).await
    }

    /// Makes the call `call` makes, retrying it as [`Self::call_with_retries`] says.
    async fn retrying<T, F>(&self, method: &str, call: impl Fn() -> F) -> Result<T, CallError>
    where
        F: std::future::Future<Output = Result<T, CallError>>,
    {
        let mut attempt = 1;
        loop {
            let pause = match call().await {
                Err(CallError::Api {
                    status: 429,
                    retry_after,
                    ..
                }) if attempt < CALL_ATTEMPTS && retry_after.unwrap_or(1) <= MAX_RETRY_AFTER => {
                    Duration::from_secs(retry_after.unwrap_or(1))
                }
                Err(ref err @ (CallError::Transport(_) | CallError::Api { .. }))
                    if attempt < CALL_ATTEMPTS && err.status().is_none_or(|s| s >= 500) =>
                {
                    self.retry_pause * (1 << (attempt - 1))
                }
                result => return result,
            };
            tracing::info!(
                method,
                pause_ms = pause.as_millis(),
                "telegram: {method} failed for now; trying again"
            );
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// Sends the file at `path` into `chat` as a document, under its own name.
    async fn send_document(
        &self,
        chat: &ChatRef,
        path: &std::path::Path,
    ) -> Result<Message, ChannelError> {
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|err| ChannelError::File {
                channel: CHANNEL.to_owned(),
                path: path.to_path_buf(),
                message: err.to_string(),
            })?;
        let file_name = path.file_name().map_or_else(
            || "file".to_owned(),
            |name| name.to_string_lossy().into_owned(),
        );
        let mut fields = vec![("chat_id", chat.chat_id.clone())];
        if let Some(thread) = &chat.thread_id {
            fields.push(("message_thread_id", thread.clone()));
        }
        self.retrying("sendDocument", || {
            self.api
                .upload("sendDocument", &fields, "document", &file_name, &bytes)
        })
        .await
        .map_err(|err| err.into_channel_error("sendDocument"))
    }

    /// Sends or edits with `body["text"]` as HTML, and once more as plain text when
    /// Telegram cannot parse the HTML: the answer reaches the chat either way.
    async fn call_formatted(&self, method: &str, mut body: Value) -> Result<Message, CallError> {
        body["parse_mode"] = json!("HTML");
        match self.call_with_retries(method, &body).await {
            Err(CallError::Api {
                status: 400,
                description,
                ..
            }) if description.to_lowercase().contains("can't parse entities") => {
                tracing::warn!(method, %description, "telegram: HTML refused; sending as plain text");
                let html = body["text"].as_str().unwrap_or_default().to_owned();
                body["text"] = json!(plain_text(&html));
                if let Some(fields) = body.as_object_mut() {
                    fields.remove("parse_mode");
                }
                self.call_with_retries(method, &body).await
            }
            result => result,
        }
    }
}

/// Pauses after a failed call as the failure asks: `retry_after` for a 429, the backoff
/// otherwise. `Ok(false)` when shut down meanwhile; an error for a rejected token.
async fn wait_to_retry(
    method: &str,
    err: CallError,
    backoff: &mut Backoff,
    shutdown: &CancellationToken,
) -> Result<bool, ChannelError> {
    let pause = match &err {
        CallError::Api { status: 401, .. } => return Err(err.into_channel_error(method)),
        CallError::Api {
            status: 429,
            retry_after: Some(seconds),
            ..
        } => Duration::from_secs(*seconds),
        CallError::Api { .. } | CallError::Transport(_) => backoff.next(),
    };
    match err.status() {
        Some(409) => tracing::warn!(method, error = %err, ?pause,
            "telegram: conflict: another process polls this bot, or a webhook is set; trying again"),
        Some(_) | None => {
            tracing::warn!(method, error = %err, ?pause, "telegram: call failed; trying again");
        }
    }
    tokio::select! {
        () = shutdown.cancelled() => Ok(false),
        () = tokio::time::sleep(pause) => Ok(true),
    }
}

/// An id for the Bot API: a number when it is one (chat, message and thread ids), else the
/// text (a channel's `@username`).
fn id_value(id: &str) -> Value {
    id.parse::<i64>()
        .map_or_else(|_| json!(id), |number| json!(number))
}

#[async_trait]
impl Channel for TelegramChannel {
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
        let mut backoff = Backoff::new(FIRST_BACKOFF);
        let Some(me) = self
            .call_until_ok::<User>("getMe", &json!({}), &mut backoff, &shutdown)
            .await?
        else {
            return Ok(());
        };
        let bot = BotIdentity {
            id: me.id,
            username: me.username.unwrap_or_default(),
        };
        tracing::info!(bot = %bot.username, account = %self.account, "telegram: connected");
        // A webhook, once set, makes getUpdates fail with 409.
        let webhook_deleted = self
            .call_until_ok::<bool>("deleteWebhook", &json!({}), &mut backoff, &shutdown)
            .await?;
        if webhook_deleted.is_none() {
            return Ok(());
        }
        let commands = json!({"commands": [
            {"command": "new", "description": "Start a new conversation"},
            {"command": "reset", "description": "Forget this conversation"},
            {"command": "help", "description": "What I can do"},
        ]});
        // Only the command menu depends on it: polling goes on without.
        match self.api.call::<bool>("setMyCommands", &commands).await {
            Ok(_) => {}
            Err(err @ CallError::Api { status: 401, .. }) => {
                return Err(err.into_channel_error("setMyCommands"));
            }
            Err(err) => tracing::warn!(error = %err, "telegram: cannot set the command menu"),
        }

        let mut offset = self.offsets.load().await;
        let watchdog = self.poll_timeout + self.stall_grace;
        loop {
            let mut body = json!({
                "timeout": self.poll_timeout.as_secs(),
                "allowed_updates": ALLOWED_UPDATES,
            });
            if let Some(offset) = offset {
                body["offset"] = json!(offset);
            }
            // The HTTP timeout is a backstop behind the watchdog, so a stall reads as one.
            let poll = self
                .api
                .call_within::<Vec<Value>>("getUpdates", &body, watchdog * 2);
            let result = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                result = tokio::time::timeout(watchdog, poll) => result,
            };
            let updates = match result {
                Ok(Ok(updates)) => updates,
                Ok(Err(err)) => {
                    if wait_to_retry("getUpdates", err, &mut backoff, &shutdown).await? {
                        continue;
                    }
                    return Ok(());
                }
                Err(_) => {
                    tracing::warn!(
                        ?watchdog,
                        "telegram: getUpdates stalled; abandoning it and polling again"
                    );
                    continue;
                }
            };
            backoff.reset();
            let confirmed = offset;
            // Each update's id and whether it carries a message, in order, and the messages.
            let mut carried = Vec::with_capacity(updates.len());
            let mut messages = Vec::with_capacity(updates.len());
            for raw in updates {
                let update_id = raw.get("update_id").and_then(Value::as_i64);
                let message = match serde_json::from_value::<Update>(raw) {
                    Ok(update) => {
                        match normalize(&update, &bot, &self.account, self.edited_messages) {
                            Normalized::Deliver(message) => Some(*message),
                            Normalized::Skip(reason) => {
                                tracing::debug!(
                                    update_id = update.update_id,
                                    reason,
                                    "telegram: update skipped"
                                );
                                None
                            }
                        }
                    }
                    Err(err) => {
                        tracing::warn!(?update_id, error = %err, "telegram: unreadable update skipped");
                        None
                    }
                };
                carried.push((update_id, message.is_some()));
                messages.extend(message);
            }
            // Handed over together, so that the gateway journals them with one commit; one at
            // a time, each would wait for a commit of its own. Shut down before the gateway
            // took them all: none of them is confirmed, and Telegram sends them again after
            // the restart (the journal drops the ones it holds already).
            let wanted = messages.len();
            let accepted = tokio::select! {
                biased;
                accepted = sink.deliver_all(messages) => accepted,
                () = shutdown.cancelled() => 0,
            };
            // Polling stops once what was delivered is confirmed.
            let stop = accepted < wanted;
            if stop {
                tracing::info!(
                    "telegram: polling stops; updates not yet delivered come again after a restart"
                );
            }
            // Confirmed: every update before the first message the gateway did not take.
            let mut delivered = 0;
            for (update_id, carries) in carried {
                if carries {
                    if delivered == accepted {
                        break;
                    }
                    delivered += 1;
                }
                if let Some(next) = update_id.map(|id| id + 1)
                    && offset.is_none_or(|current| next > current)
                {
                    offset = Some(next);
                }
            }
            // Once per batch, not per update: a crash before it only repeats updates the
            // gateway's journal already holds, and it drops those as redeliveries.
            if let Some(next) = offset.filter(|_| offset != confirmed)
                && let Err(err) = self.offsets.save(next).await
            {
                tracing::warn!(error = %err,
                    "telegram: cannot save the update offset; a restart may repeat updates");
            }
            if stop {
                return Ok(());
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let html = markdown_to_html(&message.text);
        let mut sent = SentMessage::default();
        // Telegram refuses an empty message: a blank answer sends nothing.
        if html.trim().is_empty() {
            tracing::debug!(chat = %message.chat.chat_id, "telegram: a blank answer is not sent");
        }
        for (index, part) in split_html(&html, MESSAGE_LIMIT).into_iter().enumerate() {
            let mut body = json!({
                "chat_id": id_value(&message.chat.chat_id),
                "text": part,
            });
            if let Some(thread) = &message.chat.thread_id {
                body["message_thread_id"] = id_value(thread);
            }
            // Only the first part answers; the rest follow it.
            if let Some(reply_to) = message
                .reply_to_message_id
                .as_deref()
                .filter(|_| index == 0)
            {
                body["reply_parameters"] = json!({
                    "message_id": id_value(reply_to),
                    "allow_sending_without_reply": true,
                });
            }
            let posted = self
                .call_formatted("sendMessage", body)
                .await
                .map_err(|err| err.into_channel_error("sendMessage"))?;
            sent.message_ids.push(posted.message_id.to_string());
        }
        if let Some(path) = &message.file {
            let posted = self.send_document(&message.chat, path).await?;
            sent.message_ids.push(posted.message_id.to_string());
        }
        Ok(sent)
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), ChannelError> {
        let mut body = json!({"chat_id": id_value(&chat.chat_id), "action": "typing"});
        if let Some(thread) = &chat.thread_id {
            body["message_thread_id"] = id_value(thread);
        }
        self.call_with_retries::<bool>("sendChatAction", &body)
            .await
            .map(drop)
            .map_err(|err| err.into_channel_error("sendChatAction"))
    }

    async fn edit(&self, chat: &ChatRef, message_id: &str, text: &str) -> Result<(), ChannelError> {
        let html = markdown_to_html(text);
        let mut parts = split_html(&html, MESSAGE_LIMIT);
        // One message is replaced by one: what does not fit is cut, and says so.
        let html = if parts.len() > 1 {
            tracing::warn!(
                parts = parts.len(),
                "telegram: an edit longer than one message is cut"
            );
            parts = split_html(&html, MESSAGE_LIMIT - 1);
            format!("{}…", parts.swap_remove(0))
        } else {
            parts.pop().unwrap_or_default()
        };
        let body = json!({
            "chat_id": id_value(&chat.chat_id),
            "message_id": id_value(message_id),
            "text": html,
        });
        match self.call_formatted("editMessageText", body).await {
            Ok(_) => Ok(()),
            // Telegram refuses an edit to the same text; the message already says it.
            Err(CallError::Api {
                status: 400,
                description,
                ..
            }) if description.contains("message is not modified") => Ok(()),
            Err(err) => Err(err.into_channel_error("editMessageText")),
        }
    }

    async fn react(
        &self,
        chat: &ChatRef,
        message_id: &str,
        emoji: &str,
    ) -> Result<(), ChannelError> {
        let body = json!({
            "chat_id": id_value(&chat.chat_id),
            "message_id": id_value(message_id),
            "reaction": [{"type": "emoji", "emoji": emoji}],
        });
        self.call_with_retries::<bool>("setMessageReaction", &body)
            .await
            .map(drop)
            .map_err(|err| err.into_channel_error("setMessageReaction"))
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
        let file: File = self
            .call_with_retries("getFile", &json!({"file_id": media.file_id}))
            .await
            .map_err(|err| err.into_channel_error("getFile"))?;
        if let Some(size) = file.file_size.filter(|size| *size > DOWNLOAD_LIMIT) {
            return Err(too_large(size));
        }
        self.api.download(&file, DOWNLOAD_LIMIT).await
    }
}
