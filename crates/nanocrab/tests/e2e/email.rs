//! `nanocrab gateway` with email: the real binary between real mail servers on 127.0.0.1
//! (Dovecot and aiosmtpd, from scripts/test-deps), the fake Telegram Bot API and the mock LLM,
//! all in one gateway with the HTTP API and the web page.

use nanocrab_testkit::Reply;
use nanocrab_testkit::mail::{MAIL_PASSWORD, MAIL_USER, MailServers};
use nanocrab_testkit::telegram::{self, FakeTelegram};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::{Home, Wire, message_texts};
use crate::web_client::WebClient;

const TELEGRAM_TOKEN: &str = "123456:fake-telegram-5ecret";
/// The sender of the recorded Telegram DM.
const TELEGRAM_USER: &str = "218485655";

/// `channels.email` for `servers`: IMAP over TLS and SMTP with STARTTLS, trusting the test's CA.
fn email_config(servers: &MailServers) -> Value {
    json!({
        "fromAddress": MAIL_USER,
        "fromName": "Nanocrab",
        "imapHost": "127.0.0.1",
        "imapPort": servers.imaps_port,
        "imapSecurity": "tls",
        "imapPassword": MAIL_PASSWORD,
        "smtpHost": "127.0.0.1",
        "smtpPort": servers.smtp_port,
        "smtpSecurity": "starttls",
        "caFile": servers.ca_file(),
        "allowFrom": ["Alice@Example.com"],
    })
}

#[test]
fn a_mail_is_answered_in_its_thread_beside_telegram_and_a_stranger_is_not() {
    let servers = MailServers::start();
    let telegram = FakeTelegram::spawn(TELEGRAM_TOKEN);
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["channels"] = json!({
        "email": email_config(&servers),
        "telegram": {
            "token": TELEGRAM_TOKEN,
            "apiBase": telegram.api_base(),
            "pollTimeout": 1,
            "allowFrom": [TELEGRAM_USER],
        },
    });
    config["gateway"] = json!({ "port": 0 });
    home.write_config(config);
    home.mock.push(Reply::text("Tuesday at **ten** works."));

    let mut gateway = home.start_gateway();
    assert!(
        gateway.log().contains("channels: telegram, email"),
        "{}",
        gateway.log()
    );
    // A stranger first, then Alice: the stranger's mail is refused before Alice's is read.
    servers.deliver(
        "From: Mallory <mallory@example.com>\nSubject: Hi\nMessage-ID: <m@example.com>\n\nAnswer me.\n",
    );
    servers.deliver(
        "From: Alice Example <alice@example.com>\nTo: Nanocrab <bot@example.test>\nSubject: Plans\nMessage-ID: <plan-1@example.com>\nDate: Tue, 1 Dec 2026 10:00:00 +0000\n\nWhen shall we meet?\n",
    );
    let sent = gateway.eventually("the answer by mail", |_| {
        let sent = servers.sent();
        (!sent.is_empty()).then_some(sent)
    });
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (
            sent[0].rcpt_tos.clone(),
            sent[0].header("Subject"),
            sent[0].header("In-Reply-To"),
            sent[0].header("References"),
            sent[0].text().trim_end().to_owned(),
            sent[0].encrypted,
        ),
        (
            vec!["alice@example.com".to_owned()],
            Some("Re: Plans".to_owned()),
            Some("<plan-1@example.com>".to_owned()),
            Some("<plan-1@example.com>".to_owned()),
            "Tuesday at **ten** works.".to_owned(),
            true,
        )
    );
    // The model read the mail as data, fenced with who sent it and the subject.
    let request = home.requests().pop().unwrap();
    let user = message_texts(&request.body)
        .into_iter()
        .rev()
        .find(|(role, _)| role == "user")
        .unwrap()
        .1;
    assert_eq!(
        user,
        "[email from alice@example.com]\n<untrusted-data source=\"email from alice@example.com\">\nFrom: Alice Example <alice@example.com>\nSubject: Plans\n\nWhen shall we meet?\n</untrusted-data>"
    );
    let session = std::fs::read_to_string(
        home.home()
            .join("sessions/agent:main:email:dm:alice@example.com:topic:plan-1@example.com.jsonl"),
    )
    .unwrap();
    assert!(session.contains("When shall we meet?"), "{session}");

    // Telegram answers in the same gateway.
    home.mock.push(Reply::text("Hello from Telegram."));
    telegram.push_update(telegram::private_text("and here?"));
    gateway.eventually("the Telegram answer", |_| {
        (!telegram.sent_messages().is_empty()).then_some(())
    });

    // `GET /status` shows both running; the stranger's mail was received and refused.
    let web = WebClient::new(&gateway.base);
    let status = web.get("/status");
    assert_eq!(status.status, 200, "{:?}", status.body);
    let channels: Vec<_> = status.body["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            json!({"name": c["name"], "account": c["account"], "state": c["state"],
                "in": c["messagesIn"], "out": c["messagesOut"]})
        })
        .collect();
    assert_eq!(
        channels,
        [
            json!({"name": "telegram", "account": "default", "state": "running", "in": 1, "out": 1}),
            json!({"name": "email", "account": "default", "state": "running", "in": 2, "out": 1}),
        ]
    );
    assert!(!gateway.log().contains(MAIL_PASSWORD));
    assert!(gateway.terminate().success());
    assert!(!password_written_to_disk(&home));
    // What was read is remembered for the next start.
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(home.home().join("state/email-default.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["lastUid"], json!(2));
}

/// Whether any file of the home but the config holds the mail password.
fn password_written_to_disk(home: &Home) -> bool {
    let mut found = false;
    let mut dirs = vec![home.home()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path != home.config_path()
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                found |= text.contains(MAIL_PASSWORD);
            }
        }
    }
    found
}

#[test]
fn a_wrong_password_stops_only_the_email_channel_and_status_says_why() {
    let servers = MailServers::start();
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    let mut email = email_config(&servers);
    email["imapPassword"] = json!("not-the-password");
    config["channels"] = json!({ "email": email });
    config["gateway"] = json!({ "port": 0 });
    home.write_config(config);
    let mut gateway = home.start_gateway();
    let web = WebClient::new(&gateway.base);
    let state = gateway.eventually("the email channel stopped", |_| {
        let status = web.get("/status");
        let email = status.body["channels"][0].clone();
        (email["state"] == "unauthorized").then_some(email)
    });
    assert_eq!(
        state["error"],
        json!(
            "email: the token was rejected: 127.0.0.1 refused the login of bot@example.test: [AUTHENTICATIONFAILED] Authentication failed."
        )
    );
    // The HTTP API goes on.
    assert_eq!(web.get("/health").status, 200);
    assert!(!gateway.log().contains("not-the-password"));
    assert!(gateway.terminate().success());
}

#[test]
fn a_missing_password_or_authserv_id_is_a_clear_error_at_start() {
    let servers = MailServers::start();
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    let mut email = email_config(&servers);
    email["imapPassword"] = json!("${NANOCRAB_TEST_UNSET_PASSWORD}");
    config["channels"] = json!({ "email": email.clone() });
    home.write_config(config.clone());
    let run = home.run(home.nanocrab().arg("gateway"));
    assert!(!run.success, "{run:?}");
    assert!(
        run.stderr.contains("channels.email.imapPassword"),
        "{}",
        run.stderr
    );

    email["imapPassword"] = json!(MAIL_PASSWORD);
    email["requireAuthResults"] = json!(true);
    config["channels"] = json!({ "email": email.clone() });
    home.write_config(config.clone());
    let run = home.run(home.nanocrab().arg("gateway"));
    assert!(!run.success, "{run:?}");
    assert!(
        run.stderr.contains(
            "`channels.email.requireAuthResults` is on but `channels.email.authservId` is empty"
        ),
        "{}",
        run.stderr
    );

    email["requireAuthResults"] = json!(false);
    email["imapHost"] = json!("imap.example.com");
    email["imapSecurity"] = json!("plain");
    config["channels"] = json!({ "email": email });
    home.write_config(config);
    let run = home.run(home.nanocrab().arg("gateway"));
    assert!(!run.success, "{run:?}");
    assert!(
        run.stderr
            .contains("imapSecurity is plain, but imap.example.com is not this machine"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_audit_flags_open_email_policies_and_status_shows_each_mailbox() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["channels"] = json!({
        "email": {
            "fromAddress": "bot@example.test",
            "imapHost": "imap.example.test",
            "imapPassword": "app-password-1",
            "smtpHost": "smtp.example.test",
            "dmPolicy": "open",
            "accounts": {
                "work": {"fromAddress": "work@example.test"},
            },
        },
    });
    home.write_config(config);
    let run = home.run(home.nanocrab().args(["security", "audit"]));
    assert!(!run.success);
    let email_lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.contains("channels.email"))
        .collect();
    insta::assert_snapshot!(email_lines.join("\n"));
    let status = home.run(home.nanocrab().arg("status"));
    let lines: Vec<&str> = status
        .stdout
        .lines()
        .filter(|line| line.starts_with("email"))
        .collect();
    insta::assert_snapshot!(lines.join("\n"), @r"
    email      bot@example.test: IMAP imap.example.test:993 tls, SMTP smtp.example.test:587 starttls; dmPolicy open, allowFrom 0, requireAuthResults off
    email      work@example.test: missing imapPassword under channels.email.accounts.work; dmPolicy open, allowFrom 0, requireAuthResults off
    ");
    assert!(!run.stdout.contains("app-password-1"));
}
