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
