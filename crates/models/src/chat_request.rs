//! What a local chat model is asked and what it answers: plain data, built with or without
//! the `local-models` feature, so that callers compile the same either way.

/// The most tokens a chat model attends to here, whatever it was trained for: candle's
/// llama keeps rotary tables for this many positions.
pub const MAX_CHAT_CONTEXT: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatRole {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTurn {
    pub role: ChatRole,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GenerateOptions {
    pub max_tokens: u32,
    /// 0.0 or less: greedy (argmax). Otherwise sampling with this temperature.
    pub temperature: f32,
    /// Nucleus sampling: only the most likely tokens that together reach this probability.
    pub top_p: Option<f64>,
    pub seed: u64,
    /// The output ends before the first occurrence of any of these.
    pub stop: Vec<String>,
    /// 1.0 = off. Small models loop without it.
    pub repeat_penalty: f32,
    /// Tools offered to the model, as OpenAI-style function definitions (`{"type":
    /// "function", "function": {name, description, parameters}}`), handed to the chat
    /// template as `tools`; only a model whose template uses them can call them.
    pub tools: Vec<serde_json::Value>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            max_tokens: 512,
            temperature: 0.0,
            top_p: None,
            seed: 299_792_458,
            stop: Vec::new(),
            repeat_penalty: 1.1,
            tools: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-turn token or a stop string.
    Stop,
    /// `max_tokens` were generated.
    Length,
    /// The caller's callback asked to stop.
    Cancelled,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub text: String,
    pub prompt_tokens: u32,
    /// Tokens generated, the end-of-turn token not counted.
    pub completion_tokens: u32,
    pub finish: FinishReason,
    /// Time to the first generated token: the prompt's evaluation.
    pub prompt_seconds: f64,
    /// Time after the first token: one forward pass per further token.
    pub generate_seconds: f64,
}
