//! Inbound chat messages as tests need them.

use nanocrab_schema::{ChatType, InboundMessage, Sender};

/// A Telegram DM (`default` account) from `sender`, in the chat of the same id, with nothing
/// else set; tests override what they are about with struct update syntax.
pub fn inbound_dm(sender: &str, message_id: &str, text: &str) -> InboundMessage {
    InboundMessage {
        channel: "telegram".to_owned(),
        account: "default".to_owned(),
        message_id: message_id.to_owned(),
        chat_id: sender.to_owned(),
        chat_type: ChatType::Dm,
        chat_title: None,
        guild_id: None,
        thread_id: None,
        sender: Sender {
            id: sender.to_owned(),
            ..Sender::default()
        },
        text: text.to_owned(),
        reply_to: None,
        mentions: Vec::new(),
        mentions_bot: false,
        media: Vec::new(),
        timestamp: 0,
        edited: false,
        forwarded_from: None,
        via_bot: None,
        caption: false,
        team_id: None,
    }
}
