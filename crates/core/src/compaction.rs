//! Compaction: when the history no longer fits comfortably in the context window, its older
//! part is summarised by the model and the summary stands for it in what the model is sent.
//! The transcript keeps every message; a compaction record in it says where the summary ends.
//! Long histories are summarised in parts (split by their share of tokens) and the parts
//! merged, so that no summarising request is itself too long.

/// Compaction starts when the history passes this share of its token budget...
pub(crate) const TRIGGER_SHARE: f64 = 0.75;
/// ...and keeps whole, after the summary, the newest turns within this share.
pub(crate) const KEEP_SHARE: f64 = 0.35;
/// A summarising request carries at most this share of the budget of conversation.
pub(crate) const PART_SHARE: f64 = 0.30;

pub(crate) const SUMMARY_PROMPT: &str = "You summarise a conversation for the assistant that will continue it. Keep every fact, decision, name, number, date, file path and open task; drop pleasantries. Write in the conversation's language, as plain notes, at most 400 words. Reply with the summary only.";

pub(crate) const MERGE_PROMPT: &str = "Merge these summaries of consecutive parts of one conversation into one summary, in order, keeping every fact, decision, name, number, date, file path and open task; at most 500 words. Reply with the summary only.";
