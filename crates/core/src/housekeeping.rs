//! Housekeeping: small jobs beside the conversation that `agents.defaults.housekeepingModel`
//! does instead of the agent's model, so that they cost no tokens when it is a local one: a
//! session's title, and the consolidation of a short stretch of conversation.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use nanocrab_provider::{ChatRequest, ModelChain, ProviderError, ResolvedModel};
use nanocrab_schema::{LlmMessage, Role, SessionKey};
use nanocrab_sessions::{Session, SessionEntry, SessionError, SessionStore, TokenCounter};

pub(crate) const TITLE_PROMPT: &str =
    "Write a title of at most six words for the conversation below. Answer with the title only.";

/// For a housekeeping model without tool calling, which cannot call `save_memory`: a plain
/// summary goes to memory/HISTORY.md, and MEMORY.md is left to the agent's model.
pub(crate) const SUMMARY_PROMPT: &str = "Summarise the conversation below in two to five sentences for the user's history log: what happened and what was decided, with names, dates and numbers. Write only the summary.";

/// Titles are cut to this many characters, like the stand-in made from the first question.
const TITLE_CHARS: usize = 60;
/// Each message shown to the title prompt is cut to this many characters.
const TITLE_MESSAGE_CHARS: usize = 1_000;
/// A consolidation is short enough for the housekeeping model when its prompt takes at most
/// this share of the model's window, leaving the rest for the answer and the estimate's error.
const SHORT_SHARE: f64 = 0.5;

#[derive(Debug, thiserror::Error)]
pub enum HousekeepingError {
    #[error("session title: {0}")]
    Provider(#[from] ProviderError),
    #[error("session title: {0}")]
    Session(#[from] SessionError),
}

/// The housekeeping model; it has no fallbacks, so a failure never spends tokens elsewhere.
pub(crate) struct Housekeeper {
    pub(crate) models: ModelChain,
    /// Sessions the model could not title; not asked again while the process runs.
    untitled: Mutex<HashSet<SessionKey>>,
}

impl Housekeeper {
    pub(crate) fn new(model: ResolvedModel) -> Self {
        Self {
            models: ModelChain::new(model, Vec::new()),
            untitled: Mutex::default(),
        }
    }

    fn gave_up_on(&self, key: &SessionKey) -> bool {
        self.untitled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }

    fn give_up_on(&self, key: &SessionKey) {
        self.untitled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone());
    }

    /// Titles session `key` of `store` once its first question is answered; returns the new
    /// title. With a title already, or after giving up on this session, nothing is asked.
    pub(crate) async fn title_if_missing(
        &self,
        store: &SessionStore,
        key: &SessionKey,
    ) -> Result<Option<String>, HousekeepingError> {
        if self.gave_up_on(key) || store.settings(key)?.title.is_some() {
            return Ok(None);
        }
        let session = store.load(key)?;
        let Some(exchange) = first_exchange(&session) else {
            return Ok(None);
        };
        let answer = self.ask(TITLE_PROMPT, exchange, 24).await;
        let title = answer.as_deref().ok().and_then(clean_title);
        let Some(title) = title else {
            // Asked once: a model that failed or gave nothing usable is not asked again after
            // every turn, reading the transcript each time; the first question stands in.
            self.give_up_on(key);
            return answer.map(|_| None).map_err(HousekeepingError::from);
        };
        // Read again just before writing: a turn may have saved settings meanwhile.
        let mut settings = store.settings(key)?;
        settings.title = Some(title.clone());
        store.save_settings(key, &settings)?;
        Ok(Some(title))
    }

    /// One question without tools, answered greedily; the answer's text.
    pub(crate) async fn ask(
        &self,
        system: &str,
        question: String,
        max_tokens: u32,
    ) -> Result<String, ProviderError> {
        ask_once(&self.models, system, question, max_tokens, Some(0.0)).await
    }

    /// Whether `prompt` is short enough for this model, whose window is its own when it says
    /// so and `configured_window` otherwise.
    pub(crate) fn fits(&self, prompt: &str, configured_window: u32) -> bool {
        let model = self.models.primary();
        let window = model.profile.context_window.unwrap_or(configured_window);
        let tokens = TokenCounter::for_model(&model.model).count_text(prompt);
        tokens as f64 <= f64::from(window) * SHORT_SHARE
    }
}

/// The title prompt's input for `session`: its first question and answer, each shortened;
/// `None` until it has both.
pub(crate) fn first_exchange(session: &Session) -> Option<String> {
    let mut messages = session.entries.iter().map(SessionEntry::message);
    let question = messages
        .by_ref()
        .find(|m| m.role == Role::User && !m.text().trim().is_empty())?;
    let answer = messages.find(|m| m.role == Role::Assistant && !m.text().trim().is_empty())?;
    Some(title_input(&question.text(), &answer.text()))
}

/// Titles session `key` of `store` with `models` whether it has a title or not (the user
/// asked); `None` when it has no answered question yet or the model gave nothing usable.
pub(crate) async fn retitle(
    models: &ModelChain,
    store: &SessionStore,
    key: &SessionKey,
) -> Result<Option<String>, HousekeepingError> {
    let session = store.load(key)?;
    let Some(exchange) = first_exchange(&session) else {
        return Ok(None);
    };
    let answer = ask_once(models, TITLE_PROMPT, exchange, 24, Some(0.0)).await?;
    let Some(title) = clean_title(&answer) else {
        return Ok(None);
    };
    let mut settings = store.settings(key)?;
    settings.title = Some(title.clone());
    store.save_settings(key, &settings)?;
    Ok(Some(title))
}

/// The title prompt's conversation: the first question and its answer, each shortened.
pub(crate) fn title_input(question: &str, answer: &str) -> String {
    let cut = |text: &str| -> String { text.trim().chars().take(TITLE_MESSAGE_CHARS).collect() };
    format!("user: {}\nassistant: {}", cut(question), cut(answer))
}

/// The title in a model's answer: its first line without a `Title:` label, quotes, heading
/// marks or a final full stop, at most [`TITLE_CHARS`] characters. `None` when nothing is left.
pub(crate) fn clean_title(answer: &str) -> Option<String> {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.trim_start_matches('#').trim();
    let line = line
        .strip_prefix("Title:")
        .or_else(|| line.strip_prefix("title:"))
        .unwrap_or(line);
    let line = line
        .trim()
        .trim_matches(|c| matches!(c, '"' | '\'' | '*' | '`' | '“' | '”'))
        .trim_end_matches('.')
        .trim();
    let title: String = line.chars().take(TITLE_CHARS).collect();
    (!title.is_empty()).then_some(title)
}

/// Asks `models` one question without tools and returns the answer's text: how titles,
/// summaries and history entries are asked for, by the housekeeping model or the agent's own.
pub(crate) async fn ask_once(
    models: &ModelChain,
    system: &str,
    question: String,
    max_tokens: u32,
    temperature: Option<f32>,
) -> Result<String, ProviderError> {
    let request = ChatRequest {
        model: "".into(),
        system: system.into(),
        messages: vec![LlmMessage::user(question)].into(),
        tools: Vec::new().into(),
        max_tokens,
        temperature,
    };
    let (_, response) = models.chat(0, &request, &mut |_| {}, &mut |_| {}).await?;
    Ok(LlmMessage {
        role: Role::Assistant,
        content: response.content,
    }
    .text())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn titles_lose_labels_quotes_and_full_stops() {
        let cases = [
            ("Paris trip planning", Some("Paris trip planning")),
            (
                "\n  \"Paris trip planning.\"\nMore text",
                Some("Paris trip planning"),
            ),
            ("Title: **Budget review**", Some("Budget review")),
            ("# Weekly groceries", Some("Weekly groceries")),
            ("  \n \"\" \n", None),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(answer, _)| clean_title(answer))
            .collect();
        let wanted: Vec<_> = cases.iter().map(|(_, t)| t.map(str::to_owned)).collect();
        assert_eq!(got, wanted);
        assert_eq!(clean_title(&"x".repeat(100)).map(|t| t.len()), Some(60));
    }

    #[test]
    fn the_title_input_shortens_each_message() {
        let input = title_input(&"q".repeat(2_000), " the answer ");
        assert_eq!(
            input,
            format!("user: {}\nassistant: the answer", "q".repeat(1_000))
        );
    }
}
