//! Compaction: when the history no longer fits comfortably in the context window, its older
//! part is summarised by the model and the summary stands for it in what the model is sent.
//! The transcript keeps every message; a compaction record in it says where the summary ends.
//! Long histories are summarised in parts (split by their share of tokens) and the parts
//! merged, so that no summarising request is itself too long.

use nanocrab_provider::{ModelChain, ProviderError};
use nanocrab_schema::ContentBlock;
use nanocrab_sessions::{Compaction, SessionEntry, TokenCounter};
use nanocrab_tools::wrap_untrusted;

use crate::agent::{AgentSettings, add_fenced_sources};

/// Compaction starts when the history passes this share of its token budget...
pub(crate) const TRIGGER_SHARE: f64 = 0.75;
/// ...and keeps whole, after the summary, the newest turns within this share.
const KEEP_SHARE: f64 = 0.35;
/// A summarising request carries at most this share of the budget of conversation.
const PART_SHARE: f64 = 0.30;

const SUMMARY_PROMPT: &str = "You summarise a conversation for the assistant that will continue it. Keep every fact, decision, name, number, date, file path and open task; drop pleasantries. Write in the conversation's language, as plain notes, at most 400 words. Reply with the summary only.";

const MERGE_PROMPT: &str = "Merge these summaries of consecutive parts of one conversation into one summary, in order, keeping every fact, decision, name, number, date, file path and open task; at most 500 words. Reply with the summary only.";

/// How many tokens of the newest turns a compaction keeps whole: their share of `budget`, or,
/// with `force` (the provider said the request was too long), none beyond the current turn.
pub(crate) fn kept_tokens(budget: usize, force: bool) -> usize {
    if force {
        0
    } else {
        (budget as f64 * KEEP_SHARE) as usize
    }
}

/// Where compacting `entries`, summarised up to `start` already, cuts them: the older part
/// ends there and is summarised; the newest whole turns within `keep` tokens stay, and the
/// current turn always does. `None` when nothing would be summarised.
pub(crate) fn cut_point(
    entries: &[SessionEntry],
    start: usize,
    counter: TokenCounter,
    keep: usize,
) -> Option<usize> {
    let (mut cut, mut kept) = (None, 0);
    for i in (start..entries.len()).rev() {
        kept += counter.count_message(&entries[i].message());
        // The current turn is always kept.
        if entries[i].starts_turn() && (cut.is_none() || kept <= keep) {
            cut = Some(i);
        }
        if kept > keep && cut.is_some() {
            break;
        }
    }
    cut.filter(|&cut| cut > start)
}

/// Summarises the older part of a history with the agent's own model.
pub(crate) struct Compactor<'a> {
    pub(crate) models: &'a ModelChain,
    pub(crate) settings: &'a AgentSettings,
    pub(crate) counter: TokenCounter,
}

impl Compactor<'_> {
    /// The summary of `entries` after the `earlier` compaction's, in parts of their share of
    /// `budget` merged into one; `None` when the model returned an empty one.
    pub(crate) async fn summarise(
        &self,
        earlier: Option<&Compaction>,
        entries: &[SessionEntry],
        budget: usize,
    ) -> Result<Option<String>, ProviderError> {
        // A summary of untrusted text is untrusted text: it keeps the fence, naming what it
        // was made from, so a later note written from it is marked too.
        let mut sources = Vec::new();
        if let Some(earlier) = earlier {
            add_fenced_sources(&mut sources, [&ContentBlock::text(earlier.summary.clone())]);
        }
        add_fenced_sources(&mut sources, entries.iter().flat_map(|e| &e.content));
        let part_budget = ((budget as f64 * PART_SHARE) as usize).max(500);
        let mut parts: Vec<String> = Vec::new();
        let mut part = match earlier {
            Some(earlier) => format!(
                "Summary of what came before:\n{}\n\n",
                earlier.summary.trim()
            ),
            None => String::new(),
        };
        let mut part_tokens = self.counter.count_text(&part);
        for entry in entries {
            let text = crate::consolidation::render(entry);
            let tokens = self.counter.count_text(&text);
            if !part.is_empty() && part_tokens + tokens > part_budget {
                parts.push(std::mem::take(&mut part));
                part_tokens = 0;
            }
            part.push_str(&text);
            part_tokens += tokens;
        }
        parts.push(part);
        let mut summaries = Vec::with_capacity(parts.len());
        for part in parts {
            summaries.push(self.ask(SUMMARY_PROMPT, part).await?);
        }
        let summary = match <[String; 1]>::try_from(summaries) {
            Ok([one]) => one,
            Err(several) => {
                let joined = several
                    .iter()
                    .enumerate()
                    .map(|(i, s)| format!("Part {}:\n{s}", i + 1))
                    .collect::<Vec<_>>()
                    .join("\n\n");
                self.ask(MERGE_PROMPT, joined).await?
            }
        };
        if summary.trim().is_empty() {
            return Ok(None);
        }
        Ok(Some(if sources.is_empty() {
            summary
        } else {
            wrap_untrusted(
                &format!("summary of a conversation holding {}", sources.join("; ")),
                summary.trim(),
            )
        }))
    }

    /// `text` summarised as `system` asks.
    async fn ask(&self, system: &str, text: String) -> Result<String, ProviderError> {
        crate::housekeeping::ask_once(
            self.models,
            system,
            text,
            self.settings.max_tokens,
            self.settings.temperature,
        )
        .await
    }
}
