//! [`TimeScale`]: `--time-scale F`, the only scale. See `policy.rs` for where it converts.

use std::fmt;
use std::time::Duration;

/// A time scale that is not a finite number in the accepted range.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("the time scale must be a number between 0.001 and 1000000, got {0}")]
pub struct InvalidTimeScale(pub f64);

/// How many times faster than the rules' time the runtime runs (`--time-scale F`).
///
/// ```
/// use rebound_runtime::time::TimeScale;
/// use std::time::Duration;
/// let f = TimeScale::new(100.0).unwrap();
/// assert_eq!(f.to_real(Duration::from_secs(30)), Duration::from_millis(300));
/// assert_eq!(f.to_rules(Duration::from_millis(300)), Duration::from_secs(30));
/// assert!(TimeScale::new(0.0).is_err());
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct TimeScale(f64);

impl TimeScale {
    /// Real time: the rules' delays are waited as written.
    pub const REAL: TimeScale = TimeScale(1.0);

    /// A scale of `factor`, between 0.001 and 1,000,000.
    pub fn new(factor: f64) -> Result<TimeScale, InvalidTimeScale> {
        if factor.is_finite() && (0.001..=1e6).contains(&factor) {
            Ok(TimeScale(factor))
        } else {
            Err(InvalidTimeScale(factor))
        }
    }

    /// The factor F.
    pub fn factor(self) -> f64 {
        self.0
    }

    /// A duration in the rules' time, as real time (divided by F, to the nearest nanosecond).
    pub fn to_real(self, rules: Duration) -> Duration {
        Self::nanos(rules.as_nanos() as f64 / self.0)
    }

    /// A real duration, in the rules' time (multiplied by F, to the nearest nanosecond).
    pub fn to_rules(self, real: Duration) -> Duration {
        Self::nanos(real.as_nanos() as f64 * self.0)
    }

    fn nanos(n: f64) -> Duration {
        // Integer nanoseconds, so that 100 ms at 100× is exactly 1 ms.
        if n >= u64::MAX as f64 {
            Duration::MAX
        } else {
            Duration::from_nanos(n.round() as u64)
        }
    }
}

impl Default for TimeScale {
    fn default() -> Self {
        TimeScale::REAL
    }
}

impl fmt::Debug for TimeScale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimeScale({})", self.0)
    }
}

impl fmt::Display for TimeScale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}×", self.0)
    }
}
