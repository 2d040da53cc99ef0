//! What the source did, for `/metrics` and `/readyz`: [`SourceStats`] and [`CustodyAt`].
//!
//! (A copy of the Redis Streams source's for now, with the same fields: the two are to become
//! one `SourceHealth` the runtime's metrics read, `design.md`, "Next: sources and custody".)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

use rebound_runtime::time::Timestamp;

/// Where a custody ack came from (`rebound_source_custody_total{at}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustodyAt {
    /// The message's first retry was stored.
    Retained,
    /// The message was acked.
    Acked,
    /// The message's dead letter was stored.
    DeadLettered,
}

/// What the source did, for `/metrics` and `/readyz`. Shared by the spout and its tasks.
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Messages fetched and handed to the spout (or found already in custody).
    pub received: AtomicU64,
    /// Of those, messages the broker delivered again (a delivery count above 1: a restart's,
    /// an `ack_wait` that passed, a custody ack lost; or a sequence fetched before, from a
    /// server that came back with an older consumer state).
    pub redelivered: AtomicU64,
    /// Custody acks by where they came from: retained, acked, dead-lettered.
    pub custody: [AtomicU64; 3],
    /// Acks the server confirmed (double acks answered).
    pub acked_at_broker: AtomicU64,
    /// Messages fetched and not yet confirmed acknowledged (`rebound_source_unacked`).
    pub unacked: AtomicU64,
    /// What the consumer says is waiting (`num_pending` of its info), when the server says.
    pub lag: AtomicU64,
    down: AtomicBool,
    since: Mutex<Option<Timestamp>>,
}

impl SourceStats {
    /// Custody acks from `at`.
    pub fn custody(&self, at: CustodyAt) -> u64 {
        self.custody[at as usize].load(Relaxed)
    }

    /// Since when the broker does not answer, if it does not.
    pub fn unreachable_since(&self) -> Option<Timestamp> {
        if !self.down.load(Relaxed) {
            return None;
        }
        *self.since.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records whether the broker answered; the first failure after an answer starts the
    /// `since`.
    pub(crate) fn reachable(&self, up: bool) {
        let was_down = self.down.swap(!up, Relaxed);
        if was_down != up {
            return; // no change
        }
        let mut since = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        *since = (!up).then(Timestamp::now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_since_the_first_failure_until_an_answer() {
        let stats = SourceStats::default();
        assert_eq!(stats.unreachable_since(), None);
        stats.reachable(false);
        let since = stats.unreachable_since().expect("down");
        stats.reachable(false);
        assert_eq!(
            stats.unreachable_since(),
            Some(since),
            "kept from the first failure"
        );
        stats.reachable(true);
        assert_eq!(stats.unreachable_since(), None);
    }
}
