//! What the gateway itself says in a chat (never the agent): the short texts for a message it
//! cannot take or a turn that failed, and how an answer is addressed.

use nanocrab_schema::{ChatType, InboundMessage, OutboundMessage};

/// What a failed turn tells the sender; the error itself goes to the log only, since it may
/// name providers, paths or limits the sender has no business seeing.
pub(crate) const APOLOGY: &str =
    "Sorry, something went wrong while answering that. Please try again in a moment.";

/// What a sender is told when their conversation already has `gateway.queue.cap` messages
/// waiting.
pub(crate) const BUSY: &str = "I'm still working on your earlier messages and can't take more right now. Please send this again in a moment.";

/// What a sender is told when their message could not be stored.
pub(crate) const NOT_STORED: &str =
    "Sorry, I can't take messages right now. Please send this again in a moment.";

/// What a sender of a voice message or audio file is told when there is no transcriber: the
/// turn goes on, knowing only that it arrived.
pub(crate) const NO_TRANSCRIBER: &str = "I got your voice message, but I can't listen to audio: no transcription is set up. Set `tools.transcription` in config.json to an OpenAI-compatible speech-to-text endpoint (OpenAI, Groq or a local server); see \"Voice messages\" in docs/channels.md. Until then, please write.";

/// What a sender is told when their `kind` (voice message, audio file) could not be
/// transcribed, and `why` in a few words (never the error itself).
pub(crate) fn not_transcribed(kind: &str, why: &str) -> String {
    format!(
        "I got your {kind}, but couldn't transcribe it: {why}. If it matters, please send it again or write it."
    )
}

/// `text` as an answer to `message`: into its chat and thread, and in a group, where several
/// conversations interleave, as a reply to it.
pub(crate) fn answer_to(message: &InboundMessage, text: String) -> OutboundMessage {
    OutboundMessage {
        chat: message.chat(),
        text,
        reply_to_message_id: match message.chat_type {
            ChatType::Group => Some(message.message_id.clone()),
            ChatType::Dm | ChatType::Channel => None,
        },
        file: None,
    }
}
