//! In-process chat inference against a tiny random llama GGUF built by the testkit: loading
//! (with re-quantization), the model's own template and tokenizer, decoding, stopping.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use candle_core::quantized::GgmlDType;
use nanocrab_models::{
    ChatModel, ChatRole, ChatTurn, FinishReason, GenerateOptions, Generation, ModelError,
};
use nanocrab_testkit::gguf::{ENDOFTEXT, IM_END, TinyLlama, tokens};
use pretty_assertions::assert_eq;
use tempfile::TempDir;

fn write(tiny: &TinyLlama) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    tiny.write(&path);
    (dir, path)
}

fn load(tiny: &TinyLlama) -> (TempDir, ChatModel) {
    let (dir, path) = write(tiny);
    (dir, ChatModel::load(&path).unwrap())
}

fn load_error(tiny: &TinyLlama) -> (PathBuf, String) {
    let (_dir, path) = write(tiny);
    let err = ChatModel::load(&path).err().expect("the load fails");
    (path, err.to_string())
}

fn user(content: &str) -> ChatTurn {
    ChatTurn {
        role: ChatRole::User,
        content: content.to_string(),
    }
}

fn question() -> Vec<ChatTurn> {
    vec![
        ChatTurn {
            role: ChatRole::System,
            content: "Be brief.".to_string(),
        },
        user("What is the capital of France?"),
    ]
}

/// The generation and the pieces `on_text` got.
fn generate(model: &mut ChatModel, options: &GenerateOptions) -> (Generation, Vec<String>) {
    let mut pieces = Vec::new();
    let generation = model
        .generate(&question(), options, &mut |piece| {
            pieces.push(piece.to_string());
            ControlFlow::Continue(())
        })
        .unwrap();
    (generation, pieces)
}

fn greedy(max_tokens: u32) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        ..GenerateOptions::default()
    }
}

/// The id of the byte token for `byte`, after the three control tokens.
fn byte_token(byte: u8) -> u32 {
    let id = 3 + u32::from(byte);
    assert_eq!(tokens()[id as usize], (byte as char).to_string());
    id
}

fn favouring(token: u32) -> TinyLlama {
    TinyLlama {
        favoured_token: Some(token),
        ..TinyLlama::default()
    }
}

#[test]
fn the_prompt_is_the_models_own_template_rendered() {
    let (_dir, model) = load(&TinyLlama::default());
    let conversation = vec![
        ChatTurn {
            role: ChatRole::System,
            content: "Be brief.".to_string(),
        },
        user("Hi"),
        ChatTurn {
            role: ChatRole::Assistant,
            content: "Hello!".to_string(),
        },
        user("What is the capital of France?"),
    ];
    let prompt = model.render(&conversation, &[]).unwrap();
    // The cue for the answer ends with its newline (a snapshot would not show it).
    assert!(prompt.ends_with("<|im_start|>assistant\n"), "{prompt:?}");
    insta::assert_snapshot!("with_system_prompt", prompt);
    insta::assert_snapshot!(
        "default_system_prompt",
        model.render(&[user("hello")], &[]).unwrap()
    );
}

#[test]
fn control_tokens_in_the_prompt_are_single_tokens_and_bpe_merges_apply() {
    let (_dir, model) = load(&TinyLlama::default());
    assert_eq!(model.count_tokens("<|im_start|>user\n").unwrap(), 3);
    // "Ġthe" is one merged token; "Ġ" + "user" two more.
    assert_eq!(model.count_tokens(" the user").unwrap(), 3);
    assert_eq!(model.count_tokens("").unwrap(), 0);
}

#[test]
fn greedy_decoding_is_deterministic_and_streams_all_of_its_text() {
    let (_dir, mut model) = load(&TinyLlama::default());
    let (first, pieces) = generate(&mut model, &greedy(24));
    let (second, _) = generate(&mut model, &greedy(24));
    assert_eq!(pieces.concat(), first.text);
    assert!(!first.text.is_empty());
    assert_eq!(
        (second.text, second.completion_tokens, second.finish),
        (first.text, first.completion_tokens, first.finish)
    );
    assert_eq!(
        first.prompt_tokens as usize,
        model
            .count_tokens(&model.render(&question(), &[]).unwrap())
            .unwrap()
    );
}

#[test]
fn float_weights_load_without_re_quantization_and_generate() {
    let (_dir, mut model) = load(&TinyLlama {
        dtype: GgmlDType::F32,
        ..TinyLlama::default()
    });
    let (generation, pieces) = generate(&mut model, &greedy(8));
    assert_eq!(pieces.concat(), generation.text);
    assert!(generation.completion_tokens > 0);
}

#[test]
fn the_same_seed_samples_the_same_text_and_other_seeds_differ() {
    let (_dir, mut model) = load(&TinyLlama::default());
    let sampled = |model: &mut ChatModel, seed: u64, top_p: Option<f64>| {
        let options = GenerateOptions {
            max_tokens: 16,
            temperature: 1.0,
            top_p,
            seed,
            repeat_penalty: 1.0,
            ..GenerateOptions::default()
        };
        generate(model, &options).0.text
    };
    let first = sampled(&mut model, 1, None);
    assert_eq!(sampled(&mut model, 1, None), first);
    // One other seed could happen to agree; five all agreeing would mean the seed is ignored.
    let others: Vec<String> = (2..7).map(|seed| sampled(&mut model, seed, None)).collect();
    assert!(
        others.iter().any(|text| *text != first),
        "{first:?} {others:?}"
    );
    let nucleus = sampled(&mut model, 1, Some(0.9));
    assert_eq!(sampled(&mut model, 1, Some(0.9)), nucleus);
}

#[test]
fn max_tokens_ends_the_generation_after_exactly_that_many_tokens() {
    let (_dir, mut model) = load(&favouring(byte_token(b'a')));
    let (generation, pieces) = generate(&mut model, &greedy(5));
    assert_eq!(
        (
            generation.text.as_str(),
            generation.completion_tokens,
            generation.finish
        ),
        ("aaaaa", 5, FinishReason::Length)
    );
    assert_eq!(pieces, vec!["a"; 5]);
}

#[test]
fn end_of_turn_tokens_stop_the_generation_and_are_never_shown() {
    for token in [IM_END, ENDOFTEXT] {
        let (_dir, mut model) = load(&favouring(token));
        let (generation, pieces) = generate(&mut model, &greedy(10));
        assert_eq!(
            (
                generation.text.as_str(),
                generation.completion_tokens,
                generation.finish
            ),
            ("", 0, FinishReason::Stop),
            "token {token}"
        );
        assert!(pieces.is_empty());
    }
}

#[test]
fn breaking_from_the_callback_cancels() {
    let (_dir, mut model) = load(&favouring(byte_token(b'a')));
    let mut pieces = Vec::new();
    let generation = model
        .generate(&question(), &greedy(50), &mut |piece| {
            pieces.push(piece.to_string());
            ControlFlow::Break(())
        })
        .unwrap();
    assert_eq!(
        (
            generation.text.as_str(),
            generation.completion_tokens,
            generation.finish
        ),
        ("a", 1, FinishReason::Cancelled)
    );
    assert_eq!(pieces, vec!["a"]);
}

#[test]
fn the_output_ends_before_a_stop_string_which_is_never_streamed() {
    let (_dir, mut model) = load(&TinyLlama::default());
    let (free, _) = generate(&mut model, &greedy(40));
    let chars: Vec<char> = free.text.chars().collect();
    assert!(chars.len() >= 6, "{:?}", free.text);
    // Two characters from the middle of what the model says when nothing stops it.
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let expected = &free.text[..free.text.find(&stop).unwrap()];
    let options = GenerateOptions {
        stop: vec!["never said".to_string(), stop.clone()],
        ..greedy(40)
    };
    let (stopped, pieces) = generate(&mut model, &options);
    assert_eq!(
        (stopped.text.as_str(), stopped.finish),
        (expected, FinishReason::Stop),
        "stop {stop:?}"
    );
    assert_eq!(pieces.concat(), expected);
}

#[test]
fn a_prompt_that_leaves_no_room_for_max_tokens_is_an_error() {
    let (_dir, mut model) = load(&TinyLlama {
        context_length: 64,
        ..TinyLlama::default()
    });
    assert_eq!(model.context_tokens(), 64);
    let prompt_tokens = model
        .count_tokens(&model.render(&question(), &[]).unwrap())
        .unwrap();
    assert!(prompt_tokens < 64);
    let max_tokens = (64 - prompt_tokens + 1) as u32;
    let err = model
        .generate(&question(), &greedy(max_tokens), &mut |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    let ModelError::ContextOverflow {
        prompt_tokens: got_prompt,
        max_tokens: got_max,
        context_tokens,
    } = err
    else {
        panic!("{err}");
    };
    assert_eq!(
        (got_prompt, got_max, context_tokens),
        (prompt_tokens, max_tokens as usize, 64)
    );
    // One token fewer fits.
    let (generation, _) = generate(&mut model, &greedy(max_tokens - 1));
    assert_eq!(generation.prompt_tokens as usize, prompt_tokens);
}

fn assert_names(message: &str, path: &Path, needle: &str) {
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains(needle), "{message}");
}

#[test]
fn other_architectures_are_refused_by_name() {
    let (path, message) = load_error(&TinyLlama {
        architecture: "gemma3".to_string(),
        ..TinyLlama::default()
    });
    assert_names(&message, &path, "architecture `gemma3` is not supported");
}

#[test]
fn other_tokenizer_kinds_are_refused_by_name() {
    let (path, message) = load_error(&TinyLlama {
        tokenizer_model: "llama".to_string(),
        ..TinyLlama::default()
    });
    assert_names(&message, &path, "tokenizer kind `llama` is not supported");
}

#[test]
fn a_model_without_a_chat_template_is_refused() {
    let (path, message) = load_error(&TinyLlama {
        chat_template: None,
        ..TinyLlama::default()
    });
    assert_names(&message, &path, "no chat template");
}

#[test]
fn a_template_that_does_not_compile_is_refused() {
    let (path, message) = load_error(&TinyLlama {
        chat_template: Some("{% for message in messages %}".to_string()),
        ..TinyLlama::default()
    });
    assert_names(&message, &path, "chat template does not compile");
}

#[test]
fn a_template_that_raises_an_exception_fails_the_render_with_its_message() {
    let (_dir, model) = load(&TinyLlama {
        chat_template: Some(
            "{% if messages[0]['role'] != 'system' %}{{ raise_exception('system first') }}{% endif %}"
                .to_string(),
        ),
        ..TinyLlama::default()
    });
    let message = model.render(&[user("hi")], &[]).unwrap_err().to_string();
    assert!(message.contains("system first"), "{message}");
}

#[test]
fn truncated_and_foreign_files_are_errors_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = TinyLlama::default().bytes();
    for (name, contents) in [
        ("truncated.gguf", &bytes[..bytes.len() / 2]),
        ("header.gguf", &bytes[..100]),
        ("foreign.gguf", b"PK\x03\x04 a zip file".as_slice()),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        let message = ChatModel::load(&path).err().expect(name).to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
    }
    let missing = dir.path().join("missing.gguf");
    let message = ChatModel::load(&missing).err().unwrap().to_string();
    assert!(
        message.contains(&missing.display().to_string()),
        "{message}"
    );
}

#[test]
fn offered_tools_reach_a_template_that_takes_them() {
    // Qwen 2.5's way of listing tools, shortened; `tojson` writes JSON as Python's json.dumps
    // does, as the templates expect.
    let template = "{% if tools %}<|im_start|>system\n# Tools\n<tools>\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools><|im_end|>\n{% endif %}{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{{ '<|im_start|>assistant\n' }}";
    let (_dir, model) = load(&TinyLlama {
        chat_template: Some(template.to_string()),
        ..TinyLlama::default()
    });
    let tool = serde_json::json!({"type": "function", "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }});
    assert_eq!(
        model.render(&[user("hi")], &[tool]).unwrap(),
        "<|im_start|>system\n# Tools\n<tools>\n{\"function\": {\"description\": \"Read a file.\", \"name\": \"read_file\", \"parameters\": {\"properties\": {\"path\": {\"type\": \"string\"}}, \"type\": \"object\"}}, \"type\": \"function\"}\n</tools><|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        model.render(&[user("hi")], &[]).unwrap(),
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn a_re_quantized_copy_is_kept_beside_the_model_and_read_at_the_next_load() {
    let (_dir, path) = write(&TinyLlama::default());
    let cache = path.with_file_name("tiny.gguf.q8_0");
    let options = GenerateOptions {
        max_tokens: 6,
        ..GenerateOptions::default()
    };
    let first = generate(&mut ChatModel::load(&path).unwrap(), &options).0;
    assert!(cache.is_file(), "kept at {}", cache.display());
    let kept = std::fs::read(&cache).unwrap();
    let second = generate(&mut ChatModel::load(&path).unwrap(), &options).0;
    assert_eq!(second.text, first.text);
    assert_eq!(std::fs::read(&cache).unwrap(), kept, "read, not made again");

    // A copy that is not one (cut short by hand, say) is made again.
    std::fs::write(&cache, b"GGUF").unwrap();
    let third = generate(&mut ChatModel::load(&path).unwrap(), &options).0;
    assert_eq!(third.text, first.text);
    assert_eq!(std::fs::read(&cache).unwrap(), kept);
}
