//! `nanocrab gateway` as a child process of a test home, and waiting for what it does.

use std::io::BufRead as _;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::{Home, assert_no_secret};

/// How long a test waits for the gateway to do something before it fails with the gateway's
/// log; generous, as CI machines are slow, and never reached when things work.
const PATIENCE: Duration = Duration::from_secs(60);

/// A running gateway; killed when dropped.
pub struct GatewayProcess {
    child: Child,
    log: Arc<Mutex<String>>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Home {
    /// Starts the gateway on a free port, then writes the port it took into the config, where
    /// the commands that talk to it (`nanocrab heartbeat run`, `nanocrab cron run`) look.
    pub fn start_gateway_for_cli(&self) -> GatewayProcess {
        let set_port = |port: u16| {
            let mut config: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(self.config_path()).unwrap())
                    .unwrap();
            config["gateway"]["port"] = serde_json::json!(port);
            self.write_config(config);
        };
        set_port(0);
        let gateway = self.start_gateway();
        set_port(gateway.base.rsplit(':').next().unwrap().parse().unwrap());
        gateway
    }

    /// Starts `nanocrab gateway` with this home (its config should set `gateway.port` 0) and
    /// waits until it listens.
    pub fn start_gateway(&self) -> GatewayProcess {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("nanocrab"))
            .arg("gateway")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.user_home())
            .env("NANOCRAB_HOME", self.home())
            .env("NANOCRAB_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut gateway = GatewayProcess {
            child,
            log,
            base: String::new(),
        };
        gateway.base = gateway.eventually("the gateway to listen", |g| {
            g.log()
                .lines()
                .find_map(|line| line.split("listening on ").nth(1))
                .map(|addr| addr.trim().to_owned())
        });
        gateway
    }
}

impl GatewayProcess {
    /// Runs `tests/e2e/<script>` with `args` in `home`'s Python (the one with the OpenAI
    /// client) against this gateway, asserting that it succeeds; returns the JSON it printed.
    pub fn run_python(&self, home: &Home, script: &str, args: &[&str]) -> serde_json::Value {
        let output = home
            .openai_python()
            .arg(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/e2e")
                    .join(script),
            )
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}\n{}\ngateway log:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.log()
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// Everything the gateway wrote to stderr so far; checked never to hold the API key.
    pub fn log(&self) -> String {
        let log = self.log.lock().unwrap().clone();
        assert_no_secret(&log);
        log
    }

    /// Polls `check` until it gives a value; fails the test with the gateway's log if it does
    /// not within [`PATIENCE`] or the gateway exits.
    pub fn eventually<T>(&mut self, what: &str, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(value) = check(self) {
                return value;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the gateway exited ({status}) while waiting for {what}:\n{}",
                    self.log()
                );
            }
            if start.elapsed() > PATIENCE {
                panic!("waited too long for {what}; gateway log:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then waits for the exit.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > PATIENCE {
                panic!("the gateway did not stop on SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: a crash, no chance to clean up.
    pub fn crash(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
