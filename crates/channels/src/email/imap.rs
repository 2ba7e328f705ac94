//! The IMAP commands the channel uses, each with a time limit: log in (TLS, STARTTLS or plain
//! to this machine), select the mailbox, find the UIDs after the last one read, fetch mails
//! whole, mark them read, and wait for news with IDLE.

use std::time::Duration;

use async_imap::extensions::idle::IdleResponse;
use futures::TryStreamExt as _;
use nanocrab_config::{MailSecurity, MailServer};

use super::connection::{Io, MailError, Trust, tcp};

/// How long one command may take; a server that says nothing for this long is gone.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) type Session = async_imap::Session<Box<dyn Io>>;

/// The selected mailbox, as SELECT reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Selected {
    pub uid_validity: u32,
    /// The UID the next mail will get (at least 1).
    pub uid_next: u32,
}

/// What ended a wait for news.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The server told of a change (a new mail, most often), or the wait was up.
    Look,
    /// The shutdown came first.
    Stop,
}

/// `future`, or a transport error saying what did not finish in time.
async fn timed<T>(
    what: &str,
    future: impl Future<Output = Result<T, async_imap::error::Error>>,
) -> Result<T, MailError> {
    tokio::time::timeout(COMMAND_TIMEOUT, future)
        .await
        .map_err(|_| MailError::Transport(format!("IMAP {what}: no answer in time")))?
        .map_err(|err| MailError::Transport(format!("IMAP {what}: {err}")))
}

/// Connects to `server` and logs in. A refused login is [`MailError::Login`].
pub(crate) async fn log_in(server: &MailServer, trust: &Trust) -> Result<Session, MailError> {
    let stream = tcp(server).await?;
    let stream = match server.security {
        MailSecurity::Tls => trust.wrap(stream, &server.host).await?,
        MailSecurity::Starttls => {
            let mut client = async_imap::Client::new(stream);
            greeting(&mut client, &server.host).await?;
            timed(
                "STARTTLS",
                client.run_command_and_check_ok("STARTTLS", None),
            )
            .await?;
            trust.wrap(client.into_inner(), &server.host).await?
        }
        MailSecurity::Plain => stream,
    };
    let mut client = async_imap::Client::new(stream);
    if server.security != MailSecurity::Starttls {
        greeting(&mut client, &server.host).await?;
    }
    let login = tokio::time::timeout(
        COMMAND_TIMEOUT,
        client.login(&server.username, &server.password),
    )
    .await
    .map_err(|_| MailError::Transport("IMAP LOGIN: no answer in time".to_owned()))?;
    match login {
        Ok(session) => Ok(session),
        Err((async_imap::error::Error::No(why), _)) => Err(MailError::Login(format!(
            "{} refused the login of {}: {}",
            server.host,
            server.username,
            server_words(&why)
        ))),
        Err((err, _)) => Err(MailError::Transport(format!("IMAP LOGIN: {err}"))),
    }
}

/// Reads the server's greeting, which comes before any command.
async fn greeting(
    client: &mut async_imap::Client<Box<dyn Io>>,
    host: &str,
) -> Result<(), MailError> {
    match tokio::time::timeout(COMMAND_TIMEOUT, client.read_response()).await {
        Ok(Ok(Some(_))) => Ok(()),
        Ok(Ok(None)) => Err(MailError::Transport(format!(
            "{host} closed the connection before its greeting"
        ))),
        Ok(Err(err)) => Err(MailError::Transport(format!("{host}'s greeting: {err}"))),
        Err(_) => Err(MailError::Transport(format!(
            "no greeting from {host} in time"
        ))),
    }
}

/// Whether the server offers IDLE.
pub(crate) async fn has_idle(session: &mut Session) -> Result<bool, MailError> {
    Ok(timed("CAPABILITY", session.capabilities())
        .await?
        .has_str("IDLE"))
}

/// Selects `mailbox` read-write. A mailbox the server refuses is [`MailError::Login`]: the
/// config names one that does not exist.
pub(crate) async fn select(session: &mut Session, mailbox: &str) -> Result<Selected, MailError> {
    let selected = tokio::time::timeout(COMMAND_TIMEOUT, session.select(mailbox))
        .await
        .map_err(|_| MailError::Transport("IMAP SELECT: no answer in time".to_owned()))?;
    let mailbox_data = match selected {
        Ok(data) => data,
        Err(async_imap::error::Error::No(why)) => {
            return Err(MailError::Login(format!(
                "cannot open the mailbox {mailbox}: {}",
                server_words(&why)
            )));
        }
        Err(err) => return Err(MailError::Transport(format!("IMAP SELECT: {err}"))),
    };
    let Some(uid_validity) = mailbox_data.uid_validity else {
        return Err(MailError::Transport(format!(
            "the server gave no UIDVALIDITY for {mailbox}"
        )));
    };
    Ok(Selected {
        uid_validity,
        uid_next: mailbox_data.uid_next.unwrap_or(1).max(1),
    })
}

/// The UIDs above `last`, in order.
pub(crate) async fn uids_after(session: &mut Session, last: u32) -> Result<Vec<u32>, MailError> {
    let first = last.saturating_add(1);
    // `N:*` also names the highest UID when it is below N, hence the filter.
    let found = timed("UID SEARCH", session.uid_search(format!("UID {first}:*"))).await?;
    let mut uids: Vec<u32> = found.into_iter().filter(|uid| *uid > last).collect();
    uids.sort_unstable();
    Ok(uids)
}

/// The UIDs of the mails not yet read, in order.
pub(crate) async fn unseen(session: &mut Session) -> Result<Vec<u32>, MailError> {
    let mut uids: Vec<u32> = timed("UID SEARCH", session.uid_search("UNSEEN"))
        .await?
        .into_iter()
        .collect();
    uids.sort_unstable();
    Ok(uids)
}

/// The whole mails of `uids`, by UID, in the order asked; a UID the server no longer has (the
/// mail was deleted meanwhile) is left out.
pub(crate) async fn fetch(
    session: &mut Session,
    uids: &[u32],
) -> Result<Vec<(u32, Vec<u8>)>, MailError> {
    let set = uid_set(uids);
    let fetched: Vec<_> = timed("UID FETCH", async {
        session
            .uid_fetch(&set, "(UID BODY.PEEK[])")
            .await?
            .try_collect::<Vec<_>>()
            .await
    })
    .await?;
    let mut mails: Vec<(u32, Vec<u8>)> = fetched
        .iter()
        .filter_map(|fetch| Some((fetch.uid?, fetch.body()?.to_vec())))
        .collect();
    mails.sort_by_key(|(uid, _)| uids.iter().position(|asked| asked == uid));
    Ok(mails)
}

/// Flags the mails of `uids` as read.
pub(crate) async fn mark_seen(session: &mut Session, uids: &[u32]) -> Result<(), MailError> {
    let set = uid_set(uids);
    timed("UID STORE", async {
        session
            .uid_store(&set, "+FLAGS.SILENT (\\Seen)")
            .await?
            .try_collect::<Vec<_>>()
            .await
    })
    .await
    .map(drop)
}

/// Waits in IDLE until the server tells of a change, `renew` has passed (servers drop an IDLE
/// after 30 minutes), or `stop` finishes. The session comes back out of IDLE, ready for
/// commands, unless stopped.
pub(crate) async fn idle(
    session: Session,
    renew: Duration,
    stop: impl Future<Output = ()>,
) -> Result<(Session, Woken), MailError> {
    let mut handle = session.idle();
    timed("IDLE", handle.init()).await?;
    let woken = {
        // Dropping the interrupt source ends the wait, so it lives as long as the wait.
        let (wait, _interrupt) = handle.wait_with_timeout(renew);
        tokio::select! {
            waited = wait => match waited {
                Ok(IdleResponse::NewData(_) | IdleResponse::Timeout | IdleResponse::ManualInterrupt) => Woken::Look,
                Err(err) => return Err(MailError::Transport(format!("IMAP IDLE: {err}"))),
            },
            () = stop => Woken::Stop,
        }
    };
    let session = timed("DONE", handle.done()).await?;
    Ok((session, woken))
}

/// Says goodbye; the connection may be gone already.
pub(crate) async fn log_out(mut session: Session) {
    let _ = tokio::time::timeout(Duration::from_secs(5), session.logout()).await;
}

/// What the server said with a NO: async-imap reports it as `code: …, info: Some("…")`.
fn server_words(why: &str) -> String {
    why.split_once("info: Some(\"")
        .and_then(|(_, rest)| rest.strip_suffix("\")"))
        .map_or_else(|| why.trim().to_owned(), |info| info.replace("\\\"", "\""))
}

/// `1,3,4` for a UID FETCH or STORE.
fn uid_set(uids: &[u32]) -> String {
    uids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
