/// Splits `<think>...</think>` out of streamed text: what is inside is reasoning, the rest is
/// the answer. Tags may arrive split across deltas, so a partial tag at the end of a delta is
/// held back until the next one decides it.
#[derive(Debug, Default)]
pub(crate) struct ThinkFilter {
    inside: bool,
    held: String,
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

impl ThinkFilter {
    /// Returns (answer text, reasoning text) released by this delta.
    pub fn push(&mut self, delta: &str) -> (String, String) {
        let mut text = std::mem::take(&mut self.held);
        text.push_str(delta);
        let (mut answer, mut reasoning) = (String::new(), String::new());
        let mut rest = text.as_str();
        loop {
            let tag = if self.inside { CLOSE } else { OPEN };
            let out = if self.inside {
                &mut reasoning
            } else {
                &mut answer
            };
            if let Some(at) = rest.find(tag) {
                out.push_str(&rest[..at]);
                rest = &rest[at + tag.len()..];
                self.inside = !self.inside;
                continue;
            }
            // Hold back the longest suffix that could still become the tag.
            let keep = (1..tag.len())
                .rev()
                .find(|&n| {
                    rest.len() >= n
                        && rest.is_char_boundary(rest.len() - n)
                        && tag.starts_with(&rest[rest.len() - n..])
                })
                .unwrap_or(0);
            out.push_str(&rest[..rest.len() - keep]);
            self.held = rest[rest.len() - keep..].to_owned();
            break;
        }
        (answer, reasoning)
    }

    /// At the end of the stream: pushes whatever was held back as deltas and returns the
    /// answer part of it, for the adapter to add to its text.
    pub fn flush(&mut self, deltas: &mut Vec<crate::provider::ProviderDelta>) -> String {
        let (answer, reasoning) = self.finish();
        if !answer.is_empty() {
            deltas.push(crate::provider::ProviderDelta::Text(answer.clone()));
        }
        if !reasoning.is_empty() {
            deltas.push(crate::provider::ProviderDelta::Reasoning(reasoning));
        }
        answer
    }

    /// Releases whatever was held back at the end of the stream.
    fn finish(&mut self) -> (String, String) {
        let held = std::mem::take(&mut self.held);
        if self.inside {
            (String::new(), held)
        } else {
            (held, String::new())
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
}
