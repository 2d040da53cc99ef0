//! [`TimeSource`]: the little the runtime needs to know about time.
//!
//! Deadlines and sleeps use `tokio::time`, so tests can pause and advance time
//! (`tokio::time::pause`). Records that outlive the process (a message's first delivery, a
//! dead letter's times) need wall-clock time; [`TokioTime`] derives it from tokio's clock so
//! the two agree, paused or not. The shared `Clock` of the durable runtime can implement this
//! trait.

use std::time::SystemTime;

use tokio::time::Instant;

/// Monotonic and wall-clock time, as one consistent pair.
pub trait TimeSource: Send + Sync + 'static {
    /// Monotonic now (drives timeouts and retry due times).
    fn now(&self) -> Instant;
    /// Wall-clock now (for records that outlive the process).
    fn wall(&self) -> SystemTime;
}

/// Tokio's clock, with the wall clock read once at creation and advanced by tokio's.
#[derive(Clone, Copy, Debug)]
pub struct TokioTime {
    base: Instant,
    base_wall: SystemTime,
}

impl TokioTime {
    /// Reads both clocks now. Call inside a tokio runtime (a paused one works too).
    pub fn new() -> TokioTime {
        TokioTime {
            base: Instant::now(),
            base_wall: SystemTime::now(),
        }
    }
}

impl Default for TokioTime {
    fn default() -> Self {
        Self::new()
    }
}

impl TimeSource for TokioTime {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn wall(&self) -> SystemTime {
        self.base_wall + (Instant::now() - self.base)
    }
}
