//! The acker: Storm's XOR ledger, and the task that runs it.
//!
//! How it works, in one comment. Every root message gets a 64-bit root id (random in its high
//! 40 bits; the low 24 name the message's slot in its spout task's pending table, so the
//! spout finds it without hashing), and every delivered tuple (each copy to each task) a
//! random 64-bit edge id. The ledger keeps, per
//! root, `xor`: the XOR of every edge id it has been told about. Each edge id is reported
//! exactly twice — once when the tuple is created (in the spout's `init`, or in the ack of the
//! parent that emitted it) and once when the tuple itself is acked — so the two cancel, and
//! `xor` returns to 0 exactly when every tuple of the tree has been acked (a false 0 needs a
//! 2^-64 coincidence). Messages may arrive in any order: an ack or fail before the `init`
//! simply creates the entry early; a tree is only decided once the `init` (which names the
//! spout task) has arrived. The first decision removes the entry, so later acks or fails for
//! that root are ignored (they recreate an entry without a spout task, which can never be
//! decided and is dropped at the timeout). Timeouts use Storm's `RotatingMap`: entries live in
//! `BUCKETS` maps, new ones go into the newest; every `message_timeout / (BUCKETS - 1)` the
//! oldest map is dropped and its decidable entries fail with code `TIMEOUT` — so a tree times
//! out between `message_timeout` and `1.5 × message_timeout` after its first message.

use std::collections::hash_map::{Entry as MapEntry, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::topology::{Failure, codes};

/// How many rotating buckets the ledger keeps.
pub const BUCKETS: usize = 3;

/// Ids are (mostly) random already, so hashing is one multiplication.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        // Root ids carry a spout's slot number in their low bits: multiply so that every bit
        // reaches the high bits the map also uses.
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A `HashMap` keyed by random ids.
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct Entry {
    xor: u64,
    spout: Option<u32>,
    failed: Option<Box<Failure>>,
}

/// How a tree ended, for the spout task that owns it.
#[derive(Debug, PartialEq)]
pub enum Terminal {
    /// Every tuple of the tree was acked.
    Acked {
        /// The root id.
        root: u64,
        /// The spout task (global number) that emitted it.
        spout: u32,
    },
    /// A tuple failed, or the tree timed out.
    Failed {
        /// The root id.
        root: u64,
        /// The spout task (global number) that emitted it.
        spout: u32,
        /// The first failure reported for the tree.
        failure: Box<Failure>,
    },
}

impl Terminal {
    /// The root id.
    pub fn root(&self) -> u64 {
        match self {
            Terminal::Acked { root, .. } | Terminal::Failed { root, .. } => *root,
        }
    }
}

/// The XOR ledger with rotating timeout buckets (see the module comment).
pub struct Ledger {
    /// Newest first.
    buckets: Vec<IdMap<Entry>>,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

impl Ledger {
    /// An empty ledger with [`BUCKETS`] buckets.
    pub fn new() -> Ledger {
        Ledger {
            buckets: (0..BUCKETS).map(|_| IdMap::default()).collect(),
        }
    }

    /// The spout emitted root `root` to tuples whose edge ids XOR to `xor`.
    pub fn init(&mut self, root: u64, xor: u64, spout: u32) -> Option<Terminal> {
        self.update(root, |e| {
            e.xor ^= xor;
            e.spout = Some(spout);
        })
    }

    /// A tuple of tree `root` was acked: `xor` is its edge id XOR the edge ids of the tuples it
    /// emitted.
    pub fn ack(&mut self, root: u64, xor: u64) -> Option<Terminal> {
        self.update(root, |e| e.xor ^= xor)
    }

    /// A tuple of tree `root` failed.
    pub fn fail(&mut self, root: u64, failure: Box<Failure>) -> Option<Terminal> {
        self.update(root, |e| {
            e.failed.get_or_insert(failure);
        })
    }

    /// Drops the oldest bucket, reporting its decidable trees as timed out, and starts a new
    /// one.
    pub fn rotate(&mut self, expired: &mut Vec<Terminal>) {
        let mut oldest = self.buckets.pop().unwrap_or_default();
        for (root, entry) in oldest.drain() {
            if let Some(spout) = entry.spout {
                expired.push(Terminal::Failed {
                    root,
                    spout,
                    failure: Box::new(Failure::new(
                        codes::TIMEOUT,
                        "the tuple tree did not complete within message_timeout",
                    )),
                });
            }
        }
        // Reuse the drained map's allocation for the new bucket.
        self.buckets.insert(0, oldest);
    }

    /// Trees (and early entries) currently tracked.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.buckets.iter().map(HashMap::len).sum()
    }

    /// True when nothing is tracked.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn update(&mut self, root: u64, apply: impl FnOnce(&mut Entry)) -> Option<Terminal> {
        // Most messages find their tree in the newest bucket: one lookup. Otherwise look in the
        // older ones, and create the entry in the newest if it is nowhere.
        let (newest, older) = self.buckets.split_first_mut()?;
        let mut slot = match newest.entry(root) {
            MapEntry::Occupied(o) => o,
            MapEntry::Vacant(v) => match older.iter_mut().find(|b| b.contains_key(&root)) {
                Some(bucket) => match bucket.entry(root) {
                    MapEntry::Occupied(o) => o,
                    MapEntry::Vacant(v) => v.insert_entry(Entry::default()),
                },
                None => v.insert_entry(Entry::default()),
            },
        };
        apply(slot.get_mut());
        let entry = slot.get();
        let spout = entry.spout?;
        if entry.failed.is_none() && entry.xor != 0 {
            return None;
        }
        let entry = slot.remove();
        Some(match entry.failed {
            Some(failure) => Terminal::Failed {
                root,
                spout,
                failure,
            },
            None => Terminal::Acked { root, spout },
        })
    }
}

/// A message to an acker.
#[derive(Debug)]
pub(crate) enum AckerMsg {
    Init { root: u64, xor: u64, spout: u32 },
    Ack { root: u64, xor: u64 },
    Fail { root: u64, failure: Box<Failure> },
}

impl AckerMsg {
    fn apply(self, ledger: &mut Ledger) -> Option<Terminal> {
        match self {
            AckerMsg::Init { root, xor, spout } => ledger.init(root, xor, spout),
            AckerMsg::Ack { root, xor } => ledger.ack(root, xor),
            AckerMsg::Fail { root, failure } => ledger.fail(root, failure),
        }
    }
}

/// Which acker owns a root.
pub(crate) fn acker_for(root: u64, ackers: usize) -> usize {
    // The high bits of a root id are random (the low ones are a spout's slot number).
    if ackers == 1 {
        0 // skips a division per message in the common case
    } else {
        ((root >> 32) as usize) % ackers
    }
}

/// A batch of fates for one spout task, with the moment the acker sent it (the spout task
/// measures from it how long fates wait between the two: `rebound_ack_seconds`).
pub(crate) type Fates = (crate::time::Instant, Vec<Terminal>);

/// The acker task: applies batches to its ledger, rotates on time, and sends each spout task
/// the terminals of its trees in batches.
///
/// A spout task's fate channel holds at least `max_spout_pending` batches and every batch
/// carries at least one of that task's in-flight trees, so these sends never wait: the acker
/// can always make progress, which is what keeps the bounded channels deadlock-free.
pub(crate) async fn run_acker(
    mut rx: mpsc::Receiver<Vec<AckerMsg>>,
    spouts: Arc<[mpsc::Sender<Fates>]>,
    message_timeout: Duration,
) {
    let mut ledger = Ledger::new();
    let period = (message_timeout / (BUCKETS as u32 - 1)).max(Duration::from_millis(1));
    let mut next_rotation = crate::time::now() + period;
    let sleep = tokio::time::sleep_until(next_rotation);
    tokio::pin!(sleep);
    let mut out: Vec<Vec<Terminal>> = (0..spouts.len()).map(|_| Vec::new()).collect();
    let mut expired = Vec::new();
    let deliver = |t: Terminal, out: &mut Vec<Vec<Terminal>>| {
        let spout = match &t {
            Terminal::Acked { spout, .. } | Terminal::Failed { spout, .. } => *spout as usize,
        };
        if let Some(buf) = out.get_mut(spout) {
            buf.push(t);
        }
    };
    loop {
        tokio::select! {
            batch = rx.recv() => {
                let Some(batch) = batch else { break };
                for msg in batch {
                    if let Some(t) = msg.apply(&mut ledger) {
                        deliver(t, &mut out);
                    }
                }
                // Take what else is queued before sending fates, for bigger batches.
                for _ in 0..16 {
                    let Ok(batch) = rx.try_recv() else { break };
                    for msg in batch {
                        if let Some(t) = msg.apply(&mut ledger) {
                            deliver(t, &mut out);
                        }
                    }
                }
            }
            () = &mut sleep => {}
        }
        // Checked on every pass, not only when the timer wins, so a busy acker still rotates.
        let now = crate::time::now();
        if now >= next_rotation {
            while next_rotation <= now {
                ledger.rotate(&mut expired);
                next_rotation += period;
            }
            sleep.as_mut().reset(next_rotation);
            for t in expired.drain(..) {
                deliver(t, &mut out);
            }
        }
        for (spout, buf) in out.iter_mut().enumerate() {
            if buf.is_empty() {
                continue;
            }
            let batch = (now, std::mem::replace(buf, Vec::with_capacity(buf.len())));
            match spouts[spout].try_send(batch) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(batch)) => {
                    let _ = spouts[spout].send(batch).await;
                }
                // The spout task has stopped (shutdown): nobody is waiting for these fates.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
    }
}

#[cfg(test)]
#[path = "acker_model_tests.rs"]
mod model_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_completes_when_xor_returns_to_zero() {
        let mut l = Ledger::new();
        // root tuple a; bolt acks a emitting b and c; b and c acked.
        let (a, b, c) = (0xA1, 0xB2, 0xC4);
        assert_eq!(l.init(1, a, 0), None);
        assert_eq!(l.ack(1, a ^ b ^ c), None);
        assert_eq!(l.ack(1, b), None);
        assert_eq!(l.ack(1, c), Some(Terminal::Acked { root: 1, spout: 0 }));
        assert!(l.is_empty());
    }

    #[test]
    fn acks_and_fails_before_init_count() {
        let mut l = Ledger::new();
        assert_eq!(l.ack(7, 0x11), None);
        assert_eq!(
            l.init(7, 0x11, 3),
            Some(Terminal::Acked { root: 7, spout: 3 })
        );
        let f = Box::new(Failure::new("X", "boom"));
        assert_eq!(l.fail(8, f.clone()), None);
        assert_eq!(
            l.init(8, 0x22, 1),
            Some(Terminal::Failed {
                root: 8,
                spout: 1,
                failure: f
            })
        );
    }

    #[test]
    fn timeout_after_rotations_and_late_acks_ignored() {
        let mut l = Ledger::new();
        l.init(5, 0x55, 2);
        let mut out = Vec::new();
        for _ in 0..BUCKETS - 1 {
            l.rotate(&mut out);
            assert!(out.is_empty());
        }
        l.rotate(&mut out);
        assert!(
            matches!(&out[..], [Terminal::Failed { root: 5, spout: 2, failure }] if failure.code == codes::TIMEOUT)
        );
        assert_eq!(l.ack(5, 0x55), None);
        out.clear();
        for _ in 0..BUCKETS {
            l.rotate(&mut out);
        }
        assert!(out.is_empty(), "an entry without init is never decided");
        assert!(l.is_empty());
    }
}
