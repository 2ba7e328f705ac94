//! What the channel knows of its mailbox across restarts, in `state/email-<account>.json`:
//! the mailbox's UIDVALIDITY and the last UID handed to the gateway (so nothing is read twice
//! or skipped), and each recent thread's subject and references (so an answer, even one sent
//! after a restart, is a reply in its thread).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How many threads are remembered; the least recently written to goes first.
const REMEMBERED_THREADS: usize = 1000;

/// How many message ids an answer's `References` carries: the thread's first and the latest
/// ones (RFC 5322 lets a long chain be cut so).
const MAX_REFERENCES: usize = 20;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MailboxState {
    /// The mailbox these UIDs belong to.
    pub mailbox: String,
    pub uid_validity: u32,
    /// Every mail up to this UID has been handed to the gateway or deliberately skipped.
    pub last_uid: u32,
    /// Unread mails at or below `last_uid` still to read: those the mailbox held when it was
    /// first opened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<u32>,
    /// By the thread's root message id.
    #[serde(default)]
    pub threads: BTreeMap<String, Thread>,
    /// Counts thread updates, to find the least recently used.
    #[serde(default)]
    pub clock: u64,
}

/// One thread of mails, as its latest mail left it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Thread {
    /// The subject without `Re:`.
    pub subject: String,
    /// The ids an answer refers to, oldest first, the latest mail's own last: the answer's
    /// `In-Reply-To` is the last, its `References` all of them.
    pub references: Vec<String>,
    /// [`MailboxState::clock`] when the thread last had a mail.
    pub used: u64,
}

impl MailboxState {
    /// The state of a mailbox first seen, or seen rebuilt: nothing in it taken yet.
    pub fn fresh(mailbox: &str, uid_validity: u32, last_uid: u32) -> Self {
        Self {
            mailbox: mailbox.to_owned(),
            uid_validity,
            last_uid,
            pending: Vec::new(),
            threads: BTreeMap::new(),
            clock: 0,
        }
    }

    /// Records a mail of the thread `root`: its subject and the ids an answer to it refers to.
    pub fn record(&mut self, root: &str, subject: &str, mut references: Vec<String>) {
        if references.len() > MAX_REFERENCES {
            references.drain(1..references.len() - (MAX_REFERENCES - 1));
        }
        self.clock += 1;
        self.threads.insert(
            root.to_owned(),
            Thread {
                subject: subject.to_owned(),
                references,
                used: self.clock,
            },
        );
        while self.threads.len() > REMEMBERED_THREADS {
            let Some(oldest) = self
                .threads
                .iter()
                .min_by_key(|(_, thread)| thread.used)
                .map(|(root, _)| root.clone())
            else {
                break;
            };
            self.threads.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_long_chain_keeps_its_first_and_latest_ids_and_old_threads_go_first() {
        let mut state = MailboxState::fresh("INBOX", 7, 0);
        let ids: Vec<String> = (0..30).map(|n| format!("m{n}@x")).collect();
        state.record("m0@x", "Plans", ids);
        let kept = &state.threads["m0@x"].references;
        assert_eq!(kept.len(), MAX_REFERENCES);
        assert_eq!(kept[0], "m0@x");
        assert_eq!(kept[1], "m11@x");
        assert_eq!(kept.last().map(String::as_str), Some("m29@x"));

        for n in 0..REMEMBERED_THREADS {
            state.record(&format!("t{n}@x"), "t", vec![format!("t{n}@x")]);
        }
        assert_eq!(state.threads.len(), REMEMBERED_THREADS);
        assert!(!state.threads.contains_key("m0@x"));
        assert!(state.threads.contains_key("t0@x"));
    }
}
