use anyhow::{Context as _, bail};
use nanocrab_memory::SessionStore;
use nanocrab_schema::{ContentBlock, Role, SessionKey};

use super::Env;
use crate::cli::SessionsCommand;

pub fn run(env: &Env, command: SessionsCommand) -> anyhow::Result<()> {
    let store = SessionStore::new(env.paths.sessions_dir());
    match command {
        SessionsCommand::List => {
            let sessions = store.list()?;
            if sessions.is_empty() {
                println!("no sessions yet in {}", env.paths.sessions_dir().display());
            }
            for s in sessions {
                println!(
                    "{:<32} {:>4} messages  {}  {}",
                    s.key,
                    s.messages,
                    s.updated_at.as_deref().unwrap_or("-"),
                    s.title
                );
            }
        }
        SessionsCommand::Show { key, json } => {
            let key = SessionKey::parse(&key)?;
            if !store.exists(&key) {
                bail!("no session {key} in {}", env.paths.sessions_dir().display());
            }
            if json {
                // The stored records as they are on disk, one JSON object a line.
                let path = store.path(&key);
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                print!("{text}");
                return Ok(());
            }
            let session = store.load(&key)?;
            println!("session {key}");
            for (index, entry) in session.entries.iter().enumerate() {
                if let Some(compaction) = &session.compaction
                    && compaction.through == index
                {
                    println!(
                        "[{}] (the model now gets this summary instead of the {index} messages above)\n{}",
                        compaction
                            .timestamp
                            .get(..19)
                            .unwrap_or(&compaction.timestamp),
                        indent(&compaction.summary)
                    );
                }
                let time = entry.timestamp.get(..19).unwrap_or(&entry.timestamp);
                let who = match entry.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                for block in &entry.content {
                    match block {
                        ContentBlock::Text { text } => println!("[{time}] {who}: {text}"),
                        ContentBlock::Thinking { thinking, .. } => {
                            println!("[{time}] {who} (thinking): {thinking}")
                        }
                        ContentBlock::RedactedThinking { .. } => {
                            println!("[{time}] {who} (redacted thinking)")
                        }
                        ContentBlock::Image(image) => println!(
                            "[{time}] {who} (image {}): {}",
                            image.media_type,
                            image
                                .file
                                .as_ref()
                                .map(|file| store.dir().join(file).display().to_string())
                                .unwrap_or_else(|| "inline".to_owned())
                        ),
                        ContentBlock::ToolUse(call) => {
                            println!(
                                "[{time}] {who} → {} {} [{}]",
                                call.name, call.input, call.id
                            )
                        }
                        ContentBlock::ToolResult(result) => println!(
                            "[{time}] {} [{}]:\n{}",
                            if result.is_error {
                                "tool error"
                            } else {
                                "tool result"
                            },
                            result.tool_use_id,
                            indent(&result.content)
                        ),
                    }
                }
                if let (Some(model), Some(usage)) = (&entry.model, &entry.usage) {
                    let mut cache = String::new();
                    if usage.cache_read_tokens > 0 {
                        cache.push_str(&format!(", {} cache read", usage.cache_read_tokens));
                    }
                    if usage.cache_write_tokens > 0 {
                        cache.push_str(&format!(", {} cache write", usage.cache_write_tokens));
                    }
                    println!(
                        "           ({model}: {} in, {} out{cache})",
                        usage.input_tokens, usage.output_tokens
                    );
                }
            }
        }
        SessionsCommand::Reset { key } => {
            let key = SessionKey::parse(&key)?;
            match store.reset(&key)? {
                Some(archived) => println!("archived {key} to {}", archived.display()),
                None => println!("no session {key}: nothing to reset"),
            }
        }
    }
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|line| format!("    {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}
