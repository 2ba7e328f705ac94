//! The tokenizer of a GGUF chat model, rebuilt from the vocabulary and merges in its metadata
//! so that a model is one file.
//!
//! candle's own `TokenizerFromGguf` prepends a space marker ("Ġ") to the first word, which
//! changes SmolLM2's prompts; this builds what the model was trained with instead. Only
//! byte-level BPE (`tokenizer.ggml.model == "gpt2"`) is supported.

use candle_core::quantized::gguf_file::Content;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

use crate::gguf_metadata;

/// llama.cpp's token types.
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// Builds the tokenizer; the error is a detail for the caller to tie to the file.
pub(crate) fn from_gguf(content: &Content) -> Result<Tokenizer, String> {
    let kind = gguf_metadata::string(content, "tokenizer.ggml.model")?;
    if kind != "gpt2" {
        return Err(format!(
            "the tokenizer kind `{kind}` is not supported (only byte-level BPE, `gpt2`)"
        ));
    }
    let tokens = gguf_metadata::strings(content, "tokenizer.ggml.tokens")?;
    let token_types = gguf_metadata::optional_i32s(content, "tokenizer.ggml.token_type")?;
    let merges = gguf_metadata::strings(content, "tokenizer.ggml.merges")?
        .iter()
        .map(|merge| {
            merge
                .split_once(' ')
                .map(|(left, right)| (left.to_string(), right.to_string()))
                .ok_or_else(|| format!("the merge `{merge}` is not two tokens"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(id, token)| (token.clone(), id as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|err| format!("the BPE vocabulary: {err}"))?;
    let mut tokenizer = Tokenizer::new(bpe);
    // SmolLM2's pre-tokenizer (`tokenizer.ggml.pre == "smollm"`) splits digits one by one
    // before GPT-2's byte-level split; other BPE models get GPT-2's split alone, which is
    // close to, but not always the same as, their own regular expression.
    let byte_level = ByteLevel::new(false, true, true);
    let pre = gguf_metadata::string(content, "tokenizer.ggml.pre").unwrap_or("gpt2");
    if pre == "smollm" {
        tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
            Digits::new(true).into(),
            byte_level.into(),
        ])));
    } else {
        tokenizer.with_pre_tokenizer(Some(byte_level));
    }
    tokenizer.with_decoder(Some(ByteLevel::default()));
    // Both kinds must be matched whole in the prompt text (a chat template writes
    // `<|im_start|>` as text). Control tokens are special, so decoding leaves them out;
    // user-defined ones (`<think>`, ...) are part of the visible text, as in llama.cpp.
    let added: Vec<AddedToken> = tokens
        .iter()
        .zip(token_types.iter())
        .filter_map(|(token, kind)| match *kind {
            TOKEN_TYPE_CONTROL => Some(AddedToken::from(token.clone(), true)),
            TOKEN_TYPE_USER_DEFINED => Some(AddedToken::from(token.clone(), false)),
            _ => None,
        })
        .collect();
    tokenizer
        .add_tokens(added)
        .map_err(|err| format!("the control and user-defined tokens: {err}"))?;
    Ok(tokenizer)
}
