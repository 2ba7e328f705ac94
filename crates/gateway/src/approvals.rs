//! Approvals in the gateway: a guarded call asks in the chat its run came from (the reply
//! `approve ID`, `always ID` or `deny ID` answers it) or, for a run with no chat (the HTTP
//! API), waits at `GET /v1/approvals` for `POST /v1/approvals/{id}`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use nanocrab_policy::{
    APPROVAL_ID_LEN, ApprovalAnswer, ApprovalError, ApprovalReply, ApprovalRequest, Approver,
};
use nanocrab_schema::{ChatRef, InboundMessage, OutboundMessage, SessionKey};
use tokio::sync::oneshot;

use crate::bus::{OutboundBus, OutboundEvent, Outgoing, Sent};

struct Pending {
    request: ApprovalRequest,
    /// Where it was asked; only a reply from this chat answers it.
    chat: Option<ChatRef>,
    reply: oneshot::Sender<ApprovalReply>,
}

/// The approvals waiting for an answer, and where each running chat turn's session is.
pub struct Approvals {
    pending: Mutex<BTreeMap<String, Pending>>,
    chats: Mutex<HashMap<SessionKey, ChatRef>>,
    /// Where questions are published, for the channels' sender to ask in their chat.
    bus: OutboundBus,
}

/// What answering an approval did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    Done,
    /// No such approval is waiting (it was answered, timed out, or never existed).
    NotPending,
}

impl Approvals {
    /// Approvals whose questions go out on `bus`: give the gateway the same bus.
    pub fn new(bus: OutboundBus) -> Arc<Self> {
        Arc::new(Self {
            pending: Mutex::new(BTreeMap::new()),
            chats: Mutex::new(HashMap::new()),
            bus,
        })
    }

    /// From now until [`Self::unbind`], approvals of `session` are asked in `chat`.
    pub(crate) fn bind(&self, session: &SessionKey, chat: ChatRef) {
        self.chats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.clone(), chat);
    }

    pub(crate) fn unbind(&self, session: &SessionKey) {
        self.chats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session);
    }

    /// The approvals waiting now, oldest id order.
    pub fn pending(&self) -> Vec<ApprovalRequest> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|p| p.request.clone())
            .collect()
    }

    /// Answers approval `id` for `by`. Only `chat` (when given) may answer one asked in a chat.
    pub fn answer(
        &self,
        id: &str,
        answer: ApprovalAnswer,
        by: String,
        chat: Option<&ChatRef>,
    ) -> Answered {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let matches = pending.get(id).is_some_and(|p| match (chat, &p.chat) {
            (Some(from), Some(asked)) => same_chat(from, asked),
            (Some(_), None) => false,
            (None, _) => true,
        });
        if !matches {
            return Answered::NotPending;
        }
        match pending.remove(id) {
            // The run may have stopped waiting in the meantime; then nobody needs the answer.
            Some(p) => {
                let _ = p.reply.send(ApprovalReply { answer, by });
                Answered::Done
            }
            None => Answered::NotPending,
        }
    }

    /// If `message` is an answer (`approve ID`, `always ID`, `deny ID`), applies it and returns
    /// what to tell the sender; other messages are left for the agent. Only the sender's own
    /// freshly typed message answers: a forward, an edit, a caption, a quoting reply or a
    /// bot's message shaped like an answer is refused (and told so), never applied, and not
    /// passed on to the agent either, which could do nothing with it.
    pub(crate) fn answer_from_chat(&self, message: &InboundMessage) -> Option<String> {
        let mut words = message.text.split_whitespace();
        let (verb, id, rest) = (words.next()?, words.next()?, words.next());
        if rest.is_some()
            || id.len() != APPROVAL_ID_LEN
            || !id.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return None;
        }
        let answer = ApprovalAnswer::from_verb(verb)?;
        let id = id.to_ascii_lowercase();
        if !message.typed_by_sender() {
            return Some(format!(
                "Not taken as an answer to {id}: an approval must be a message you type yourself, not a forward, an edit, a caption, a quote or a bot's message. Send \"{verb} {id}\" again if you mean it."
            ));
        }
        let by = format!("{}:{}", message.channel, message.sender.id);
        Some(match self.answer(&id, answer, by, Some(&message.chat())) {
            Answered::Done => match answer {
                ApprovalAnswer::Once => format!("Approved {id}."),
                ApprovalAnswer::Session => {
                    format!("Approved {id}, and the same for the rest of this conversation.")
                }
                ApprovalAnswer::Deny => format!("Denied {id}."),
            },
            Answered::NotPending => format!(
                "No approval {id} is waiting in this chat: it was answered already or timed out."
            ),
        })
    }

    fn chat_of(&self, session: Option<&SessionKey>) -> Option<ChatRef> {
        let session = session?;
        self.chats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .cloned()
    }
}

fn same_chat(a: &ChatRef, b: &ChatRef) -> bool {
    a.channel == b.channel && a.account == b.account && a.chat_id == b.chat_id
}

/// Takes an approval off the list when its run stops waiting, answered or not.
struct Withdraw<'a> {
    approvals: &'a Approvals,
    id: String,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.approvals
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

#[async_trait]
impl Approver for Approvals {
    async fn ask(&self, request: &ApprovalRequest) -> Result<ApprovalReply, ApprovalError> {
        let (reply, answer) = oneshot::channel();
        let chat = self.chat_of(request.session.as_ref());
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                request.id.clone(),
                Pending {
                    request: request.clone(),
                    chat: chat.clone(),
                    reply,
                },
            );
        let _withdraw = Withdraw {
            approvals: self,
            id: request.id.clone(),
        };
        self.bus.publish(OutboundEvent::ApprovalRequested {
            request: request.clone(),
            chat: chat.clone(),
        });
        match &chat {
            Some(chat) => {
                let (question, sent) = Outgoing::with_receipt(OutboundMessage {
                    chat: chat.clone(),
                    text: request.question(),
                    reply_to_message_id: None,
                    file: None,
                });
                if self.bus.publish(OutboundEvent::Message(question)) == 0 {
                    return Err(ApprovalError::Unreachable(format!(
                        "the channel {} is not running",
                        chat.channel
                    )));
                }
                match sent.await {
                    Ok(Sent::Delivered) => {}
                    Ok(Sent::Failed(why)) => {
                        return Err(ApprovalError::Unreachable(format!(
                            "the question could not be sent: {why}"
                        )));
                    }
                    Ok(Sent::Kept) | Err(_) => {
                        return Err(ApprovalError::Unreachable("the gateway is stopping".into()));
                    }
                }
            }
            None => tracing::info!(
                approval = %request.id,
                "{} waits for approval at GET /v1/approvals",
                request.tool
            ),
        }
        answer
            .await
            .map_err(|_| ApprovalError::Unreachable("the gateway is stopping".into()))
    }
}
