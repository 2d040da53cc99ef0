//! The one backoff of Rebound's own retries: a rules directory read again, a store write, a
//! claim round, an alert sent again, a give-up written again. A rule's `backoff:` is paced by
//! [`BackoffKind`](super::BackoffKind); this is only for the process's own work.

use std::time::Duration;

/// Waits that double from `first` up to `max`: `first`, `2·first`, `4·first`, … `max`.
///
/// ```
/// use std::time::Duration;
/// use rebound_engine::backoff::Doubling;
///
/// let ms = Duration::from_millis;
/// let d = Doubling::new(ms(10), ms(50));
/// let waits: Vec<_> = (0..=5).map(|n| d.after(n)).collect();
/// assert_eq!(waits, [ms(0), ms(10), ms(20), ms(40), ms(50), ms(50)]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doubling {
    first: Duration,
    max: Duration,
}

impl Doubling {
    /// Waits from `first`, doubling, never above `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Doubling { first, max }
    }

    /// The wait after `failures` failures in a row: none for 0, then `first · 2^(failures−1)`,
    /// at most `max`. Saturates rather than overflows, however many failures.
    pub fn after(self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 2u32.saturating_pow(failures - 1);
        self.first.saturating_mul(factor).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_never_overflows() {
        let d = Doubling::new(Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(d.after(1), Duration::from_secs(1));
        assert_eq!(d.after(6), Duration::from_secs(32));
        assert_eq!(d.after(7), Duration::from_secs(60));
        assert_eq!(d.after(u32::MAX), Duration::from_secs(60));
        let huge = Doubling::new(Duration::MAX, Duration::MAX);
        assert_eq!(huge.after(40), Duration::MAX);
    }
}
