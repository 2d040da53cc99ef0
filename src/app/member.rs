//! A [`TopologyJob`](super::TopologyJob) as a node of a fleet (`--store redis`): it joins the
//! fleet under its name (refused while a live node has it), heartbeats what `/v1/nodes` shows
//! (its rule version at once when it changes, its trees in flight and retries claimed every
//! lease / 3), says whether the shared store answers (`/readyz`), and leaves at its stop. The
//! store divides the retries (claims); the job's sources divide the messages (a consumer
//! group, a durable consumer), so there is nothing else to balance.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metrics::gate::Breakers;
use rebound_engine::PolicyHandle;
use rebound_runtime::durable::Durable;
use rebound_runtime::store::StoreError;
use rebound_store_redis::{Member, NodeStatus, RedisStore};

use super::job::JobError;
use crate::pipeline::FleetLink;
use crate::pipeline::fleet::keeper::{FleetState, probe};
use crate::pipeline::fleet::rules_report::RulesReport;
use crate::pipeline::fleet::{FleetView, RulesErrors, join_as};

/// A node that joined its fleet.
pub(super) struct FleetMember {
    store: Arc<RedisStore>,
    member: Member,
    view: FleetView,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// Joins `link`'s fleet as its node. Blocking.
pub(super) fn join(link: &FleetLink) -> Result<(Member, Arc<RedisStore>), JobError> {
    let member = join_as(&link.store, &link.options)?.map_err(JobError::Refused)?;
    Ok((member, link.store.clone()))
}

impl FleetMember {
    /// Starts keeping `member` in `link`'s fleet: `pending` says how many trees the job has
    /// in flight, `breakers` how its breakers stand.
    pub(super) fn start(
        link: &FleetLink,
        member: Member,
        durable: Durable,
        rules: Arc<PolicyHandle>,
        pending: Arc<dyn Fn() -> u64 + Send + Sync>,
        breakers: Breakers,
        canary: crate::pipeline::fleet::CanaryVersion,
    ) -> FleetMember {
        let store = link.store.clone();
        let state = Arc::new(FleetState::default());
        let lease = link.options.lease;
        let (stop, stopped) = watch::channel(false);
        let report = RulesReport {
            store: store.clone(),
            member: member.clone(),
            rules: rules.clone(),
            errors: link.rules_errors.clone(),
            changed: link.rules_changed.clone(),
        };
        let heartbeat = Heartbeat {
            store: store.clone(),
            member: member.clone(),
            durable,
            rules,
            errors: link.rules_errors.clone(),
            state: state.clone(),
            pending,
            breakers,
            canary,
            every: lease / 3,
        };
        let tasks = vec![
            tokio::spawn(report.run(stopped.clone())),
            tokio::spawn(heartbeat.run(stopped)),
            tokio::spawn(probe(store.clone(), state.clone())),
        ];
        FleetMember {
            view: FleetView {
                store: store.clone(),
                state,
                lease,
                node: member.node.clone(),
            },
            store,
            member,
            stop,
            tasks,
        }
    }

    /// What the admin API shows of the fleet (`/v1/nodes`, `/readyz`).
    pub(super) fn view(&self) -> &FleetView {
        &self.view
    }

    /// Stops heartbeating and leaves the fleet (its name is free at once).
    pub(super) async fn leave(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            task.abort();
            let _ = task.await;
        }
        let (store, member) = (self.store, self.member);
        let left = tokio::task::spawn_blocking(move || store.leave(&member)).await;
        if let Ok(Err(e)) = left {
            tracing::warn!(error = %e, "leaving the fleet failed; the node's row expires after its lease");
        }
    }
}

struct Heartbeat {
    store: Arc<RedisStore>,
    member: Member,
    durable: Durable,
    rules: Arc<PolicyHandle>,
    errors: RulesErrors,
    state: Arc<FleetState>,
    pending: Arc<dyn Fn() -> u64 + Send + Sync>,
    breakers: Breakers,
    canary: crate::pipeline::fleet::CanaryVersion,
    every: Duration,
}

impl Heartbeat {
    async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let claims = self.durable.claim_stats().unwrap_or_default();
            let status = NodeStatus {
                rules_version: Some(self.rules.current().version().to_string()),
                canary_version: (self.canary)(),
                rules_errors: self
                    .errors
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone(),
                partitions: Vec::new(),
                in_flight: (self.pending)() + claims.held,
                retries_claimed: claims.claimed,
                breakers: (self.breakers)(),
            };
            let (store, member, lease) = (self.store.clone(), self.member.clone(), self.every * 3);
            let beat = tokio::task::spawn_blocking(move || -> Result<u64, StoreError> {
                store.heartbeat(&member, &status)?;
                Ok(store.nodes(lease)?.len() as u64)
            });
            tokio::select! {
                beat = beat => match beat {
                    Ok(Ok(nodes)) => self.state.nodes.store(nodes, std::sync::atomic::Ordering::Relaxed),
                    Ok(Err(e)) => tracing::debug!(error = %e, "the heartbeat failed; trying again next time"),
                    Err(_) => {}
                },
                _ = stop.changed() => return,
            }
        }
    }
}
