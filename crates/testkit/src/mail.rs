//! Real mail servers on 127.0.0.1 for the email tests: Dovecot (Debian's `dovecot-imapd`) for
//! IMAP and aiosmtpd (PyPI) for SMTP, both installed by `scripts/test-deps`, each started by
//! the test in a folder of its own and stopped when it is dropped.
//!
//! - Dovecot serves one mailbox, [`MAIL_USER`] with [`MAIL_PASSWORD`], on a plain port that
//!   offers STARTTLS and on a port with TLS from the first byte, with a certificate for
//!   127.0.0.1 and `localhost` made by a CA of the test's own ([`MailServers::ca_file`]). It
//!   offers IDLE unless started [`MailServers::without_idle`]. It runs unprivileged: as the
//!   test's user, or, when the test runs as root, as `nobody`.
//! - [`MailServers::deliver`] puts a mail into the mailbox as a mail server's delivery
//!   would (an IMAP APPEND), and says its UID.
//! - aiosmtpd takes mail on a plain port (STARTTLS offered) and a TLS port, wants the same
//!   login, refuses recipients `@reject.test` with a 550, and keeps every mail it is sent:
//!   [`MailServers::sent`].

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The mailbox's login.
pub const MAIL_USER: &str = "bot@example.test";
/// Its password.
pub const MAIL_PASSWORD: &str = "mail-secret-4711";

/// What the servers are waited for at most.
const READY: Duration = Duration::from_secs(20);

/// A running Dovecot and aiosmtpd; both stop when this is dropped.
pub struct MailServers {
    dir: tempfile::TempDir,
    dovecot: Child,
    smtp: Child,
    /// IMAP, plain with STARTTLS offered.
    pub imap_port: u16,
    /// IMAP over TLS.
    pub imaps_port: u16,
    /// SMTP, plain with STARTTLS offered.
    pub smtp_port: u16,
    /// SMTP over TLS.
    pub smtps_port: u16,
}

/// One mail the SMTP server was sent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentMail {
    /// The envelope sender (`MAIL FROM`).
    pub mail_from: String,
    /// The envelope recipients (`RCPT TO`).
    pub rcpt_tos: Vec<String>,
    /// The mail as sent, headers and body.
    pub data: String,
    /// Whether the connection was encrypted (STARTTLS or TLS).
    pub encrypted: bool,
    /// Who logged in.
    pub login: Option<String>,
}

impl SentMail {
    /// The first header field `name`, unfolded and decoded.
    pub fn header(&self, name: &str) -> Option<String> {
        let mail = mail_parser::MessageParser::default().parse(self.data.as_bytes())?;
        let raw = mail
            .headers_raw()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)?;
        if name.eq_ignore_ascii_case("Subject") {
            return mail.subject().map(str::to_owned);
        }
        Some(raw.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    /// The text of its plain part.
    pub fn text(&self) -> String {
        mail_parser::MessageParser::default()
            .parse(self.data.as_bytes())
            .and_then(|mail| mail.body_text(0).map(|text| text.into_owned()))
            .unwrap_or_default()
    }

    /// The names and bytes of its attachments.
    pub fn attachments(&self) -> Vec<(String, Vec<u8>)> {
        use mail_parser::MimeHeaders as _;
        let Some(mail) = mail_parser::MessageParser::default().parse(self.data.as_bytes()) else {
            return Vec::new();
        };
        mail.attachments()
            .map(|part| {
                (
                    part.attachment_name().unwrap_or_default().to_owned(),
                    part.contents().to_vec(),
                )
            })
            .collect()
    }
}

/// Whether Dovecot lists IDLE among its capabilities.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Idle {
    Offered,
    Withheld,
}

impl MailServers {
    /// Both servers, Dovecot offering IDLE.
    pub fn start() -> Self {
        Self::start_with(Idle::Offered)
    }

    /// Both servers, Dovecot not offering IDLE (a server the channel has to poll).
    pub fn without_idle() -> Self {
        Self::start_with(Idle::Withheld)
    }

    fn start_with(idle: Idle) -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        write_certificates(dir.path());
        let (smtp, smtp_port, smtps_port) = start_smtp(dir.path());
        let mut tries = 0;
        let (dovecot, imap_port, imaps_port) = loop {
            tries += 1;
            match start_dovecot(dir.path(), idle) {
                Ok(started) => break started,
                // Another test took a port between its choice and Dovecot's bind.
                Err(log) if tries < 5 && log.contains("Address already in use") => {}
                Err(log) => panic!("Dovecot did not start: {log}"),
            }
        };
        Self {
            dir,
            dovecot,
            smtp,
            imap_port,
            imaps_port,
            smtp_port,
            smtps_port,
        }
    }

    /// The PEM file of the CA the servers' certificate comes from.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Puts `raw` (a whole mail; bare `\n` line ends become `\r\n`) into the mailbox, and
    /// returns the UID it got.
    pub fn deliver(&self, raw: &str) -> u32 {
        let mail = raw.replace("\r\n", "\n").replace('\n', "\r\n");
        let mut imap = Imap::log_in(self.imap_port);
        let done = imap.command(&format!("APPEND INBOX {{{}+}}\r\n{mail}", mail.len()));
        // `a2 OK [APPENDUID <validity> <uid>] Append completed.`
        done.last()
            .and_then(|line| line.split("APPENDUID ").nth(1))
            .and_then(|rest| rest.split([' ', ']']).nth(1))
            .and_then(|uid| uid.parse().ok())
            .unwrap_or_else(|| panic!("APPEND did not say the UID: {done:?}"))
    }

    /// Flags the mail `uid` as read, as a person reading it in a mail client would.
    pub fn flag_seen(&self, uid: u32) {
        let mut imap = Imap::log_in(self.imap_port);
        imap.command("SELECT INBOX");
        imap.command(&format!("UID STORE {uid} +FLAGS.SILENT (\\Seen)"));
    }

    /// The UIDs of the mails flagged `\Seen`, in order.
    pub fn seen(&self) -> Vec<u32> {
        let mut imap = Imap::log_in(self.imap_port);
        imap.command("SELECT INBOX");
        let lines = imap.command("UID SEARCH SEEN");
        let mut uids: Vec<u32> = lines
            .iter()
            .filter_map(|line| line.strip_prefix("* SEARCH"))
            .flat_map(|rest| rest.split_whitespace().filter_map(|uid| uid.parse().ok()))
            .collect();
        uids.sort_unstable();
        uids
    }

    /// Every mail the SMTP server took, in the order it took them.
    pub fn sent(&self) -> Vec<SentMail> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("sent"))
            .expect("the sent folder")
            .map(|entry| entry.expect("an entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|path| {
                serde_json::from_slice(&std::fs::read(path).expect("a sent mail"))
                    .expect("a sent mail's record")
            })
            .collect()
    }
}

impl Drop for MailServers {
    fn drop(&mut self) {
        // SIGTERM: Dovecot's master stops the processes it started before it exits.
        let _ = Command::new("kill")
            .arg(self.dovecot.id().to_string())
            .status();
        let _ = self.dovecot.wait();
        let _ = self.smtp.kill();
        let _ = self.smtp.wait();
    }
}

/// A CA and a certificate for 127.0.0.1 and `localhost` signed by it: `ca.pem`, `cert.pem`,
/// `key.pem`.
fn write_certificates(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "nanocrab test mail CA");
    let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("a server key");
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("server parameters");
    server
        .distinguished_name
        .push(DnType::CommonName, "127.0.0.1");
    let cert = server
        .signed_by(&key, &issuer)
        .expect("the server certificate");
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("ca.pem");
    std::fs::write(dir.join("cert.pem"), cert.pem()).expect("cert.pem");
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("key.pem");
}

/// The Python with aiosmtpd that `scripts/test-deps` sets up.
fn python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-deps/venv/bin/python");
    let has_aiosmtpd = Command::new(&python)
        .args(["-c", "import aiosmtpd"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        has_aiosmtpd,
        "aiosmtpd is missing: run scripts/test-deps (the README's test command, scripts/test, does)"
    );
    python
}

/// aiosmtpd on two ports, keeping what it is sent in `<dir>/sent`.
fn start_smtp(dir: &Path) -> (Child, u16, u16) {
    let sent = dir.join("sent");
    std::fs::create_dir_all(&sent).expect("the sent folder");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/smtp_sink.py");
    // aiosmtpd warns of AUTH without TLS, which the plain port allows on purpose.
    let mut child = Command::new(python())
        .args(["-W", "ignore"])
        .arg(script)
        .arg(&sent)
        .arg(dir.join("cert.pem"))
        .arg(dir.join("key.pem"))
        .args([MAIL_USER, MAIL_PASSWORD])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("aiosmtpd starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("its output"))
        .read_line(&mut line)
        .expect("aiosmtpd's first line");
    let ports: Vec<u16> = line
        .trim()
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("aiosmtpd did not start: {line:?}"))
        .split(' ')
        .map(|port| port.parse().expect("a port"))
        .collect();
    (child, ports[0], ports[1])
}

/// A port free now on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The output of `id ARGS`.
fn id(args: &[&str]) -> String {
    let out = Command::new("id").args(args).output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Dovecot in `<dir>/dovecot`, ready for logins; its log when it did not start.
fn start_dovecot(dir: &Path, idle: Idle) -> Result<(Child, u16, u16), String> {
    let binary = ["/usr/sbin/dovecot", "/usr/local/sbin/dovecot"]
        .into_iter()
        .find(|path| Path::new(path).exists())
        .unwrap_or_else(|| {
            panic!(
                "Dovecot is missing: run scripts/test-deps (Debian's dovecot-imapd; the README's test command, scripts/test, does)"
            )
        });
    let root = dir.join("dovecot");
    let _ = std::fs::remove_dir_all(&root);
    for sub in ["run", "state", "mail"] {
        std::fs::create_dir_all(root.join(sub)).expect("Dovecot's folders");
    }
    // Dovecot refuses to run its logins as root: under root it runs as nobody.
    let as_root = id(&["-u"]) == "0";
    let (user, group) = if as_root {
        ("nobody".to_owned(), id(&["-gn", "nobody"]))
    } else {
        (id(&["-un"]), id(&["-gn"]))
    };
    let (imap_port, imaps_port) = (free_port(), free_port());
    let log = root.join("dovecot.log");
    let capability = match idle {
        Idle::Offered => String::new(),
        Idle::Withheld => {
            "imap_capability = IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE LITERAL+ UIDPLUS\n"
                .to_owned()
        }
    };
    let config = format!(
        r#"base_dir = {root}/run
state_dir = {root}/state
instance_name = nanocrab-test-{imap_port}
protocols = imap
listen = 127.0.0.1
log_path = {log}
ssl = yes
ssl_cert = <{dir}/cert.pem
ssl_key = <{dir}/key.pem
ssl_min_protocol = TLSv1.2
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
mail_location = maildir:{root}/mail/%u
mailbox_idle_check_interval = 1 secs
{capability}passdb {{
  driver = passwd-file
  args = scheme=PLAIN {root}/users
}}
userdb {{
  driver = static
  args = uid={user} gid={group} home={root}/mail/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
"#,
        root = root.display(),
        dir = dir.display(),
        log = log.display(),
    );
    std::fs::write(root.join("dovecot.conf"), config).expect("dovecot.conf");
    std::fs::write(
        root.join("users"),
        format!("{MAIL_USER}:{{PLAIN}}{MAIL_PASSWORD}\n"),
    )
    .expect("Dovecot's users");
    let mut command = if as_root {
        chown_to(dir, &user);
        let mut command = Command::new("setpriv");
        command.args([
            "--reuid",
            &user,
            "--regid",
            &group,
            "--clear-groups",
            binary,
        ]);
        command
    } else {
        Command::new(binary)
    };
    let mut child = command
        .arg("-F")
        .arg("-c")
        .arg(root.join("dovecot.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("Dovecot starts");
    let started = Instant::now();
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            let mut text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(mut stderr) = child.stderr.take() {
                let _ = stderr.read_to_string(&mut text);
            }
            return Err(text);
        }
        if let Ok(stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, imap_port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut greeting = String::new();
            if BufReader::new(stream).read_line(&mut greeting).is_ok()
                && greeting.starts_with("* OK")
            {
                return Ok((child, imap_port, imaps_port));
            }
        }
        if started.elapsed() > READY {
            let _ = child.kill();
            return Err(std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Gives `dir` and everything in it to `user`, so that Dovecot running as them can use it.
fn chown_to(dir: &Path, user: &str) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{user}:"))
        .arg(dir)
        .status()
        .expect("chown runs");
    assert!(status.success(), "chown {user} {}", dir.display());
}

/// A plain IMAP connection for the test's own commands.
struct Imap {
    reader: BufReader<TcpStream>,
    tag: u32,
}

impl Imap {
    fn log_in(port: u16) -> Self {
        let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("Dovecot listens");
        stream
            .set_read_timeout(Some(READY))
            .expect("a read timeout");
        let mut imap = Self {
            reader: BufReader::new(stream),
            tag: 0,
        };
        let mut greeting = String::new();
        imap.reader.read_line(&mut greeting).expect("a greeting");
        imap.command(&format!("LOGIN {MAIL_USER} {MAIL_PASSWORD}"));
        imap
    }

    /// Sends `command` and returns the lines up to its tagged answer, which must be OK.
    fn command(&mut self, command: &str) -> Vec<String> {
        self.tag += 1;
        let tag = format!("t{}", self.tag);
        self.reader
            .get_mut()
            .write_all(format!("{tag} {command}\r\n").as_bytes())
            .expect("a command sent");
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let read = self.reader.read_line(&mut line).expect("an answer");
            assert!(read > 0, "Dovecot closed the connection: {lines:?}");
            let line = line.trim_end().to_owned();
            let done = line.starts_with(&format!("{tag} "));
            lines.push(line);
            if done {
                let last = lines.last().map(String::as_str).unwrap_or_default();
                assert!(
                    last.starts_with(&format!("{tag} OK")),
                    "{command:?} failed: {lines:?}"
                );
                return lines;
            }
        }
    }
}
