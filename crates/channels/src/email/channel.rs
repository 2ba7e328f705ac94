//! The email [`Channel`]: a mailbox read over IMAP, answers sent over SMTP.
//!
//! Reading keeps one IMAP connection: the mails after the last UID handed over are fetched
//! a few at a time, handed to the gateway together, and only once it has them is the last UID
//! advanced (in the state file) and are they marked read; then the connection waits in IDLE
//! for the next mail (renewed before the server's 30 minutes run out), or looks again after
//! `pollInterval` where the server has no IDLE. A dropped connection is opened again with
//! backoff; a refused login stops the channel.
//!
//! - First start on a mailbox: its unread mails are read; what was read before is left alone.
//! - The mailbox's UIDVALIDITY changed (it was rebuilt, and its UIDs mean other mails now):
//!   nothing in it is read again; mail from its next UID on is.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lettre::message::Mailbox;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport as _, Tokio1Executor};
use nanocrab_config::{EmailConfig, MailAccount, MailSecurity, MailServer};
use nanocrab_schema::{ChatRef, InboundMessage, Media, OutboundMessage};
use tokio_util::sync::CancellationToken;

use super::compose::{File, compose};
use super::connection::{CHANNEL, MailError, Trust, is_loopback};
use super::imap::{self, Session, Woken};
use super::mailbox_state::{MailboxState, Thread};
use super::normalize::{Normalized, Place, Reading, ThreadMail, attachment_bytes, normalize};
use crate::backoff::Backoff;
use crate::error_text::with_causes;
use crate::state_file::StateFile;
use crate::{Channel, ChannelCapabilities, ChannelError, InboundSink, SentMessage};

/// How many mails are fetched and handed over together.
const BATCH: usize = 8;

/// The most an attachment may be to be fetched for a turn.
const DOWNLOAD_LIMIT: u64 = 25 * 1024 * 1024;

/// The most a file sent as an attachment may be: most servers take 25 MB a mail, and base64
/// makes a file a third larger.
const SEND_LIMIT: u64 = 18 * 1024 * 1024;

/// How long one SMTP exchange may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(60);

/// Everything an [`EmailChannel`] needs, its keys resolved.
#[derive(Debug, Clone)]
pub struct EmailSettings {
    /// Which mailbox this is (`default` with one).
    pub account: String,
    pub from_address: String,
    pub from_name: Option<String>,
    /// The IMAP folder read.
    pub mailbox: String,
    pub imap: MailServer,
    pub smtp: MailServer,
    /// A PEM file of a CA trusted besides the platform's.
    pub ca_file: Option<PathBuf>,
    /// Where the mailbox's state file is kept (`state/email-<account>.json`).
    pub state_dir: PathBuf,
    /// How often a server without IDLE is looked at.
    pub poll_interval: Duration,
    /// How long one IDLE lasts before it is renewed (servers end it after 30 minutes).
    pub idle_renew: Duration,
    /// Whether mails taken are flagged `\Seen`.
    pub mark_seen: bool,
    pub max_body_chars: usize,
    /// The receiving server's authserv-id, when `requireAuthResults` is on.
    pub authserv_id: Option<String>,
    /// The first pause before a failed connection is tried again; it doubles with each try.
    pub retry_pause: Duration,
}

impl EmailSettings {
    /// The settings of the mailbox `account` of `config`.
    pub fn from_config(config: &EmailConfig, account: &MailAccount, state_dir: PathBuf) -> Self {
        Self {
            account: account.name.clone(),
            from_address: account.from_address.clone(),
            from_name: account.from_name.clone(),
            mailbox: account.mailbox.clone(),
            imap: account.imap.clone(),
            smtp: account.smtp.clone(),
            ca_file: config.ca_file.as_ref().map(PathBuf::from),
            state_dir,
            poll_interval: Duration::from_secs(config.poll_interval.max(1)),
            idle_renew: Duration::from_secs(25 * 60),
            mark_seen: config.mark_seen,
            max_body_chars: config.max_body_chars.max(1),
            authserv_id: config
                .require_auth_results
                .then(|| config.authserv_id.trim().to_owned()),
            retry_pause: Duration::from_secs(1),
        }
    }
}

/// One mailbox, read over IMAP and answered over SMTP.
#[derive(Debug)]
pub struct EmailChannel {
    settings: EmailSettings,
    from: Mailbox,
    /// Lowercase; mail from these is the bot's own.
    own_addresses: Vec<String>,
    trust: Trust,
    smtp: AsyncSmtpTransport<Tokio1Executor>,
    state_file: StateFile,
    /// `None` until the mailbox was first opened.
    state: Mutex<Option<MailboxState>>,
}

impl EmailChannel {
    /// Fails when the addresses do not parse or the CA file cannot be read; the servers are
    /// first tried when [`Channel::run`] starts (or an answer is sent).
    pub fn new(settings: EmailSettings) -> Result<Self, ChannelError> {
        let setup = |message: String| ChannelError::Transport {
            channel: CHANNEL.to_owned(),
            method: "setup".to_owned(),
            message,
        };
        let address = settings
            .from_address
            .parse()
            .map_err(|err| setup(format!("fromAddress {:?}: {err}", settings.from_address)))?;
        let from = Mailbox::new(settings.from_name.clone(), address);
        for (server, key) in [
            (&settings.imap, "imapSecurity"),
            (&settings.smtp, "smtpSecurity"),
        ] {
            if server.security == MailSecurity::Plain && !is_loopback(&server.host) {
                return Err(setup(format!(
                    "{key} is plain, but {} is not this machine: an unencrypted connection would show the password to the network (use tls or starttls)",
                    server.host
                )));
            }
        }
        let extra_pem = match &settings.ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|err| ChannelError::File {
                channel: CHANNEL.to_owned(),
                path: path.clone(),
                message: err.to_string(),
            })?),
            None => None,
        };
        let trust = Trust::new(extra_pem).map_err(|message| ChannelError::File {
            channel: CHANNEL.to_owned(),
            path: settings.ca_file.clone().unwrap_or_default(),
            message,
        })?;
        let smtp = smtp_transport(&settings.smtp, &trust, from.email.domain()).map_err(setup)?;
        let mut own_addresses = vec![settings.from_address.to_lowercase()];
        for login in [&settings.imap.username, &settings.smtp.username] {
            if login.contains('@') && !own_addresses.contains(&login.to_lowercase()) {
                own_addresses.push(login.to_lowercase());
            }
        }
        let state_file = StateFile::new(&settings.state_dir, CHANNEL, &settings.account, "json");
        let state = load_state(state_file.path());
        Ok(Self {
            settings,
            from,
            own_addresses,
            trust,
            smtp,
            state_file,
            state: Mutex::new(state),
        })
    }

    fn state(&self) -> MutexGuard<'_, Option<MailboxState>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes the state as it is now; a failure is a transport error, so the connection
    /// starts over and nothing is confirmed that is not on disk.
    async fn save_state(&self) -> Result<(), MailError> {
        let bytes = match &*self.state() {
            Some(state) => serde_json::to_vec_pretty(state)
                .map_err(|err| MailError::Transport(format!("cannot encode the state: {err}")))?,
            None => return Ok(()),
        };
        self.state_file.save(&bytes).await.map_err(|err| {
            MailError::Transport(format!(
                "cannot write {}: {err}",
                self.state_file.path().display()
            ))
        })
    }

    /// Compares the mailbox with what the state says of it, and starts the state over when
    /// the mailbox is new or was rebuilt.
    async fn reconcile(
        &self,
        session: &mut Session,
        selected: imap::Selected,
    ) -> Result<(), MailError> {
        let account = &self.settings.account;
        let mailbox = &self.settings.mailbox;
        let known = self.state().as_ref().map(|state| {
            (
                state.mailbox == *mailbox,
                state.uid_validity == selected.uid_validity,
            )
        });
        match known {
            Some((true, true)) => return Ok(()),
            Some((true, false)) => {
                tracing::warn!(%account, %mailbox, uid_validity = selected.uid_validity,
                    "email: the mailbox was rebuilt (its UIDVALIDITY changed): the mails in it now are not read again; mail arriving from now on is");
                let mut state = self.state();
                let threads = state
                    .as_ref()
                    .map(|state| state.threads.clone())
                    .unwrap_or_default();
                let mut fresh =
                    MailboxState::fresh(mailbox, selected.uid_validity, selected.uid_next - 1);
                fresh.threads = threads;
                *state = Some(fresh);
            }
            Some((false, _)) | None => {
                let unread = imap::unseen(session).await?;
                tracing::info!(%account, %mailbox, unread = unread.len(),
                    "email: first start on this mailbox: its unread mails are read, those already read are left alone");
                let mut fresh =
                    MailboxState::fresh(mailbox, selected.uid_validity, selected.uid_next - 1);
                fresh.pending = unread;
                *self.state() = Some(fresh);
            }
        }
        self.save_state().await
    }

    /// The UIDs to read now: those left from the first start, then those after the last.
    async fn to_read(&self, session: &mut Session) -> Result<Vec<u32>, MailError> {
        let (mut pending, last) = match &*self.state() {
            Some(state) => (state.pending.clone(), state.last_uid),
            None => (Vec::new(), 0),
        };
        pending.extend(imap::uids_after(session, last).await?);
        Ok(pending)
    }

    /// Reads, hands over and confirms the mails of `uids`. `Ok(false)` when the gateway
    /// stopped taking them.
    async fn take(
        &self,
        session: &mut Session,
        uids: &[u32],
        sink: &InboundSink,
        uid_validity: u32,
    ) -> Result<bool, MailError> {
        let fetched = imap::fetch(session, uids).await?;
        let reading = Reading {
            account: &self.settings.account,
            own_addresses: &self.own_addresses,
            authserv_id: self.settings.authserv_id.as_deref(),
            max_body_chars: self.settings.max_body_chars,
        };
        // In the order of `uids`; a UID not fetched (deleted meanwhile) needs nothing.
        let mut handled: Vec<(u32, Option<(InboundMessage, ThreadMail)>)> = Vec::new();
        for uid in uids {
            let Some((_, raw)) = fetched.iter().find(|(fetched, _)| fetched == uid) else {
                handled.push((*uid, None));
                continue;
            };
            let place = Place {
                uid_validity,
                uid: *uid,
            };
            match normalize(raw, place, &reading) {
                Normalized::Deliver(message, thread) => {
                    handled.push((*uid, Some((*message, thread))));
                }
                Normalized::Skip { reason, forged } => {
                    if forged {
                        tracing::warn!(account = %self.settings.account, uid,
                            "email: a mail refused, never answered: {reason}");
                    } else {
                        tracing::info!(account = %self.settings.account, uid,
                            "email: a mail not answered: {reason}");
                    }
                    handled.push((*uid, None));
                }
            }
        }
        // Threads are known before their mails are handed over: an answer may be sent at once.
        // A mail not taken in the end is read again and recorded again.
        if let Some(state) = self.state().as_mut() {
            for (_, delivery) in &handled {
                if let Some((_, thread)) = delivery {
                    state.record(&thread.root, &thread.subject, thread.references.clone());
                }
            }
        }
        let messages: Vec<InboundMessage> = handled
            .iter()
            .filter_map(|(_, delivery)| delivery.as_ref().map(|(message, _)| message.clone()))
            .collect();
        let offered = messages.len();
        let accepted = sink.deliver_all(messages).await;
        // Confirmed: every mail up to the first one the gateway did not take.
        let mut taken = 0;
        let mut confirmed = Vec::new();
        let mut seen = Vec::new();
        for (uid, delivery) in &handled {
            match delivery {
                Some(_) if taken == accepted => break,
                Some(_) => {
                    taken += 1;
                    seen.push(*uid);
                }
                None => {}
            }
            confirmed.push(*uid);
        }
        if let Some(state) = self.state().as_mut() {
            state.pending.retain(|uid| !confirmed.contains(uid));
            if let Some(highest) = confirmed.iter().max() {
                state.last_uid = state.last_uid.max(*highest);
            }
        }
        self.save_state().await?;
        if self.settings.mark_seen && !seen.is_empty() {
            imap::mark_seen(session, &seen).await?;
        }
        Ok(accepted == offered)
    }

    /// One IMAP connection, from the login until it breaks (an error), the shutdown or the
    /// gateway's end (`Ok`).
    async fn connection(
        &self,
        sink: &InboundSink,
        shutdown: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<(), MailError> {
        let logged_in = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            session = imap::log_in(&self.settings.imap, &self.trust) => session,
        };
        let mut session = logged_in?;
        let idle = imap::has_idle(&mut session).await?;
        let selected = imap::select(&mut session, &self.settings.mailbox).await?;
        self.reconcile(&mut session, selected).await?;
        backoff.reset();
        tracing::info!(account = %self.settings.account, mailbox = %self.settings.mailbox,
            idle, "email: reading the mailbox");
        loop {
            let uids = self.to_read(&mut session).await?;
            for batch in uids.chunks(BATCH) {
                if shutdown.is_cancelled()
                    || !self
                        .take(&mut session, batch, sink, selected.uid_validity)
                        .await?
                {
                    tracing::info!(
                        "email: receiving stops; a mail not yet handed over is read again after a restart"
                    );
                    imap::log_out(session).await;
                    return Ok(());
                }
            }
            // A mail that came while these were read was announced in an answer already, and
            // IDLE would not tell of it again: look again until there is nothing new.
            if !uids.is_empty() {
                continue;
            }
            if idle {
                let woken;
                (session, woken) =
                    imap::idle(session, self.settings.idle_renew, shutdown.cancelled()).await?;
                if woken == Woken::Stop {
                    imap::log_out(session).await;
                    return Ok(());
                }
            } else {
                tokio::select! {
                    () = shutdown.cancelled() => {
                        imap::log_out(session).await;
                        return Ok(());
                    }
                    () = tokio::time::sleep(self.settings.poll_interval) => {}
                }
            }
        }
    }
}

/// The state a previous run left in `path`; none when there is no file. A file that cannot
/// be read is set aside with a warning: the mailbox is then read as on a first start.
fn load_state(path: &Path) -> Option<MailboxState> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(state) => Some(state),
        Err(err) => {
            tracing::warn!(path = %path.display(),
                "email: the state file cannot be read ({err}); the mailbox is read as on a first start");
            None
        }
    }
}

/// The SMTP client for `server`: implicit TLS, STARTTLS (required, never skipped) or plain
/// to this machine, with the same trust as IMAP.
fn smtp_transport(
    server: &MailServer,
    trust: &Trust,
    hello_domain: &str,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let parameters = || {
        let mut builder = TlsParameters::builder(server.host.clone());
        if let Some(pem) = &trust.extra_pem {
            let certificate = lettre::transport::smtp::client::Certificate::from_pem(pem)
                .map_err(|err| format!("the CA file: {err}"))?;
            builder = builder.add_root_certificate(certificate);
        }
        builder
            .build_rustls()
            .map_err(|err| format!("cannot set up TLS for {}: {err}", server.host))
    };
    let tls = match server.security {
        MailSecurity::Tls => Tls::Wrapper(parameters()?),
        MailSecurity::Starttls => Tls::Required(parameters()?),
        MailSecurity::Plain => Tls::None,
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(server.host.clone())
        .port(server.port)
        .tls(tls)
        .timeout(Some(SMTP_TIMEOUT))
        .hello_name(ClientId::Domain(hello_domain.to_owned()));
    if !server.username.is_empty() {
        builder = builder.credentials(Credentials::new(
            server.username.clone(),
            server.password.clone(),
        ));
    }
    Ok(builder.build())
}

/// A failed send as the gateway's sender reads it: a refused login (kept for the next start),
/// a refusal for good (not sent again), or a failure that may pass.
fn send_error(err: &lettre::transport::smtp::Error) -> MailError {
    let text = with_causes(err);
    let code = err.status().map(|code| code.to_string());
    if code.as_deref() == Some("535") || code.as_deref() == Some("534") {
        MailError::Login(format!("the SMTP server refused the login: {text}"))
    } else if err.is_permanent() {
        MailError::Rejected(text)
    } else {
        MailError::Transport(text)
    }
}

#[async_trait]
impl Channel for EmailChannel {
    fn name(&self) -> &str {
        CHANNEL
    }

    fn account(&self) -> &str {
        &self.settings.account
    }

    fn capabilities(&self) -> ChannelCapabilities {
        ChannelCapabilities {
            // A mail sent stays as it was sent.
            edit: false,
            typing: false,
            reactions: false,
            threads: true,
            media: true,
        }
    }

    fn untrusted_content(&self) -> bool {
        true
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        let mut backoff = Backoff::new(self.settings.retry_pause);
        loop {
            let error = match self.connection(&sink, &shutdown, &mut backoff).await {
                Ok(()) => return Ok(()),
                Err(MailError::Login(message)) => {
                    return Err(MailError::Login(message).into_channel_error("IMAP"));
                }
                Err(MailError::Rejected(message) | MailError::Transport(message)) => message,
            };
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let pause = backoff.next();
            tracing::warn!(account = %self.settings.account, %error, ?pause,
                "email: the IMAP connection failed; connecting again");
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let to: Mailbox = message.chat.chat_id.parse().map_err(|err| {
            MailError::Rejected(format!(
                "{:?} is not an address: {err}",
                message.chat.chat_id
            ))
            .into_channel_error("SMTP")
        })?;
        // A thread the state no longer knows is still answered in it, by its first mail.
        let thread = message.chat.thread_id.as_ref().map(|root| {
            self.state()
                .as_ref()
                .and_then(|state| state.threads.get(root).cloned())
                .unwrap_or_else(|| Thread {
                    subject: String::new(),
                    references: vec![root.clone()],
                    used: 0,
                })
        });
        let file = match &message.file {
            Some(path) => {
                let file_error = |message: String| ChannelError::File {
                    channel: CHANNEL.to_owned(),
                    path: path.clone(),
                    message,
                };
                let size = tokio::fs::metadata(path)
                    .await
                    .map_err(|err| file_error(err.to_string()))?
                    .len();
                if size > SEND_LIMIT {
                    return Err(ChannelError::TooLarge {
                        channel: CHANNEL.to_owned(),
                        file: path.display().to_string(),
                        size,
                        limit: SEND_LIMIT,
                    });
                }
                Some(File {
                    name: path.file_name().map_or_else(
                        || "file".to_owned(),
                        |name| name.to_string_lossy().into_owned(),
                    ),
                    bytes: tokio::fs::read(path)
                        .await
                        .map_err(|err| file_error(err.to_string()))?,
                })
            }
            None => None,
        };
        let composed = compose(&self.from, to, thread.as_ref(), &message.text, file)
            .map_err(|err| MailError::Rejected(err).into_channel_error("SMTP"))?;
        self.smtp
            .send(composed.mail)
            .await
            .map_err(|err| send_error(&err).into_channel_error("SMTP"))?;
        Ok(SentMessage {
            message_ids: vec![composed.message_id],
        })
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), ChannelError> {
        Err(ChannelError::Unsupported {
            channel: CHANNEL.to_owned(),
            capability: "show typing",
        })
    }

    async fn edit(
        &self,
        _chat: &ChatRef,
        _message_id: &str,
        _text: &str,
    ) -> Result<(), ChannelError> {
        Err(ChannelError::Unsupported {
            channel: CHANNEL.to_owned(),
            capability: "edit a mail it sent",
        })
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
        let gone = |why: &str| {
            MailError::Transport(format!("the mail of {} {why}", media.file_id))
                .into_channel_error("IMAP FETCH")
        };
        let mut parts = media.file_id.split(':').map(str::parse::<u64>);
        let (Some(Ok(uid_validity)), Some(Ok(uid)), Some(Ok(index)), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(gone("is not a mail's attachment"));
        };
        let (Ok(uid_validity), Ok(uid), Ok(index)) = (
            u32::try_from(uid_validity),
            u32::try_from(uid),
            usize::try_from(index),
        ) else {
            return Err(gone("is not a mail's attachment"));
        };
        let mut session = imap::log_in(&self.settings.imap, &self.trust)
            .await
            .map_err(|err| err.into_channel_error("IMAP"))?;
        let fetched = async {
            let selected = imap::select(&mut session, &self.settings.mailbox).await?;
            if selected.uid_validity != uid_validity {
                return Ok(None);
            }
            imap::fetch(&mut session, &[uid])
                .await
                .map(|mut mails| mails.pop().map(|(_, raw)| raw))
        }
        .await;
        imap::log_out(session).await;
        let raw = fetched
            .map_err(|err| err.into_channel_error("IMAP FETCH"))?
            .ok_or_else(|| gone("is no longer in the mailbox"))?;
        attachment_bytes(&raw, index).ok_or_else(|| gone("has no such attachment"))
    }
}
