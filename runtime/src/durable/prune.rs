//! [`FatePruner`]: when the journal forgets the acked fates a broker source leaves.
//!
//! A source that commits positions (the bundled spout, a partitioned log read by offset) has
//! its acked fates pruned by its position. A broker source (a Redis stream, a JetStream
//! consumer) commits none: the acked fates of its retried messages are kept only so that a
//! redelivery of a message whose fate is known is recognised, and a broker redelivers within
//! its ack wait or a lease, or not at all. With [`JournalOptions::fates_keep`] set, the journal
//! queues a [`WriteOp::PruneFates`] every [`FatePruner::every`], for the fates recorded
//! more than `fates_keep` before the newest acked fate it has written, so what the store keeps
//! of them is bounded by that window. Time is the fates' own (their `at`): the journal needs no
//! clock of its own, and a run at a scaled time prunes on the scale it records.
//!
//! [`JournalOptions::fates_keep`]: super::JournalOptions::fates_keep

use std::time::Duration;

use crate::store::WriteOp;
use crate::time::{Instant, Timestamp};

/// Decides when the journal prunes, from the acked fates it writes. See the
/// [module docs](self).
#[derive(Debug)]
pub(super) struct FatePruner {
    keep: Duration,
    every: Duration,
    /// The newest `at` of an acked fate seen since the last prune.
    newest: Option<Timestamp>,
    last: Option<Instant>,
}

impl FatePruner {
    /// A pruner that keeps fates for `keep`, pruning every tenth of it (at least every second,
    /// at most every minute).
    pub(super) fn new(keep: Duration) -> FatePruner {
        FatePruner {
            keep,
            every: (keep / 10).clamp(Duration::from_secs(1), Duration::from_secs(60)),
            newest: None,
            last: None,
        }
    }

    /// Notes a write: an acked fate's time moves the line.
    pub(super) fn saw(&mut self, op: &WriteOp) {
        if let WriteOp::Acked { at, .. } = op {
            self.newest = Some(self.newest.map_or(*at, |n| n.max(*at)));
        }
    }

    /// The prune to commit now, if one is due: never before the first acked fate, then at
    /// most once per `every`.
    pub(super) fn due(&mut self, now: Instant) -> Option<WriteOp> {
        let newest = self.newest?;
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < self.every)
        {
            return None;
        }
        self.last = Some(now);
        self.newest = None;
        Some(WriteOp::PruneFates {
            before: newest.saturating_sub(self.keep),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MessageId;

    fn acked(at_ms: u64) -> WriteOp {
        WriteOp::Acked {
            id: MessageId::from("m"),
            at: Timestamp::from_millis(at_ms),
            offset: None,
        }
    }

    #[test]
    fn prunes_behind_the_newest_fate_at_most_once_per_tenth_of_the_window() {
        let mut p = FatePruner::new(Duration::from_secs(60));
        let t0 = crate::time::now();
        assert_eq!(p.due(t0), None, "nothing acked yet: nothing to prune");
        p.saw(&acked(100_000));
        p.saw(&acked(90_000));
        assert_eq!(
            p.due(t0),
            Some(WriteOp::PruneFates {
                before: Timestamp::from_millis(40_000)
            })
        );
        p.saw(&acked(200_000));
        assert_eq!(
            p.due(t0 + Duration::from_secs(5)),
            None,
            "within 6 s of the last"
        );
        assert_eq!(
            p.due(t0 + Duration::from_secs(6)),
            Some(WriteOp::PruneFates {
                before: Timestamp::from_millis(140_000)
            })
        );
        assert_eq!(
            p.due(t0 + Duration::from_secs(60)),
            None,
            "no acked fate since: the line has not moved"
        );
    }
}
