//! Turns the tokens a model generates into the text a reader sees, piece by piece as soon as
//! each piece is decided: decoded incrementally so a multi-byte character is never split, and
//! cut before the first caller-given stop string, holding back any tail that may yet become
//! one.

use tokenizers::Tokenizer;

/// What one more token made visible.
#[derive(Debug, PartialEq)]
pub(crate) enum Piece {
    /// Text that can be shown (possibly empty while bytes or a stop string are pending).
    Text(String),
    /// The last text before a stop string; nothing follows.
    Stopped(String),
}

pub(crate) struct VisibleText {
    tokens: Vec<u32>,
    /// Decoding restarts at `prefix_offset` rather than from the first token, and the text of
    /// `prefix_offset..read_offset` has already been passed on: decoding a little context
    /// keeps word-initial spaces right without redecoding everything.
    prefix_offset: usize,
    read_offset: usize,
    stops: Vec<String>,
    /// Decoded text that could still be the start of a stop string.
    held: String,
    shown: String,
}

impl VisibleText {
    pub(crate) fn new(stops: &[String]) -> Self {
        Self {
            tokens: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
            // An empty stop string would stop before the first character.
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
            shown: String::new(),
        }
    }

    /// All text passed on so far.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    pub(crate) fn push(&mut self, tokenizer: &Tokenizer, token: u32) -> Result<Piece, String> {
        self.tokens.push(token);
        let before = self.decode(tokenizer, self.prefix_offset, self.read_offset)?;
        let now = self.decode(tokenizer, self.prefix_offset, self.tokens.len())?;
        // A trailing U+FFFD is a character whose remaining bytes are still to come.
        let new = match now.get(before.len()..) {
            Some(new) if !new.is_empty() && !now.ends_with('\u{FFFD}') => new.to_string(),
            _ => return Ok(Piece::Text(String::new())),
        };
        self.prefix_offset = self.read_offset;
        self.read_offset = self.tokens.len();
        Ok(self.offer(&new))
    }

    /// The generation ended without a stop string: what was held back or left undecoded is
    /// shown now (an unfinished character as U+FFFD).
    pub(crate) fn finish(&mut self, tokenizer: &Tokenizer) -> Result<Piece, String> {
        let before = self.decode(tokenizer, self.prefix_offset, self.read_offset)?;
        let now = self.decode(tokenizer, self.prefix_offset, self.tokens.len())?;
        let rest = now.get(before.len()..).unwrap_or_default().to_string();
        self.prefix_offset = self.tokens.len();
        self.read_offset = self.tokens.len();
        self.held.push_str(&rest);
        if let Piece::Stopped(piece) = self.offer("") {
            return Ok(Piece::Stopped(piece));
        }
        let piece = std::mem::take(&mut self.held);
        self.shown.push_str(&piece);
        Ok(Piece::Text(piece))
    }

    fn decode(&self, tokenizer: &Tokenizer, from: usize, to: usize) -> Result<String, String> {
        tokenizer
            .decode(&self.tokens[from..to], true)
            .map_err(|err| format!("decoding the output: {err}"))
    }

    fn offer(&mut self, text: &str) -> Piece {
        self.held.push_str(text);
        // What was shown never ends with the start of a stop string, so any stop string
        // lies wholly within `held`.
        let first_stop = self
            .stops
            .iter()
            .filter_map(|stop| self.held.find(stop.as_str()))
            .min();
        if let Some(at) = first_stop {
            let piece = self.held[..at].to_string();
            self.held.clear();
            self.shown.push_str(&piece);
            return Piece::Stopped(piece);
        }
        let keep_from = self
            .held
            .char_indices()
            .map(|(at, _)| at)
            .find(|&at| {
                let tail = &self.held[at..];
                self.stops.iter().any(|stop| stop.starts_with(tail))
            })
            .unwrap_or(self.held.len());
        let rest = self.held.split_off(keep_from);
        let piece = std::mem::replace(&mut self.held, rest);
        self.shown.push_str(&piece);
        Piece::Text(piece)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use pretty_assertions::assert_eq;
    use tokenizers::models::wordlevel::WordLevel;

    use super::*;

    /// A tokenizer whose tokens decode to themselves, joined without separators, so a test
    /// chooses exactly how text is cut into tokens.
    fn tokenizer(pieces: &[&str]) -> Tokenizer {
        let vocab = pieces
            .iter()
            .enumerate()
            .map(|(id, piece)| (piece.to_string(), id as u32))
            .collect();
        let model = WordLevel::builder()
            .vocab(vocab)
            .unk_token(pieces[0].to_string())
            .build()
            .unwrap();
        let mut tokenizer = Tokenizer::new(model);
        tokenizer.with_decoder(Some(tokenizers::decoders::fuse::Fuse::new()));
        tokenizer
    }

    fn run(pieces: &[&str], stops: &[&str]) -> (Vec<Piece>, String) {
        let tokenizer = tokenizer(pieces);
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut visible = VisibleText::new(&stops);
        let mut out = Vec::new();
        for id in 0..pieces.len() as u32 {
            let piece = visible.push(&tokenizer, id).unwrap();
            let stopped = matches!(piece, Piece::Stopped(_));
            out.push(piece);
            if stopped {
                return (out, visible.shown().to_string());
            }
        }
        out.push(visible.finish(&tokenizer).unwrap());
        (out, visible.shown().to_string())
    }

    fn text(s: &str) -> Piece {
        Piece::Text(s.to_string())
    }

    #[test]
    fn without_stop_strings_each_token_shows_at_once() {
        let (pieces, shown) = run(&["Hello", ",", " world"], &[]);
        assert_eq!(
            pieces,
            vec![text("Hello"), text(","), text(" world"), text("")]
        );
        assert_eq!(shown, "Hello, world");
    }

    #[test]
    fn a_possible_start_of_a_stop_string_is_held_until_decided() {
        let (pieces, shown) = run(&["The E", "N", "X"], &["END"]);
        assert_eq!(pieces, vec![text("The "), text(""), text("ENX"), text("")]);
        assert_eq!(shown, "The ENX");
    }

    #[test]
    fn output_is_cut_before_a_stop_string_across_tokens() {
        let (pieces, shown) = run(&["Answer: 4", "\nUs", "er:", " more"], &["\nUser:"]);
        assert_eq!(
            pieces,
            vec![text("Answer: 4"), text(""), Piece::Stopped(String::new())]
        );
        assert_eq!(shown, "Answer: 4");
    }

    #[test]
    fn the_earliest_of_several_stop_strings_wins() {
        let (pieces, shown) = run(&["a STOP b HALT"], &["HALT", "STOP"]);
        assert_eq!(pieces, vec![Piece::Stopped("a ".to_string())]);
        assert_eq!(shown, "a ");
    }

    #[test]
    fn empty_stop_strings_are_ignored() {
        let (_, shown) = run(&["abc"], &[""]);
        assert_eq!(shown, "abc");
    }

    #[test]
    fn a_multi_byte_character_is_never_split() {
        use tokenizers::models::bpe::{BPE, Vocab};
        use tokenizers::pre_tokenizers::byte_level::ByteLevel;

        let vocab: Vocab = ByteLevel::alphabet()
            .into_iter()
            .enumerate()
            .map(|(id, c)| (c.to_string(), id as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, Vec::new())
            .build()
            .unwrap();
        let mut tokenizer = Tokenizer::new(bpe);
        tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
        tokenizer.with_decoder(Some(ByteLevel::default()));
        let ids = tokenizer.encode("é!", false).unwrap().get_ids().to_vec();
        assert_eq!(ids.len(), 3, "two bytes of é and one of !");
        let mut visible = VisibleText::new(&[]);
        let pieces: Vec<Piece> = ids
            .iter()
            .map(|&id| visible.push(&tokenizer, id).unwrap())
            .collect();
        assert_eq!(pieces, vec![text(""), text("é"), text("!")]);
    }

    #[test]
    fn text_held_back_is_shown_when_the_generation_ends() {
        let tokenizer = tokenizer(&["ok"]);
        let mut visible = VisibleText::new(&["okay".to_string()]);
        assert_eq!(visible.push(&tokenizer, 0).unwrap(), text(""));
        assert_eq!(visible.finish(&tokenizer).unwrap(), text("ok"));
    }
}
