//! A channel's receive loop, kept running: one that fails is started again after a pause
//! that doubles up to a minute, unless the platform rejected its credentials; that channel
//! stays stopped (an error in the log names it) and the others go on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nanocrab_channels::{Channel, ChannelError, InboundSink};
use tokio_util::sync::CancellationToken;

use crate::status::{ChannelState, Status};

const FIRST_RESTART: Duration = Duration::from_secs(1);
const MAX_RESTART: Duration = Duration::from_secs(60);

/// Runs `channel` until `shutdown`, starting it again when it fails.
pub(crate) async fn supervise(
    channel: Arc<dyn Channel>,
    sink: InboundSink,
    shutdown: CancellationToken,
    status: Arc<Status>,
) {
    let (name, account) = (channel.name().to_owned(), channel.account().to_owned());
    let set_state = |state| {
        if let Some(channel) = status.channel(&name, &account) {
            channel.set_state(state);
        }
    };
    let mut pause = FIRST_RESTART;
    loop {
        set_state(ChannelState::Running);
        let started = Instant::now();
        let result = channel.run(sink.clone(), shutdown.clone()).await;
        if shutdown.is_cancelled() {
            set_state(ChannelState::Stopped);
            return;
        }
        let error = match result {
            Ok(()) => "stopped receiving on its own".to_owned(),
            Err(err @ ChannelError::Unauthorized { .. }) => {
                tracing::error!(channel = %name, %account, "{err}; the channel stays stopped until the gateway restarts");
                set_state(ChannelState::Unauthorized {
                    error: err.to_string(),
                });
                return;
            }
            Err(
                err @ (ChannelError::Unsupported { .. }
                | ChannelError::File { .. }
                | ChannelError::Api { .. }
                | ChannelError::Rejected { .. }
                | ChannelError::Transport { .. }
                | ChannelError::TooLarge { .. }),
            ) => err.to_string(),
        };
        // A channel that ran for a while before failing starts over with a short pause.
        if started.elapsed() > MAX_RESTART {
            pause = FIRST_RESTART;
        }
        tracing::warn!(channel = %name, %account, "{error}; starting it again in {}s", pause.as_secs());
        set_state(ChannelState::Restarting { error });
        tokio::select! {
            () = shutdown.cancelled() => {
                set_state(ChannelState::Stopped);
                return;
            }
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(MAX_RESTART);
    }
}
