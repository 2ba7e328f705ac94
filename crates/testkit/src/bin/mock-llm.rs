//! The mock LLM as a process, for benchmarks: answers every request with the same text and
//! appends each request as a JSON line to a file.
//!
//!     mock-llm --reply "Hello!" --record requests.jsonl
//!
//! Prints the port it listens on (127.0.0.1) as its first line.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a dev tool: a panic is the right report

use std::io::Write as _;
use std::time::Duration;

use nanocrab_testkit::{MockLlm, Reply};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut reply = "Hello!".to_owned();
    let mut record = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--reply" => reply = args.next().expect("--reply TEXT"),
            "--record" => record = Some(args.next().expect("--record FILE")),
            other => {
                panic!("unknown argument {other}; usage: mock-llm [--reply TEXT] [--record FILE]")
            }
        }
    }
    let mock = MockLlm::start().await;
    mock.set_fallback(Reply::text(reply));
    println!("{}", mock.port());
    std::io::stdout().flush().expect("stdout");
    let mut written = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let Some(path) = &record else { continue };
        let requests = mock.requests();
        if requests.len() > written {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("open the record file");
            for request in &requests[written..] {
                let line = serde_json::json!({"path": request.path, "body": request.body});
                writeln!(file, "{line}").expect("write the record file");
            }
            written = requests.len();
        }
    }
}
