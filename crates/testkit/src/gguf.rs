//! A tiny llama-architecture GGUF chat model with deterministic pseudo-random weights, for
//! testing in-process inference without a real model: SmolLM2's metadata layout (byte-level
//! BPE vocabulary, ChatML template, control tokens), two layers of 64 dimensions, a few
//! hundred kilobytes.
//!
//! ```no_run
//! use nanocrab_testkit::gguf::TinyLlama;
//! let tiny = TinyLlama { favoured_token: Some(nanocrab_testkit::gguf::IM_END), ..TinyLlama::default() };
//! tiny.write(std::path::Path::new("tiny.gguf"));
//! ```

use std::io::Cursor;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

pub const ENDOFTEXT: u32 = 0;
pub const IM_START: u32 = 1;
pub const IM_END: u32 = 2;

/// SmolLM2-135M-Instruct's own template: ChatML, with a default system prompt when the
/// conversation has none.
pub const SMOLLM2_CHAT_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const SPECIAL_TOKENS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
/// A few merges so that encoding exercises BPE, in rank order.
const MERGES: [(&str, &str); 12] = [
    ("Ġ", "t"),
    ("h", "e"),
    ("Ġt", "he"),
    ("i", "n"),
    ("e", "r"),
    ("a", "n"),
    ("Ġ", "a"),
    ("o", "u"),
    ("u", "s"),
    ("us", "er"),
    ("i", "s"),
    ("Ġ", "i"),
];

const EMBEDDING: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const FEED_FORWARD: usize = 128;
const LAYERS: usize = 2;

/// llama.cpp's token types.
const NORMAL: i32 = 1;
const CONTROL: i32 = 3;

#[derive(Debug, Clone)]
pub struct TinyLlama {
    pub architecture: String,
    /// `tokenizer.ggml.model`: `gpt2` (byte-level BPE), or another kind to test refusals.
    pub tokenizer_model: String,
    pub chat_template: Option<String>,
    pub context_length: u32,
    /// Of the large matrices; norms are always F32. Q4_1 exercises re-quantization.
    pub dtype: GgmlDType,
    /// Makes this token win greedy decoding at every step, whatever the prompt.
    pub favoured_token: Option<u32>,
    pub seed: u64,
}

impl Default for TinyLlama {
    fn default() -> Self {
        Self {
            architecture: "llama".to_string(),
            tokenizer_model: "gpt2".to_string(),
            chat_template: Some(SMOLLM2_CHAT_TEMPLATE.to_string()),
            context_length: 512,
            dtype: GgmlDType::Q4_1,
            favoured_token: None,
            seed: 7,
        }
    }
}

/// The vocabulary: the three control tokens, GPT-2's 256 byte characters in byte order, then
/// the merged tokens.
pub fn tokens() -> Vec<String> {
    let mut tokens: Vec<String> = SPECIAL_TOKENS.iter().map(|t| t.to_string()).collect();
    tokens.extend(byte_chars().into_iter().map(String::from));
    tokens.extend(MERGES.iter().map(|(a, b)| format!("{a}{b}")));
    tokens
}

impl TinyLlama {
    /// The GGUF file.
    pub fn bytes(&self) -> Vec<u8> {
        let tokens = tokens();
        let vocab = tokens.len();
        let token_types: Vec<Value> = (0..vocab)
            .map(|id| {
                Value::I32(if id < SPECIAL_TOKENS.len() {
                    CONTROL
                } else {
                    NORMAL
                })
            })
            .collect();
        let mut metadata: Vec<(&str, Value)> = vec![
            (
                "general.architecture",
                Value::String(self.architecture.clone()),
            ),
            ("general.name", Value::String("tiny".to_string())),
            ("llama.block_count", Value::U32(LAYERS as u32)),
            ("llama.context_length", Value::U32(self.context_length)),
            ("llama.embedding_length", Value::U32(EMBEDDING as u32)),
            ("llama.feed_forward_length", Value::U32(FEED_FORWARD as u32)),
            ("llama.attention.head_count", Value::U32(HEADS as u32)),
            ("llama.attention.head_count_kv", Value::U32(KV_HEADS as u32)),
            ("llama.rope.freq_base", Value::F32(10_000.0)),
            ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
            (
                "llama.rope.dimension_count",
                Value::U32((EMBEDDING / HEADS) as u32),
            ),
            ("llama.vocab_size", Value::U32(vocab as u32)),
            (
                "tokenizer.ggml.model",
                Value::String(self.tokenizer_model.clone()),
            ),
            ("tokenizer.ggml.pre", Value::String("smollm".to_string())),
            (
                "tokenizer.ggml.tokens",
                Value::Array(tokens.iter().cloned().map(Value::String).collect()),
            ),
            ("tokenizer.ggml.token_type", Value::Array(token_types)),
            (
                "tokenizer.ggml.merges",
                Value::Array(
                    MERGES
                        .iter()
                        .map(|(a, b)| Value::String(format!("{a} {b}")))
                        .collect(),
                ),
            ),
            ("tokenizer.ggml.bos_token_id", Value::U32(IM_START)),
            ("tokenizer.ggml.eos_token_id", Value::U32(IM_END)),
            ("tokenizer.ggml.add_bos_token", Value::Bool(false)),
        ];
        if let Some(template) = &self.chat_template {
            metadata.push(("tokenizer.chat_template", Value::String(template.clone())));
        }
        let tensors = self.tensors(vocab);
        let metadata_refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let tensor_refs: Vec<(&str, &QTensor)> =
            tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let mut out = Cursor::new(Vec::new());
        gguf_file::write(&mut out, &metadata_refs, &tensor_refs).unwrap();
        out.into_inner()
    }

    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.bytes()).unwrap();
    }

    fn tensors(&self, vocab: usize) -> Vec<(String, QTensor)> {
        let mut random = XorShift(self.seed.max(1));
        let head_dim = EMBEDDING / HEADS;
        let kv = KV_HEADS * head_dim;
        let mut tensors = Vec::new();
        // Dimension 0 of every embedding is large and positive and survives the small layers,
        // so an output row that weighs it heavily wins every step.
        let mut embeddings = random.values(vocab * EMBEDDING, 0.5);
        for row in embeddings.chunks_mut(EMBEDDING) {
            row[0] = 4.0;
        }
        tensors.push((
            "token_embd.weight".to_string(),
            self.matrix(embeddings, vocab, EMBEDDING),
        ));
        for layer in 0..LAYERS {
            let mut add = |name: &str, rows: usize, columns: usize, random: &mut XorShift| {
                let values = random.values(rows * columns, 0.2);
                tensors.push((
                    format!("blk.{layer}.{name}.weight"),
                    self.matrix(values, rows, columns),
                ));
            };
            add("attn_q", EMBEDDING, EMBEDDING, &mut random);
            add("attn_k", kv, EMBEDDING, &mut random);
            add("attn_v", kv, EMBEDDING, &mut random);
            add("attn_output", EMBEDDING, EMBEDDING, &mut random);
            add("ffn_gate", FEED_FORWARD, EMBEDDING, &mut random);
            add("ffn_up", FEED_FORWARD, EMBEDDING, &mut random);
            add("ffn_down", EMBEDDING, FEED_FORWARD, &mut random);
            for norm in ["attn_norm", "ffn_norm"] {
                tensors.push((format!("blk.{layer}.{norm}.weight"), norm_weights()));
            }
        }
        tensors.push(("output_norm.weight".to_string(), norm_weights()));
        let mut output = random.values(vocab * EMBEDDING, 0.3);
        if let Some(token) = self.favoured_token {
            output[token as usize * EMBEDDING] = 30.0;
        }
        tensors.push((
            "output.weight".to_string(),
            self.matrix(output, vocab, EMBEDDING),
        ));
        tensors
    }

    fn matrix(&self, values: Vec<f32>, rows: usize, columns: usize) -> QTensor {
        let tensor = Tensor::from_vec(values, (rows, columns), &Device::Cpu).unwrap();
        QTensor::quantize(&tensor, self.dtype).unwrap()
    }
}

fn norm_weights() -> QTensor {
    let tensor = Tensor::ones(EMBEDDING, candle_core::DType::F32, &Device::Cpu).unwrap();
    QTensor::quantize(&tensor, GgmlDType::F32).unwrap()
}

/// GPT-2's printable stand-ins for the 256 byte values, indexed by byte.
fn byte_chars() -> Vec<char> {
    let printable = |b: u32| {
        (u32::from(b'!')..=u32::from(b'~')).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b)
    };
    let mut next_unprintable = 256;
    (0u32..256)
        .map(|b| {
            let code = if printable(b) {
                b
            } else {
                next_unprintable += 1;
                next_unprintable - 1
            };
            char::from_u32(code).unwrap()
        })
        .collect()
}

struct XorShift(u64);

impl XorShift {
    /// Uniform in `[-scale, scale)`.
    fn values(&mut self, count: usize, scale: f32) -> Vec<f32> {
        (0..count)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                ((self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
            })
            .collect()
    }
}
