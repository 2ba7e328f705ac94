//! A channel receiving in the background into a real inbound queue, for the adapters'
//! behaviour tests (each test file uses the parts it needs).
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use nanocrab_channels::{Channel, ChannelError, Delivery, inbound_queue};
use nanocrab_schema::InboundMessage;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a test waits for what must happen: long enough for a loaded 2-core machine,
/// short enough to fail fast.
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Running<C> {
    pub channel: Arc<C>,
    pub queue: mpsc::Receiver<Delivery>,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<Result<(), ChannelError>>,
}

impl<C: Channel + 'static> Running<C> {
    pub fn start(channel: Arc<C>) -> Self {
        let (sink, queue) = inbound_queue(8);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let channel = Arc::clone(&channel);
            let shutdown = shutdown.clone();
            async move { channel.run(sink, shutdown).await }
        });
        Self {
            channel,
            queue,
            shutdown,
            task,
        }
    }

    /// The next delivery, not yet accepted.
    pub async fn delivery(&mut self) -> Delivery {
        tokio::time::timeout(WAIT, self.queue.recv())
            .await
            .expect("no message delivered in time")
            .expect("the channel stopped delivering")
    }

    /// The next message, accepted as the gateway would once it is journaled.
    pub async fn message(&mut self) -> InboundMessage {
        let delivery = self.delivery().await;
        let message = delivery.message.clone();
        delivery.accept();
        message
    }

    pub async fn stop(self) -> Result<(), ChannelError> {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("run did not end after shutdown")
            .unwrap()
    }
}

/// Waits until `done` holds, polling the fake's state.
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
