//! The email adapter against real mail servers on 127.0.0.1: Dovecot for IMAP and aiosmtpd
//! for SMTP (`nanocrab_testkit::mail`, installed by scripts/test-deps).
#![cfg(feature = "email")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod running;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nanocrab_channels::email::{EmailChannel, EmailSettings};
use nanocrab_channels::{Channel, ChannelError};
use nanocrab_config::{MailSecurity, MailServer};
use nanocrab_schema::{ChatType, InboundMessage, Media, MediaKind, OutboundMessage, Sender};
use nanocrab_testkit::mail::{MAIL_PASSWORD, MAIL_USER, MailServers, SentMail};
use pretty_assertions::assert_eq;
use running::{Running, until};

fn server(port: u16, security: MailSecurity) -> MailServer {
    MailServer {
        host: "127.0.0.1".to_owned(),
        port,
        security,
        username: MAIL_USER.to_owned(),
        password: MAIL_PASSWORD.to_owned(),
    }
}

/// Plain connections to both servers, a poll interval no test waits for.
fn settings(servers: &MailServers, state_dir: &Path) -> EmailSettings {
    EmailSettings {
        account: "default".to_owned(),
        from_address: MAIL_USER.to_owned(),
        from_name: Some("Nanocrab".to_owned()),
        mailbox: "INBOX".to_owned(),
        imap: server(servers.imap_port, MailSecurity::Plain),
        smtp: server(servers.smtp_port, MailSecurity::Plain),
        ca_file: None,
        state_dir: state_dir.to_owned(),
        poll_interval: Duration::from_secs(3600),
        idle_renew: Duration::from_secs(25 * 60),
        mark_seen: true,
        max_body_chars: 20_000,
        authserv_id: None,
        retry_pause: Duration::from_millis(50),
    }
}

fn receiving(settings: EmailSettings) -> Running<EmailChannel> {
    Running::start(Arc::new(EmailChannel::new(settings).unwrap()))
}

/// Waits until the channel has opened the mailbox (it writes its state then), so that what
/// is delivered next arrives while it waits for news.
async fn opened(state_dir: &Path) {
    let state = state_dir.join("email-default.json");
    until("the mailbox opened", || state.exists()).await;
}

fn answer(message: &InboundMessage, text: &str) -> OutboundMessage {
    OutboundMessage {
        chat: message.chat(),
        text: text.to_owned(),
        reply_to_message_id: None,
        file: None,
    }
}

/// A mail from Alice, with `extra` headers.
fn mail(id: &str, subject: &str, extra: &str, body: &str) -> String {
    format!(
        "From: Alice Example <alice@example.com>\nTo: Nanocrab <{MAIL_USER}>\nSubject: {subject}\nMessage-ID: <{id}>\nDate: Tue, 1 Dec 2026 10:00:00 +0000\nMIME-Version: 1.0\n{extra}Content-Type: text/plain; charset=utf-8\n\n{body}\n"
    )
}

/// The headers of a sent mail that make it a reply, and who it is from and to.
fn reply_headers(sent: &SentMail) -> Vec<(String, Option<String>)> {
    [
        "From",
        "To",
        "Subject",
        "In-Reply-To",
        "References",
        "Auto-Submitted",
    ]
    .iter()
    .map(|name| ((*name).to_owned(), sent.header(name)))
    .collect()
}

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), Some((*value).to_owned())))
        .collect()
}

#[tokio::test]
async fn a_mail_is_answered_in_its_thread_over_tls_and_a_reply_to_the_answer_stays_in_it() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    // IMAP over TLS, SMTP with STARTTLS, the servers' certificate from the test's own CA.
    let mut tls = settings(&servers, state.path());
    tls.imap = server(servers.imaps_port, MailSecurity::Tls);
    tls.smtp = server(servers.smtp_port, MailSecurity::Starttls);
    tls.ca_file = Some(servers.ca_file());
    let first = servers.deliver(&mail(
        "plan-1@example.com",
        "Plans",
        "",
        "When shall we meet?",
    ));
    let mut running = receiving(tls);
    let message = running.message().await;
    assert_eq!(
        message,
        InboundMessage {
            channel: "email".to_owned(),
            account: "default".to_owned(),
            message_id: "plan-1@example.com".to_owned(),
            chat_id: "alice@example.com".to_owned(),
            chat_type: ChatType::Dm,
            chat_title: Some("Plans".to_owned()),
            guild_id: None,
            thread_id: Some("plan-1@example.com".to_owned()),
            sender: Sender {
                id: "alice@example.com".to_owned(),
                username: None,
                display_name: Some("Alice Example".to_owned()),
                is_bot: false,
            },
            text: "When shall we meet?".to_owned(),
            reply_to: None,
            mentions: Vec::new(),
            mentions_bot: true,
            media: Vec::new(),
            timestamp: 1_796_119_200,
            edited: false,
            forwarded_from: None,
            via_bot: None,
            caption: false,
            team_id: None,
        }
    );
    until("the mail marked read", || servers.seen() == [first]).await;

    let sent = running
        .channel
        .send(&answer(&message, "**Tuesday** at ten?"))
        .await
        .unwrap();
    let ours = &sent.message_ids[0];
    assert!(ours.ends_with("@example.test"), "{ours}");
    let mails = servers.sent();
    assert_eq!(mails.len(), 1);
    assert_eq!(
        reply_headers(&mails[0]),
        headers(&[
            ("From", "Nanocrab <bot@example.test>"),
            ("To", "alice@example.com"),
            ("Subject", "Re: Plans"),
            ("In-Reply-To", "<plan-1@example.com>"),
            ("References", "<plan-1@example.com>"),
            ("Auto-Submitted", "auto-replied"),
        ])
    );
    assert_eq!(mails[0].header("Message-ID"), Some(format!("<{ours}>")));
    assert_eq!(mails[0].text().trim_end(), "**Tuesday** at ten?");
    assert_eq!(
        (
            mails[0].mail_from.as_str(),
            mails[0].rcpt_tos.as_slice(),
            mails[0].encrypted,
            mails[0].login.as_deref()
        ),
        (
            MAIL_USER,
            ["alice@example.com".to_owned()].as_slice(),
            true,
            Some(MAIL_USER)
        )
    );

    // Alice answers the answer from her mail client: the same thread, so the same chat.
    servers.deliver(&mail(
        "plan-3@example.com",
        "Re: Plans",
        &format!("In-Reply-To: <{ours}>\nReferences: <plan-1@example.com> <{ours}>\n"),
        &format!(
            "Yes, Tuesday.\n\nOn Tue, 1 Dec 2026 at 10:05, Nanocrab <{MAIL_USER}> wrote:\n> **Tuesday** at ten?"
        ),
    ));
    let reply = running.message().await;
    assert_eq!(
        (reply.chat(), reply.text.as_str()),
        (message.chat(), "Yes, Tuesday.")
    );
    running
        .channel
        .send(&answer(&reply, "Noted."))
        .await
        .unwrap();
    let mails = servers.sent();
    assert_eq!(
        reply_headers(&mails[1]),
        headers(&[
            ("From", "Nanocrab <bot@example.test>"),
            ("To", "alice@example.com"),
            ("Subject", "Re: Plans"),
            ("In-Reply-To", "<plan-3@example.com>"),
            (
                "References",
                &format!("<plan-1@example.com> <{ours}> <plan-3@example.com>")
            ),
            ("Auto-Submitted", "auto-replied"),
        ])
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_restart_in_the_middle_of_a_mailbox_answers_nothing_twice_and_skips_nothing() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    let uids: Vec<u32> = (1..=5)
        .map(|n| {
            servers.deliver(&mail(
                &format!("m{n}@example.com"),
                &format!("Mail {n}"),
                "",
                "hi",
            ))
        })
        .collect();
    let mut running = receiving(settings(&servers, state.path()));
    // The five come together; the gateway takes two, then stops before the third.
    let mut deliveries = Vec::new();
    for _ in 0..5 {
        deliveries.push(running.delivery().await);
    }
    let taken: Vec<String> = deliveries
        .drain(..2)
        .map(|delivery| {
            let id = delivery.message.message_id.clone();
            delivery.accept();
            id
        })
        .collect();
    assert_eq!(taken, ["m1@example.com", "m2@example.com"]);
    drop(deliveries);
    // Seeing the gateway gone, the channel stops receiving by itself.
    tokio::time::timeout(running::WAIT, &mut running.task)
        .await
        .expect("the channel stops")
        .unwrap()
        .unwrap();
    assert_eq!(servers.seen(), uids[..2]);

    let mut again = receiving(settings(&servers, state.path()));
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(again.message().await.message_id);
    }
    assert_eq!(ids, ["m3@example.com", "m4@example.com", "m5@example.com"]);
    // A later mail comes next: nothing of the first five came twice.
    servers.deliver(&mail("m6@example.com", "Mail 6", "", "hi"));
    assert_eq!(again.message().await.message_id, "m6@example.com");
    until("all six marked read", || servers.seen().len() == 6).await;
    again.stop().await.unwrap();
}

#[tokio::test]
async fn a_first_start_reads_the_unread_mails_only_and_robots_are_never_answered() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    let read = servers.deliver(&mail("old@example.com", "Old", "", "read already"));
    servers.flag_seen(read);
    servers.deliver(&mail(
        "away@example.com",
        "Out of office",
        "Auto-Submitted: auto-replied\n",
        "I am away.",
    ));
    servers.deliver(&mail(
        "list@example.com",
        "[list] news",
        "List-Id: <news.example.com>\n",
        "news",
    ));
    servers.deliver(&format!(
        "From: {MAIL_USER}\nSubject: mine\nMessage-ID: <mine@example.test>\n\nthe bot's own\n"
    ));
    servers.deliver(&mail("new@example.com", "New", "", "unread"));
    let mut running = receiving(settings(&servers, state.path()));
    assert_eq!(running.message().await.message_id, "new@example.com");
    servers.deliver(&mail("later@example.com", "Later", "", "after the start"));
    assert_eq!(running.message().await.message_id, "later@example.com");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_rebuilt_mailbox_is_not_read_again() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    let running = receiving(settings(&servers, state.path()));
    opened(state.path()).await;
    running.stop().await.unwrap();
    // The state of a mailbox whose UIDVALIDITY was another: to the channel, the server has
    // rebuilt it since, and its UIDs now name other mails.
    let file = state.path().join("email-default.json");
    let mut saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    saved["uidValidity"] = serde_json::json!(saved["uidValidity"].as_u64().unwrap() + 1);
    std::fs::write(&file, saved.to_string()).unwrap();
    servers.deliver(&mail("before@example.com", "Old", "", "was there before"));

    let mut running = receiving(settings(&servers, state.path()));
    until("the state started over", || {
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("\"lastUid\": 1")
    })
    .await;
    servers.deliver(&mail("after@example.com", "New", "", "arrived after"));
    assert_eq!(running.message().await.message_id, "after@example.com");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn with_auth_results_required_a_spoofed_sender_is_refused() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    let mut checked = settings(&servers, state.path());
    checked.authserv_id = Some("mx.example.test".to_owned());
    // Its From says alice@example.com, but it was sent from elsewhere; and a header the
    // sender wrote itself, below the receiving server's, claims a pass.
    let spoofed = servers.deliver(&mail(
        "spoofed@evil.example",
        "Wire the money",
        "Authentication-Results: mx.example.test; dkim=none; spf=fail smtp.mailfrom=evil.example; dmarc=fail header.from=example.com\nAuthentication-Results: mx.example.test; dkim=pass header.d=example.com\n",
        "Urgent.",
    ));
    let genuine = servers.deliver(&mail(
        "genuine@example.com",
        "Hello",
        "Authentication-Results: mx.example.test;\n dkim=pass (2048-bit key) header.d=example.com header.s=s1;\n spf=pass smtp.mailfrom=alice@example.com\n",
        "It's me.",
    ));
    let mut running = receiving(checked);
    assert_eq!(running.message().await.message_id, "genuine@example.com");
    until("the genuine mail marked read", || {
        servers.seen() == [genuine]
    })
    .await;
    assert!(!servers.seen().contains(&spoofed));
    running.stop().await.unwrap();
}

#[tokio::test]
async fn an_html_only_mail_reads_as_text_and_attachments_are_fetched_for_the_turn() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    servers.deliver(
        "From: alice@example.com\nSubject: Menu\nMessage-ID: <html@example.com>\nMIME-Version: 1.0\nContent-Type: text/html; charset=utf-8\n\n<html><head><style>p{color:red}</style></head><body><p>Lunch is <b>soup</b>.</p><ul><li>bread</li></ul></body></html>\n",
    );
    let png = [
        0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', 0, 0, 0, 13,
    ];
    servers.deliver(&format!(
        "From: alice@example.com\nSubject: Files\nMessage-ID: <files@example.com>\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nSee both.\n--b\nContent-Type: application/pdf; name=plan.pdf\nContent-Disposition: attachment; filename=plan.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0xLjQK\n--b\nContent-Type: image/png\nContent-Disposition: attachment; filename=map.png\nContent-Transfer-Encoding: base64\n\n{}\n--b--\n",
        base64_of(&png)
    ));
    let mut running = receiving(settings(&servers, state.path()));
    let html = running.message().await;
    assert_eq!(html.text, "Lunch is **soup**.\n\n*   bread");
    let files = running.message().await;
    assert_eq!(files.text, "See both.");
    let uid_validity = files.media[0].file_id.split(':').next().unwrap().to_owned();
    assert_eq!(
        files.media,
        [
            Media {
                kind: MediaKind::Document,
                file_id: format!("{uid_validity}:2:0"),
                mime_type: Some("application/pdf".to_owned()),
                file_name: Some("plan.pdf".to_owned()),
                size: Some(9),
            },
            Media {
                kind: MediaKind::Photo,
                file_id: format!("{uid_validity}:2:1"),
                mime_type: Some("image/png".to_owned()),
                file_name: Some("map.png".to_owned()),
                size: Some(12),
            },
        ]
    );
    assert_eq!(
        running.channel.download(&files.media[0]).await.unwrap(),
        b"%PDF-1.4\n"
    );
    assert_eq!(
        running.channel.download(&files.media[1]).await.unwrap(),
        png
    );
    running.stop().await.unwrap();
}

/// Standard base64 of `bytes`, for a test mail.
fn base64_of(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, byte)| n | u32::from(*byte) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test]
async fn idle_brings_a_new_mail_at_once_and_a_server_without_it_is_polled() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    // The hour between polls never passes in this test: only IDLE can bring the mail.
    let mut running = receiving(settings(&servers, state.path()));
    opened(state.path()).await;
    servers.deliver(&mail("idle@example.com", "Now", "", "while idling"));
    assert_eq!(running.message().await.message_id, "idle@example.com");
    running.stop().await.unwrap();

    let polled = MailServers::without_idle();
    let state = tempfile::tempdir().unwrap();
    let mut often = settings(&polled, state.path());
    often.poll_interval = Duration::from_millis(100);
    let mut running = receiving(often);
    opened(state.path()).await;
    polled.deliver(&mail("poll@example.com", "Later", "", "found by a poll"));
    assert_eq!(running.message().await.message_id, "poll@example.com");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_wrong_password_stops_the_channel_with_a_clear_error() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    let mut wrong = settings(&servers, state.path());
    wrong.imap.password = "not-the-password".to_owned();
    let channel = EmailChannel::new(wrong).unwrap();
    let (sink, _queue) = nanocrab_channels::inbound_queue(1);
    // It returns by itself, once: no loop of logins.
    let err = tokio::time::timeout(
        running::WAIT,
        channel.run(sink, tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the channel gives up")
    .unwrap_err();
    assert!(matches!(err, ChannelError::Unauthorized { .. }), "{err:?}");
    insta::assert_snapshot!(err.to_string(), @"email: the token was rejected: 127.0.0.1 refused the login of bot@example.test: [AUTHENTICATIONFAILED] Authentication failed.");
    assert!(!err.to_string().contains("not-the-password"));
}

#[tokio::test]
async fn a_recipient_the_server_refuses_is_refused_for_good() {
    let servers = MailServers::start();
    let state = tempfile::tempdir().unwrap();
    let channel = EmailChannel::new(settings(&servers, state.path())).unwrap();
    let mut to_nobody = OutboundMessage {
        chat: nanocrab_schema::ChatRef {
            channel: "email".to_owned(),
            account: "default".to_owned(),
            chat_id: "nobody@reject.test".to_owned(),
            thread_id: None,
        },
        text: "# Weekly plan\n\nHere it is.".to_owned(),
        reply_to_message_id: None,
        file: None,
    };
    let err = channel.send(&to_nobody).await.unwrap_err();
    assert!(matches!(err, ChannelError::Rejected { .. }), "{err:?}");
    assert!(err.to_string().contains("550"), "{err}");

    // A mail of its own, with a file, to someone who has an address.
    let file = state.path().join("plan.txt");
    std::fs::write(&file, "step 1\n").unwrap();
    to_nobody.chat.chat_id = "alice@example.com".to_owned();
    to_nobody.file = Some(file);
    channel.send(&to_nobody).await.unwrap();
    let sent = servers.sent();
    assert_eq!(
        (
            sent[0].header("Subject"),
            sent[0].header("In-Reply-To"),
            sent[0].attachments()
        ),
        (
            Some("Weekly plan".to_owned()),
            None,
            vec![("plan.txt".to_owned(), b"step 1\n".to_vec())]
        )
    );
}
