/// Splits reasoning out of streamed text: what is inside `<think>...</think>` (DeepSeek R1,
/// Qwen, MiniMax and most local reasoning models) or `<thinking>...</thinking>` (Claude 3 when
/// it reasons before a tool call) is reasoning, the rest is the answer. Tags may arrive split
/// across deltas, so a partial tag at the end of a delta is held back until the next one
/// decides it.
#[derive(Debug, Default)]
pub(crate) struct ThinkFilter {
    /// The closing tag awaited, while inside a reasoning span.
    inside: Option<&'static str>,
    /// A reasoning span just closed: the blank lines models put after it are not the answer.
    after_close: bool,
    held: String,
}

/// Opening tags and their closing tags. Neither opening tag is a prefix of the other.
const TAGS: [(&str, &str); 2] = [("<think>", "</think>"), ("<thinking>", "</thinking>")];

impl ThinkFilter {
    /// Returns (answer text, reasoning text) released by this delta.
    pub fn push(&mut self, delta: &str) -> (String, String) {
        let mut text = std::mem::take(&mut self.held);
        text.push_str(delta);
        let (mut answer, mut reasoning) = (String::new(), String::new());
        let mut rest = text.as_str();
        loop {
            let (out, found, candidates): (&mut String, _, Vec<&str>) = match self.inside {
                Some(close) => (
                    &mut reasoning,
                    rest.find(close).map(|at| (at, close.len(), None)),
                    vec![close],
                ),
                None => (
                    &mut answer,
                    TAGS.iter()
                        .filter_map(|(open, close)| {
                            rest.find(open).map(|at| (at, open.len(), Some(*close)))
                        })
                        .min_by_key(|(at, _, _)| *at),
                    TAGS.iter().map(|(open, _)| *open).collect(),
                ),
            };
            if let Some((at, len, next)) = found {
                self.emit(out, &rest[..at]);
                rest = &rest[at + len..];
                self.after_close = next.is_none();
                self.inside = next;
                continue;
            }
            // Hold back the longest suffix that could still become a tag.
            let keep = candidates
                .iter()
                .filter_map(|tag| {
                    (1..tag.len()).rev().find(|&n| {
                        rest.len() >= n
                            && rest.is_char_boundary(rest.len() - n)
                            && tag.starts_with(&rest[rest.len() - n..])
                    })
                })
                .max()
                .unwrap_or(0);
            self.emit(out, &rest[..rest.len() - keep]);
            self.held = rest[rest.len() - keep..].to_owned();
            break;
        }
        (answer, reasoning)
    }

    fn emit(&mut self, out: &mut String, text: &str) {
        let text = if self.after_close && self.inside.is_none() {
            let trimmed = text.trim_start();
            self.after_close = trimmed.is_empty();
            trimmed
        } else {
            text
        };
        out.push_str(text);
    }

    /// At the end of the stream: pushes whatever was held back as deltas and returns it as
    /// (answer, reasoning), for the adapter to add to its content.
    pub fn flush(&mut self, deltas: &mut Vec<crate::provider::ProviderDelta>) -> (String, String) {
        let (answer, reasoning) = self.finish();
        if !answer.is_empty() {
            deltas.push(crate::provider::ProviderDelta::Text(answer.clone()));
        }
        if !reasoning.is_empty() {
            deltas.push(crate::provider::ProviderDelta::Reasoning(reasoning.clone()));
        }
        (answer, reasoning)
    }

    /// Releases whatever was held back at the end of the stream.
    fn finish(&mut self) -> (String, String) {
        let held = std::mem::take(&mut self.held);
        match self.inside {
            Some(_) => (String::new(), held),
            None => (held, String::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn run(deltas: &[&str]) -> (String, String) {
        let mut filter = ThinkFilter::default();
        let (mut answer, mut reasoning) = (String::new(), String::new());
        for delta in deltas {
            let (a, r) = filter.push(delta);
            answer.push_str(&a);
            reasoning.push_str(&r);
        }
        let (a, r) = filter.finish();
        (answer + &a, reasoning + &r)
    }

    #[test]
    fn tags_split_across_deltas_are_recognised() {
        let expected = ("Hello!".to_owned(), "the user greets me".to_owned());
        assert_eq!(
            run(&["<think>the user greets me</think>", "\n", "\nHello!"]),
            expected
        );
        assert_eq!(run(&["<think>the user greets me</think>Hello!"]), expected);
        assert_eq!(
            run(&["<th", "ink>the user ", "greets me</thi", "nk>Hel", "lo!"]),
            expected
        );
        assert_eq!(
            run(&["a < b and <b>x</b>"]),
            ("a < b and <b>x</b>".to_owned(), String::new())
        );
        assert_eq!(
            run(&["ends with <thi"]),
            ("ends with <thi".to_owned(), String::new())
        );
    }

    #[test]
    fn claude_3_thinking_tags_are_reasoning_too_and_each_tag_closes_only_its_own() {
        assert_eq!(
            run(&[
                "<thin",
                "king>\nI need the tool.\n</thin",
                "king>\n\nOkay, updating."
            ]),
            (
                "Okay, updating.".to_owned(),
                "\nI need the tool.\n".to_owned()
            )
        );
        assert_eq!(
            run(&["<think>a </thinking> b</think>c"]),
            ("c".to_owned(), "a </thinking> b".to_owned())
        );
    }
}
