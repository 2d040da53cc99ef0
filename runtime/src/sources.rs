//! What a broker source tells the process that runs it (`sources.md`): its counters for
//! `/metrics` and whether its broker answers, for `/readyz`. Every broker source (Redis
//! Streams, NATS JetStream, …) keeps one [`SourceStats`]; the runtime names no broker client.

#[cfg(feature = "source-conformance")]
#[path = "../source-conformance/mod.rs"]
pub mod conformance;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

use std::time::Duration;

use crate::stats::Histogram;
use crate::time::Timestamp;

/// Where a custody ack came from (`rebound_source_custody_total{at}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustodyAt {
    /// The message's first retry was stored ([`Spout::retained`](crate::topology::Spout::retained)).
    Retained,
    /// The message was acked.
    Acked,
    /// The message's dead letter was stored.
    DeadLettered,
}

impl CustodyAt {
    /// Every place, in the order of the metric's labels.
    pub const ALL: [CustodyAt; 3] = [
        CustodyAt::Retained,
        CustodyAt::Acked,
        CustodyAt::DeadLettered,
    ];

    /// The label: `retained`, `acked` or `dead_lettered`.
    pub fn as_str(self) -> &'static str {
        match self {
            CustodyAt::Retained => "retained",
            CustodyAt::Acked => "acked",
            CustodyAt::DeadLettered => "dead_lettered",
        }
    }
}

/// What a source did, shared by its spout and its client tasks.
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Messages read from the broker (handed to the spout, or found already in custody).
    pub received: AtomicU64,
    /// Of those, messages read again: redelivered by the broker, or taken over from a dead
    /// consumer.
    pub redelivered: AtomicU64,
    custody: [AtomicU64; 3],
    /// Acknowledgements the broker confirmed.
    pub acked_at_broker: AtomicU64,
    /// Messages read and not yet confirmed acknowledged at the broker.
    pub unacked: AtomicU64,
    /// What the broker says is waiting to be read (its lag), when it says.
    pub lag: AtomicU64,
    down: AtomicBool,
    since: Mutex<Option<Timestamp>>,
    /// From the moment the spout heard of a message's custody (right after the journal's
    /// commit) to the broker's confirmation of its ack.
    custody_latency: Mutex<Histogram>,
}

impl SourceStats {
    /// Counts a custody ack from `at`.
    pub fn count_custody(&self, at: CustodyAt) {
        self.custody[at as usize].fetch_add(1, Relaxed);
    }

    /// Custody acks from `at` so far.
    pub fn custody(&self, at: CustodyAt) -> u64 {
        self.custody[at as usize].load(Relaxed)
    }

    /// Notes the time each of a batch of custody acks took, from the spout's `retained`,
    /// `ack` or `dead_lettered` to the broker's confirmation.
    pub fn observe_custody(&self, took: impl IntoIterator<Item = Duration>) {
        let mut h = self
            .custody_latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for d in took {
            h.observe(d);
        }
    }

    /// How long custody acks took so far, from the commit to the broker's confirmation
    /// (read quantiles with [`Histogram::quantile`]).
    pub fn custody_latency(&self) -> Histogram {
        self.custody_latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Since when the broker does not answer, if it does not.
    pub fn unreachable_since(&self) -> Option<Timestamp> {
        if !self.down.load(Relaxed) {
            return None;
        }
        *self.since.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The broker answered (`true`) or did not; the first failure after an answer starts the
    /// time [`SourceStats::unreachable_since`] names.
    pub fn reachable(&self, up: bool) {
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
    fn unreachable_since_the_first_failure_until_it_answers() {
        let s = SourceStats::default();
        assert_eq!(s.unreachable_since(), None);
        s.reachable(false);
        let since = s.unreachable_since().expect("down");
        s.reachable(false);
        assert_eq!(
            s.unreachable_since(),
            Some(since),
            "the first failure's time is kept"
        );
        s.reachable(true);
        assert_eq!(s.unreachable_since(), None);
        s.count_custody(CustodyAt::Retained);
        assert_eq!(s.custody(CustodyAt::Retained), 1);
        assert_eq!(
            CustodyAt::ALL.map(CustodyAt::as_str),
            ["retained", "acked", "dead_lettered"]
        );
    }
}
