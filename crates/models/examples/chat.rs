//! Measures a GGUF chat model on this machine: load time, resident memory after load, and
//! prompt and decode speed on fixed conversations (a question, its follow-up, a greeting),
//! greedy, with the answers.
//!
//! `cargo run --release -p nanocrab-models --example chat -- MODEL.gguf`

use std::error::Error;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use nanocrab_models::{ChatModel, ChatRole, ChatTurn, FinishReason, GenerateOptions};

fn main() -> Result<(), Box<dyn Error>> {
    let path: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: chat MODEL.gguf")?
        .into();
    let started = Instant::now();
    let mut model = ChatModel::load(&path)?;
    println!(
        "load: {:.2} s, RSS after load: {} MiB, context: {} tokens",
        started.elapsed().as_secs_f64(),
        rss_kib()? / 1024,
        model.context_tokens()
    );
    let mut france = vec![
        turn(ChatRole::System, "You are a helpful assistant."),
        turn(ChatRole::User, "What is the capital of France?"),
    ];
    let answer = ask(&mut model, &france)?;
    // A second turn extends the first prompt, so only its new tokens are evaluated.
    france.push(turn(ChatRole::Assistant, &answer));
    france.push(turn(ChatRole::User, "And of Germany?"));
    ask(&mut model, &france)?;
    ask(&mut model, &[turn(ChatRole::User, "hello")])?;
    Ok(())
}

/// Prints the answer as it streams, then the figures; returns the answer.
fn ask(model: &mut ChatModel, turns: &[ChatTurn]) -> Result<String, Box<dyn Error>> {
    let question = turns.last().map(|t| t.content.as_str()).unwrap_or_default();
    println!("\n> {question}");
    let mut stdout = std::io::stdout();
    let generation = model.generate(turns, &GenerateOptions::default(), &mut |piece| {
        print!("{piece}");
        let _ = stdout.flush();
        ControlFlow::Continue(())
    })?;
    // The first token comes out of the prompt's evaluation and each later one, or the
    // end-of-turn token, out of one decoding step.
    let decode_steps = match generation.finish {
        FinishReason::Stop => generation.completion_tokens,
        _ => generation.completion_tokens.saturating_sub(1),
    }
    .max(1);
    println!(
        "\n[{:?}] prompt: {} tokens, time to first token {:.3} s ({:.1} tok/s, cached tokens \
         included); decode: {} tokens in {:.3} s ({:.1} tok/s); RSS {} MiB",
        generation.finish,
        generation.prompt_tokens,
        generation.prompt_seconds,
        f64::from(generation.prompt_tokens) / generation.prompt_seconds,
        generation.completion_tokens,
        generation.generate_seconds,
        f64::from(decode_steps) / generation.generate_seconds,
        rss_kib()? / 1024,
    );
    Ok(generation.text)
}

fn turn(role: ChatRole, content: &str) -> ChatTurn {
    ChatTurn {
        role,
        content: content.to_string(),
    }
}

fn rss_kib() -> Result<u64, Box<dyn Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .ok_or("no VmRSS in /proc/self/status")?;
    let kib = line
        .split_whitespace()
        .nth(1)
        .ok_or("VmRSS without a number")?
        .parse()?;
    Ok(kib)
}
