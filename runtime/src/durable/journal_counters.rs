//! The journal's counters: what it did ([`JournalStats`], read by anyone) and whether its
//! commits fail now (what a readiness probe asks), kept by the journal thread.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::store::StoreError;
use crate::time::Timestamp;

/// Counters of the journal's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Writes committed.
    pub committed: u64,
    /// Transactions committed.
    pub transactions: u64,
    /// Failed attempts to commit a batch (each was retried).
    pub failures: u64,
    /// Writes never written (counted in `committed` too): queued retries a later write of the
    /// same message made moot while they were held, and acked fates with no row to drop that
    /// were not needed (see the [journal's docs](super::journal)).
    pub moot: u64,
    /// Writes waiting for the disk: queued, or held retries. (An acked fate held until a
    /// position covers it waits for the position, not the disk, and is not counted.)
    pub backlog: u64,
    /// Writes a shared store refused as stale ([`Applied::Stale`](crate::store::Applied::Stale)): made under a claim that
    /// was no longer this node's.
    pub stale: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) committed: AtomicU64,
    pub(super) transactions: AtomicU64,
    pub(super) failures: AtomicU64,
    pub(super) moot: AtomicU64,
    pub(super) backlog: AtomicUsize,
    pub(super) stale: AtomicU64,
    /// Since when commits fail, and the last cause (`None` while they succeed).
    pub(super) failing: std::sync::Mutex<Option<(Timestamp, String)>>,
    /// Whether `failing` is set: a commit that succeeds looks at this, not the lock.
    pub(super) any_failing: std::sync::atomic::AtomicBool,
}

impl Counters {
    /// A commit failed with `e`.
    pub(super) fn failed(&self, e: &StoreError) {
        self.failures.fetch_add(1, Relaxed);
        let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
        let since = failing
            .as_ref()
            .map_or_else(Timestamp::now, |(since, _)| *since);
        *failing = Some((since, e.to_string()));
        self.any_failing.store(true, Relaxed);
    }

    /// A commit succeeded.
    pub(super) fn committed(&self, writes: u64) {
        self.committed.fetch_add(writes, Relaxed);
        self.transactions.fetch_add(1, Relaxed);
        if self.any_failing.swap(false, Relaxed) {
            *self.failing.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }
}
