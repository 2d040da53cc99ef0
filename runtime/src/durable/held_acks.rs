//! [`HeldAcks`]: acked fates the journal holds back until their source's position covers them.
//!
//! A durable source commits a low-water mark: every message at or below it has its fate. An
//! acked fate above the mark is needed only until the mark passes it (after a crash it keeps
//! the message from being delivered again). The mark lags behind the acks by about the
//! slowest retry in flight, so the journal holds each such fate for a while: if a position of
//! its source covers it meanwhile, it is moot and never written. One still held after
//! [`JournalOptions::ack_hold`](super::JournalOptions::ack_hold), or beyond
//! [`JournalOptions::max_held_acks`](super::JournalOptions::max_held_acks), is written (and
//! pruned later, when the mark passes it).
//!
//! A held fate is as safe as one still in the journal's queue: lost in a crash, its message is
//! delivered again (at least once), never lost, because the position never moved past it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::time::Instant;

use hashbrown::HashMap;

use crate::store::WriteOp;

/// Held acked fates, per source by position, and in arrival order for their deadline.
#[derive(Debug, Default)]
pub(super) struct HeldAcks {
    by_source: HashMap<Arc<str>, BTreeMap<u64, WriteOp>>,
    /// Arrival order; an entry no longer in `by_source` (covered, or replaced) is skipped.
    arrivals: VecDeque<(Instant, Arc<str>, u64)>,
    len: usize,
}

impl HeldAcks {
    /// Holds `op`, the acked fate at `position` of `source`, received at `at`. Returns the fate
    /// it replaced (the same position acked twice: a redelivery), which is moot.
    pub(super) fn hold(
        &mut self,
        source: Arc<str>,
        position: u64,
        op: WriteOp,
        at: Instant,
    ) -> bool {
        let held = self.by_source.entry(source.clone()).or_default();
        let replaced = held.insert(position, op).is_some();
        if !replaced {
            self.len += 1;
        }
        self.arrivals.push_back((at, source, position));
        replaced
    }

    /// Drops the fates of `source` at or below `position`; returns how many (all moot).
    pub(super) fn cover(&mut self, source: &str, position: u64) -> usize {
        let Some(held) = self.by_source.get_mut(source) else {
            return 0;
        };
        let above = held.split_off(&(position.saturating_add(1)));
        let covered = std::mem::replace(held, above).len();
        self.len -= covered;
        covered
    }

    /// Takes the fates held at least `hold` by `now`, and the oldest beyond `max`, oldest first.
    pub(super) fn due(&mut self, now: Instant, hold: Duration, max: usize) -> Vec<WriteOp> {
        let mut out = Vec::new();
        while let Some(&(at, ..)) = self.arrivals.front() {
            let expired = now.saturating_duration_since(at) >= hold;
            if !expired && self.len <= max {
                break;
            }
            out.extend(self.pop_front());
        }
        out
    }

    /// Takes every held fate.
    pub(super) fn all(&mut self) -> Vec<WriteOp> {
        let mut out = Vec::with_capacity(self.len);
        while !self.arrivals.is_empty() {
            out.extend(self.pop_front());
        }
        out
    }

    /// True if nothing is held.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// When the oldest held fate arrived.
    pub(super) fn oldest(&mut self) -> Option<Instant> {
        while let Some((at, source, position)) = self.arrivals.front() {
            if self.live(source, *position) {
                return Some(*at);
            }
            self.arrivals.pop_front();
        }
        None
    }

    fn live(&self, source: &str, position: u64) -> bool {
        self.by_source
            .get(source)
            .is_some_and(|held| held.contains_key(&position))
    }

    fn pop_front(&mut self) -> Option<WriteOp> {
        let (_, source, position) = self.arrivals.pop_front()?;
        let op = self.by_source.get_mut(&source)?.remove(&position)?;
        self.len -= 1;
        Some(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Offset;
    use crate::time::Timestamp;
    use crate::topology::MessageId;

    fn acked(position: u64) -> WriteOp {
        WriteOp::Acked {
            id: MessageId::from(format!("m{position}")),
            at: Timestamp::ZERO,
            offset: Some(Offset {
                source: "src".into(),
                position,
            }),
        }
    }

    fn positions(ops: &[WriteOp]) -> Vec<u64> {
        ops.iter()
            .map(|op| match op {
                WriteOp::Acked {
                    offset: Some(o), ..
                } => o.position,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_position_covers_what_it_passes_and_the_rest_comes_out_when_due() {
        let t0 = crate::time::now();
        let ms = Duration::from_millis;
        let mut held = HeldAcks::default();
        let src: Arc<str> = "src".into();
        for (i, p) in [3, 1, 5, 2].into_iter().enumerate() {
            assert!(!held.hold(src.clone(), p, acked(p), t0 + ms(i as u64)));
        }
        assert!(
            held.hold(src.clone(), 5, acked(5), t0 + ms(9)),
            "a redelivery replaces"
        );
        assert_eq!(held.cover("src", 2), 2);
        assert_eq!(held.cover("other", 9), 0);
        assert_eq!(held.oldest(), Some(t0)); // 3, the first to arrive
        assert_eq!(positions(&held.due(t0 + ms(100), ms(100), 100)), [3]);
        assert!(held.due(t0 + ms(100), ms(100), 100).is_empty());
        assert_eq!(positions(&held.all()), [5]);
        assert!(held.is_empty());
        assert_eq!(held.oldest(), None);
    }

    #[test]
    fn beyond_the_bound_the_oldest_come_out_at_once() {
        let now = crate::time::now();
        let mut held = HeldAcks::default();
        for p in 1..=5 {
            held.hold("src".into(), p, acked(p), now);
        }
        assert_eq!(positions(&held.due(now, Duration::from_secs(1), 3)), [1, 2]);
        assert_eq!(held.all().len(), 3);
    }
}
