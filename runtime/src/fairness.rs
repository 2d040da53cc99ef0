//! Fairness between retries and new data: the [`Mixer`] (at most N retries per new message,
//! and never more than one new message ahead of a due retry) and the [`RetryFuse`] (hold
//! retries back while the recent failure rate is too high).

use std::time::Duration;

use tokio::time::Instant;

use crate::topology::{FuseConfig, RetryMix};

/// Where the next delivery should come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// A due retry.
    Retry,
    /// A new message from the spout.
    New,
}

/// Decides whose turn it is when both due retries and new messages are available.
///
/// The spout task tries `first()` and falls back to the other source when the first has
/// nothing, so with both available the pattern is `N` retries, one new message, `N` retries…
/// and with only one available it flows at full speed.
#[derive(Clone, Debug)]
pub struct Mixer {
    retries_per_new: u32,
    since_new: u32,
}

impl Mixer {
    /// A mixer for `mix`.
    pub fn new(mix: RetryMix) -> Mixer {
        Mixer {
            retries_per_new: mix.retries_per_new,
            since_new: 0,
        }
    }

    /// The source to try first, then the other.
    pub fn order(&self) -> [Turn; 2] {
        if self.since_new < self.retries_per_new {
            [Turn::Retry, Turn::New]
        } else {
            [Turn::New, Turn::Retry]
        }
    }

    /// Records a delivery from `turn`.
    pub fn took(&mut self, turn: Turn) {
        match turn {
            Turn::Retry => self.since_new = self.since_new.saturating_add(1),
            Turn::New => self.since_new = 0,
        }
    }
}

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

    /// When the oldest slot next drops out of the window.
    pub fn next_slide(&self) -> Instant {
        self.current_start + self.width
    }
}

/// The retry fuse. Open while, over the window, at least `min_samples` trees finished and the
/// failed share is at least `threshold`; retries are then held in the queue (never dropped)
/// while new messages keep flowing, until the rate falls back under the threshold (or the
/// window empties, which happens by itself when nothing flows).
#[derive(Clone, Debug)]
pub struct RetryFuse {
    cfg: FuseConfig,
    window: FailWindow,
}

impl RetryFuse {
    /// A closed fuse.
    pub fn new(cfg: FuseConfig, now: Instant) -> RetryFuse {
        RetryFuse {
            cfg,
            window: FailWindow::new(cfg.window, now),
        }
    }

    /// Records finished trees.
    pub fn record(&mut self, now: Instant, acked: u64, failed: u64) {
        if acked + failed > 0 {
            self.window.record(now, acked, failed);
        }
    }

    /// Failed / finished over the window (0 when nothing finished).
    pub fn fail_rate(&mut self, now: Instant) -> f64 {
        let (acked, failed) = self.window.totals(now);
        let total = acked + failed;
        if total == 0 {
            0.0
        } else {
            failed as f64 / total as f64
        }
    }

    /// Whether retries are held back now.
    pub fn is_open(&mut self, now: Instant) -> bool {
        if !self.cfg.enabled {
            return false;
        }
        let (acked, failed) = self.window.totals(now);
        let total = acked + failed;
        total >= self.cfg.min_samples.max(1) && failed as f64 >= self.cfg.threshold * total as f64
    }

    /// When the state may next change without new records (the window slides).
    pub fn next_check(&self) -> Instant {
        self.window.next_slide()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixer_alternates_by_ratio() {
        let mut m = Mixer::new(RetryMix { retries_per_new: 3 });
        let mut seq = String::new();
        for _ in 0..8 {
            let t = m.order()[0];
            m.took(t);
            seq.push(if t == Turn::Retry { 'R' } else { 'N' });
        }
        assert_eq!(seq, "RRRNRRRN");
        let mut zero = Mixer::new(RetryMix { retries_per_new: 0 });
        assert_eq!(zero.order()[0], Turn::New);
        zero.took(Turn::Retry);
        assert_eq!(zero.order()[0], Turn::New);
    }

    #[test]
    fn fuse_opens_and_recovers_as_the_window_slides() {
        let t0 = Instant::now();
        let cfg = FuseConfig {
            enabled: true,
            window: Duration::from_secs(10),
            threshold: 0.5,
            min_samples: 10,
        };
        let mut fuse = RetryFuse::new(cfg, t0);
        fuse.record(t0, 2, 5);
        assert!(!fuse.is_open(t0), "too few samples");
        fuse.record(t0, 0, 5);
        assert!(fuse.is_open(t0));
        assert!((fuse.fail_rate(t0) - 10.0 / 12.0).abs() < 1e-9);
        let later = t0 + Duration::from_secs(5);
        fuse.record(later, 20, 0);
        assert!(!fuse.is_open(later));
        // Once the failures slide out of the window only the successes remain.
        let much_later = t0 + Duration::from_secs(11);
        assert_eq!(fuse.fail_rate(much_later), 0.0);
        assert!(fuse.next_check() > much_later);
        assert_eq!(fuse.window.totals(t0 + Duration::from_secs(60)), (0, 0));
    }
}
