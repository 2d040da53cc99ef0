//! Time, owned by the runtime: a [`Timestamp`] newtype and the [`Clock`] trait.
//!
//! Everything in the runtime that needs "now" or needs to wait asks a [`Clock`]; nothing else
//! calls `Instant::now()` or `SystemTime::now()`. Three clocks exist:
//!
//! - [`WallClock::real`]: Unix wall time in milliseconds.
//! - [`WallClock::scaled`]: `--time-scale F`. Virtual now is `unix_ms × F`, so delays run F times
//!   faster *and* virtual time stays continuous across restarts. That matters because due times
//!   are persisted: a retry due at virtual `t` before a crash is still due at `t` afterwards.
//!   (Restarting the same data directory with a different `F` moves virtual time by a factor;
//!   keep one scale per data directory.)
//! - [`ManualClock`]: moves only when a test says so; sleepers wake when it passes their deadline.
//!
//! Wall time (not a monotonic `Instant`) is the base on purpose: due times must mean the same
//! thing in the next process. A wall clock stepped backwards only makes retries late, never early.

use std::fmt;
use std::future::Future;
use std::ops::{Add, Sub};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// A point in (possibly virtual) time: milliseconds since the Unix epoch, as the clock counts.
///
/// ```
/// use rebound_runtime::clock::Timestamp;
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

/// What [`Clock::sleep_until`] returns: a boxed, `'static` future, so clocks can be trait objects.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of (possibly virtual) time that can also wait.
///
/// The sleeping methods need a tokio runtime for the wall clocks; the manual clock needs none.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now, in this clock's time.
    fn now(&self) -> Timestamp;

    /// Completes once [`Clock::now`] is at or past `deadline` (immediately if it already is).
    fn sleep_until(&self, deadline: Timestamp) -> Sleep;

    /// Completes after `d` of this clock's time.
    fn sleep(&self, d: Duration) -> Sleep {
        self.sleep_until(self.now() + d)
    }
}

/// The clock handle the runtime passes around.
pub type SharedClock = Arc<dyn Clock>;

/// A time scale that is not a finite number above zero.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("time scale must be a finite number between 0.000001 and 1000000, got {0}")]
pub struct InvalidScale(pub f64);

/// Unix wall time, optionally sped up by a factor (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WallClock {
    /// The scale in millionths, so virtual time is computed in exact integer arithmetic.
    scale_micros: u64,
}

impl WallClock {
    /// Real time: `now()` is Unix milliseconds.
    pub fn real() -> Self {
        WallClock {
            scale_micros: 1_000_000,
        }
    }

    /// Virtual time running `factor` times faster than real time (`--time-scale`).
    ///
    /// ```
    /// use rebound_runtime::clock::WallClock;
    /// assert!(WallClock::scaled(100.0).is_ok());
    /// assert!(WallClock::scaled(0.0).is_err());
    /// ```
    pub fn scaled(factor: f64) -> Result<Self, InvalidScale> {
        if !factor.is_finite() || !(1e-6..=1e6).contains(&factor) {
            return Err(InvalidScale(factor));
        }
        Ok(WallClock {
            scale_micros: (factor * 1e6).round() as u64,
        })
    }

    /// The speed-up factor.
    pub fn factor(&self) -> f64 {
        self.scale_micros as f64 / 1e6
    }

    fn now_at(scale_micros: u64) -> Timestamp {
        // Before 1970 only on a badly broken machine; treat it as the epoch.
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let virtual_ms = since.as_nanos() * u128::from(scale_micros) / 1_000_000_000_000;
        Timestamp(u64::try_from(virtual_ms).unwrap_or(u64::MAX))
    }
}

impl Clock for WallClock {
    fn now(&self) -> Timestamp {
        Self::now_at(self.scale_micros)
    }

    fn sleep_until(&self, deadline: Timestamp) -> Sleep {
        let scale_micros = self.scale_micros;
        Box::pin(async move {
            // Re-check after every wake-up: the wall clock may have been stepped meanwhile.
            loop {
                let now = Self::now_at(scale_micros);
                if now >= deadline {
                    return;
                }
                let virtual_left = (deadline - now).as_micros();
                let real_left = virtual_left * 1_000_000 / u128::from(scale_micros);
                let real_left = u64::try_from(real_left).unwrap_or(u64::MAX);
                tokio::time::sleep(Duration::from_micros(real_left.max(1))).await;
            }
        })
    }
}

/// A clock for tests: time moves only through [`ManualClock::advance`] and [`ManualClock::set`].
///
/// Clones share the same time. Sleepers wake as soon as the time passes their deadline.
///
/// ```
/// use rebound_runtime::clock::{Clock, ManualClock, Timestamp};
/// use std::time::Duration;
/// let clock = ManualClock::new(Timestamp::from_millis(10));
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(clock.now(), Timestamp::from_millis(15));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<watch::Sender<Timestamp>>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            now: Arc::new(watch::Sender::new(start)),
        }
    }

    /// Moves time forward by `d` and wakes the sleepers that are now due.
    pub fn advance(&self, d: Duration) {
        self.now.send_modify(|now| *now = *now + d);
    }

    /// Moves time to `t`; a `t` in the past is ignored (time never runs backwards).
    pub fn set(&self, t: Timestamp) {
        self.now.send_if_modified(|now| {
            let forward = t > *now;
            if forward {
                *now = t;
            }
            forward
        });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.borrow()
    }

    fn sleep_until(&self, deadline: Timestamp) -> Sleep {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            // An error means every handle to the clock is gone: time can never reach the
            // deadline, so the sleeper waits forever, as it would on a stopped clock.
            if rx.wait_for(|now| *now >= deadline).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_far_future_fits_the_store_and_additions_saturate_there() {
        assert_eq!(Timestamp::MAX.as_millis(), i64::MAX as u64);
        let now = Timestamp::from_millis(1_800_000_000_000);
        assert_eq!(now.saturating_add(Duration::MAX), Timestamp::MAX);
        assert_eq!(
            Timestamp::MAX.saturating_add(Duration::from_millis(1)),
            Timestamp::MAX
        );
    }

    #[test]
    fn scaled_clock_runs_faster_than_real_and_stays_near_unix_times_factor() {
        let real = WallClock::real().now().as_millis();
        let scaled = WallClock::scaled(100.0).unwrap().now().as_millis();
        // Same instant, give or take a scheduling hiccup: scaled ≈ real × 100.
        let expected = real * 100;
        assert!(scaled >= expected && scaled < expected + 100 * 10_000);
    }

    #[test]
    fn invalid_scales_are_refused() {
        for f in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e7] {
            assert!(WallClock::scaled(f).is_err(), "{f}");
        }
    }

    #[test]
    fn manual_clock_never_runs_backwards() {
        let c = ManualClock::new(Timestamp::from_millis(100));
        c.set(Timestamp::from_millis(50));
        assert_eq!(c.now(), Timestamp::from_millis(100));
        c.set(Timestamp::from_millis(150));
        assert_eq!(c.now(), Timestamp::from_millis(150));
    }

    #[tokio::test]
    async fn manual_sleep_wakes_only_when_time_passes_the_deadline() {
        let c = ManualClock::new(Timestamp::ZERO);
        let mut sleep = tokio::spawn(c.sleep_until(Timestamp::from_millis(10)));
        c.advance(Duration::from_millis(9));
        tokio::task::yield_now().await;
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut sleep)
                .await
                .is_err()
        );
        c.advance(Duration::from_millis(1));
        sleep.await.unwrap();
    }

    #[tokio::test]
    async fn scaled_sleep_returns_once_virtual_deadline_passed() {
        let c = WallClock::scaled(1000.0).unwrap();
        let deadline = c.now() + Duration::from_millis(500); // 0.5 ms real
        c.sleep_until(deadline).await;
        assert!(c.now() >= deadline);
    }
}
