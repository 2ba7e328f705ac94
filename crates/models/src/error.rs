use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no model is called `{name}`{}; known models: {known}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    Unknown {
        name: String,
        known: String,
        suggestion: Option<String>,
    },
    #[error("`{key}`: {detail}")]
    Entry { key: String, detail: String },
    #[error("the model `{name}` is not installed; run `nanocrab models pull {name}`")]
    NotInstalled { name: String },
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A source could not be reached or did not have the file; the next source is tried.
    #[error("{url}: {detail}")]
    Unreachable { url: String, detail: String },
    /// The bytes are not the ones pinned; the bad download was deleted.
    #[error(
        "{what} does not match its digest (sha256 {expected}, got {actual}); it was deleted and nothing was installed"
    )]
    Digest {
        what: String,
        expected: String,
        actual: String,
    },
    /// The hub describes a file other than the one pinned: a moved branch, or a wrong entry.
    #[error(
        "{url}: the hub says the file's {what} is {hub}, but the catalogue pins {pinned}; nothing was downloaded"
    )]
    Pinned {
        url: String,
        what: String,
        hub: String,
        pinned: String,
    },
    /// A file placed by hand is not the one pinned; it is left where it is.
    #[error(
        "{} is not the file pinned for {model} (expected {expected}, got {actual}); remove or replace it and pull again",
        path.display()
    )]
    PlacedByHand {
        model: String,
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("cannot fetch `{name}`: every source failed:\n{failures}\n{by_hand}")]
    Unavailable {
        name: String,
        /// One line per source.
        failures: String,
        /// How to install it by hand.
        by_hand: String,
    },
    #[error("{}: {detail}", path.display())]
    Files { path: PathBuf, detail: String },
    #[error("model {name}: {detail}")]
    Run { name: String, detail: String },
    /// This binary was built without the runtime of local models.
    #[error(
        "this nanocrab was built without local models (cargo feature `local-models`); build it with `cargo build --release -p nanocrab --features local-models`, or use a remote provider"
    )]
    NotBuilt,
    #[error(
        "the prompt takes {prompt_tokens} tokens and up to {max_tokens} more were asked for, but the model attends to {context_tokens} tokens"
    )]
    ContextOverflow {
        prompt_tokens: usize,
        max_tokens: usize,
        context_tokens: usize,
    },
}

impl ModelError {
    /// Whether the next source is worth trying: this one could not be reached or did not have
    /// the file. Wrong bytes never are: they say something is amiss, not missing.
    pub fn falls_through(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::Unknown { .. }
            | Self::Entry { .. }
            | Self::NotInstalled { .. }
            | Self::Io { .. }
            | Self::Digest { .. }
            | Self::Pinned { .. }
            | Self::PlacedByHand { .. }
            | Self::Unavailable { .. }
            | Self::Files { .. }
            | Self::Run { .. }
            | Self::NotBuilt
            | Self::ContextOverflow { .. } => false,
        }
    }
}
