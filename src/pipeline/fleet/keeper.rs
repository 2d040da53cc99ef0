//! The keeper: one task per node that keeps it in the fleet. Every tick it
//!
//! - asks the store which of the positions its partitions wait on have a fate (another node
//!   may have fired their retry), and tells the spout;
//! - every lease / 3, heartbeats (what `/v1/nodes` shows) and balances the partitions: the
//!   spout hears which it took over and which it lost;
//! - every quarter second, reads the partitions' committed positions: the fleet's progress,
//!   and the end of the run once every order has its fate;
//! - notes whether the store answers (`/readyz`, `rebound_store_up`).

/// The version of the canary a node runs, if one (its heartbeat says it on `/v1/nodes`).
pub(crate) type CanaryVersion = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// The canary version of `release`'s runtime (none without one).
pub(crate) fn canary_version(
    release: Option<Arc<rebound_runtime::release::Release>>,
) -> CanaryVersion {
    Arc::new(move || {
        release
            .as_ref()
            .and_then(|r| r.canary_version())
            .map(|v| v.to_string())
    })
}

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::spout::{Command, Desk};
use super::{PARTITIONS, Part, order_at, partition_len, partition_source};
use crate::pipeline::orders::{SOURCE, message_id};
use crate::pipeline::spout::Live;
use rebound_engine::PolicyHandle;
use rebound_runtime::durable::Durable;
use rebound_runtime::store::{ClaimQueue, MessageId, Store, StoreError};
use rebound_runtime::time::Timestamp;
use rebound_store_redis::{Held, Member, NodeStatus, RedisStore};

/// How often the keeper looks for fates written elsewhere.
const TICK: Duration = Duration::from_millis(100);

/// How long the readiness probe waits for the store's answer.
const PROBE: Duration = Duration::from_millis(500);

/// How often it reads the fleet's progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// What the keeper knows of the fleet, for the pipeline's handle.
#[derive(Debug)]
pub struct FleetState {
    /// Orders of the run with a fate, fleet-wide, at or below the committed positions.
    pub settled: AtomicU64,
    /// Set once every order of a bounded run has its fate.
    pub finished: AtomicBool,
    /// Whether the store answered the last call.
    pub store_up: AtomicBool,
    /// Since when it does not (wall ms), while it does not.
    pub down_since: Mutex<Option<Timestamp>>,
    /// Live nodes seen at the last heartbeat.
    pub nodes: AtomicU64,
    /// The fleet's retries waiting and in flight, as the store last said.
    pub queue_depth: Arc<AtomicU64>,
}

/// A node starts with the store answering: it connected to join the fleet.
impl Default for FleetState {
    fn default() -> FleetState {
        FleetState {
            settled: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            store_up: AtomicBool::new(true),
            down_since: Mutex::new(None),
            nodes: AtomicU64::new(0),
            queue_depth: Arc::default(),
        }
    }
}

impl FleetState {
    pub(crate) fn answered(&self, ok: bool) {
        let was = self.store_up.swap(ok, Relaxed);
        let mut since = self
            .down_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match (was, ok) {
            (true, false) => *since = Some(Timestamp::now()),
            (_, true) => *since = None,
            (false, false) if since.is_none() => *since = Some(Timestamp::now()),
            _ => {}
        }
    }

    /// Since when the store does not answer, if it does not.
    pub fn down_since(&self) -> Option<Timestamp> {
        *self
            .down_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

pub(crate) struct Keeper {
    pub(crate) store: Arc<RedisStore>,
    /// The run's messages are a keyed run's events (their ids are `event-…`).
    pub(crate) keyed: bool,
    pub(crate) durable: Durable,
    pub(crate) desk: Arc<Desk>,
    pub(crate) live: Arc<Live>,
    pub(crate) state: Arc<FleetState>,
    pub(crate) rules: Arc<PolicyHandle>,
    pub(crate) rules_errors: super::RulesErrors,
    pub(crate) member: Member,
    pub(crate) lease: Duration,
    pub(crate) messages: Option<u64>,
    pub(crate) pending: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// The node's breakers, for its heartbeat.
    pub(crate) breakers: crate::metrics::gate::Breakers,
    /// The version of the canary the node runs, for its heartbeat.
    pub(crate) canary: CanaryVersion,
    /// Surplus partitions stopped, to be released at the next balance.
    pub(crate) releasing: Mutex<std::collections::HashSet<Part>>,
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or(Err(StoreError::WriterClosed))
}

/// Pings the store every [`TICK`] (each ping bounded by [`PROBE`]) and says in `state`
/// whether it answered, until aborted.
pub(crate) async fn probe(store: Arc<RedisStore>, state: Arc<FleetState>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let s = store.clone();
        let up = tokio::task::spawn_blocking(move || s.ping(PROBE))
            .await
            .unwrap_or(false);
        state.answered(up);
    }
}

impl Keeper {
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut epochs: HashMap<Part, Held> = HashMap::new();
        let mut next_balance = Instant::now();
        let mut next_progress = Instant::now();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut warned = false;
        // Whether the store answers is probed on a task of its own, every tick: a round below
        // can wait seconds on a store that just went away (each call has its deadline), and
        // `/readyz` must not wait with it.
        let probing = tokio::spawn(probe(self.store.clone(), self.state.clone()));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => break,
            }
            // A stop does not wait for the round in progress (its calls may be answered late
            // by a loaded store): the last round below follows at once.
            let round = async {
                let now = Instant::now();
                let up = self.state.store_up.load(Relaxed);
                if !up {
                    if !warned {
                        tracing::warn!(
                            "the shared store does not answer; decisions go on, writes queue up"
                        );
                    }
                    warned = true;
                    return;
                }
                warned = false;
                let mut ok = self.settle_elsewhere().await;
                if now >= next_balance {
                    ok &= self.balance(&mut epochs).await;
                    next_balance = now + self.lease / 3;
                }
                if now >= next_progress {
                    ok &= self.progress().await;
                    next_progress = now + PROGRESS_EVERY;
                }
                if !ok {
                    tracing::debug!("a call to the shared store failed; trying again next tick");
                }
                if !ok && !warned {
                    tracing::warn!(
                        "the shared store does not answer; decisions go on, writes queue up"
                    );
                }
                warned = !ok;
            };
            tokio::select! {
                () = round => {}
                _ = stop.changed() => break,
            }
        }
        probing.abort();
        // A graceful stop (the spout has stopped and its positions are committed): let the
        // partitions go at once rather than after their lease, and leave.
        let store = self.store.clone();
        let member = self.member.clone();
        let held: Vec<Held> = epochs.into_values().collect();
        let _ = blocking(move || {
            for h in &held {
                store.release_partition(SOURCE, &member, h)?;
            }
            store.leave(&member)
        })
        .await;
    }

    /// Asks the store about the positions the spout waits on; true if it answered. (Those the
    /// partition's stored position covers are settled by [`Keeper::progress`], which reads it.)
    async fn settle_elsewhere(&self) -> bool {
        let gaps = self.desk.gaps();
        if gaps.is_empty() {
            return true;
        }
        let (store, keyed) = (self.store.clone(), self.keyed);
        let found = blocking(move || {
            let mut found = Vec::new();
            for (part, positions) in gaps {
                let ids: Vec<MessageId> = positions
                    .iter()
                    .map(|&k| MessageId::from(message_id(keyed, order_at(part, k))))
                    .collect();
                let fates = store.known_fates(&ids)?;
                if fates.is_empty() {
                    continue;
                }
                let known: std::collections::HashSet<&str> =
                    fates.iter().map(|(id, _)| id.as_str()).collect();
                let settled: Vec<u64> = positions
                    .iter()
                    .zip(&ids)
                    .filter(|(_, id)| known.contains(id.as_str()))
                    .map(|(&k, _)| k)
                    .collect();
                found.push((part, settled));
            }
            Ok(found)
        })
        .await;
        match found {
            Ok(found) => {
                for (part, positions) in found {
                    self.desk.send(Command::Settled { part, positions });
                }
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading fates for the partitions failed");
                false
            }
        }
    }

    /// Heartbeats and balances the partitions; true if the store answered.
    async fn balance(&self, held: &mut HashMap<Part, Held>) -> bool {
        let claims = self.durable.claim_stats().unwrap_or_default();
        let owned_now = self.desk.owned();
        let status = NodeStatus {
            rules_version: Some(self.rules.current().version().to_string()),
            canary_version: (self.canary)(),
            rules_errors: self
                .rules_errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            partitions: owned_now.clone(),
            in_flight: (self.pending)() + claims.held,
            retries_claimed: claims.claimed,
            breakers: (self.breakers)(),
        };
        // Surplus the spout has stopped (it no longer owns it): release it now.
        let released: Vec<Held> = held
            .values()
            .filter(|h| !owned_now.contains(&h.partition) && self.releasing(h.partition))
            .copied()
            .collect();
        let holding: Vec<Held> = held
            .values()
            .filter(|h| !released.contains(h))
            .copied()
            .collect();
        let store = self.store.clone();
        let lease = self.lease;
        let member = self.member.clone();
        let balanced = blocking(move || {
            for h in &released {
                store.release_partition(SOURCE, &member, h)?;
            }
            store.heartbeat(&member, &status)?;
            let nodes = store.nodes(lease)?.len() as u64;
            let owned = store.balance_partitions(SOURCE, PARTITIONS, &member, lease, &holding)?;
            Ok((nodes, owned, released))
        })
        .await;
        let (nodes, owned, released) = match balanced {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(error = %e, "balancing the partitions failed");
                return false;
            }
        };
        for h in released {
            held.remove(&h.partition);
            self.releasing
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&h.partition);
        }
        self.state.nodes.store(nodes, Relaxed);
        if !owned.member {
            tracing::warn!(
                "this node is no longer a live member of the fleet (it stalled past its lease?); rejoining"
            );
        }
        for h in &owned.lost {
            if held.remove(&h.partition).is_some() {
                self.desk.send(Command::Lost { part: h.partition });
            }
        }
        for &part in &owned.surplus {
            let mut releasing = self
                .releasing
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if held.contains_key(&part) && releasing.insert(part) {
                // Stop it first; it is released at the next balance, its position committed.
                self.desk.send(Command::Lost { part });
            }
        }
        for h in owned.held {
            if let Some(old) = held.get_mut(&h.partition) {
                *old = h;
                continue;
            }
            let (part, keyed) = (h.partition, self.keyed);
            let durable = self.durable.clone();
            let loaded = blocking(move || {
                durable.source_position(
                    &partition_source(part),
                    move |k| message_id(keyed, order_at(part, k)),
                    [],
                )
            })
            .await;
            match loaded {
                Ok(position) => {
                    held.insert(part, h);
                    self.desk.send(Command::Acquired {
                        part,
                        epoch: h.epoch,
                        position,
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, partition = part, "loading a partition's position failed");
                    return false;
                }
            }
        }
        true
    }

    /// True if `part` is surplus this node stopped, waiting to be released.
    fn releasing(&self, part: Part) -> bool {
        self.releasing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&part)
    }

    /// Reads the fleet's progress from the partitions' committed positions; true if the
    /// store answered. A stored position past a position the spout waits on settles it: a
    /// previous owner that had not heard it lost the partition (its lease ran out while the
    /// store was down, or while it was stopped) settled the same messages and committed past
    /// this node, pruning the acked fates its position covers, so no fate tells of them.
    async fn progress(&self) -> bool {
        let store = self.store.clone();
        let read = blocking(move || {
            let positions = (0..PARTITIONS)
                .map(|part| Ok(store.position(&partition_source(part))?.unwrap_or(0)))
                .collect::<Result<Vec<u64>, StoreError>>()?;
            let (due, in_flight) = store.depth()?;
            Ok((positions, due + in_flight))
        })
        .await;
        let Ok((positions, depth)) = read else {
            return false;
        };
        self.state.queue_depth.store(depth, Relaxed);
        for (part, waits) in self.desk.gaps() {
            let through = positions[part as usize];
            if waits.first().is_some_and(|&k| k <= through) {
                self.desk.send(Command::Committed { part, through });
            }
        }
        let settled: u64 = positions.iter().sum();
        self.state.settled.store(settled, Relaxed);
        self.live.settled.fetch_max(settled, Relaxed);
        if let Some(n) = self.messages {
            let done = (0..PARTITIONS).all(|p| positions[p as usize] >= partition_len(p, n));
            if done && !self.state.finished.swap(true, Relaxed) {
                tracing::info!("every order of the run has its fate");
            }
        }
        true
    }
}
