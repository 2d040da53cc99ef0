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
//!
//! One FIFO in arrival order, and per source the position covered so far: a position covers
//! in O(1) (an entry at or below its source's mark is dead), and dead entries leave from the
//! front, where acks, which arrive roughly in position order, reach first. Every ack costs a
//! push and a pop, nothing more: this is the hot path of a durable source.

use std::collections::VecDeque;
use std::time::Duration;

use crate::store::{Offset, SourceName, WriteOp};
use crate::time::{Instant, Timestamp};
use crate::topology::MessageId;

/// Held acked fates in arrival order, and the mark each source's positions have reached.
#[derive(Debug, Default)]
pub(super) struct HeldAcks {
    queue: VecDeque<Held>,
    /// Per source (few: one per positioned source), its name and the highest position seen.
    marks: Vec<(SourceName, u64)>,
}

/// One held fate, kept small (a durable source holds tens of thousands): the op is rebuilt
/// only for the few that are written.
#[derive(Debug)]
struct Held {
    arrived: Instant,
    id: MessageId,
    acked_at: Timestamp,
    position: u64,
    source: u32,
}

/// What leaves the hold: fates to write, and how many were moot (covered).
#[derive(Debug, Default)]
pub(super) struct Released {
    pub(super) write: Vec<WriteOp>,
    pub(super) moot: usize,
}

impl HeldAcks {
    /// Holds `op`, an acked fate with an offset, received at `at`. (Anything else is not held:
    /// it is handed back.)
    pub(super) fn hold(&mut self, op: WriteOp, at: Instant) -> Option<WriteOp> {
        let WriteOp::Acked {
            id,
            at: acked_at,
            offset: Some(offset),
        } = op
        else {
            return Some(op);
        };
        let source = self.source(offset.source) as u32;
        self.queue.push_back(Held {
            arrived: at,
            id,
            acked_at,
            position: offset.position,
            source,
        });
        None
    }

    /// `source`'s position reached `position`: every fate of the source at or below it is moot.
    pub(super) fn cover(&mut self, source: &str, position: u64) {
        // Looked up by text: a name is interned (a global lock) only the first time.
        let i = match self
            .marks
            .iter()
            .position(|(name, _)| name.as_str() == source)
        {
            Some(i) => i,
            None => self.source(SourceName::from(source)),
        };
        let mark = &mut self.marks[i].1;
        *mark = (*mark).max(position);
    }

    /// Takes the moot fates from the front, and the fates held at least `hold` by `now` or
    /// beyond `max`, oldest first; with `all`, every fate.
    pub(super) fn release(
        &mut self,
        now: Instant,
        hold: Duration,
        max: usize,
        all: bool,
    ) -> Released {
        let mut out = Released::default();
        while let Some(front) = self.queue.front() {
            let dead = front.position <= self.marks[front.source as usize].1;
            let due = all
                || self.queue.len() > max
                || now.saturating_duration_since(front.arrived) >= hold;
            if !dead && !due {
                break;
            }
            let held = self.queue.pop_front().expect("front exists");
            if dead {
                out.moot += 1;
            } else {
                out.write.push(WriteOp::Acked {
                    id: held.id,
                    at: held.acked_at,
                    offset: Some(Offset {
                        source: self.marks[held.source as usize].0,
                        position: held.position,
                    }),
                });
            }
        }
        out
    }

    /// True if nothing is held.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// When the oldest held fate arrived.
    pub(super) fn oldest(&self) -> Option<Instant> {
        self.queue.front().map(|h| h.arrived)
    }

    fn source(&mut self, source: SourceName) -> usize {
        match self.marks.iter().position(|(name, _)| *name == source) {
            Some(i) => i,
            None => {
                self.marks.push((source, 0));
                self.marks.len() - 1
            }
        }
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
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut held = HeldAcks::default();
        for (i, p) in [1, 3, 2, 5].into_iter().enumerate() {
            assert!(held.hold(acked(p), t0 + ms(i as u64)).is_none());
        }
        held.cover("src", 2);
        held.cover("other", 9);
        // 1 is dead at the front and leaves; 3 is live and not due, so it stops there.
        let early = held.release(t0 + ms(50), ms(100), 100, false);
        assert_eq!((positions(&early.write), early.moot), (vec![], 1));
        assert_eq!(held.oldest(), Some(t0 + ms(1)));
        // 3 is due; 2 behind it is dead; 5 is not due yet.
        let due = held.release(t0 + ms(101), ms(100), 100, false);
        assert_eq!((positions(&due.write), due.moot), (vec![3], 1));
        let rest = held.release(t0 + ms(101), ms(100), 100, true);
        assert_eq!((positions(&rest.write), rest.moot), (vec![5], 0));
        assert!(held.is_empty());
        assert_eq!(held.oldest(), None);
    }

    #[test]
    fn beyond_the_bound_the_oldest_come_out_at_once() {
        let now = Instant::now();
        let mut held = HeldAcks::default();
        for p in 1..=5 {
            assert!(held.hold(acked(p), now).is_none());
        }
        let out = held.release(now, Duration::from_secs(1), 3, false);
        assert_eq!(positions(&out.write), [1, 2]);
        assert_eq!(held.release(now, Duration::ZERO, 0, true).write.len(), 3);
    }
}
