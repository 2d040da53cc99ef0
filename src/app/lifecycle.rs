//! How `run` and `serve` end: on Ctrl-C or SIGTERM (a graceful stop, bounded in time; a second
//! signal stops at once), when the store stops taking writes (exit 2 with the cause), or,
//! for `run`, when every message has its fate.

use super::job::{JobError, Running, Summary};
use std::time::Duration;
use tokio::time::Instant;

/// The longest a graceful stop may take, from the signal to the exit: trees in flight get
/// most of it ([`DRAIN_TIMEOUT`]), the last writes, the session's counters and the report
/// what the pipeline keeps after the drain, the alerts' last sends and the async runtime's
/// shutdown the last [`EXIT_SHARE`]. Past it the process exits anyway (as safe as a crash:
/// the next start continues).
pub const STOP_TIMEOUT: Duration = StopBounds::DEFAULT.total;

/// The share of [`STOP_TIMEOUT`] that trees in flight may take to finish.
pub const DRAIN_TIMEOUT: Duration = StopBounds::DEFAULT.trees;

/// The end of [`STOP_TIMEOUT`] kept for what follows the pipeline's stop: the alerts' last
/// sends and the async runtime's shutdown.
pub const EXIT_SHARE: Duration = crate::config::EXIT_SHARE;

pub use crate::config::StopBounds;

/// Exit code after a second signal, as a shell reports a process stopped by SIGINT.
const INTERRUPTED: i32 = 130;

/// Ctrl-C and SIGTERM, installed at once (a signal right after start-up still stops
/// gracefully).
pub struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers; must run inside the tokio runtime.
    pub fn install() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// Completes on the next Ctrl-C or SIGTERM.
    pub async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }

    /// From now on, the next signal stops the process at once (exit 130). Everything that
    /// counts is durable already, so this is as safe as a crash.
    pub fn exit_on_next(mut self) {
        tokio::spawn(async move {
            self.next().await;
            super::console::say("INFO", "stopping at once");
            std::process::exit(INTERRUPTED);
        });
    }
}

/// What ended the wait of `run` or `serve`.
pub enum Ending {
    /// Every message has its fate (`run` only).
    Finished,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The store refused every write for its whole bound.
    StoreFailed(String),
}

/// Waits for a signal or a store failure, whichever comes first.
pub async fn interrupted_or_failed(signals: &mut Signals, running: &dyn Running) -> Ending {
    tokio::select! {
        () = signals.next() => Ending::Interrupted,
        failure = running.store_failed() => Ending::StoreFailed(failure.to_string()),
    }
}

/// Stops `running` gracefully so that the process can exit by `deadline` (the signal plus
/// `bounds.total`): trees in flight finish (at most `bounds.trees`), the last writes are
/// committed, and the report is read if `report` asks for it (`serve` prints none), all
/// [`EXIT_SHARE`] before `deadline`. An error says why the stop could not finish: the store
/// failed, or the time ran out.
pub async fn stop(
    running: Box<dyn Running>,
    deadline: Instant,
    bounds: StopBounds,
    report: bool,
) -> Result<Option<Box<dyn Summary>>, JobError> {
    let by = deadline.checked_sub(EXIT_SHARE).unwrap_or(deadline);
    let failed = running.store_failed();
    let stop = running.stop(by, bounds.trees, report);
    tokio::select! {
        stopped = tokio::time::timeout_at(by, stop) => match stopped {
            Ok(stopped) => stopped,
            Err(_) => Err(JobError::Late(bounds.total.as_secs())),
        },
        failure = failed => Err(JobError::StoreFailed(failure)),
    }
}
