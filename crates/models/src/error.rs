use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no model is called `{name}`; known models: {known}")]
    Unknown { name: String, known: String },
    #[error("the model `{name}` is not installed; run `nanocrab models pull {name}`")]
    NotInstalled { name: String },
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("package index {url}: {detail}")]
    Index { url: String, detail: String },
    #[error(
        "{url} does not match its published digest (sha256 {expected}, got {actual}); nothing was installed"
    )]
    Digest {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("{}: {detail}", path.display())]
    Files { path: PathBuf, detail: String },
    #[error("model {name}: {detail}")]
    Run { name: String, detail: String },
    #[error(
        "the prompt takes {prompt_tokens} tokens and up to {max_tokens} more were asked for, but the model attends to {context_tokens} tokens"
    )]
    ContextOverflow {
        prompt_tokens: usize,
        max_tokens: usize,
        context_tokens: usize,
    },
}
