//! [`FleetSync`]: the one task that syncs a topology's adaptive state with the fleet's. Every
//! `every` (default [`SYNC_EVERY`](super::SYNC_EVERY)) it takes the gate's push and the heat's levels, calls
//! [`FleetState::sync`] (one round trip), and applies the totals to the gate and the heat. It
//! runs on a thread of its own: the trait blocks, and a decision must never wait for it.
//!
//! A sync that fails leaves the node on its own state ([`RetryGate::lost`], the others' heat
//! dropped), logs one WARN for the outage, and keeps the push: the next attempt sends it again
//! unchanged (same `seq`: counted once whatever the lost reply did), then the counts that
//! gathered meanwhile. The first sync that answers rejoins, with one INFO line.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::fleet::{FleetState, Push};
use super::{Heat, RetryGate};
use crate::fate::FailurePolicy;
use crate::time::TimeSource;

/// What a sync thread uses: the fleet's state, and the topology's gate, heat, policy and time.
pub struct SyncParts {
    /// The shared store's side.
    pub fleet: Arc<dyn FleetState>,
    /// The topology's budgets and breakers.
    pub gate: Arc<RetryGate>,
    /// The topology's heat.
    pub heat: Arc<Heat>,
    /// The policy whose rule set says which budgets and breakers there are.
    pub policy: Arc<dyn FailurePolicy>,
    /// The topology's clock.
    pub time: Arc<dyn TimeSource>,
    /// How often to sync ([`SYNC_EVERY`](super::SYNC_EVERY) in production; the spec's range is 100–250 ms).
    pub every: Duration,
}

/// The running sync thread; stopped and joined by [`FleetSync::stop`], told to stop (not
/// waited for: it may be in a round trip to a store that does not answer) when dropped.
#[derive(Debug)]
pub struct FleetSync {
    stop: Arc<(Mutex<bool>, Condvar)>,
    syncs: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl FleetSync {
    /// Starts syncing `parts` every `parts.every`.
    pub fn start(parts: SyncParts) -> FleetSync {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let syncs = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, syncs) = (stop.clone(), syncs.clone());
            std::thread::Builder::new()
                .name("rebound-fleet-sync".into())
                .spawn(move || run(parts, &stop, &syncs))
                .ok()
        };
        if thread.is_none() {
            tracing::warn!(
                "cannot start the fleet sync thread: the adaptive state stays the node's"
            );
        }
        FleetSync {
            stop,
            syncs,
            thread,
        }
    }

    /// Syncs that answered so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Relaxed)
    }

    /// Stops the thread and waits for it (at most one sync's round trip).
    pub fn stop(mut self) {
        self.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn signal(&self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
    }
}

impl Drop for FleetSync {
    fn drop(&mut self) {
        self.signal();
    }
}

fn run(parts: SyncParts, stop: &(Mutex<bool>, Condvar), syncs: &AtomicU64) {
    let every = parts.every.max(Duration::from_millis(1));
    let mut pending: Option<Push> = None;
    let mut down = false;
    loop {
        let rules = parts.policy.adaptive();
        let rules_ref = rules.as_ref().map(|(set, scale)| (&**set, *scale));
        let push = match pending.take() {
            Some(p) => p,
            None => {
                let mut p = parts.gate.take_push(rules_ref);
                p.heat = parts.heat.own_levels(parts.time.now());
                p
            }
        };
        match parts.fleet.sync(&push) {
            Ok(totals) => {
                let now = parts.time.now();
                parts.gate.apply(rules_ref, &push, &totals, now);
                parts.heat.set_others(&totals.heat, now);
                syncs.fetch_add(1, Relaxed);
                if down {
                    down = false;
                    tracing::info!(
                        nodes = totals.nodes,
                        "the shared store answers again: budgets, breakers and heat are the fleet's"
                    );
                }
            }
            Err(e) => {
                parts.gate.lost();
                parts.heat.set_others(&[], parts.time.now());
                if !down {
                    tracing::warn!(
                        error = %e,
                        nodes = parts.gate.fleet_nodes(),
                        "the shared store does not answer: budgets, breakers and heat are this \
                         node's own (budgets' floors divided by the last known live nodes) until \
                         it does"
                    );
                }
                down = true;
                pending = Some(push);
            }
        }
        let (flag, wake) = stop;
        let stopped = flag.lock().unwrap_or_else(PoisonError::into_inner);
        let (stopped, _) = wake
            .wait_timeout_while(stopped, every, |s| !*s)
            .unwrap_or_else(PoisonError::into_inner);
        if *stopped {
            return;
        }
    }
}
