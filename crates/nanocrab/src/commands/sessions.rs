use anyhow::{Context as _, bail};
use nanocrab_schema::{ContentBlock, Role, SessionKey};
use nanocrab_sessions::{SessionStore, SessionSummary};

use super::Env;
use crate::cli::SessionsCommand;

pub fn run(env: &Env, command: SessionsCommand) -> anyhow::Result<()> {
    let store = SessionStore::new(env.paths.sessions_dir());
    match command {
        SessionsCommand::List { json } => {
            let sessions = store.list()?;
            if json {
                let list: Vec<serde_json::Value> = sessions
                    .iter()
                    .map(|s| {
                        serde_json::json!({
                            "key": s.key.as_str(),
                            "messages": s.messages,
                            "createdAt": s.created_at,
                            "updatedAt": s.updated_at,
                            "title": s.title,
                        })
                    })
                    .collect();
                outln!("{}", serde_json::to_string_pretty(&list)?)?;
            } else if sessions.is_empty() {
                outln!("no sessions yet in {}", env.paths.sessions_dir().display())?;
            } else {
                out!("{}", table(&sessions, &jiff::Zoned::now()))?;
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
                out!("{text}")?;
                return Ok(());
            }
            let session = store.load(&key)?;
            outln!("session {key}")?;
            for (index, entry) in session.entries.iter().enumerate() {
                if let Some(compaction) = &session.compaction
                    && compaction.through == index
                {
                    outln!(
                        "[{}] (the model now gets this summary instead of the {index} messages above)\n{}",
                        compaction
                            .timestamp
                            .get(..19)
                            .unwrap_or(&compaction.timestamp),
                        indent(&compaction.summary)
                    )?;
                }
                let time = entry.timestamp.get(..19).unwrap_or(&entry.timestamp);
                let who = match entry.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                for block in &entry.content {
                    match block {
                        ContentBlock::Text { text } => outln!("[{time}] {who}: {text}")?,
                        ContentBlock::Thinking { thinking, .. } => {
                            outln!("[{time}] {who} (thinking): {thinking}")?
                        }
                        ContentBlock::RedactedThinking { .. } => {
                            outln!("[{time}] {who} (redacted thinking)")?
                        }
                        ContentBlock::Image(image) => outln!(
                            "[{time}] {who} (image {}): {}",
                            image.media_type,
                            image
                                .file
                                .as_ref()
                                .map(|file| store.dir().join(file).display().to_string())
                                .unwrap_or_else(|| "inline".to_owned())
                        )?,
                        ContentBlock::ToolUse(call) => outln!(
                            "[{time}] {who} → {} {} [{}]",
                            call.name,
                            call.input,
                            call.id
                        )?,
                        ContentBlock::ToolResult(result) => outln!(
                            "[{time}] {} [{}]:\n{}",
                            if result.is_error {
                                "tool error"
                            } else {
                                "tool result"
                            },
                            result.tool_use_id,
                            indent(&result.content)
                        )?,
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
                    outln!(
                        "           ({model}: {} in, {} out{cache})",
                        usage.input_tokens,
                        usage.output_tokens
                    )?;
                }
            }
        }
        SessionsCommand::Reset { key } => {
            let key = SessionKey::parse(&key)?;
            match store.reset(&key)? {
                Some(archived) => outln!("archived {key} to {}", archived.display())?,
                None => outln!("no session {key}: nothing to reset")?,
            }
        }
    }
    Ok(())
}

/// `sessions list`: a header and aligned columns, each session's last message as a time ago
/// (seen from `now`), its title last since it has no width to keep.
fn table(sessions: &[SessionSummary], now: &jiff::Zoned) -> String {
    let ago = |updated: Option<&str>| {
        let Some(text) = updated else {
            return "-".to_owned();
        };
        let Ok(then) = text.parse::<jiff::Timestamp>() else {
            return text.to_owned();
        };
        let seconds = now.timestamp().as_second() - then.as_second();
        match seconds {
            ..60 => "just now".to_owned(),
            60..3_600 => format!("{} min ago", seconds / 60),
            3_600..86_400 => format!("{} h ago", seconds / 3_600),
            86_400..172_800 => "yesterday".to_owned(),
            172_800..604_800 => format!("{} days ago", seconds / 86_400),
            _ => then.to_zoned(now.time_zone().clone()).date().to_string(),
        }
    };
    let rows: Vec<[String; 4]> = sessions
        .iter()
        .map(|s| {
            [
                s.key.to_string(),
                s.messages.to_string(),
                ago(s.updated_at.as_deref()),
                s.title.clone(),
            ]
        })
        .collect();
    let header = ["KEY", "MESSAGES", "UPDATED", "TITLE"].map(String::from);
    let width = |column: usize| {
        std::iter::once(&header)
            .chain(&rows)
            .map(|row| row[column].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (key, messages, updated) = (width(0), width(1), width(2));
    std::iter::once(&header)
        .chain(&rows)
        .map(|[k, m, u, t]| {
            format!("{k:<key$}  {m:>messages$}  {u:<updated$}  {t}")
                .trim_end()
                .to_owned()
                + "\n"
        })
        .collect()
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|line| format!("    {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nanocrab_schema::SessionKey;

    fn summary(
        key: &str,
        messages: usize,
        updated_at: Option<&str>,
        title: &str,
    ) -> SessionSummary {
        SessionSummary {
            key: SessionKey::parse(key).unwrap(),
            messages,
            created_at: None,
            updated_at: updated_at.map(String::from),
            title: title.to_owned(),
        }
    }

    #[test]
    fn the_list_has_a_header_aligned_columns_and_times_ago() {
        let now: jiff::Zoned = "2026-03-15T12:00:00+01:00[+01:00]".parse().unwrap();
        let sessions = [
            summary(
                "cli:default",
                4,
                Some("2026-03-15T10:59:30Z"),
                "what is in my workspace?",
            ),
            summary(
                "agent:main:openai:default",
                12,
                Some("2026-03-15T10:58:00Z"),
                "hello",
            ),
            summary(
                "telegram:42",
                130,
                Some("2026-03-15T08:10:00Z"),
                "the dentist",
            ),
            summary("cli:yesterday", 2, Some("2026-03-14T09:00:00Z"), ""),
            summary("cli:week", 1, Some("2026-03-09T12:00:00Z"), "plans"),
            summary("cli:old", 7, Some("2026-01-31T23:30:00Z"), "taxes"),
            summary("cli:empty", 0, None, ""),
            summary("cli:odd", 1, Some("not a time"), "hand-edited"),
        ];
        insta::assert_snapshot!(table(&sessions, &now));
    }
}
