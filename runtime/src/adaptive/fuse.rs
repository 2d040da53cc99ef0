//! The configuration's retry fuse, as the breaker for everything (`operations.md`,
//! "Breakers"): over its window it counts every finished tree and the failed ones; at
//! `min_samples` and a failed share of `threshold` it opens and every due retry is held (never
//! dropped) while new messages keep flowing; after half a window it is half-open and releases
//! a share of the held retries that rises from 10% to 100% over the other half; a failed share
//! at `threshold` during that ramp opens it again; then it is closed. So a fuse that opened
//! once holds retries back about one window, as long as its failures count in the rate.
//!
//! It does not open in its first window: a process that has run for less than a window has
//! seen its fast failures before its slow successes (a malformed order fails at parsing,
//! a good one is acked after its write), not its failure rate.
//!
//! The failure rate the rules see (`signals.fail_rate`) is measured over the same window, in
//! ten slots, whatever the fuse's state.

use std::time::Duration;

use tokio::time::Instant;

use super::breaker::{Breaker, BreakerLimits, BreakerState};
use crate::topology::{FuseConfig, MessageId};

/// The fuse's name where breakers are reported (`rebound_breaker_state{breaker="fuse"}`, the
/// report's breakers).
pub const FUSE: &str = "fuse";

const SLOTS: u32 = 10;

/// Finished trees (acked and failed) over a sliding window, in `SLOTS` slots.
#[derive(Clone, Debug)]
pub struct FailWindow {
    slots: [(u64, u64); SLOTS as usize],
    width: Duration,
    current: usize,
    current_start: Instant,
}

impl FailWindow {
    /// A window of length `window` starting at `now`.
    pub fn new(window: Duration, now: Instant) -> FailWindow {
        FailWindow {
            slots: [(0, 0); SLOTS as usize],
            width: (window / SLOTS).max(Duration::from_millis(1)),
            current: 0,
            current_start: now,
        }
    }

    fn advance(&mut self, now: Instant) {
        if now < self.current_start + self.width {
            return;
        }
        let steps = (now - self.current_start).as_nanos() / self.width.as_nanos();
        if steps >= u128::from(SLOTS) {
            self.slots = [(0, 0); SLOTS as usize];
        } else {
            for _ in 0..steps {
                self.current = (self.current + 1) % SLOTS as usize;
                self.slots[self.current] = (0, 0);
            }
        }
        self.current_start += self.width * (steps.min(u128::from(u32::MAX)) as u32);
    }

    /// Records `acked` and `failed` finished trees at `now`.
    pub fn record(&mut self, now: Instant, acked: u64, failed: u64) {
        self.advance(now);
        let slot = &mut self.slots[self.current];
        slot.0 += acked;
        slot.1 += failed;
    }

    /// (acked, failed) over the window ending at `now`.
    pub fn totals(&mut self, now: Instant) -> (u64, u64) {
        self.advance(now);
        self.slots
            .iter()
            .fold((0, 0), |(a, f), (sa, sf)| (a + sa, f + sf))
    }

    /// Failed / finished over the window (0 when nothing finished).
    pub fn fail_rate(&mut self, now: Instant) -> f64 {
        let (acked, failed) = self.totals(now);
        let total = acked + failed;
        if total == 0 {
            0.0
        } else {
            failed as f64 / total as f64
        }
    }
}

/// The fuse: a [`Breaker`] over every finished tree, with half the configuration's window as
/// its cool-down and half as its ramp; off (`fuse: off`) it never holds a retry back.
#[derive(Debug)]
pub struct Fuse {
    rate: FailWindow,
    breaker: Option<Breaker>,
    /// The end of its first window: it may open from then on.
    judges_from: Instant,
}

/// The breaker's limits for a fuse configuration.
pub fn fuse_limits(cfg: &FuseConfig) -> BreakerLimits {
    BreakerLimits {
        open_at: Some(cfg.threshold),
        open_on_heat: None,
        min_samples: cfg.min_samples.max(1),
        window: cfg.window,
        cool_down: cfg.window / 2,
        ramp: cfg.window / 2,
    }
}

impl Fuse {
    /// A closed fuse (or one that is off) at `now`.
    pub fn new(cfg: &FuseConfig, now: Instant) -> Fuse {
        Fuse {
            rate: FailWindow::new(cfg.window, now),
            breaker: cfg.enabled.then(|| Breaker::new(fuse_limits(cfg), now)),
            judges_from: now + cfg.window,
        }
    }

    /// `acked` and `failed` finished trees at `now`.
    pub fn record(&mut self, now: Instant, acked: u64, failed: u64) {
        if acked + failed == 0 {
            return;
        }
        self.rate.record(now, acked, failed);
        let may_open = now >= self.judges_from;
        if let Some(b) = &mut self.breaker {
            for _ in 0..failed {
                b.record_sample(true, now, may_open);
            }
            for _ in 0..acked {
                b.record_sample(false, now, may_open);
            }
        }
    }

    /// Failed / finished over the window (`signals.fail_rate`).
    pub fn fail_rate(&mut self, now: Instant) -> f64 {
        self.rate.fail_rate(now)
    }

    /// Where it stands at `now` (closed when it is off).
    pub fn state(&mut self, now: Instant) -> BreakerState {
        self.breaker
            .as_mut()
            .map_or(BreakerState::Closed, |b| b.state(now))
    }

    /// Whether the due retry `id` may fire at `now` (half-open: as the ramp's share allows).
    pub fn admit(&mut self, id: &MessageId, now: Instant) -> bool {
        self.breaker.as_mut().is_none_or(|b| b.admit(id, now))
    }

    /// The breaker, for the report and the metrics (`None` when the fuse is off).
    pub fn breaker(&mut self) -> Option<&mut Breaker> {
        self.breaker.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> MessageId {
        MessageId::from(format!("m{n}").as_str())
    }

    fn cfg() -> FuseConfig {
        FuseConfig {
            enabled: true,
            window: Duration::from_secs(10),
            threshold: 0.5,
            min_samples: 10,
        }
    }

    #[test]
    fn the_rate_slides_with_the_window() {
        let t0 = Instant::now();
        let mut fuse = Fuse::new(&cfg(), t0);
        fuse.record(t0, 2, 10);
        assert!((fuse.fail_rate(t0) - 10.0 / 12.0).abs() < 1e-9);
        let later = t0 + Duration::from_secs(5);
        fuse.record(later, 12, 0);
        assert!((fuse.fail_rate(later) - 10.0 / 24.0).abs() < 1e-9);
        // Once the failures slide out of the window only the successes remain.
        assert_eq!(fuse.fail_rate(t0 + Duration::from_secs(11)), 0.0);
        assert_eq!(fuse.rate.totals(t0 + Duration::from_secs(60)), (0, 0));
    }

    #[test]
    fn the_fuse_opens_holds_half_a_window_ramps_the_other_half_and_closes() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut fuse = Fuse::new(&cfg(), t0 - Duration::from_secs(10));
        fuse.record(t0, 2, 5);
        assert_eq!(fuse.state(t0), BreakerState::Closed, "too few samples");
        fuse.record(t0, 0, 5);
        assert_eq!(fuse.state(t0), BreakerState::Open);
        assert!(!fuse.admit(&id(0), t0 + Duration::from_millis(4900)));
        let half = t0 + Duration::from_secs(5);
        assert_eq!(fuse.state(half), BreakerState::HalfOpen);
        // Half-open at its start: one retry in ten.
        let admitted = (0..100).filter(|i| fuse.admit(&id(*i), half)).count();
        assert_eq!(admitted, 10);
        let closed = t0 + Duration::from_secs(10);
        assert_eq!(fuse.state(closed), BreakerState::Closed);
        assert!(fuse.admit(&id(0), closed));
        let entered: Vec<_> = fuse.breaker().unwrap().history().to_vec();
        assert_eq!(
            entered,
            [
                BreakerState::Open,
                BreakerState::HalfOpen,
                BreakerState::Closed
            ]
        );
    }

    #[test]
    fn failures_during_the_ramp_open_it_again() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut fuse = Fuse::new(&cfg(), t0 - Duration::from_secs(10));
        fuse.record(t0, 0, 10);
        let ramp = t0 + Duration::from_secs(7);
        assert_eq!(fuse.state(ramp), BreakerState::HalfOpen);
        fuse.record(ramp, 4, 6);
        assert_eq!(fuse.state(ramp), BreakerState::Open);
    }

    #[test]
    fn in_its_first_window_it_counts_but_does_not_open() {
        let t0 = Instant::now();
        let mut fuse = Fuse::new(&cfg(), t0);
        fuse.record(t0 + Duration::from_secs(1), 0, 50);
        assert_eq!(
            fuse.state(t0 + Duration::from_secs(1)),
            BreakerState::Closed
        );
        assert_eq!(fuse.fail_rate(t0 + Duration::from_secs(1)), 1.0);
        // A window on, the failures still in it open it at the next sample.
        let judged = t0 + Duration::from_secs(10);
        fuse.record(judged, 0, 1);
        assert_eq!(fuse.state(judged), BreakerState::Open);
    }

    #[test]
    fn a_fuse_that_is_off_never_holds_a_retry() {
        let t0 = Instant::now();
        let mut fuse = Fuse::new(
            &FuseConfig {
                enabled: false,
                ..cfg()
            },
            t0,
        );
        fuse.record(t0, 0, 1000);
        assert_eq!(fuse.state(t0), BreakerState::Closed);
        assert!(fuse.admit(&id(0), t0));
        assert!(fuse.breaker().is_none());
        assert_eq!(fuse.fail_rate(t0), 1.0);
    }
}
