//! The chat template a GGUF model carries (`tokenizer.chat_template`), rendered the way
//! Hugging Face's `apply_chat_template` does: a Jinja template over `messages`,
//! `add_generation_prompt`, `bos_token` and `eos_token`.

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, Error, ErrorKind, Value, context};

use crate::chat_request::{ChatRole, ChatTurn};

const NAME: &str = "chat";

pub(crate) struct ChatTemplate {
    environment: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// Compiles `source`; the error is a detail for the caller to tie to the file.
    pub(crate) fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, String> {
        let mut environment = Environment::new();
        // The settings `transformers` renders chat templates with.
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|err| err.to_string())?;
        environment.set_syntax(syntax);
        // Templates call it to refuse a conversation they cannot render (roles out of
        // order, ...); the message becomes the error.
        environment.add_function("raise_exception", |message: String| -> Result<(), Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        environment
            .add_template_owned(NAME, source.to_string())
            .map_err(|err| format!("the chat template does not compile: {err:#}"))?;
        Ok(Self {
            environment,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// The prompt for `turns`, ending with the cue for the assistant's answer; `tools` go to
    /// the template as `tools` (left undefined when there are none, as templates test).
    pub(crate) fn render(
        &self,
        turns: &[ChatTurn],
        tools: &[serde_json::Value],
    ) -> Result<String, String> {
        let messages: Vec<Value> = turns
            .iter()
            .map(|turn| {
                Value::from_pairs([
                    ("role", role_name(turn.role)),
                    ("content", turn.content.as_str()),
                ])
            })
            .collect();
        let template = self
            .environment
            .get_template(NAME)
            .map_err(|err| err.to_string())?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => self.bos_token.as_str(),
                eos_token => self.eos_token.as_str(),
                tools => (!tools.is_empty()).then(|| Value::from(minijinja::value::Serde(tools))),
            })
            .map_err(|err| format!("the chat template fails: {err:#}"))
    }
}

fn role_name(role: ChatRole) -> &'static str {
    match role {
        ChatRole::System => "system",
        ChatRole::User => "user",
        ChatRole::Assistant => "assistant",
    }
}
