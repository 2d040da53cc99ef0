//! The trees in flight of one spout task: [`PendingTable`], a slab indexed by the root id.

use super::ordering::LineKey;
use crate::topology::Message;

pub(super) struct InFlight {
    pub(super) root: u64,
    pub(super) msg: Message,
    /// The line of its key, if its order is kept (found again without reading the key).
    pub(super) line: Option<LineKey>,
    /// When it was emitted, in nanoseconds since the task's `epoch` (half the size of an
    /// `Instant`, and one subtraction for the latency).
    pub(super) emitted_at: u64,
}

/// Bits of a root id that name its slot in the spout task's pending table.
const SLOT_BITS: u32 = 24;
pub(super) const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// The trees in flight of one spout task, in a slab. A root id is random in its high 40 bits
/// and carries its slot in the low 24, so a fate finds its message by indexing, with no
/// hashing; the stored root is compared, so a stale or foreign id never matches.
pub(super) struct PendingTable {
    slots: Vec<Option<InFlight>>,
    free: Vec<u32>,
    len: usize,
}

impl PendingTable {
    pub(super) fn new() -> Self {
        PendingTable {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// A slot for a new tree (fill it with `insert`).
    pub(super) fn next_slot(&mut self) -> u64 {
        match self.free.last() {
            Some(&slot) => u64::from(slot),
            None => self.slots.len() as u64,
        }
    }

    pub(super) fn insert(&mut self, flight: InFlight) {
        let slot = (flight.root & SLOT_MASK) as usize;
        if self.free.last() == Some(&(slot as u32)) {
            self.free.pop();
        }
        if slot == self.slots.len() {
            self.slots.push(None);
        }
        self.slots[slot] = Some(flight);
        self.len += 1;
    }

    pub(super) fn remove(&mut self, root: u64) -> Option<InFlight> {
        let slot = (root & SLOT_MASK) as usize;
        let entry = self.slots.get_mut(slot)?;
        if entry.as_ref().is_none_or(|f| f.root != root) {
            return None;
        }
        self.len -= 1;
        self.free.push(slot as u32);
        entry.take()
    }
}
