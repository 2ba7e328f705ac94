//! What the agent says mid-turn with its `message` tool, and what each turn said so to the chat
//! its reply goes to.
//!
//! Whoever starts a turn (a chat turn, an autonomous run) tells [`TurnMessages`] the chat the
//! turn's reply goes to, under the run's trace id: that is the tool's "this chat". A message
//! goes out on the bus like an answer (the channels' sender retries it, and keeps it in the
//! outbox when the platform cannot take it now), after whatever the chat already had queued;
//! the tool waits until it is sent or kept, so the model learns of a refusal (a chat that does
//! not exist). What reached the turn's own chat is remembered until the turn ends, and the
//! turn's final reply is not sent when it only repeats it or says [`NO_REPLY`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nanocrab_schema::{ChatRef, OutboundMessage, TraceId};
use nanocrab_tools::{ChatMessages, MessageRequest, NO_REPLY, Sending};

use crate::bus::{OutboundBus, OutboundEvent, Outgoing, Sent};

/// The account a `<channel>:<chatId>` names: channels have one account each so far.
pub(crate) const DEFAULT_ACCOUNT: &str = "default";

/// The message tool's chats; clones share them.
#[derive(Clone)]
pub struct TurnMessages {
    shared: Arc<Shared>,
}

struct Shared {
    bus: OutboundBus,
    /// `(name, account)` of the channels the gateway runs.
    channels: Vec<(String, String)>,
    /// The turns running now, by trace id.
    turns: Mutex<HashMap<TraceId, Said>>,
}

/// A running turn's own chat, and the texts the tool sent there.
struct Said {
    chat: ChatRef,
    texts: Vec<String>,
}

/// A turn's hold on its chat, from its start to its end; dropping it forgets the turn.
pub(crate) struct TurnChat {
    shared: Arc<Shared>,
    trace: TraceId,
}

impl TurnChat {
    /// The texts the message tool sent to the turn's own chat, oldest first; the turn is
    /// forgotten.
    pub(crate) fn said(self) -> Vec<String> {
        self.shared
            .lock()
            .remove(&self.trace)
            .map(|said| said.texts)
            .unwrap_or_default()
    }
}

impl Drop for TurnChat {
    fn drop(&mut self) {
        self.shared.lock().remove(&self.trace);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, HashMap<TraceId, Said>> {
        // Every change to the map is complete before anything that can panic.
        self.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TurnMessages {
    /// Messages go out on `bus`, to the channels `channels` (`(name, account)`) names.
    pub fn new(bus: OutboundBus, channels: Vec<(String, String)>) -> Self {
        Self {
            shared: Arc::new(Shared {
                bus,
                channels,
                turns: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The turn traced `trace` replies to `chat`, until the returned hold is let go.
    pub(crate) fn begin(&self, trace: TraceId, chat: ChatRef) -> TurnChat {
        self.shared.lock().insert(
            trace.clone(),
            Said {
                chat,
                texts: Vec::new(),
            },
        );
        TurnChat {
            shared: Arc::clone(&self.shared),
            trace,
        }
    }

    /// The chat the running turn traced `trace` replies to, when it has one.
    pub(crate) fn chat_of(&self, trace: &TraceId) -> Option<ChatRef> {
        self.shared.lock().get(trace).map(|said| said.chat.clone())
    }

    async fn deliver(&self, request: MessageRequest) -> Result<String, String> {
        let own = request
            .turn
            .as_ref()
            .and_then(|turn| self.shared.lock().get(turn).map(|said| said.chat.clone()));
        let chat = match (&request.to, own) {
            (None, Some(chat)) => chat,
            (None, None) => {
                return Err(
                    "this run answers no chat, so there is no \"this chat\"; give `to` \
                     (channel:chat)"
                        .to_owned(),
                );
            }
            (Some(to), own) => {
                if !self
                    .shared
                    .channels
                    .iter()
                    .any(|(name, _)| *name == to.channel)
                {
                    let running: Vec<&str> = self
                        .shared
                        .channels
                        .iter()
                        .map(|(name, _)| name.as_str())
                        .collect();
                    return Err(format!(
                        "to: no channel `{}` runs in this gateway; it runs: {}",
                        to.channel,
                        if running.is_empty() {
                            "none".to_owned()
                        } else {
                            running.join(", ")
                        }
                    ));
                }
                match own {
                    Some(chat) if chat.channel == to.channel && chat.chat_id == to.chat_id => chat,
                    Some(_) | None => ChatRef {
                        channel: to.channel.clone(),
                        account: DEFAULT_ACCOUNT.to_owned(),
                        chat_id: to.chat_id.clone(),
                        thread_id: None,
                    },
                }
            }
        };
        let place = format!("{}:{}", chat.channel, chat.chat_id);
        let (outgoing, receipt) = Outgoing::said(OutboundMessage {
            chat: chat.clone(),
            text: request.text.clone(),
            reply_to_message_id: None,
            file: request.file,
        });
        if self.shared.bus.publish(OutboundEvent::Message(outgoing)) == 0 {
            return Err(format!(
                "not sent to {place}: the gateway's sender is not running"
            ));
        }
        let answer = match receipt.await {
            Ok(Sent::Delivered) => format!("sent to {place}"),
            Ok(Sent::Kept) => format!(
                "{place} cannot be reached now; the message is kept and sent when the gateway \
                 next starts"
            ),
            Ok(Sent::Failed(why)) => return Err(format!("not sent to {place}: {why}")),
            Err(_) => return Err(format!("not sent to {place}: the gateway stopped")),
        };
        if let Some(turn) = &request.turn
            && let Some(said) = self.shared.lock().get_mut(turn)
            && said.chat == chat
        {
            said.texts.push(request.text);
        }
        Ok(answer)
    }
}

impl ChatMessages for TurnMessages {
    fn send(&self, request: MessageRequest) -> Sending<'_> {
        Box::pin(self.deliver(request))
    }
}

/// Whether a turn's final `reply` is to be sent to its chat: not when it says [`NO_REPLY`]
/// (alone, or at its start or end), nor when the message tool already sent that very text
/// (`said`) to the chat during the turn.
pub(crate) fn worth_sending(reply: &str, said: &[String]) -> bool {
    let reply = reply.trim();
    !says_no_reply(reply) && !said.iter().any(|text| text.trim() == reply)
}

/// Whether `reply` starts or ends with [`NO_REPLY`], Markdown marks and end punctuation
/// around it ignored, as a word of its own.
fn says_no_reply(reply: &str) -> bool {
    const MARKS: [char; 3] = ['*', '`', '_'];
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let opened = reply.trim_start().trim_start_matches(MARKS);
    let at_start = opened
        .strip_prefix(NO_REPLY)
        .is_some_and(|rest| !word(rest.trim_start_matches(MARKS).chars().next()));
    let closed = reply
        .trim_end()
        .trim_end_matches(MARKS)
        .trim_end_matches(['.', '!'])
        .trim_end_matches(MARKS);
    let at_end = closed
        .strip_suffix(NO_REPLY)
        .is_some_and(|rest| !word(rest.trim_end_matches(MARKS).chars().next_back()));
    at_start || at_end
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn no_reply_alone_or_at_an_edge_silences_the_reply() {
        let cases = [
            ("NO_REPLY", false),
            ("  **NO_REPLY**  \n", false),
            ("`NO_REPLY`.", false),
            ("NO_REPLY: sent it above.", false),
            ("I sent you the file. NO_REPLY", false),
            ("Say NO_REPLY in the middle and it is sent.", true),
            ("NO_REPLYING is another word", true),
            ("the summary is in ANO_REPLY", true),
            ("Here is your summary.", true),
        ];
        let wrong: Vec<_> = cases
            .iter()
            .filter(|(reply, sent)| worth_sending(reply, &[]) != *sent)
            .collect();
        assert_eq!(wrong, Vec::<&(&str, bool)>::new());
    }

    #[test]
    fn a_reply_the_tool_already_sent_is_not_sent_again() {
        let said = vec!["Done: the report is attached.".to_owned()];
        assert!(!worth_sending("  Done: the report is attached.\n", &said));
        assert!(worth_sending(
            "Done: the report is attached. Anything else?",
            &said
        ));
        assert!(worth_sending("Done: the report is attached.", &[]));
    }
}
