//! The hand-over of inbound messages from an adapter to the gateway.
//!
//! A platform forgets a message once the adapter confirms it (Telegram's `getUpdates`
//! offset), so an adapter confirms only what the gateway has accepted: [`InboundSink::deliver`]
//! returns once the gateway has journaled the message, and the bounded queue makes a busy
//! gateway slow the adapter down instead of piling messages up in memory.

use nanocrab_schema::InboundMessage;
use tokio::sync::{mpsc, oneshot};

/// One message on its way to the gateway, with the receipt the adapter waits for.
#[derive(Debug)]
pub struct Delivery {
    pub message: InboundMessage,
    receipt: oneshot::Sender<()>,
}

impl Delivery {
    /// Tells the adapter the message is safe (journaled or deliberately dropped), so it may
    /// confirm it to the platform.
    pub fn accept(self) {
        // The adapter may have stopped waiting (shutdown); the message is handled anyway.
        let _ = self.receipt.send(());
    }
}

/// The adapter's end of the inbound queue.
#[derive(Debug, Clone)]
pub struct InboundSink {
    queue: mpsc::Sender<Delivery>,
}

/// The gateway stopped taking messages (it is shutting down); the message was not accepted
/// and the platform will deliver it again on the next start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the gateway is no longer accepting messages")]
pub struct SinkClosed;

impl InboundSink {
    /// Hands `message` over and waits until the gateway has accepted it.
    pub async fn deliver(&self, message: InboundMessage) -> Result<(), SinkClosed> {
        let (receipt, accepted) = oneshot::channel();
        self.queue
            .send(Delivery { message, receipt })
            .await
            .map_err(|_| SinkClosed)?;
        accepted.await.map_err(|_| SinkClosed)
    }
}

impl InboundSink {
    /// Hands `messages` over together, in order, and waits until the gateway has accepted
    /// them: what arrives together is journaled with one commit, where one at a time would
    /// wait for a commit each. Returns how many, from the first, were accepted: all of them
    /// unless the gateway stopped taking messages (it is shutting down).
    pub async fn deliver_all(&self, messages: Vec<InboundMessage>) -> usize {
        let mut receipts = Vec::with_capacity(messages.len());
        for message in messages {
            let (receipt, accepted) = oneshot::channel();
            if self
                .queue
                .send(Delivery { message, receipt })
                .await
                .is_err()
            {
                break;
            }
            receipts.push(accepted);
        }
        let mut accepted = 0;
        for receipt in receipts {
            if receipt.await.is_err() {
                break;
            }
            accepted += 1;
        }
        accepted
    }
}

/// A queue holding at most `capacity` messages not yet taken by the gateway.
pub fn inbound_queue(capacity: usize) -> (InboundSink, mpsc::Receiver<Delivery>) {
    let (queue, receiver) = mpsc::channel(capacity.max(1));
    (InboundSink { queue }, receiver)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> InboundMessage {
        nanocrab_testkit::inbound_dm("42", "1", "hi")
    }

    #[tokio::test]
    async fn deliver_returns_only_once_the_gateway_accepts() {
        let (sink, mut queue) = inbound_queue(1);
        let sent = tokio::spawn(async move { sink.deliver(message()).await });
        let delivery = queue.recv().await.unwrap();
        assert!(!sent.is_finished());
        assert_eq!(delivery.message, message());
        delivery.accept();
        assert_eq!(sent.await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn a_batch_is_handed_over_whole_and_counts_what_was_accepted() {
        let (sink, mut queue) = inbound_queue(8);
        let batch = vec![message(), message(), message()];
        let sent = tokio::spawn(async move { sink.deliver_all(batch).await });
        let mut taken = Vec::new();
        // All three are in the queue before any is accepted.
        while taken.len() < 3 {
            taken.push(queue.recv().await.unwrap());
        }
        assert!(!sent.is_finished());
        let mut taken = taken.into_iter();
        taken.next().unwrap().accept();
        taken.next().unwrap().accept();
        // The third is dropped (a gateway shutting down): two were accepted.
        drop(taken);
        assert_eq!(sent.await.unwrap(), 2);
    }

    #[tokio::test]
    async fn a_dropped_delivery_is_not_accepted() {
        let (sink, mut queue) = inbound_queue(1);
        let sent = tokio::spawn(async move { sink.deliver(message()).await });
        drop(queue.recv().await.unwrap());
        assert_eq!(sent.await.unwrap(), Err(SinkClosed));
    }
}
