//! Time, one model for the whole runtime.
//!
//! - **Monotonic time** (tokio's [`Instant`]) is what the runtime waits on: timeouts, due
//!   retries, the journal's hold. Tokio's clock, so tests can pause and advance it.
//! - **Wall time** ([`Timestamp`], Unix milliseconds) is what outlives the process: a message's
//!   first delivery, a retry's due time in the store, a dead letter's times. It means the same
//!   thing in the next process, which a monotonic instant does not.
//!
//! [`TimeSource`] gives both as one consistent pair; [`TokioTime`] derives wall time from
//! tokio's clock (paused or not), and [`ManualTime`] moves only when a test says so.
//! [`TimeMap`] converts between the two for the durable queue, and [`TimeScale`]
//! (`--time-scale F`) is the only scale: the rules keep their own time, the runtime runs in
//! real time, and the policy converts at one seam (`policy.rs`).
//!
//! Nothing outside this module reads a clock: everything else asks a [`TimeSource`] or takes
//! its times as arguments (the scheduler and the store do).

use std::fmt;
use std::ops::{Add, Sub};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod map;
mod scale;
mod source;

pub use map::TimeMap;
pub use scale::{InvalidTimeScale, TimeScale};
pub use source::{ManualTime, TimeSource, TokioTime};
pub use tokio::time::Instant;

/// Monotonic now, on tokio's clock: paused where a test pauses it, and the real clock on a
/// thread outside any runtime (the journal's). With [`TimeSource`], the only way the runtime
/// reads the time.
pub fn now() -> Instant {
    Instant::now()
}

/// A point in wall time: milliseconds since the Unix epoch.
///
/// ```
/// use rebound_runtime::time::Timestamp;
/// use std::time::Duration;
/// let t = Timestamp::from_millis(1_000);
/// assert_eq!((t + Duration::from_millis(250)).as_millis(), 1_250);
/// assert_eq!(Timestamp::from_millis(1_250) - t, Duration::from_millis(250));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The epoch itself.
    pub const ZERO: Timestamp = Timestamp(0);
    /// The far future (`i64::MAX` ms, what the store's columns hold); `due = MAX` never fires
    /// in practice.
    pub const MAX: Timestamp = Timestamp(i64::MAX as u64);

    /// A timestamp `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + d`, clamped at [`Timestamp::MAX`]; sub-millisecond parts of `d` are dropped.
    pub fn saturating_add(self, d: Duration) -> Self {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(ms).min(Self::MAX.0))
    }

    /// `self - d`, clamped at [`Timestamp::ZERO`].
    pub fn saturating_sub(self, d: Duration) -> Self {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_sub(ms))
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    /// Saturating, like [`Timestamp::saturating_add`].
    fn add(self, d: Duration) -> Timestamp {
        self.saturating_add(d)
    }
}

impl Sub<Timestamp> for Timestamp {
    type Output = Duration;
    /// Saturating, like [`Timestamp::saturating_duration_since`].
    fn sub(self, earlier: Timestamp) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

impl Timestamp {
    /// The wall clock now (for a caller with no [`TimeSource`], such as an operator's action
    /// on a store no topology runs over).
    pub fn now() -> Timestamp {
        Timestamp::from_system(SystemTime::now())
    }

    /// A wall-clock time, to the millisecond (0 before the epoch; clamped at
    /// [`Timestamp::MAX`]).
    pub fn from_system(t: SystemTime) -> Timestamp {
        let ms = t
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Timestamp::from_millis(ms.min(Timestamp::MAX.as_millis()))
    }

    /// The wall-clock time of this timestamp.
    pub fn to_system(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.as_millis())
    }
}
