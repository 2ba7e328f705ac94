//! The pause between tries of a platform call that failed for now.

use std::time::Duration;

const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Exponential backoff from the first pause, doubling up to 30 s, back to the first after a
/// success.
#[derive(Debug)]
pub(crate) struct Backoff {
    first: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration) -> Self {
        Self { first, next: first }
    }

    pub fn next(&mut self) -> Duration {
        let pause = self.next;
        self.next = (pause * 2).min(MAX_BACKOFF);
        pause
    }

    pub fn reset(&mut self) {
        self.next = self.first;
    }
}
