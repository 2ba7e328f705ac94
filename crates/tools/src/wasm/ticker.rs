//! Wall time for guests: wasmtime's epoch interruption needs someone to advance the engine's
//! epoch. One thread does it for all tools, and only while a call is running, so an idle
//! gateway does not wake up for nothing.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use wasmtime::Engine;

/// The epoch's period: the granularity of the wall-time limits.
pub const TICK: Duration = Duration::from_millis(10);

#[derive(Default)]
struct State {
    running: usize,
    stopped: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

pub struct Ticker {
    shared: Arc<Shared>,
}

/// A call in progress; the ticker runs while one exists.
pub struct Running {
    shared: Arc<Shared>,
}

impl Ticker {
    pub fn start(engine: Engine) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("nanocrab-wasm-epoch".into())
            .spawn(move || tick(&engine, &thread_shared))?;
        Ok(Self { shared })
    }

    pub fn running(&self) -> Running {
        let mut state = lock(&self.shared);
        state.running += 1;
        drop(state);
        self.shared.wake.notify_all();
        Running {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Epoch ticks that make up `timeout_ms`, rounded up, plus one: the tick in progress when
    /// the call starts may end at once.
    pub fn ticks(timeout_ms: u64) -> u64 {
        let tick_ms = u64::try_from(TICK.as_millis()).unwrap_or(u64::MAX).max(1);
        timeout_ms.div_ceil(tick_ms) + 1
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        lock(&self.shared).stopped = true;
        self.shared.wake.notify_all();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.running = state.running.saturating_sub(1);
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn tick(engine: &Engine, shared: &Shared) {
    loop {
        let mut state = lock(shared);
        while state.running == 0 && !state.stopped {
            state = shared
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.stopped {
            return;
        }
        drop(state);
        std::thread::sleep(TICK);
        engine.increment_epoch();
    }
}
