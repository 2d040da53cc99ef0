//! The messages this source holds: fetched and not yet confirmed acknowledged, each with its
//! ack handle, keyed by stream sequence (the part of the id `STREAM/SEQ` that differs). The
//! reader adds them, the acker takes them out once the server confirmed their custody ack and
//! sends `+WPI` for those held past half of `ack_wait`. Their count is
//! [`SourceStats::unacked`], and the reader fetches only while it is under `max_unacked`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_nats::jetstream::message::Acker;
use tokio::time::Instant;

use super::SourceStats;

/// One held message.
struct Entry {
    acker: Arc<Acker>,
    /// Its last delivery or `+WPI`: the server redelivers it at this plus `ack_wait`.
    since: Instant,
}

/// What [`Held::insert`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Inserted {
    /// A message this source did not hold.
    New,
    /// One it holds already (the server redelivered it meanwhile): its handle is renewed and
    /// it is not handed out a second time.
    Again,
}

/// The held messages, shared by the reader and the acker.
pub(super) struct Held {
    map: Mutex<HashMap<u64, Entry>>,
    /// The consumer's `ack_wait` as the server has it, in milliseconds (the reader learns it).
    ack_wait_ms: AtomicU64,
    stats: Arc<SourceStats>,
}

impl Held {
    pub(super) fn new(ack_wait: Duration, stats: Arc<SourceStats>) -> Held {
        let held = Held {
            map: Mutex::default(),
            ack_wait_ms: AtomicU64::new(0),
            stats,
        };
        held.set_ack_wait(ack_wait);
        held
    }

    fn map(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many are held.
    pub(super) fn len(&self) -> usize {
        self.map().len()
    }

    /// The consumer's `ack_wait`.
    pub(super) fn ack_wait(&self) -> Duration {
        Duration::from_millis(self.ack_wait_ms.load(Relaxed))
    }

    pub(super) fn set_ack_wait(&self, ack_wait: Duration) {
        let ms = u64::try_from(ack_wait.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.ack_wait_ms.store(ms, Relaxed);
    }

    /// Holds the message at `seq`, just delivered, with its ack handle.
    pub(super) fn insert(&self, seq: u64, acker: Acker) -> Inserted {
        let mut map = self.map();
        let entry = Entry {
            acker: Arc::new(acker),
            since: Instant::now(),
        };
        let inserted = match map.insert(seq, entry) {
            None => Inserted::New,
            Some(_) => Inserted::Again,
        };
        self.stats.unacked.store(map.len() as u64, Relaxed);
        inserted
    }

    /// The ack handle of `seq`, while it is held.
    pub(super) fn acker(&self, seq: u64) -> Option<Arc<Acker>> {
        self.map().get(&seq).map(|e| e.acker.clone())
    }

    /// Lets `seq` go: the server confirmed its ack.
    pub(super) fn release(&self, seq: u64) {
        let mut map = self.map();
        map.remove(&seq);
        self.stats.unacked.store(map.len() as u64, Relaxed);
    }

    /// The handles of the messages whose last delivery or `+WPI` is at least half of
    /// `ack_wait` ago, marked as progressed now (the caller sends `+WPI` for each).
    pub(super) fn progress_due(&self) -> Vec<Arc<Acker>> {
        let half = self.ack_wait() / 2;
        let now = Instant::now();
        let mut map = self.map();
        map.values_mut()
            .filter(|e| now.duration_since(e.since) >= half)
            .map(|e| {
                e.since = now;
                e.acker.clone()
            })
            .collect()
    }
}
