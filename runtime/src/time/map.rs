//! [`TimeMap`]: monotonic instants to wall-clock timestamps and back.

use std::time::Duration;

use tokio::time::Instant;

use super::{TimeSource, Timestamp};

/// Maps the runtime's monotonic instants to the store's wall-clock timestamps and back, through
/// one pair of readings taken at creation. Within the process the mapping follows the
/// monotonic clock (a stepped wall clock does not move due times); across processes the
/// timestamps are plain Unix milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct TimeMap {
    base: Instant,
    base_ms: u64,
}

impl TimeMap {
    /// Reads `time` once.
    pub fn new(time: &dyn TimeSource) -> TimeMap {
        TimeMap {
            base: time.now(),
            base_ms: time.wall().as_millis(),
        }
    }

    /// The timestamp of `at`, rounded up to the millisecond: a due time never moves earlier.
    /// Clamped at [`Timestamp::MAX`], never wrapped.
    pub fn due_timestamp(&self, at: Instant) -> Timestamp {
        match at.checked_duration_since(self.base) {
            Some(after) => {
                let ms = u64::try_from(after.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
                let ms = self
                    .base_ms
                    .saturating_add(ms)
                    .min(Timestamp::MAX.as_millis());
                Timestamp::from_millis(ms)
            }
            None => {
                let before = (self.base - at).as_millis() as u64;
                Timestamp::from_millis(self.base_ms.saturating_sub(before))
            }
        }
    }

    /// The timestamp of `at`, rounded down: "now" never runs ahead.
    pub fn now_timestamp(&self, at: Instant) -> Timestamp {
        match at.checked_duration_since(self.base) {
            Some(after) => {
                Timestamp::from_millis(self.base_ms.saturating_add(after.as_millis() as u64))
            }
            None => {
                let before = (self.base - at).as_nanos().div_ceil(1_000_000) as u64;
                Timestamp::from_millis(self.base_ms.saturating_sub(before))
            }
        }
    }

    /// The instant of `ts`. A timestamp before this process started maps to the base instant,
    /// which has passed: it is due at once.
    pub fn instant(&self, ts: Timestamp) -> Instant {
        let ms = ts.as_millis();
        if ms >= self.base_ms {
            let after = Duration::from_millis(ms - self.base_ms);
            // Far enough never to come; an Instant that cannot hold it waits a century.
            self.base
                .checked_add(after)
                .unwrap_or_else(|| self.base + Duration::from_secs(100 * 365 * 86_400))
        } else {
            self.base
                .checked_sub(Duration::from_millis(self.base_ms - ms))
                .unwrap_or(self.base)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::TokioTime;

    #[tokio::test]
    async fn a_due_time_past_every_clock_is_clamped_not_wrapped() {
        let time = TokioTime::new();
        let map = TimeMap::new(&time);
        let far = time.now() + Duration::from_millis(i64::MAX as u64); // the longest retry delay
        assert_eq!(map.due_timestamp(far), Timestamp::MAX);
        assert!(map.instant(Timestamp::MAX) > time.now());
    }

    #[tokio::test(start_paused = true)]
    async fn due_times_round_up_and_now_rounds_down() {
        let time = TokioTime::new();
        let map = TimeMap::new(&time);
        let t = time.now() + Duration::from_micros(1500);
        let due = map.due_timestamp(t);
        let now = map.now_timestamp(t);
        assert_eq!(due.as_millis() - now.as_millis(), 1);
        assert!(map.instant(due) >= t, "a due time never maps earlier");
        assert!(map.instant(now) <= t, "now never maps later");
        // Long before the process started: due at once.
        assert!(map.instant(Timestamp::from_millis(5)) <= time.now());
    }
}
