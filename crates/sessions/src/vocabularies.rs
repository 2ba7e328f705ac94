//! OpenAI's vocabularies as this crate ships them: packed and compressed in `vocab/` (its
//! README says how), 1.5 MB of binary instead of the 5.3 MB `tiktoken-rs` would embed, and
//! unpacked into `tiktoken-rs`'s encoder the first time a count needs one.

use rustc_hash::FxHashMap;
use tiktoken_rs::{CoreBPE, Rank};

use crate::tokens::Encoding;

/// cl100k_base's split pattern, as `tiktoken-rs` builds it (only o200k_base's is public).
const CL100K_BASE_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

#[derive(Debug, thiserror::Error)]
pub(crate) enum VocabularyError {
    #[error("cannot decompress: {0}")]
    Decompress(String),
    #[error("a token runs past the end of the data")]
    Truncated,
    /// `tiktoken-rs` reports it as an `anyhow::Error`, kept here as text.
    #[error("{0}")]
    Build(String),
}

/// Unpacks `encoding`'s vocabulary and builds its encoder with the special tokens and split
/// pattern `tiktoken-rs` gives it.
pub(crate) fn load(encoding: Encoding) -> Result<CoreBPE, VocabularyError> {
    let (packed, specials, pattern): (&[u8], &[(&str, Rank)], &str) = match encoding {
        Encoding::O200kBase => (
            include_bytes!("../vocab/o200k_base.zlib"),
            &[("<|endoftext|>", 199_999), ("<|endofprompt|>", 200_018)],
            tiktoken_rs::O200K_BASE_PAT_STR,
        ),
        Encoding::Cl100kBase => (
            include_bytes!("../vocab/cl100k_base.zlib"),
            &[
                ("<|endoftext|>", 100_257),
                ("<|fim_prefix|>", 100_258),
                ("<|fim_middle|>", 100_259),
                ("<|fim_suffix|>", 100_260),
                ("<|endofprompt|>", 100_276),
            ],
            CL100K_BASE_PATTERN,
        ),
    };
    let bytes = miniz_oxide::inflate::decompress_to_vec_zlib(packed)
        .map_err(|err| VocabularyError::Decompress(err.to_string()))?;
    let mut encoder = FxHashMap::default();
    let mut rest = bytes.as_slice();
    let mut rank: Rank = 0;
    while let Some((&len, after)) = rest.split_first() {
        let (token, next) = after
            .split_at_checked(usize::from(len))
            .ok_or(VocabularyError::Truncated)?;
        encoder.insert(token.to_vec(), rank);
        rank += 1;
        rest = next;
    }
    let specials = specials
        .iter()
        .map(|&(text, rank)| (text.to_owned(), rank))
        .collect();
    CoreBPE::new(encoder, specials, pattern).map_err(|err| VocabularyError::Build(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every token of the packed vocabulary is the one `tiktoken-rs` has at that rank, and
    /// both split and encode text alike (specials included).
    #[test]
    fn packed_vocabularies_are_tiktoken_rs_own() {
        let text =
            "Hello, world! <|endoftext|> naïve 12345 don't\n\n  tabs\tand CamelCase — 東京 🦀";
        for (encoding, upstream, size) in [
            (Encoding::O200kBase, tiktoken_rs::o200k_base(), 199_998),
            (Encoding::Cl100kBase, tiktoken_rs::cl100k_base(), 100_256),
        ] {
            let ours = load(encoding).unwrap();
            let upstream = upstream.unwrap();
            for rank in 0..size {
                assert_eq!(
                    ours.decode_bytes(&[rank]).unwrap(),
                    upstream.decode_bytes(&[rank]).unwrap(),
                    "{encoding:?} rank {rank}"
                );
            }
            assert_eq!(ours.encode_ordinary(text), upstream.encode_ordinary(text));
            assert_eq!(
                ours.encode_with_special_tokens(text),
                upstream.encode_with_special_tokens(text)
            );
        }
    }
}
