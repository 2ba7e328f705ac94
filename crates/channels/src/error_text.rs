//! Errors of platform calls as one line for a log or a [`ChannelError`](crate::ChannelError),
//! with every token taken out.

/// An error and its causes on one line: the cause is often the only part that says what went
/// wrong ("dns error: … Name or service not known" under "error sending request").
pub(crate) fn with_causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        // hyper and reqwest often repeat their cause in their own message.
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// The start of a body that is not the API's JSON (a proxy's error page), for a message.
#[cfg(any(feature = "telegram", feature = "slack"))]
pub(crate) fn excerpt(text: &str) -> &str {
    let text = text.trim();
    text.char_indices()
        .nth(200)
        .map_or(text, |(index, _)| &text[..index])
}

/// `text` with each of `secrets` replaced by `[token]`.
#[cfg(any(feature = "telegram", feature = "slack"))]
pub(crate) fn redact(text: &str, secrets: &[&str]) -> String {
    secrets
        .iter()
        .filter(|secret| !secret.is_empty())
        .fold(text.to_owned(), |text, secret| {
            text.replace(secret, "[token]")
        })
}
