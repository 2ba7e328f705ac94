//! The gateway's memory at rest and under load: `nanocrab gateway` between the fake Telegram
//! Bot API (and, with `--channels`, the fake Discord and Slack too) and the echoing mock LLM,
//! all in this process on 127.0.0.1.
//!
//!     cargo bench -p nanocrab --bench gateway_load [-- --json] [-- --gateway BIN]
//!     cargo bench -p nanocrab --bench gateway_load -- --channels telegram,discord,slack
//!     python3 scripts/bench.py --gateway   (the release binary, as shipped)
//!
//! It onboards a throwaway `NANOCRAB_HOME`, starts the gateway with a clean environment and
//! the default log level, reads its resident memory after it has idled, then has 100 private
//! chats send 100 messages each and checks that every message got its own echo, in its own
//! chat, in order. By default each chat waits for the answer before sending its next message,
//! as a person does, so the default `collect` queue answers every message in a turn of its
//! own; `--burst` queues all of them at once instead (`followup` mode, a queue cap of
//! `--per-chat`). Then the memory again, SIGTERM, and a clean exit with nothing left in the
//! inbound journal.
//!
//! Memory consolidation is off (`memory.consolidateAfter: 0`): the echoing mock never calls
//! `save_memory`, so every consolidation would fail (and be tried again once more than half a
//! window of messages has come). `--consolidate` leaves the default on, to see that.
//!
//! `--channels telegram,discord,slack` (default `telegram`) runs those channels together, each
//! against its fake (Discord: the gateway WebSocket and REST; Slack: Socket Mode and the Web
//! API), and spreads the same chats over them in turn: chat 0 on the first, chat 1 on the
//! second, and so on. The figures are for all of them together.
//!
//! `--rounds N` has N rounds of new chats talk to the same gateway one after the other: what
//! the gateway keeps of a finished conversation adds up round after round, while the memory a
//! long conversation's turns need does not.
//!
//! Options: `--gateway BIN` (default: the `nanocrab` cargo built for this bench), `--chats N`,
//! `--per-chat N`, `--rounds N`, `--idle SECONDS` (default 3), `--burst`, `--consolidate`,
//! `--channels LIST`, `--json`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::io::{BufRead as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::clean_command;
use nanocrab_testkit::discord::{self as dc, FakeDiscord};
use nanocrab_testkit::slack::{self as sl, FakeSlack};
use nanocrab_testkit::telegram::{self, FakeTelegram};
use nanocrab_testkit::{MockLlm, Reply};
use serde_json::{Value, json};

const TOKEN: &str = "123456:bench-token";
const DISCORD_TOKEN: &str = "MTAxOTg.bench-token";
/// Chat ids start above this, clear of the recorded fixtures' ids.
const FIRST_CHAT: i64 = 7_000_000;
/// No answer for this long means something is stuck; the run fails with the gateway's log.
const PATIENCE: Duration = Duration::from_secs(120);

struct Options {
    gateway: PathBuf,
    chats: usize,
    per_chat: usize,
    idle: Duration,
    rounds: usize,
    burst: bool,
    consolidate: bool,
    /// The chats are spread over these in turn.
    channels: Vec<Platform>,
    json: bool,
}

/// A chat platform the bench talks through, each against its fake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Platform {
    Telegram,
    Discord,
    Slack,
}

impl Platform {
    fn name(self) -> &'static str {
        match self {
            Self::Telegram => "telegram",
            Self::Discord => "discord",
            Self::Slack => "slack",
        }
    }
}

fn options() -> Options {
    let mut options = Options {
        gateway: PathBuf::from(env!("CARGO_BIN_EXE_nanocrab")),
        chats: 100,
        per_chat: 100,
        idle: Duration::from_secs(3),
        rounds: 1,
        burst: false,
        consolidate: false,
        channels: vec![Platform::Telegram],
        json: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--gateway" => options.gateway = PathBuf::from(value()),
            "--chats" => options.chats = value().parse().expect("--chats N"),
            "--per-chat" => options.per_chat = value().parse().expect("--per-chat N"),
            "--idle" => options.idle = Duration::from_secs_f64(value().parse().expect("--idle S")),
            "--rounds" => options.rounds = value().parse().expect("--rounds N"),
            "--burst" => options.burst = true,
            "--consolidate" => options.consolidate = true,
            "--channels" => {
                options.channels = value()
                    .split(',')
                    .map(|name| match name.trim() {
                        "telegram" => Platform::Telegram,
                        "discord" => Platform::Discord,
                        "slack" => Platform::Slack,
                        other => fail(&format!(
                            "--channels: no channel {other:?} (telegram, discord, slack)"
                        )),
                    })
                    .collect();
                options.channels.dedup();
            }
            "--json" => options.json = true,
            // `cargo bench` passes `--bench` to every bench binary.
            "--bench" => {}
            other => fail(&format!("unknown option {other}")),
        }
    }
    assert!(options.chats > 0 && options.per_chat > 0 && options.rounds > 0);
    assert!(
        !options.channels.is_empty(),
        "--channels needs one at least"
    );
    options
}

fn fail(message: &str) -> ! {
    eprintln!("gateway_load: {message}");
    std::process::exit(1);
}

/// One `/proc/<pid>` reading.
#[derive(Debug, Clone, Copy)]
struct Sample {
    rss_mb: f64,
    hwm_mb: f64,
    threads: u64,
    /// None when `/proc/<pid>/fd` is closed to us: nanocrab makes itself non-dumpable, so only
    /// root may list it.
    fds: Option<usize>,
    /// User plus system time since the process started.
    cpu: Duration,
}

fn sample(pid: u32) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|v| v.trim().trim_end_matches("kB").trim().to_owned())
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    let kb = |name: &str| field(name).parse::<f64>().unwrap() / 1024.0;
    // Fields 14 and 15 of `stat`, counted after the parenthesised command name, which may
    // itself hold spaces.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Sample {
        rss_mb: kb("VmRSS:"),
        hwm_mb: kb("VmHWM:"),
        threads: field("Threads:").parse().unwrap(),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
            .ok()
            .map(Iterator::count),
        cpu: Duration::from_secs_f64(ticks as f64 / clock_ticks()),
    }
}

/// A file descriptor count, or `?` where only root may count them.
fn shown(fds: Option<usize>) -> String {
    fds.map_or_else(|| "?".to_owned(), |n| n.to_string())
}

/// `sysconf(_SC_CLK_TCK)` without libc: what `getconf` says, else Linux's usual 100.
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The gateway process and its stderr, each line with the time it was read.
struct Gateway {
    child: Child,
    started: Instant,
    log: Arc<Mutex<Vec<(Instant, String)>>>,
}

impl Gateway {
    fn spawn(bin: &Path, dir: &Path) -> Self {
        let started = Instant::now();
        let mut child = clean_command(bin, dir)
            .arg("gateway")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| fail(&format!("cannot run {}: {err}", bin.display())));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push((Instant::now(), line));
            }
        });
        Self {
            child,
            started,
            log,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log_text(&self) -> String {
        let log = self.log.lock().unwrap();
        log.iter().map(|(_, line)| format!("{line}\n")).collect()
    }

    /// Fails the run with the end of the gateway's log.
    fn die(&mut self, what: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = self.log_text();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        fail(&format!(
            "{what}; the gateway's log ends:\n{}",
            tail.join("\n")
        ))
    }

    fn check_alive(&mut self, what: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            self.die(&format!("the gateway exited ({status}) while {what}"));
        }
    }

    /// Waits for `listening on http://ADDR`; gives the address and when the line came.
    fn wait_listening(&mut self) -> (String, Duration) {
        loop {
            let found = self.log.lock().unwrap().iter().find_map(|(at, line)| {
                line.split("listening on http://")
                    .nth(1)
                    .map(|addr| (addr.trim().to_owned(), *at - self.started))
            });
            if let Some(found) = found {
                return found;
            }
            self.check_alive("starting");
            if self.started.elapsed() > PATIENCE {
                self.die("the gateway did not listen");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// SIGTERM; the exit status's code and how long the exit took.
    fn terminate(mut self) -> (Option<i32>, Duration, String) {
        let pid = self.pid().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success(), "kill -TERM {pid} failed");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), start.elapsed(), self.log_text());
            }
            if start.elapsed() > PATIENCE {
                self.die("the gateway did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Onboards `dir/home` as a new user would, then points the model at the mock and each
/// channel at its fake, open to any direct message.
fn prepare_home(options: &Options, dir: &Path, mock: &MockLlm, fakes: &Fakes) {
    let onboard = clean_command(&options.gateway, dir)
        // A model named: with none and no key, onboard would fetch the local model.
        .args(["onboard", "--model", "openai/bench-model"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    if !onboard.status.success() {
        fail(&format!(
            "nanocrab onboard failed: {}",
            String::from_utf8_lossy(&onboard.stderr)
        ));
    }
    let path = dir.join("home/config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["agents"]["defaults"]["model"] = json!("openai/bench-model");
    config["providers"] = json!({"openai": {"apiKey": "bench-key", "apiBase": mock.openai_base()}});
    config["channels"] = json!({});
    if let Some(fake) = &fakes.telegram {
        config["channels"]["telegram"] = json!({
            "token": TOKEN,
            "apiBase": fake.api_base(),
            // Telegram's default long poll: what an idle gateway really waits on.
            "pollTimeout": 30,
            "dmPolicy": "open",
            "allowFrom": [],
        });
    }
    if let Some((fake, _)) = &fakes.discord {
        config["channels"]["discord"] = json!({
            "token": DISCORD_TOKEN,
            "apiBase": fake.api_base(),
            "gatewayUrl": fake.gateway_url(),
            "dmPolicy": "open",
            "allowFrom": [],
        });
    }
    if let Some(fake) = &fakes.slack {
        config["channels"]["slack"] = json!({
            "botToken": fake.bot_token(),
            "appToken": fake.app_token(),
            "apiBase": fake.api_base(),
            "dmPolicy": "open",
            "allowFrom": [],
        });
    }
    config["gateway"] = json!({"port": 0});
    if !options.consolidate {
        config["memory"]["consolidateAfter"] = json!(0);
    }
    if options.burst {
        // A chat's whole backlog waits in its queue and is answered message by message.
        config["gateway"]["queue"] = json!({"mode": "followup", "cap": options.per_chat});
    }
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

fn chat_id(chat: usize) -> i64 {
    FIRST_CHAT + 1 + chat as i64
}

fn text_of(chat: usize, number: usize) -> String {
    format!("chat {} says message {number}", chat_id(chat))
}

/// The fakes of the platforms the run talks through; Discord's serves from a runtime of its
/// own (Telegram's and Slack's run on threads of their own).
struct Fakes {
    channels: Vec<Platform>,
    telegram: Option<FakeTelegram>,
    discord: Option<(FakeDiscord, tokio::runtime::Runtime)>,
    slack: Option<FakeSlack>,
    /// Answers read so far, per platform.
    seen: [usize; 3],
}

impl Fakes {
    fn start(channels: &[Platform]) -> Self {
        let discord = channels.contains(&Platform::Discord).then(|| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            (runtime.block_on(FakeDiscord::start(DISCORD_TOKEN)), runtime)
        });
        Self {
            channels: channels.to_vec(),
            telegram: channels
                .contains(&Platform::Telegram)
                .then(|| FakeTelegram::spawn(TOKEN)),
            discord,
            slack: channels.contains(&Platform::Slack).then(FakeSlack::spawn),
            seen: [0; 3],
        }
    }

    fn platform_of(&self, chat: usize) -> Platform {
        self.channels[chat % self.channels.len()]
    }

    /// Message `number` (from 1) of `chat`, through its platform: its own sender, chat and
    /// message id, since the gateway drops a second delivery of the same chat and message id.
    fn push(&self, chat: usize, number: usize) {
        let text = text_of(chat, number);
        match self.platform_of(chat) {
            Platform::Telegram => {
                let mut update = telegram::private_text(&text);
                update["message"]["from"]["id"] = json!(chat_id(chat));
                update["message"]["chat"]["id"] = json!(chat_id(chat));
                update["message"]["message_id"] = json!(number);
                self.telegram.as_ref().unwrap().push_update(update);
            }
            Platform::Discord => {
                let mut message = dc::dm(&text);
                message["id"] =
                    json!((chat_id(chat) as u64 * 1_000_000 + number as u64).to_string());
                message["channel_id"] = json!(chat_id(chat).to_string());
                message["author"]["id"] = json!((chat_id(chat) + 1_000_000_000).to_string());
                self.discord
                    .as_ref()
                    .unwrap()
                    .0
                    .push_message_create(message);
            }
            Platform::Slack => {
                let fake = self.slack.as_ref().unwrap();
                let mut frame = sl::dm_message(fake, &text);
                frame["payload"]["event"]["channel"] = json!(format!("D{}", chat_id(chat)));
                frame["payload"]["event"]["user"] = json!(format!("U{}", chat_id(chat)));
                fake.push_envelope(frame);
            }
        }
    }

    /// The answers sent since the last call, as (platform, chat id as sent, text).
    fn fresh_answers(&mut self) -> Vec<(Platform, String, String)> {
        let mut fresh = Vec::new();
        if let Some(fake) = &self.telegram {
            let sent = fake.sent_messages_after(self.seen[0]);
            self.seen[0] += sent.len();
            fresh.extend(
                sent.into_iter()
                    .map(|m| (Platform::Telegram, m.chat_id, m.text)),
            );
        }
        if let Some((fake, _)) = &self.discord {
            let sent = fake.sent_messages_after(self.seen[1]);
            self.seen[1] += sent.len();
            fresh.extend(
                sent.into_iter()
                    .map(|m| (Platform::Discord, m.channel_id, m.content)),
            );
        }
        if let Some(fake) = &self.slack {
            let sent = fake.posted_after(self.seen[2]);
            self.seen[2] += sent.len();
            fresh.extend(sent.into_iter().map(|m| {
                let chat = m.channel.trim_start_matches('D').to_owned();
                (Platform::Slack, chat, m.text)
            }));
        }
        fresh
    }
}

/// `GET path` on the gateway's own HTTP server, as JSON.
fn http_get_json(addr: &str, path: &str) -> Value {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|err| panic!("{path}: {err}: {response}"))
}

/// Journaled messages without their `done` record.
fn unfinished_in_journal(home: &Path) -> usize {
    let Ok(journal) = std::fs::read_to_string(home.join("state/gateway-inbox.jsonl")) else {
        return 0;
    };
    let mut open = HashSet::new();
    for record in journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let id = record["id"].as_u64();
        match (record["type"].as_str(), id) {
            (Some("message"), Some(id)) => {
                open.insert(id);
            }
            (Some("done"), Some(id)) => {
                open.remove(&id);
            }
            _ => {}
        }
    }
    open.len()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let options = options();
    let per_round = options.chats * options.per_chat;
    let total = per_round * options.rounds;
    let mut fakes = Fakes::start(&options.channels);
    let mock = MockLlm::spawn();
    mock.set_fallback(Reply::echo());
    let dir = tempfile::tempdir().unwrap();
    prepare_home(&options, dir.path(), &mock, &fakes);

    let mut gateway = Gateway::spawn(&options.gateway, dir.path());
    let (addr, cold_start) = gateway.wait_listening();
    std::thread::sleep(options.idle);
    gateway.check_alive("idling");
    let idle = sample(gateway.pid());

    // Each chat's next message to send (from 1), and when its last one went out; round `r`
    // talks in chats `r * chats..(r + 1) * chats`, new conversations each round.
    let all_chats = options.chats * options.rounds;
    let mut next = vec![1usize; all_chats];
    let mut pushed_at = vec![Instant::now(); all_chats];
    let mut latencies = Vec::with_capacity(total);
    let mut seen = 0;
    let mut model_requests = 0;
    let mut checkpoints = Vec::new();
    let mut after_rounds = Vec::new();
    let start = Instant::now();
    for round in 0..options.rounds {
        let chats = round * options.chats..(round + 1) * options.chats;
        if options.burst {
            for number in 1..=options.per_chat {
                for chat in chats.clone() {
                    fakes.push(chat, number);
                }
            }
        } else {
            for chat in chats.clone() {
                fakes.push(chat, 1);
                pushed_at[chat] = Instant::now();
            }
        }
        let goal = (round + 1) * per_round;
        let mut last_progress = Instant::now();
        while seen < goal {
            let fresh = fakes.fresh_answers();
            if fresh.is_empty() {
                if last_progress.elapsed() > PATIENCE {
                    gateway.die(&format!(
                        "{seen} of {goal} answers after {:?}",
                        start.elapsed()
                    ));
                }
                gateway.check_alive("answering");
                model_requests += mock.take_requests().len();
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            last_progress = Instant::now();
            for (platform, chat_id, text) in fresh {
                seen += 1;
                let chat = chat_id
                    .parse::<i64>()
                    .ok()
                    .and_then(|id| usize::try_from(id - FIRST_CHAT - 1).ok())
                    .filter(|chat| chats.contains(chat) && fakes.platform_of(*chat) == platform)
                    .unwrap_or_else(|| {
                        gateway.die(&format!(
                            "an answer to a stranger: {} chat {chat_id}: {text:?}",
                            platform.name()
                        ))
                    });
                let expected = format!("echo: {}", text_of(chat, next[chat]));
                if text != expected {
                    gateway.die(&format!(
                        "answer {seen} in {} chat {chat_id}: {text:?}, expected {expected:?}",
                        platform.name()
                    ));
                }
                next[chat] += 1;
                if !options.burst {
                    latencies.push(pushed_at[chat].elapsed());
                    if next[chat] <= options.per_chat {
                        fakes.push(chat, next[chat]);
                        pushed_at[chat] = Instant::now();
                    }
                }
                if seen % 1000 == 0 || seen == goal {
                    checkpoints.push((seen, sample(gateway.pid()).rss_mb));
                }
            }
        }
        after_rounds.push(sample(gateway.pid()).rss_mb);
    }
    let elapsed = start.elapsed();
    let loaded = sample(gateway.pid());
    // The mock records a request a moment before it answers, so all are in by now.
    model_requests += mock.take_requests().len();
    let status = http_get_json(&addr, "/status");
    std::thread::sleep(options.idle);
    let settled = sample(gateway.pid());
    // Anything more than asked for would show up now.
    let extra = fakes.fresh_answers().len();

    let (code, shutdown, log) = gateway.terminate();
    let unfinished = unfinished_in_journal(&dir.path().join("home"));
    let problems: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("WARN") || line.contains("ERROR"))
        .collect();
    latencies.sort();

    let mode = if options.burst {
        format!("{per_round} queued at once, followup")
    } else {
        "each chat waits for its answer".to_owned()
    };
    let figures = json!({
        "mode": if options.burst { "burst" } else { "paced" },
        "channels": options.channels.iter().map(|c| c.name()).collect::<Vec<_>>(),
        "consolidation": options.consolidate,
        "chats": options.chats,
        "messagesPerChat": options.per_chat,
        "rounds": options.rounds,
        "coldStartMs": ms(cold_start),
        "idle": {"rssMb": idle.rss_mb, "hwmMb": idle.hwm_mb, "threads": idle.threads,
                 "fds": idle.fds, "cpuMs": ms(idle.cpu)},
        "afterLoad": {"rssMb": loaded.rss_mb, "hwmMb": loaded.hwm_mb,
                      "threads": loaded.threads, "fds": loaded.fds},
        "settled": {"rssMb": settled.rss_mb, "fds": settled.fds, "threads": settled.threads},
        "rssAfterRounds": after_rounds,
        "rssByAnswers": checkpoints.iter().map(|(n, rss)| json!([n, rss])).collect::<Vec<_>>(),
        "seconds": elapsed.as_secs_f64(),
        "messagesPerSecond": total as f64 / elapsed.as_secs_f64(),
        "gatewayCpuMsPerMessage": ms(loaded.cpu.saturating_sub(idle.cpu)) / total as f64,
        "latencyMs": if latencies.is_empty() { Value::Null } else { json!({
            "p50": ms(percentile(&latencies, 0.5)),
            "p95": ms(percentile(&latencies, 0.95)),
            "p99": ms(percentile(&latencies, 0.99)),
            "max": ms(percentile(&latencies, 1.0)),
        })},
        "modelRequests": model_requests,
        "extraAnswers": extra,
        "status": status,
        "shutdownMs": ms(shutdown),
        "exitCode": code,
        "unfinishedInJournal": unfinished,
        "logWarningCount": problems.len(),
        // The first few, cut: a failing consolidation logs a whole conversation each time.
        "logWarnings": problems.iter().take(10).map(|line| line.chars().take(500).collect::<String>()).collect::<Vec<_>>(),
    });
    if options.json {
        println!("{}", serde_json::to_string_pretty(&figures).unwrap());
    } else {
        let rounds = match options.rounds {
            1 => String::new(),
            n => format!(", {n} rounds of new chats"),
        };
        let channels: Vec<&str> = options.channels.iter().map(|c| c.name()).collect();
        println!(
            "nanocrab gateway, {} chats × {} messages ({mode}){rounds}, on {}, {}",
            options.chats,
            options.per_chat,
            channels.join(" + "),
            options.gateway.display()
        );
        println!("  cold start to `listening`  {:8.1} ms", ms(cold_start));
        println!(
            "  idle RSS ({:.0} s listening)   {:8.1} MB   ({} threads, {} fds)",
            options.idle.as_secs_f64(),
            idle.rss_mb,
            idle.threads,
            shown(idle.fds)
        );
        println!(
            "  RSS after {total:>6} messages {:7.1} MB   peak (VmHWM) {:.1} MB; {:.1} MB after {:.0} s more idle",
            loaded.rss_mb,
            loaded.hwm_mb,
            settled.rss_mb,
            options.idle.as_secs_f64()
        );
        if options.rounds > 1 {
            let rounds: Vec<String> = after_rounds.iter().map(|rss| format!("{rss:.1}")).collect();
            println!("  RSS after each round: {} MB", rounds.join(", "));
        }
        println!(
            "  RSS by answers: {}",
            checkpoints
                .iter()
                .map(|(n, rss)| format!("{n}: {rss:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "  throughput                 {:8.1} messages/s ({:.2} s for {total}); gateway CPU {:.2} ms per message",
            total as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64(),
            ms(loaded.cpu.saturating_sub(idle.cpu)) / total as f64
        );
        if !latencies.is_empty() {
            println!(
                "  message → answer           p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                ms(percentile(&latencies, 0.5)),
                ms(percentile(&latencies, 0.95)),
                ms(percentile(&latencies, 0.99)),
                ms(percentile(&latencies, 1.0))
            );
        }
        println!(
            "  threads {} → {}, fds {} → {} → {}",
            idle.threads,
            loaded.threads,
            shown(idle.fds),
            shown(loaded.fds),
            shown(settled.fds)
        );
        println!(
            "  model requests {model_requests}, extra answers {extra}, /status messages {}, turns {}",
            status["messages"], status["turns"]
        );
        println!(
            "  SIGTERM → exit {code:?} in {:.1} ms; unfinished in the journal: {unfinished}",
            ms(shutdown)
        );
        println!("  warnings/errors in the log: {}", problems.len());
        for line in problems.iter().take(5) {
            let cut: String = line.chars().take(300).collect();
            println!("    {cut}");
        }
    }
    let healthy = code == Some(0)
        && unfinished == 0
        && extra == 0
        && model_requests == total
        && problems.is_empty();
    if !healthy {
        fail("the gateway misbehaved; see the figures above");
    }
}
