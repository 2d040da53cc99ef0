//! [`MemoryFleet`]: the fleet's adaptive state in one process's memory, the plain model of
//! what a shared store does for [`FleetState`] (the Redis store's script is checked against
//! the same behaviour): counters summed over their window, pushes counted once per `seq`,
//! breaker records opened only at the epoch the opener knew, nodes live while they sync, and
//! each node's last heat. A handle per node ([`MemoryFleet::node`]); [`MemoryFleet::set_down`]
//! makes every sync fail, as a store that does not answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::fleet::{BreakerRecord, FleetState, LIVE_WITHIN, Push, Totals};
use crate::store::StoreError;

#[derive(Debug, Default)]
struct Shared {
    /// Counter name → (when, count) added.
    counts: HashMap<String, Vec<(Instant, u64)>>,
    /// (breaker, key) → (epoch, opened at).
    records: HashMap<(String, String), (u64, Instant)>,
    /// Node → what it last told.
    nodes: HashMap<String, Seen>,
}

/// A node's last seq counted, its last sync and its heat then.
type Seen = (u64, Instant, Vec<(String, f64)>);

/// The fleet's state of one process's nodes; see the module docs (`adaptive/memory_fleet.rs`).
#[derive(Debug, Clone, Default)]
pub struct MemoryFleet {
    shared: Arc<Mutex<Shared>>,
    down: Arc<AtomicBool>,
}

/// One node's handle on a [`MemoryFleet`].
#[derive(Debug, Clone)]
pub struct MemoryFleetNode {
    fleet: MemoryFleet,
    name: String,
}

impl MemoryFleet {
    /// An empty fleet.
    pub fn new() -> MemoryFleet {
        MemoryFleet::default()
    }

    /// The node `name`'s handle.
    pub fn node(&self, name: &str) -> MemoryFleetNode {
        MemoryFleetNode {
            fleet: self.clone(),
            name: name.to_owned(),
        }
    }

    /// While `down`, every sync fails as unreachable.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Relaxed);
    }

    /// The fleet's total of the counter named `name` (every count ever added).
    pub fn total(&self, name: &str) -> u64 {
        let s = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        s.counts
            .get(name)
            .map_or(0, |v| v.iter().map(|(_, n)| n).sum())
    }
}

impl FleetState for MemoryFleetNode {
    fn sync(&self, push: &Push) -> Result<Totals, StoreError> {
        if self.fleet.down.load(Relaxed) {
            return Err(StoreError::Backend {
                backend: "memory",
                op: "fleet sync",
                location: "memory".into(),
                detail: "the fleet is down (MemoryFleet::set_down)".into(),
                unreachable: true,
            });
        }
        let now = crate::time::now();
        let mut s = self
            .fleet
            .shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let last_seq = s.nodes.get(&self.name).map_or(0, |n| n.0);
        if push.seq > last_seq {
            for (counter, n) in &push.adds {
                s.counts.entry(counter.name()).or_default().push((now, *n));
            }
        }
        for o in &push.openings {
            let key = (o.breaker.clone(), o.key.clone());
            let epoch = s.records.get(&key).map_or(0, |r| r.0);
            if epoch == o.known_epoch {
                s.records.insert(key, (epoch + 1, now));
            }
        }
        s.nodes.insert(
            self.name.clone(),
            (push.seq.max(last_seq), now, push.heat.clone()),
        );
        let counts = push
            .reads
            .iter()
            .map(|c| {
                let from = now.checked_sub(c.window);
                s.counts.get(&c.name()).map_or(0, |v| {
                    v.iter()
                        .filter(|(t, _)| from.is_none_or(|f| *t > f))
                        .map(|(_, n)| n)
                        .sum()
                })
            })
            .collect();
        let live = |at: &Instant| now.saturating_duration_since(*at) <= LIVE_WITHIN;
        let heat = s
            .nodes
            .iter()
            .filter(|(name, (_, at, _))| **name != self.name && live(at))
            .flat_map(|(_, (_, at, heat))| {
                let ago = now.saturating_duration_since(*at);
                heat.iter().map(move |(biz, v)| (biz.clone(), *v, ago))
            })
            .collect();
        Ok(Totals {
            counts,
            breakers: s
                .records
                .iter()
                .map(|((breaker, key), (epoch, at))| BreakerRecord {
                    breaker: breaker.clone(),
                    key: key.clone(),
                    epoch: *epoch,
                    opened_ago: now.saturating_duration_since(*at),
                })
                .collect(),
            nodes: s
                .nodes
                .values()
                .filter(|(_, at, _)| live(at))
                .count()
                .max(1),
            heat,
        })
    }
}
