//! The commit marks (`sources.md`, "Kafka has no per-message ack"): per partition, the offsets
//! handed out and not yet in custody, the read position, and the offset the broker has
//! confirmed committed. The offset to commit is the lowest offset handed out and not in
//! custody, or, if none is, one past the highest read: offsets never seen (compacted away,
//! transaction markers) are never waited for, so they never stall it (STORM-2505, STORM-3393),
//! and a retry the store holds is in custody, so an hour-long one holds nothing back.
//!
//! What the source holds unacknowledged at the broker, per partition, is what a new member
//! would be handed again: from the confirmed committed offset up to the highest read (its
//! [`Marks::unacked`]); the reader pauses at `max_unacked` of it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// One partition's marks.
#[derive(Debug, Default)]
struct Partition {
    /// Whether the group assigned it to this member now.
    owned: bool,
    /// Offsets handed out and not yet in custody (kept across a revocation: a message of a
    /// partition that went is still in this node's hands until its custody).
    pending: BTreeSet<i64>,
    /// One past the highest offset read in this assignment; `None` before the first read.
    next: Option<i64>,
    /// The committed offset the broker confirmed (or had at assignment), if any.
    committed: Option<i64>,
    /// The highest commit asked for and not yet confirmed or failed.
    sent: Option<i64>,
    /// Custody moments of offsets no confirmed commit covers yet (for the custody latency).
    waiting: BTreeMap<i64, Instant>,
}

impl Partition {
    /// The offset to commit: the lowest pending at or above the committed one, else one past
    /// the highest read.
    fn mark(&self) -> Option<i64> {
        let next = self.next?;
        let floor = self.committed.unwrap_or(i64::MIN);
        Some(self.pending.range(floor..).next().copied().unwrap_or(next))
    }
}

/// Every partition's marks (the reader's; touched only on its thread).
#[derive(Debug, Default)]
pub(super) struct Marks {
    partitions: HashMap<i32, Partition>,
    /// The first offset read per partition in its assignment, for a partition without a
    /// committed offset (the base of its unacknowledged range).
    first: HashMap<i32, i64>,
}

/// What a commit should carry: `(partition, offset)` pairs.
pub(super) type Commit = Vec<(i32, i64)>;

impl Marks {
    fn part(&mut self, partition: i32) -> &mut Partition {
        self.partitions.entry(partition).or_default()
    }

    /// The group assigned `partition`, whose committed offset is `committed` (`None`: the
    /// group has none, and reading starts where `offset=` says).
    pub(super) fn assigned(&mut self, partition: i32, committed: Option<i64>) {
        self.first.remove(&partition);
        let p = self.part(partition);
        p.owned = true;
        p.next = None;
        p.committed = committed;
        p.sent = None;
        p.waiting.clear();
    }

    /// The group took `partition` away.
    pub(super) fn revoked(&mut self, partition: i32) {
        self.first.remove(&partition);
        let p = self.part(partition);
        p.owned = false;
        p.next = None;
        p.sent = None;
        p.waiting.clear();
    }

    /// Whether `partition` is this member's now.
    pub(super) fn owns(&self, partition: i32) -> bool {
        self.partitions.get(&partition).is_some_and(|p| p.owned)
    }

    /// Whether `offset` of `partition` is handed out and not in custody yet.
    pub(super) fn is_pending(&self, partition: i32, offset: i64) -> bool {
        self.partitions
            .get(&partition)
            .is_some_and(|p| p.pending.contains(&offset))
    }

    /// `offset` of `partition` was read; `pending` if it is handed out now (not if the store
    /// already has its custody, or this node holds it already).
    pub(super) fn read(&mut self, partition: i32, offset: i64, pending: bool) {
        self.first.entry(partition).or_insert(offset);
        let p = self.part(partition);
        p.next = Some(p.next.map_or(offset + 1, |n| n.max(offset + 1)));
        if pending {
            p.pending.insert(offset);
        }
    }

    /// `offset` of `partition` passed into custody at `at`.
    pub(super) fn custody(&mut self, partition: i32, offset: i64, at: Instant) {
        let p = self.part(partition);
        if p.pending.remove(&offset) && p.owned {
            p.waiting.insert(offset, at);
        }
    }

    /// The commits due: each owned partition whose mark is past both its committed and its
    /// sent offset, marked as sent.
    pub(super) fn due(&mut self) -> Commit {
        let mut due = Vec::new();
        for (&partition, p) in &mut self.partitions {
            if !p.owned {
                continue;
            }
            let Some(mark) = p.mark() else { continue };
            let above = |o: Option<i64>| o.is_none_or(|o| mark > o);
            if above(p.committed) && above(p.sent) {
                p.sent = Some(mark);
                due.push((partition, mark));
            }
        }
        due.sort_unstable();
        due
    }

    /// The marks of `partitions` that are past their committed offset (for the commit made on
    /// revocation and at stop), marked as sent.
    pub(super) fn final_marks(&mut self, partitions: &[i32]) -> Commit {
        let mut out = Vec::new();
        for &partition in partitions {
            let Some(p) = self.partitions.get_mut(&partition) else {
                continue;
            };
            if !p.owned {
                continue;
            }
            if let Some(mark) = p.mark()
                && p.committed.is_none_or(|c| mark > c)
            {
                p.sent = Some(mark);
                out.push((partition, mark));
            }
        }
        out
    }

    /// How far the mark of the owned partitions is ahead of what was committed or sent: the
    /// most offsets one commit would move.
    pub(super) fn uncommitted(&self) -> i64 {
        self.partitions
            .iter()
            .filter(|(_, p)| p.owned)
            .filter_map(|(partition, p)| {
                let mark = p.mark()?;
                let done = p
                    .sent
                    .max(p.committed)
                    .or_else(|| self.first.get(partition).copied())?;
                Some((mark - done).max(0))
            })
            .sum()
    }

    /// The broker confirmed `offset` committed for `partition`; returns the custody latencies
    /// it settles.
    pub(super) fn confirmed(&mut self, partition: i32, offset: i64) -> Vec<Duration> {
        let p = self.part(partition);
        p.committed = Some(p.committed.map_or(offset, |c| c.max(offset)));
        if p.sent.is_some_and(|s| s <= offset) {
            p.sent = None;
        }
        let later = p.waiting.split_off(&offset);
        let settled = std::mem::replace(&mut p.waiting, later);
        settled.values().map(Instant::elapsed).collect()
    }

    /// A commit of `partition` failed: it is asked for again at the next look.
    pub(super) fn failed(&mut self, partition: i32) {
        self.part(partition).sent = None;
    }

    /// What this member holds unacknowledged at the broker: per owned partition, from the
    /// confirmed committed offset (or the first read, when the group has none) to one past the
    /// highest read.
    pub(super) fn unacked(&self) -> u64 {
        self.partitions
            .iter()
            .filter(|(_, p)| p.owned)
            .filter_map(|(partition, p)| {
                let next = p.next?;
                let base = p.committed.or_else(|| self.first.get(partition).copied())?;
                u64::try_from(next - base).ok()
            })
            .sum()
    }

    /// One past the highest offset read of each owned partition (for the lag and the tests).
    pub(super) fn read_through(&self) -> BTreeMap<i32, i64> {
        self.partitions
            .iter()
            .filter(|(_, p)| p.owned)
            .filter_map(|(&partition, p)| Some((partition, p.next?)))
            .collect()
    }

    /// The partitions this member owns.
    pub(super) fn owned(&self) -> Vec<i32> {
        let mut owned: Vec<i32> = self
            .partitions
            .iter()
            .filter(|(_, p)| p.owned)
            .map(|(&partition, _)| partition)
            .collect();
        owned.sort_unstable();
        owned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Instant {
        Instant::now()
    }

    #[test]
    fn the_mark_is_the_lowest_offset_not_in_custody_and_a_retry_in_custody_holds_nothing() {
        let mut m = Marks::default();
        m.assigned(0, None);
        for o in 0..10 {
            m.read(0, o, true);
        }
        assert_eq!(m.unacked(), 10);
        assert_eq!(
            m.due(),
            [(0, 0)],
            "nothing in custody: the mark is the first"
        );
        m.confirmed(0, 0);
        // 0 waits an hour for its retry, stored: in custody. 1 is in flight.
        m.custody(0, 0, now());
        for o in 2..10 {
            m.custody(0, o, now());
        }
        assert_eq!(m.due(), [(0, 1)], "held back by 1 alone");
        assert_eq!(m.due(), [], "sent already");
        let settled = m.confirmed(0, 1);
        assert_eq!(settled.len(), 1, "offset 0's custody is now at the broker");
        assert_eq!(m.unacked(), 9);
        m.custody(0, 1, now());
        assert_eq!(
            m.due(),
            [(0, 10)],
            "every offset in custody: one past the highest read"
        );
        assert_eq!(m.confirmed(0, 10).len(), 9);
        assert_eq!(m.unacked(), 0);
    }

    #[test]
    fn gaps_never_stall_the_mark() {
        let mut m = Marks::default();
        m.assigned(3, Some(100));
        // Compaction took 101..104 away, a transaction marker sits at 106.
        m.read(3, 100, true);
        m.read(3, 105, true);
        m.read(3, 107, true);
        assert_eq!(
            m.unacked(),
            8,
            "from the committed offset to one past the highest read"
        );
        m.custody(3, 100, now());
        m.custody(3, 105, now());
        assert_eq!(m.due(), [(3, 107)]);
        m.custody(3, 107, now());
        assert_eq!(m.due(), [(3, 108)], "a new commit past the one sent");
        m.confirmed(3, 108);
        assert_eq!(m.unacked(), 0);
        assert_eq!(m.due(), []);
    }

    #[test]
    fn the_mark_never_goes_below_the_committed_offset() {
        let mut m = Marks::default();
        m.assigned(0, None);
        m.read(0, 5, true);
        m.revoked(0);
        assert!(m.is_pending(0, 5), "still in this node's hands");
        assert_eq!(m.due(), [], "not this member's partition");
        // Another member committed past it; the partition comes back.
        m.assigned(0, Some(9));
        m.read(0, 9, true);
        m.custody(0, 9, now());
        assert_eq!(
            m.due(),
            [(0, 10)],
            "the old pending 5 is below the committed 9"
        );
        m.custody(0, 5, now());
        assert!(!m.is_pending(0, 5));
    }

    #[test]
    fn revocation_commits_what_is_in_custody_and_a_failed_commit_is_asked_again() {
        let mut m = Marks::default();
        m.assigned(1, Some(0));
        m.assigned(2, Some(0));
        for o in 0..4 {
            m.read(1, o, true);
            m.read(2, o, true);
        }
        m.custody(1, 0, now());
        m.custody(1, 1, now());
        assert_eq!(m.final_marks(&[1, 2]), [(1, 2)], "2 has nothing in custody");
        m.failed(1);
        assert_eq!(m.uncommitted(), 2);
        assert_eq!(m.due(), [(1, 2)]);
        assert_eq!(m.uncommitted(), 0, "sent");
        assert_eq!(m.owned(), [1, 2]);
        assert_eq!(m.read_through(), BTreeMap::from([(1, 4), (2, 4)]));
        m.revoked(1);
        assert!(!m.owns(1) && m.owns(2));
        assert_eq!(m.unacked(), 4, "partition 2 alone");
    }
}
