//! A gate a scripted reply waits behind until the test opens it: a turn kept in flight for as
//! long as the test needs, however slow the machine, where a delay would be a guess.

use std::sync::Arc;

use tokio::sync::watch;

/// Closed when made; [`Gate::open`] lets every reply waiting behind it (and any later one) go.
/// Clones share the gate.
#[derive(Debug, Clone)]
pub struct Gate {
    open: Arc<watch::Sender<bool>>,
}

impl Gate {
    pub fn new() -> Self {
        Self {
            open: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Lets the replies behind the gate go.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Waits until the gate is open.
    pub(crate) async fn passed(&self) {
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = self.open.subscribe().wait_for(|open| *open).await;
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reply_waits_until_the_gate_opens() {
        let gate = Gate::new();
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.passed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        gate.open();
        waiting.await.unwrap();
        // Open stays open.
        gate.passed().await;
    }
}
