//! Telling a stall from backpressure.
//!
//! A spout task at `max_spout_pending` emits nothing, new or retried, until one of its trees
//! finishes. Under load that happens all the time and costs nothing: the limit doing its job.
//! When no tree finishes for [`STALL_AFTER`], every slot is held by a tree that waits, usually
//! for its message timeout, and everything behind it waits too: a stall. It lasts until the
//! acker's next rotation times out a bucket of those trees (up to 1.5 × `message_timeout`
//! after they were emitted). By Little's law, the slots that trees ending in a timeout hold are
//! their rate times that wait, so a stall is what a task gets when that product passes
//! `max_spout_pending`. The [`StallWatch`] only observes; nothing about delivery changes.

use std::time::Duration;

use tokio::time::Instant;

/// A task at its limit with no tree finished for this long is stalled.
pub(crate) const STALL_AFTER: Duration = Duration::from_secs(1);

/// How often a stall's time is added to the stats while it lasts.
const COUNT_EVERY: Duration = Duration::from_secs(1);

/// What a [`StallWatch::check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing new.
    None,
    /// The task is stalled, since `since`.
    Began { since: Instant },
    /// The stall that began at `since` is over: `finished` trees came free, `timed_out` of
    /// them by a timeout.
    Ended {
        since: Instant,
        finished: u64,
        timed_out: u64,
    },
}

/// One spout task's stall state, checked once per loop pass.
#[derive(Debug, Default)]
pub(crate) struct StallWatch {
    /// At the limit, with no tree finished since.
    quiet_since: Option<Instant>,
    /// Stalled: its time is in the stats up to here.
    counted_to: Option<Instant>,
    /// A slot came free since the last check.
    freed: bool,
    finished: u64,
    timed_out: u64,
}

impl StallWatch {
    /// A tree finished: acked, or failed (`timed_out` if by its timeout).
    pub(crate) fn finished(&mut self, timed_out: bool) {
        self.freed = true;
        self.finished += 1;
        self.timed_out += u64::from(timed_out);
    }

    /// A slot came free otherwise (a dead letter was stored).
    pub(crate) fn freed(&mut self) {
        self.freed = true;
    }

    /// True while stalled.
    #[cfg(test)]
    fn is_stalled(&self) -> bool {
        self.counted_to.is_some()
    }

    /// Checks at the end of a pass; `full` says the task is running and at its limit. Returns
    /// the stall time to add to the stats, and the change.
    pub(crate) fn check(&mut self, now: Instant, full: bool) -> (Duration, Change) {
        let freed = std::mem::take(&mut self.freed);
        let finished = std::mem::take(&mut self.finished);
        let timed_out = std::mem::take(&mut self.timed_out);
        if !full || freed {
            let since = self.quiet_since.take();
            self.quiet_since = full.then_some(now);
            return match (self.counted_to.take(), since) {
                (Some(counted), Some(since)) => (
                    now.saturating_duration_since(counted),
                    Change::Ended {
                        since,
                        finished,
                        timed_out,
                    },
                ),
                _ => (Duration::ZERO, Change::None),
            };
        }
        let since = *self.quiet_since.get_or_insert(now);
        match self.counted_to {
            Some(counted) => {
                self.counted_to = Some(now);
                (now.saturating_duration_since(counted), Change::None)
            }
            None if now.saturating_duration_since(since) >= STALL_AFTER => {
                self.counted_to = Some(now);
                (now - since, Change::Began { since })
            }
            None => (Duration::ZERO, Change::None),
        }
    }

    /// When to check again if nothing else happens (while the task is at its limit).
    pub(crate) fn next_check(&self) -> Option<Instant> {
        match (self.counted_to, self.quiet_since) {
            (Some(counted), _) => Some(counted + COUNT_EVERY),
            (None, Some(since)) => Some(since + STALL_AFTER),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_begins_after_a_quiet_second_at_the_limit_and_ends_with_a_finished_tree() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = StallWatch::default();
        assert_eq!(w.check(t0, true), (Duration::ZERO, Change::None));
        assert_eq!(w.next_check(), Some(t0 + STALL_AFTER));
        assert_eq!(
            w.check(t0 + Duration::from_millis(999), true).1,
            Change::None
        );
        assert_eq!(
            w.check(t0 + s(1), true),
            (s(1), Change::Began { since: t0 })
        );
        assert!(w.is_stalled());
        assert_eq!(w.check(t0 + s(3), true), (s(2), Change::None));
        w.freed(); // a stored dead letter ends a stall too
        assert_eq!(
            w.check(t0 + s(3), true).1,
            Change::Ended {
                since: t0,
                finished: 0,
                timed_out: 0
            }
        );
        assert_eq!(
            w.check(t0 + s(4), true),
            (s(1), Change::Began { since: t0 + s(3) })
        );
        assert_eq!(w.next_check(), Some(t0 + s(5)));
        w.finished(true);
        w.finished(false);
        let ended = Change::Ended {
            since: t0 + s(3),
            finished: 2,
            timed_out: 1,
        };
        assert_eq!(w.check(t0 + s(5), true), (s(1), ended));
        // Full again at once: a new quiet period starts, nothing is counted twice.
        assert!(!w.is_stalled());
        assert_eq!(w.next_check(), Some(t0 + s(6)));
    }

    #[test]
    fn trees_finishing_at_the_limit_or_room_below_it_are_no_stall() {
        let t0 = Instant::now();
        let mut w = StallWatch::default();
        for ms in (0..5_000).step_by(100) {
            w.finished(false);
            let at = t0 + Duration::from_millis(ms);
            assert_eq!(w.check(at, true), (Duration::ZERO, Change::None));
        }
        assert_eq!(
            w.check(t0 + Duration::from_secs(9), false),
            (Duration::ZERO, Change::None)
        );
        assert_eq!(w.next_check(), None);
    }
}
