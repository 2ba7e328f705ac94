//! A llama-architecture chat model in one GGUF file (SmolLM2 and its kin), run in process on
//! the CPU with candle: the file's own tokenizer and chat template, greedy or sampled
//! decoding, streamed text, stop tokens and stop strings.

use std::fs::File;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use candle_transformers::models::quantized_llama::{MAX_SEQ_LEN, ModelWeights};
use tokenizers::Tokenizer;

use crate::chat_request::{ChatTurn, FinishReason, GenerateOptions, Generation, MAX_CHAT_CONTEXT};
use crate::chat_template::ChatTemplate;
use crate::error::ModelError;
use crate::visible_text::{Piece, VisibleText};
use crate::{gguf_metadata, gguf_tokenizer, llama_weights};

/// Control tokens that end a turn in the common chat formats (ChatML, Gemma, Llama 3); a
/// model's own EOS token may be another.
const END_OF_TURN_TOKENS: [&str; 4] =
    ["<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<|eot_id|>"];

/// How many of the latest generated tokens the repeat penalty looks at.
const REPEAT_PENALTY_WINDOW: usize = 64;

pub struct ChatModel {
    /// The file's name, for errors.
    name: String,
    weights: ModelWeights,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    /// Prepended when the rendered prompt does not start with it.
    bos: Option<u32>,
    stop_tokens: Vec<u32>,
    context_tokens: usize,
    /// The tokens whose keys and values are in the model's cache, in order: a prompt that
    /// extends them is evaluated from where they end.
    evaluated: Vec<u32>,
    /// Of the last prompt, how many tokens came from the cache.
    reused_tokens: usize,
}

// The window the crate promises without candle is the one candle's llama has.
const _: () = assert!(MAX_CHAT_CONTEXT == MAX_SEQ_LEN);

// It lives behind a mutex and moves to blocking threads.
const _: fn() = || {
    fn is_send<T: Send>() {}
    is_send::<ChatModel>();
};

impl ChatModel {
    /// Blocking. Reads the GGUF, builds tokenizer + template, loads (and re-quantizes) the
    /// weights.
    pub fn load(gguf: &Path) -> Result<Self, ModelError> {
        let files = |detail: String| ModelError::Files {
            path: gguf.to_path_buf(),
            detail,
        };
        let mut file = File::open(gguf).map_err(|source| ModelError::Io {
            action: "open",
            path: gguf.to_path_buf(),
            source,
        })?;
        let content =
            Content::read(&mut file).map_err(|err| files(format!("not a GGUF model: {err}")))?;
        let architecture =
            gguf_metadata::string(&content, "general.architecture").map_err(files)?;
        if architecture != "llama" {
            return Err(files(format!(
                "the architecture `{architecture}` is not supported (only `llama`)"
            )));
        }
        let tokenizer = gguf_tokenizer::from_gguf(&content).map_err(files)?;
        let token_text = |key: &str| -> Result<(Option<u32>, String), ModelError> {
            let id = gguf_metadata::optional_u32(&content, key).map_err(files)?;
            let text = id
                .and_then(|id| tokenizer.id_to_token(id))
                .unwrap_or_default();
            Ok((id, text))
        };
        let (bos, bos_text) = token_text("tokenizer.ggml.bos_token_id")?;
        let (eos, eos_text) = token_text("tokenizer.ggml.eos_token_id")?;
        let add_bos = gguf_metadata::optional_bool(&content, "tokenizer.ggml.add_bos_token")
            .map_err(files)?
            .unwrap_or(false);
        let source = gguf_metadata::string(&content, "tokenizer.chat_template").map_err(|_| {
            files("the model has no chat template (`tokenizer.chat_template`)".to_string())
        })?;
        let template = ChatTemplate::new(source, &bos_text, &eos_text).map_err(files)?;
        let mut stop_tokens: Vec<u32> = eos.into_iter().collect();
        stop_tokens.extend(
            END_OF_TURN_TOKENS
                .iter()
                .filter_map(|token| tokenizer.token_to_id(token)),
        );
        stop_tokens.sort_unstable();
        stop_tokens.dedup();
        // candle's rotary tables end at MAX_SEQ_LEN whatever the model was trained for.
        let context_length = gguf_metadata::u32(&content, "llama.context_length").map_err(files)?;
        let context_tokens = (context_length as usize).min(MAX_SEQ_LEN);
        let mut cache = gguf.as_os_str().to_owned();
        cache.push(".q8_0");
        let weights = llama_weights::load(content, &mut file, Path::new(&cache)).map_err(files)?;
        Ok(Self {
            name: gguf
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| gguf.display().to_string()),
            weights,
            tokenizer,
            template,
            bos: bos.filter(|_| add_bos),
            stop_tokens,
            context_tokens,
            evaluated: Vec::new(),
            reused_tokens: 0,
        })
    }

    /// Tokens the model can attend to (from `llama.context_length`).
    pub fn context_tokens(&self) -> usize {
        self.context_tokens
    }

    /// The prompt text the template renders for `turns` and `tools` (with the generation
    /// prompt).
    pub fn render(
        &self,
        turns: &[ChatTurn],
        tools: &[serde_json::Value],
    ) -> Result<String, ModelError> {
        self.template
            .render(turns, tools)
            .map_err(|detail| self.run_error(detail))
    }

    /// Number of tokens of `text` (for context budgeting).
    pub fn count_tokens(&self, text: &str) -> Result<usize, ModelError> {
        Ok(self.encode(text)?.len())
    }

    /// Blocking. Renders, tokenizes and generates. `on_text` gets each new piece of visible
    /// text as soon as it is decided (whole characters; text that may begin a stop string is
    /// held back until it does not); `ControlFlow::Break(())` cancels. A prompt that leaves
    /// no room for `max_tokens` is [`ModelError::ContextOverflow`]. When the prompt extends
    /// the tokens of the previous call (the next turn of the same chat), only the new ones are
    /// evaluated.
    pub fn generate(
        &mut self,
        turns: &[ChatTurn],
        options: &GenerateOptions,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, ModelError> {
        let prompt = self.render(turns, &options.tools)?;
        let mut prompt_ids = self.encode(&prompt)?;
        if let Some(bos) = self.bos
            && prompt_ids.first() != Some(&bos)
        {
            prompt_ids.insert(0, bos);
        }
        self.generate_from(&prompt_ids, options, on_text)
    }

    fn generate_from(
        &mut self,
        prompt: &[u32],
        options: &GenerateOptions,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, ModelError> {
        let max_tokens = options.max_tokens as usize;
        if prompt.len() + max_tokens > self.context_tokens {
            return Err(ModelError::ContextOverflow {
                prompt_tokens: prompt.len(),
                max_tokens,
                context_tokens: self.context_tokens,
            });
        }
        let prompt_tokens = prompt.len() as u32;
        if prompt.is_empty() || max_tokens == 0 {
            return Ok(Generation {
                text: String::new(),
                prompt_tokens,
                completion_tokens: 0,
                finish: FinishReason::Length,
                prompt_seconds: 0.0,
                generate_seconds: 0.0,
            });
        }
        let sampling = if options.temperature <= 0.0 {
            Sampling::ArgMax
        } else {
            let temperature = f64::from(options.temperature);
            match options.top_p {
                Some(p) => Sampling::TopP { p, temperature },
                None => Sampling::All { temperature },
            }
        };
        let mut sampler = LogitsProcessor::from_sampling(options.seed, sampling);
        let mut visible = VisibleText::new(&options.stop);
        let started = Instant::now();
        let mut logits = self.evaluate_prompt(prompt)?;
        let mut first_token_at = None;
        let mut generated: Vec<u32> = Vec::new();
        let finish = loop {
            if options.repeat_penalty != 1.0 && !generated.is_empty() {
                let window = &generated[generated.len().saturating_sub(REPEAT_PENALTY_WINDOW)..];
                logits = candle_transformers::utils::apply_repeat_penalty(
                    &logits,
                    options.repeat_penalty,
                    window,
                )
                .map_err(|err| self.run_error(err.to_string()))?;
            }
            let token = sampler
                .sample(&logits)
                .map_err(|err| self.run_error(err.to_string()))?;
            first_token_at.get_or_insert_with(Instant::now);
            if self.stop_tokens.contains(&token) {
                self.flush(&mut visible, on_text)?;
                break FinishReason::Stop;
            }
            generated.push(token);
            match visible
                .push(&self.tokenizer, token)
                .map_err(|detail| self.run_error(detail))?
            {
                Piece::Text(piece) => {
                    if !piece.is_empty() && on_text(&piece).is_break() {
                        break FinishReason::Cancelled;
                    }
                }
                Piece::Stopped(piece) => {
                    if !piece.is_empty() {
                        // The generation is over either way.
                        let _ = on_text(&piece);
                    }
                    break FinishReason::Stop;
                }
            }
            if generated.len() == max_tokens {
                self.flush(&mut visible, on_text)?;
                break FinishReason::Length;
            }
            logits = self.forward(&[token])?;
        };
        let first_token_at = first_token_at.unwrap_or(started);
        Ok(Generation {
            text: visible.shown().to_string(),
            prompt_tokens,
            completion_tokens: generated.len() as u32,
            finish,
            prompt_seconds: first_token_at.duration_since(started).as_secs_f64(),
            generate_seconds: first_token_at.elapsed().as_secs_f64(),
        })
    }

    /// Shows the text held back until the generation ended.
    fn flush(
        &self,
        visible: &mut VisibleText,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<(), ModelError> {
        let (Piece::Text(piece) | Piece::Stopped(piece)) = visible
            .finish(&self.tokenizer)
            .map_err(|detail| self.run_error(detail))?;
        if !piece.is_empty() {
            // The generation is over either way.
            let _ = on_text(&piece);
        }
        Ok(())
    }

    /// The logits after `prompt`, evaluating only what the cache does not already hold.
    fn evaluate_prompt(&mut self, prompt: &[u32]) -> Result<Tensor, ModelError> {
        // The last prompt token must go through the model to give logits, so a prompt equal
        // to what was evaluated is evaluated again from the start.
        let extends = self.evaluated.len() < prompt.len() && prompt.starts_with(&self.evaluated);
        if !extends {
            self.evaluated.clear();
        }
        self.reused_tokens = self.evaluated.len();
        tracing::debug!(
            model = %self.name,
            prompt_tokens = prompt.len(),
            cached = self.reused_tokens,
            "evaluating the prompt"
        );
        self.forward(&prompt[self.reused_tokens..])
    }

    /// Runs `tokens` through the model after those already evaluated (an index of 0 resets
    /// the cache) and returns the logits of the last.
    fn forward(&mut self, tokens: &[u32]) -> Result<Tensor, ModelError> {
        // Until it succeeds, what the cache holds is unknown.
        let mut evaluated = std::mem::take(&mut self.evaluated);
        let logits = Tensor::new(tokens, &Device::Cpu)
            .and_then(|input| input.unsqueeze(0))
            .and_then(|input| self.weights.forward(&input, evaluated.len()))
            .and_then(|logits| logits.squeeze(0))
            .map_err(|err| self.run_error(err.to_string()))?;
        evaluated.extend_from_slice(tokens);
        self.evaluated = evaluated;
        Ok(logits)
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        self.tokenizer
            .encode(text, false)
            .map(|encoding| encoding.get_ids().to_vec())
            .map_err(|err| self.run_error(format!("tokenizing: {err}")))
    }

    fn run_error(&self, detail: String) -> ModelError {
        ModelError::Run {
            name: self.name.clone(),
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use nanocrab_testkit::gguf::TinyLlama;
    use pretty_assertions::assert_eq;

    use super::*;

    fn load(dir: &tempfile::TempDir) -> ChatModel {
        let path = dir.path().join("tiny.gguf");
        if !path.exists() {
            TinyLlama::default().write(&path);
        }
        ChatModel::load(&path).unwrap()
    }

    fn run(model: &mut ChatModel, prompt: &[u32]) -> Generation {
        let options = GenerateOptions {
            max_tokens: 12,
            ..GenerateOptions::default()
        };
        model
            .generate_from(prompt, &options, &mut |_| ControlFlow::Continue(()))
            .unwrap()
    }

    /// A generation without its timings.
    fn outcome(generation: &Generation) -> (String, u32, FinishReason) {
        (
            generation.text.clone(),
            generation.completion_tokens,
            generation.finish,
        )
    }

    #[test]
    fn a_prompt_extending_the_evaluated_tokens_reuses_the_cache_with_the_same_output() {
        let dir = tempfile::tempdir().unwrap();
        let mut warm = load(&dir);
        let first = warm.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
        run(&mut warm, &first.unwrap());
        let mut next = warm.evaluated.clone();
        next.extend(
            warm.encode(
                "<|im_end|>\n<|im_start|>user\nand then?<|im_end|>\n<|im_start|>assistant\n",
            )
            .unwrap(),
        );
        let cached = warm.evaluated.len();
        let reused = run(&mut warm, &next);
        assert_eq!(warm.reused_tokens, cached);

        let mut cold = load(&dir);
        let fresh = run(&mut cold, &next);
        assert_eq!(cold.reused_tokens, 0);
        assert_eq!(outcome(&reused), outcome(&fresh));
    }

    #[test]
    fn a_prompt_that_departs_from_the_evaluated_tokens_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut model = load(&dir);
        let prompt = model.encode("<|im_start|>user\nhello<|im_end|>\n").unwrap();
        run(&mut model, &prompt);
        run(&mut model, &prompt);
        assert_eq!(model.reused_tokens, 0, "the same prompt again");
        let other = model.encode("<|im_start|>user\nhi<|im_end|>\n").unwrap();
        let again = run(&mut model, &other);
        assert_eq!(model.reused_tokens, 0);
        let mut cold = load(&dir);
        assert_eq!(outcome(&again), outcome(&run(&mut cold, &other)));
    }
}
