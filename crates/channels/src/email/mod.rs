//! Email: a mailbox read over IMAP (IDLE where the server offers it, a look every
//! `pollInterval` otherwise) and answered over SMTP, both over rustls.
//!
//! - `connection`: the TCP, TLS (or STARTTLS) connections to both servers and the trusted
//!   certificates; `imap`: the IMAP commands the channel uses.
//! - `mailbox_state`: what was read (UIDVALIDITY, the last UID) and each thread's subject and
//!   references, in one file under `state/` replaced whole.
//! - `normalize`: a mail as an [`InboundMessage`](nanocrab_schema::InboundMessage), or the reason
//!   it is not answered (the bot's own, automatic, a bounce, not vouched for);
//!   `auth_results`: the `Authentication-Results` check; `body_text`: the text a person wrote
//!   (HTML made text, the quoted history cut).
//! - `compose`: an answer as a reply in its thread.
//! - `channel`: the [`Channel`](crate::Channel) tying them together.

mod auth_results;
mod body_text;
mod channel;
mod compose;
mod connection;
mod imap;
mod mailbox_state;
mod normalize;

pub use channel::{EmailChannel, EmailSettings};
