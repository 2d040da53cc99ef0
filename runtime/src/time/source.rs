//! [`TimeSource`]: monotonic and wall time as one consistent pair, from tokio's clock or a
//! test's hand.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::Timestamp;

/// Monotonic and wall-clock time, as one consistent pair.
pub trait TimeSource: Send + Sync + 'static {
    /// Monotonic now (drives timeouts and retry due times).
    fn now(&self) -> Instant;
    /// Wall-clock now (for records that outlive the process).
    fn wall(&self) -> Timestamp;
}

/// Tokio's clock, with the wall clock read once at creation and advanced by tokio's, so the
/// two agree, paused (`tokio::time::pause`) or not.
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
    fn wall(&self) -> Timestamp {
        Timestamp::from_system(self.base_wall + (Instant::now() - self.base))
    }
}

/// Time that moves only when [`ManualTime::advance`] says so: both clocks move together.
/// Cheap to clone; clones share the time.
///
/// ```
/// use rebound_runtime::time::{ManualTime, TimeSource, Timestamp};
/// use std::time::Duration;
/// let time = ManualTime::new(Timestamp::from_millis(1_000));
/// let before = time.now();
/// time.advance(Duration::from_millis(250));
/// assert_eq!(time.wall(), Timestamp::from_millis(1_250));
/// assert_eq!(time.now() - before, Duration::from_millis(250));
/// ```
#[derive(Clone, Debug)]
pub struct ManualTime {
    base: Instant,
    base_wall: Timestamp,
    passed: Arc<Mutex<Duration>>,
}

impl ManualTime {
    /// Time standing at `wall` (monotonic time starts at this moment's instant).
    pub fn new(wall: Timestamp) -> ManualTime {
        ManualTime {
            base: Instant::now(),
            base_wall: wall,
            passed: Arc::default(),
        }
    }

    /// Moves both clocks forward by `d`.
    pub fn advance(&self, d: Duration) {
        *self.passed.lock().unwrap_or_else(PoisonError::into_inner) += d;
    }

    fn passed(&self) -> Duration {
        *self.passed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TimeSource for ManualTime {
    fn now(&self) -> Instant {
        self.base + self.passed()
    }
    fn wall(&self) -> Timestamp {
        self.base_wall + self.passed()
    }
}
