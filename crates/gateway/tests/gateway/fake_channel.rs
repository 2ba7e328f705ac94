//! An in-memory chat platform: the test pushes inbound messages through the gateway's sink,
//! and reads what the gateway sent and how often it showed "typing…". Downloads of files
//! whose id starts with `held` wait until the test lets them through, which holds a turn at
//! a known point without any timing.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use nanocrab_channels::{
    Channel, ChannelCapabilities, ChannelError, InboundSink, SentMessage, SinkClosed,
};
use nanocrab_schema::{ChatRef, InboundMessage, Media, OutboundMessage};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

pub struct FakeChannel {
    name: String,
    account: String,
    capabilities: ChannelCapabilities,
    /// The gateway's sink while `run` runs.
    sink: watch::Sender<Option<InboundSink>>,
    sent: watch::Sender<Vec<OutboundMessage>>,
    typing: AtomicUsize,
    files: Mutex<HashMap<String, Vec<u8>>>,
    /// What the next calls of `run` return at once, before one runs until the shutdown.
    failures: Mutex<VecDeque<ChannelError>>,
    /// What the next calls of `send` return instead of sending, one each.
    send_failures: Mutex<VecDeque<ChannelError>>,
    runs: AtomicUsize,
    /// Permits for held downloads.
    gate: Semaphore,
    /// Held downloads waiting now, and the most there ever were at once.
    held: watch::Sender<usize>,
    peak_held: AtomicUsize,
}

impl FakeChannel {
    pub fn new(name: &str, account: &str) -> Self {
        Self {
            name: name.to_owned(),
            account: account.to_owned(),
            capabilities: ChannelCapabilities {
                typing: true,
                media: true,
                threads: true,
                ..ChannelCapabilities::default()
            },
            sink: watch::Sender::new(None),
            sent: watch::Sender::new(Vec::new()),
            typing: AtomicUsize::new(0),
            files: Mutex::new(HashMap::new()),
            failures: Mutex::new(VecDeque::new()),
            send_failures: Mutex::new(VecDeque::new()),
            runs: AtomicUsize::new(0),
            gate: Semaphore::new(0),
            held: watch::Sender::new(0),
            peak_held: AtomicUsize::new(0),
        }
    }

    /// The next `run`s fail with these errors, one each.
    pub fn fail_runs(&self, errors: Vec<ChannelError>) {
        self.failures.lock().unwrap().extend(errors);
    }

    /// The next `send`s fail with these errors, one each.
    pub fn fail_sends(&self, errors: Vec<ChannelError>) {
        self.send_failures.lock().unwrap().extend(errors);
    }

    pub fn add_file(&self, file_id: &str, bytes: &[u8]) {
        self.files
            .lock()
            .unwrap()
            .insert(file_id.to_owned(), bytes.to_vec());
    }

    /// Hands `message` to the gateway once it listens, and waits until it is accepted.
    pub async fn deliver(&self, message: InboundMessage) -> Result<(), SinkClosed> {
        let sink = self
            .sink
            .subscribe()
            .wait_for(Option::is_some)
            .await
            .unwrap()
            .clone()
            .unwrap();
        sink.deliver(message).await
    }

    /// Waits until at least `count` messages were sent, and returns all sent so far.
    pub async fn wait_for_sent(&self, count: usize) -> Vec<OutboundMessage> {
        self.sent
            .subscribe()
            .wait_for(|sent| sent.len() >= count)
            .await
            .unwrap()
            .clone()
    }

    pub fn sent(&self) -> Vec<OutboundMessage> {
        self.sent.borrow().clone()
    }

    /// Waits until `count` held downloads are waiting.
    pub async fn wait_for_held(&self, count: usize) {
        self.held
            .subscribe()
            .wait_for(|held| *held == count)
            .await
            .unwrap();
    }

    /// Lets `count` held downloads through.
    pub fn release(&self, count: usize) {
        self.gate.add_permits(count);
    }

    pub fn peak_held(&self) -> usize {
        self.peak_held.load(Ordering::SeqCst)
    }

    pub fn typing_calls(&self) -> usize {
        self.typing.load(Ordering::SeqCst)
    }

    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Channel for FakeChannel {
    fn name(&self) -> &str {
        &self.name
    }

    fn account(&self) -> &str {
        &self.account
    }

    fn capabilities(&self) -> ChannelCapabilities {
        self.capabilities
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let failure = self.failures.lock().unwrap().pop_front();
        if let Some(error) = failure {
            return Err(error);
        }
        self.sink.send_replace(Some(sink));
        shutdown.cancelled().await;
        self.sink.send_replace(None);
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let failure = self.send_failures.lock().unwrap().pop_front();
        if let Some(error) = failure {
            return Err(error);
        }
        let mut id = 0;
        self.sent.send_modify(|sent| {
            sent.push(message.clone());
            id = sent.len();
        });
        Ok(SentMessage {
            message_ids: vec![id.to_string()],
        })
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), ChannelError> {
        self.typing.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn edit(
        &self,
        _chat: &ChatRef,
        _message_id: &str,
        _text: &str,
    ) -> Result<(), ChannelError> {
        Err(ChannelError::Unsupported {
            channel: self.name.clone(),
            capability: "edit",
        })
    }

    async fn react(
        &self,
        _chat: &ChatRef,
        _message_id: &str,
        _emoji: &str,
    ) -> Result<(), ChannelError> {
        Err(ChannelError::Unsupported {
            channel: self.name.clone(),
            capability: "react",
        })
    }

    async fn download(&self, media: &Media) -> Result<Vec<u8>, ChannelError> {
        if media.file_id.starts_with("held") {
            self.held.send_modify(|held| {
                *held += 1;
                self.peak_held.fetch_max(*held, Ordering::SeqCst);
            });
            self.gate.acquire().await.unwrap().forget();
            self.held.send_modify(|held| *held -= 1);
        }
        self.files
            .lock()
            .unwrap()
            .get(&media.file_id)
            .cloned()
            .ok_or_else(|| ChannelError::Api {
                channel: self.name.clone(),
                method: "getFile".to_owned(),
                status: Some(400),
                message: format!("no file {}", media.file_id),
            })
    }
}
