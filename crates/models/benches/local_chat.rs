//! Measures a GGUF chat model on this machine: load time, resident memory after load, and
//! prompt and decode speed on fixed conversations (a question, its follow-up, a greeting),
//! greedy, with the answers. The last line has the figures as JSON, for scripts/bench.py.
//!
//! `cargo bench -p nanocrab-models --bench local_chat -- MODEL.gguf`
//! (`python3 scripts/bench.py --local` runs it on smollm2-135m)

use std::error::Error;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use nanocrab_models::{ChatModel, ChatRole, ChatTurn, FinishReason, GenerateOptions};

fn main() -> Result<(), Box<dyn Error>> {
    // `cargo bench` passes `--bench` along; the model is the argument that is not a flag.
    let path: PathBuf = std::env::args_os()
        .skip(1)
        .find(|arg| !arg.to_string_lossy().starts_with("--"))
        .ok_or("usage: local_chat MODEL.gguf")?
        .into();
    let started = Instant::now();
    let mut model = ChatModel::load(&path)?;
    let load_seconds = started.elapsed().as_secs_f64();
    let rss_after_load = rss_kib()? / 1024;
    println!(
        "load: {load_seconds:.2} s, RSS after load: {rss_after_load} MiB, context: {} tokens",
        model.context_tokens()
    );
    let mut figures = serde_json::Map::new();
    figures.insert("load s".into(), load_seconds.into());
    figures.insert("RSS after load MiB".into(), rss_after_load.into());
    let mut france = vec![
        turn(ChatRole::System, "You are a helpful assistant."),
        turn(ChatRole::User, "What is the capital of France?"),
    ];
    let answer = ask(&mut model, &france, "France", &mut figures)?;
    // A second turn extends the first prompt, so only its new tokens are evaluated.
    france.push(turn(ChatRole::Assistant, &answer));
    france.push(turn(ChatRole::User, "And of Germany?"));
    ask(&mut model, &france, "Germany (follow-up)", &mut figures)?;
    ask(
        &mut model,
        &[turn(ChatRole::User, "hello")],
        "hello",
        &mut figures,
    )?;
    figures.insert("RSS at the end MiB".into(), (rss_kib()? / 1024).into());
    println!("{}", serde_json::Value::Object(figures));
    Ok(())
}

/// Prints the answer as it streams, then the figures, which also go into `figures` under
/// `label`; returns the answer.
fn ask(
    model: &mut ChatModel,
    turns: &[ChatTurn],
    label: &str,
    figures: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String, Box<dyn Error>> {
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
    let decode_rate = f64::from(decode_steps) / generation.generate_seconds;
    figures.insert(
        format!("{label}: prompt tokens"),
        generation.prompt_tokens.into(),
    );
    figures.insert(
        format!("{label}: time to first token s"),
        generation.prompt_seconds.into(),
    );
    figures.insert(format!("{label}: decode tok/s"), decode_rate.into());
    figures.insert(format!("{label}: answer"), generation.text.clone().into());
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
