//! Keeps known secret values out of tool output, logs and the audit log.

use std::borrow::Cow;
use std::sync::Arc;

/// Values shorter than this are not treated as secrets: replacing every `1234` or `true` in
/// tool output would garble it without protecting anything.
pub const MIN_SECRET_LEN: usize = 8;

/// Replaces each known secret value with `[redacted: NAME]`, where NAME says which secret it
/// was (a config key or an environment variable) without revealing it.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret containing another is replaced whole.
    secrets: Arc<Vec<(String, String)>>,
}

impl Redactor {
    /// `secrets` are (name, value) pairs; short and repeated values are skipped.
    pub fn new(secrets: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut secrets: Vec<(String, String)> = secrets
            .into_iter()
            .filter(|(_, value)| value.trim().len() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        secrets.dedup_by(|a, b| a.1 == b.1);
        Self {
            secrets: Arc::new(secrets),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for (name, value) in self.secrets.iter() {
            if text.contains(value.as_str()) {
                text = Cow::Owned(text.replace(value.as_str(), &format!("[redacted: {name}]")));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn secrets_are_replaced_by_their_names_longest_first() {
        let redactor = Redactor::new([
            (
                "providers.openai.apiKey".to_owned(),
                "sk-abcdefgh".to_owned(),
            ),
            (
                "TELEGRAM_BOT_TOKEN".to_owned(),
                "sk-abcdefgh-ijkl".to_owned(),
            ),
            ("short".to_owned(), "1234".to_owned()),
        ]);
        assert_eq!(
            redactor.redact("key=sk-abcdefgh token=sk-abcdefgh-ijkl pin=1234"),
            "key=[redacted: providers.openai.apiKey] token=[redacted: TELEGRAM_BOT_TOKEN] pin=1234"
        );
    }

    #[test]
    fn text_without_secrets_is_not_copied() {
        let redactor = Redactor::new([("k".to_owned(), "secret-value".to_owned())]);
        assert!(matches!(redactor.redact("nothing here"), Cow::Borrowed(_)));
    }
}
