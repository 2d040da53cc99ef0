//! The canary on a fleet (`docs/spec/release.md`, "A fleet runs one canary"): the canary lives
//! in the shared store ([`CanaryFleet`], over `RedisStore`'s `{NS}:canary`), every node
//! applies it, and every node judges it on the fleet's figures (each adds what it counted
//! since its last sync and reads the sums in one script). An ending names its epoch and the
//! first node to end it wins: that node records it in its history and, for a promotion,
//! publishes the set of record, which the others follow; the others see the record ended at
//! their next tick and clear their canary.
//!
//! What the record's `spec` holds: [`FleetSpec`], JSON. The counters: one field per counter
//! of each arm (`s:first`, `s:retries`, `s:dead`, `s:a1`… for the stable arm, `c:…` for the
//! canary's).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::Arc;

use rebound_engine::release::{ArmFigures, Arms, Guard, Relative};
use rebound_store_redis::RedisStore;
use rebound_store_redis::fleet::{CanaryRecord, CanaryStart};
use serde::{Deserialize, Serialize};

/// The fleet's canary record, as the desk uses it (a trait so that the desk's tests can
/// stand in for the store).
pub trait CanaryFleet: Send + Sync + Debug {
    /// Starts the fleet's canary of `spec` (JSON), unless one is active.
    fn start(&self, spec: &str) -> Result<CanaryStart, String>;
    /// The record, if a canary was ever started.
    fn read(&self) -> Result<Option<CanaryRecord>, String>;
    /// Adds `counts` to the canary of `epoch`'s and answers the fleet's sums (`None`: the
    /// counters are another epoch's).
    fn sync(
        &self,
        epoch: u64,
        counts: &[(String, u64)],
    ) -> Result<Option<HashMap<String, u64>>, String>;
    /// Ends the canary of `epoch` (`promoted`, `rolled_back`); true for the first node.
    fn end(&self, epoch: u64, state: &str, reason: &str, arms: &str) -> Result<bool, String>;
}

impl CanaryFleet for RedisStore {
    fn start(&self, spec: &str) -> Result<CanaryStart, String> {
        self.start_canary(spec).map_err(|e| e.to_string())
    }

    fn read(&self) -> Result<Option<CanaryRecord>, String> {
        self.canary().map_err(|e| e.to_string())
    }

    fn sync(
        &self,
        epoch: u64,
        counts: &[(String, u64)],
    ) -> Result<Option<HashMap<String, u64>>, String> {
        self.sync_canary(epoch, counts).map_err(|e| e.to_string())
    }

    fn end(&self, epoch: u64, state: &str, reason: &str, arms: &str) -> Result<bool, String> {
        self.end_canary(epoch, state, reason, arms)
            .map_err(|e| e.to_string())
    }
}

/// A store shared as the fleet's canary record.
pub fn over_store(store: Arc<RedisStore>) -> Arc<dyn CanaryFleet> {
    store
}

/// What the record says of a canary: enough for any node to run it as the one that started
/// it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetSpec {
    /// The candidate's files.
    pub files: BTreeMap<String, String>,
    /// The slice's percent.
    pub percent: f64,
    /// The slice's biz types (empty: all).
    pub biz: Vec<String>,
    /// The guard's retry-ratio bound, in percent over the stable arm's.
    pub retry_ratio: f64,
    /// The guard's dead-letter-ratio bound, in percent.
    pub dead_letter_ratio: f64,
    /// The guard's samples per arm.
    pub min_samples: u64,
    /// `promote_after`, in ms.
    pub promote_after_ms: u64,
}

impl FleetSpec {
    /// The guard it describes.
    pub fn guard(&self) -> Option<Guard> {
        Some(Guard {
            retry_ratio: Relative::new(self.retry_ratio)?,
            dead_letter_ratio: Relative::new(self.dead_letter_ratio)?,
            min_samples: self.min_samples,
        })
    }
}

/// The counters of `arms` as the record's fields.
pub fn counts(arms: &Arms) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (prefix, arm) in [("s", &arms.stable), ("c", &arms.canary)] {
        out.push((format!("{prefix}:first"), arm.first_deliveries));
        out.push((format!("{prefix}:retries"), arm.retries));
        out.push((format!("{prefix}:dead"), arm.dead_letters));
        for (i, n) in arm.acked_by_attempt.iter().enumerate() {
            out.push((format!("{prefix}:a{}", i + 1), *n));
        }
    }
    out
}

/// The fleet's sums as arms (`attempts`: how many attempts the acks are counted by).
pub fn arms_of(sums: &HashMap<String, u64>, attempts: usize) -> Arms {
    let get = |f: String| sums.get(&f).copied().unwrap_or(0);
    let arm = |p: &str| ArmFigures {
        first_deliveries: get(format!("{p}:first")),
        retries: get(format!("{p}:retries")),
        dead_letters: get(format!("{p}:dead")),
        acked_by_attempt: (1..=attempts).map(|a| get(format!("{p}:a{a}"))).collect(),
    };
    Arms {
        stable: arm("s"),
        canary: arm("c"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(first: u64, retries: u64, dead: u64, acked: &[u64]) -> ArmFigures {
        ArmFigures {
            first_deliveries: first,
            retries,
            dead_letters: dead,
            acked_by_attempt: acked.to_vec(),
        }
    }

    #[test]
    fn what_a_node_counted_since_its_sync_goes_out_and_the_sums_come_back_as_arms() {
        let then = Arms {
            stable: arm(10, 2, 1, &[8, 1]),
            canary: arm(3, 0, 3, &[0, 0]),
        };
        let now = Arms {
            stable: arm(15, 4, 1, &[12, 2]),
            canary: arm(5, 1, 4, &[1, 0]),
        };
        let delta = now.since(&then);
        assert_eq!(delta.stable, arm(5, 2, 0, &[4, 1]));
        let sums: HashMap<String, u64> = counts(&delta).into_iter().collect();
        assert_eq!(arms_of(&sums, 2), delta);
        let spec = FleetSpec {
            files: BTreeMap::new(),
            percent: 10.0,
            biz: vec![],
            retry_ratio: 20.0,
            dead_letter_ratio: 10.0,
            min_samples: 50,
            promote_after_ms: 1000,
        };
        let back: FleetSpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
        assert_eq!(back, spec);
        assert_eq!(back.guard().unwrap().min_samples, 50);
    }
}
