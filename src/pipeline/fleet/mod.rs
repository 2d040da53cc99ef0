//! The bundled pipeline across nodes: several `rebound run --store redis://…` processes with
//! one namespace run **one** run of N orders between them (`docs/spec/scale-out.md`).
//!
//! - The order source is split into [`PARTITIONS`] partitions (order `n` is in partition
//!   `(n - 1) mod 16`, at position `(n - 1) / 16 + 1`), each a source with its own committed
//!   position in the store. Each node owns a fair share by lease (the store balances them);
//!   a dead node's partitions are taken over after their lease.
//! - `keeper.rs`: the node's task that joins the fleet, heartbeats, balances the partitions,
//!   tells the spout which fates other nodes wrote for its partitions (their retries may be
//!   claimed anywhere), and watches the fleet's progress until every order has its fate.
//! - `spout.rs`: the spout over the owned partitions; `book.rs`: the run's records in the
//!   store (its parameters, every session's counters, the shared idempotent order sink).
//! - `run.rs` and `effects.rs`: the product's own records in the store's namespace, by its
//!   own scripts (`scripts/*.lua`, run by `RedisStore::eval`): the run's parameters (first
//!   node wins) and its end; the shared idempotent effect sets. Each file lists its keys. The
//!   sessions' counters are the store's small documents of kind `sessions`
//!   (`{NS}:docs:sessions`, `RedisStore::put_doc`): `NODE#SESSION` → JSON.

pub(crate) mod book;
pub mod effects;
pub(crate) mod keeper;
pub(crate) mod rules_report;
pub mod run;
pub(crate) mod spout;

pub use keeper::FleetState;
pub(crate) use keeper::{CanaryVersion, canary_version};
pub use rules_report::{RulesChanged, RulesErrors};

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::orders::{OrderGen, SOURCE, position_of};
use super::spout::Live;
use super::{PipelineError, PipelineOptions, Prepared, Resume, RunRecord, now_ms};
use book::{FleetBook, FleetOrders, run_params};
use rebound_runtime::durable::{Durable, DurableOptions, Journal, SharedOptions};
use rebound_runtime::stats::Stats;
use rebound_runtime::store::{Offset, SourceName};
use rebound_runtime::time::TimeSource;
use rebound_runtime::topology::Message;
use rebound_store_redis::{Join, Member, RedisOptions, RedisStore};
use spout::{Desk, FleetSpout};

/// The order source's partitions.
pub const PARTITIONS: u32 = 16;

/// A partition's number, `0..16`.
pub(crate) type Part = u32;

/// The partition of order `n` (n ≥ 1).
pub(crate) fn partition_of(n: u64) -> Part {
    ((n - 1) % u64::from(PARTITIONS)) as Part
}

/// The position of order `n` in its partition (from 1).
pub(crate) fn position_in(n: u64) -> u64 {
    (n - 1) / u64::from(PARTITIONS) + 1
}

/// The order at position `k` (from 1) of partition `part`.
pub(crate) fn order_at(part: Part, k: u64) -> u64 {
    (k - 1) * u64::from(PARTITIONS) + u64::from(part) + 1
}

/// How many of orders `1..=n` fall in partition `part`.
pub(crate) fn partition_len(part: Part, n: u64) -> u64 {
    let p = u64::from(part);
    if n <= p {
        0
    } else {
        (n - p - 1) / u64::from(PARTITIONS) + 1
    }
}

/// The source name partition `part` commits its position under: `order-spout/7`.
pub(crate) fn partition_source(part: Part) -> String {
    rebound_store_redis::fleet::partition_source(SOURCE, part)
}

/// A message's partition and its position in it: its [`Offset`], for the journal and the
/// store. A message without an offset (a replayed letter's fresh delivery) has none.
fn partition_offset() -> impl Fn(&Message) -> Option<Offset> + Send + Sync + 'static {
    // Interned once each: the journal asks on every ack.
    let names: Vec<SourceName> = (0..PARTITIONS)
        .map(|p| SourceName::from(partition_source(p).as_str()))
        .collect();
    move |m: &Message| {
        let position = m.offset?.get();
        let n = position_of(m.id.as_str())?;
        Some(Offset {
            source: names[partition_of(n) as usize],
            position,
        })
    }
}

/// What `--store-check` says to do with a server unfit for durable state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreCheck {
    /// Refuse to start (exit 2).
    Refuse,
    /// Warn on stderr and start.
    Warn,
}

/// How a node joins a fleet.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// The shared store.
    pub redis: RedisOptions,
    /// This node's name (`--node`).
    pub node: String,
    /// How long a claim or a partition stays this node's without renewal (`--lease`).
    pub lease: Duration,
    /// What to do with a server unfit for durable state (`--store-check`).
    pub check: StoreCheck,
}

/// A node's link to its fleet, once connected: what the pipeline needs of it.
#[derive(Clone)]
pub struct FleetLink {
    /// How the node joins.
    pub options: FleetOptions,
    /// The shared store, connected and checked ([`connect`]).
    pub store: Arc<RedisStore>,
    /// Why the node does not run the store's rule set, if it does not (`/v1/nodes`).
    pub rules_errors: RulesErrors,
    /// Told when the set the node runs, or those errors, may have changed.
    pub rules_changed: RulesChanged,
}

impl std::fmt::Debug for FleetLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetLink")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// How long a fleet's journal retries a store that does not answer before it gives up: a
/// shared store's outage is waited out (writes queue up, the spout stops taking orders), not
/// a reason to stop.
pub(crate) const FLEET_GIVE_UP: Duration = Duration::from_secs(24 * 3600);

/// Connects to the shared store and checks the server as `--store-check` says. Blocking.
pub fn connect(options: &FleetOptions) -> Result<RedisStore, PipelineError> {
    let store = RedisStore::connect(&options.redis)?;
    let check = store.check_server()?;
    if check.config_hidden() {
        eprintln!(
            "warning: the Redis server refuses CONFIG GET; cannot check appendonly, appendfsync and maxmemory-policy"
        );
    }
    for w in check.warnings() {
        eprintln!("warning: {w}");
    }
    let problems = check.problems();
    match (problems.first(), options.check) {
        (None, _) => {}
        (Some(first), StoreCheck::Refuse) => {
            return Err(PipelineError::Refused(format!(
                "{first} (or pass --store-check warn to start anyway)"
            )));
        }
        (Some(_), StoreCheck::Warn) => {
            for p in &problems {
                eprintln!("warning: {p}");
            }
        }
    }
    Ok(store)
}

/// Joins the fleet on `store` as `fleet.node`: the member, or why not in one line (a live node
/// has the name). Blocking.
pub(crate) fn join_as(
    store: &RedisStore,
    fleet: &FleetOptions,
) -> Result<Result<Member, String>, rebound_runtime::store::StoreError> {
    let member = Member::new(fleet.node.clone());
    if let Join::Taken { last_seen, .. } = store.join(&member, fleet.lease)? {
        let ago = rebound_runtime::time::Timestamp::now() - last_seen;
        return Ok(Err(format!(
            "node {} is already live in namespace {} (seen {} ms ago); pass another --node, or wait {} for a dead one's lease",
            fleet.node,
            fleet.redis.namespace,
            ago.as_millis(),
            humantime::format_duration(fleet.lease)
        )));
    }
    Ok(Ok(member))
}

/// Joins the fleet, records or checks the run, and makes the node's durable seams. Blocking.
pub(super) fn prepare(
    options: &PipelineOptions,
    link: &FleetLink,
    time: Arc<dyn TimeSource>,
) -> Result<Prepared, PipelineError> {
    let fleet = &link.options;
    let store = link.store.clone();
    let member = join_as(&store, fleet)?.map_err(PipelineError::Refused)?;
    let scale = options.time_scale.factor();
    let asked = run_params(options.messages, options.keyed, scale, options.faults.seed);
    let recorded = run::record(&store, &asked)?;
    let differences = recorded.differences(&asked);
    if !differences.is_empty() {
        let _ = store.leave(&member);
        let what: Vec<String> = differences.iter().map(ToString::to_string).collect();
        return Err(PipelineError::Refused(format!(
            "namespace {} holds a run with {}: start this node with the same settings to join it, or pass another --namespace",
            fleet.redis.namespace,
            what.join(", ")
        )));
    }
    let run = RunRecord {
        messages: options.messages,
        keyed: options.keyed,
        time_scale: scale,
        created_ms: now_ms(),
        finished_ms: run::finished(&store)?.map(|t| t.as_millis()),
    };
    let book = Arc::new(FleetBook {
        store: store.clone(),
        node: fleet.node.clone(),
        run: run.clone(),
    });
    let joined = Joined {
        store: store.clone(),
        member,
        rules_errors: link.rules_errors.clone(),
        rules_changed: link.rules_changed.clone(),
        lease: fleet.lease,
        desk: Arc::new(Desk::default()),
        state: Arc::new(FleetState::default()),
    };
    if run.finished_ms.is_some() {
        return Ok(Prepared {
            lock: None,
            store,
            book,
            run,
            resume: None,
            fleet: Some(joined),
        });
    }
    let mut durable_options = DurableOptions::default();
    durable_options.journal.give_up_after = options.store_give_up.max(FLEET_GIVE_UP);
    // Every acked fate is written: it drops the retry row another node may have left for the
    // message (an earlier delivery's, scheduled after this node took the partition), which
    // this node's journal does not know of. The store prunes it once the position covers it.
    durable_options.journal.write_every_ack = true;
    // Each message's offset names its partition, so that the acked fates a partition's
    // position covers are pruned (fates stay bounded), as on a store of one's own. In
    // a fleet a message below a partition's mark can still be in flight on another node (a
    // stalled owner's duplicate, a claim reaped and fired again): the store names the offsets
    // of its schedules and dead letters too, and refuses those its position covers, so a late
    // dead letter loses to the pruned acked fate as it would to a kept one.
    let durable = Durable::builder(store.clone(), time)
        .options(durable_options)
        .shared(
            store.clone(),
            SharedOptions::new(fleet.node.clone(), fleet.lease),
        )
        .offsets(partition_offset())
        .build();
    store.name_offsets(partition_offset());
    let session = {
        use super::book::RunBook;
        book.begin_session(now_ms(), 0)?
    };
    Ok(Prepared {
        lock: None,
        store,
        book,
        run,
        resume: Some(Resume {
            durable,
            position: None,
            session,
        }),
        fleet: Some(joined),
    })
}

/// A node that joined the fleet, before its pipeline starts.
pub(super) struct Joined {
    store: Arc<RedisStore>,
    member: Member,
    rules_errors: RulesErrors,
    rules_changed: RulesChanged,
    lease: Duration,
    desk: Arc<Desk>,
    state: Arc<FleetState>,
}

impl Joined {
    /// The fleet's adaptive state for this node's topology: budgets, breakers, the fuse and
    /// heat synced with the other nodes' (`operations.md`, "One fleet, one budget").
    pub(super) fn adaptive_state(&self) -> Arc<dyn rebound_runtime::adaptive::FleetState> {
        Arc::new(rebound_store_redis::fleet::RedisFleetState::new(
            &self.store,
            &self.member,
        ))
    }

    pub(super) fn view(&self) -> FleetView {
        FleetView {
            store: self.store.clone(),
            state: self.state.clone(),
            lease: self.lease,
            node: self.member.node.clone(),
        }
    }

    pub(super) fn order_sink(&self) -> Box<dyn super::book::OrderSink> {
        Box::new(FleetOrders(self.store.clone()))
    }

    pub(super) fn spout(
        &self,
        orders: OrderGen,
        end: Option<u64>,
        journal: Journal,
        live: Arc<Live>,
        rate: Option<f64>,
    ) -> FleetSpout {
        FleetSpout::new(orders, end, journal, live, self.desk.clone(), rate)
    }

    /// Starts the keeper (see `keeper.rs`); stop it with the returned handle.
    pub(super) fn spawn_keeper(
        self,
        durable: &Durable,
        live: &Arc<Live>,
        stats: &Arc<Stats>,
        gate: Arc<rebound_runtime::adaptive::RetryGate>,
        options: &PipelineOptions,
    ) -> KeeperStop {
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(
            rules_report::RulesReport {
                store: self.store.clone(),
                member: self.member.clone(),
                rules: options.rules.clone(),
                errors: self.rules_errors.clone(),
                changed: self.rules_changed.clone(),
            }
            .run(stopped.clone()),
        );
        let stats = stats.clone();
        let keeper = keeper::Keeper {
            store: self.store,
            keyed: options.keyed,
            durable: durable.clone(),
            desk: self.desk,
            live: live.clone(),
            state: self.state,
            rules: options.rules.clone(),
            rules_errors: self.rules_errors,
            member: self.member,
            lease: self.lease,
            messages: options.messages,
            pending: Arc::new(move || stats.snapshot().pending),
            breakers: Arc::new(move || crate::metrics::gate::node_breakers(&gate)),
            canary: keeper::canary_version(options.release.clone()),
            releasing: Default::default(),
        };
        KeeperStop {
            stop,
            task: tokio::spawn(keeper.run(stopped)),
        }
    }
}

/// Stops the keeper: it lets its partitions go and leaves the fleet.
pub(super) struct KeeperStop {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl KeeperStop {
    /// Stops the keeper; its round in progress and its last one (release the partitions,
    /// leave) are let go at `until`: a partition not released is taken over after its lease,
    /// a name not given back is free once the lease has passed.
    pub(crate) async fn stop(self, until: tokio::time::Instant) {
        let _ = self.stop.send(true);
        let mut task = self.task;
        if tokio::time::timeout_at(until, &mut task).await.is_err() {
            task.abort();
            tracing::warn!(
                "the fleet keeper's last round did not finish in time; its partitions go to \
                 other nodes once their lease runs out"
            );
        }
    }
}

/// What the pipeline's handle keeps of the fleet: the store (for `/v1/nodes`) and what the
/// keeper knows (progress, readiness).
#[derive(Clone)]
pub struct FleetView {
    /// The shared store.
    pub store: Arc<RedisStore>,
    /// What the keeper knows.
    pub state: Arc<FleetState>,
    /// The nodes' lease (a node not seen within it is not live).
    pub lease: Duration,
    /// This node's name.
    pub node: String,
}

impl std::fmt::Debug for FleetView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetView")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl crate::admin::fleet::FleetDesk for FleetView {
    fn unreachable_since(&self) -> Option<rebound_runtime::time::Timestamp> {
        self.state.down_since()
    }

    fn nodes(
        &self,
    ) -> Result<Vec<rebound_store_redis::NodeReport>, rebound_runtime::store::StoreError> {
        self.store.nodes(self.lease)
    }
}

impl FleetView {
    /// Waits (up to two leases, and not past `until`) until every live node has stopped and
    /// written its last counters, so that the report this node reads next is the one they
    /// all read.
    pub(crate) async fn settled(&self, until: tokio::time::Instant) {
        let deadline = until.min(tokio::time::Instant::now() + self.lease * 2);
        while tokio::time::Instant::now() < deadline {
            let (store, lease) = (self.store.clone(), self.lease);
            let done = tokio::time::timeout_at(
                deadline,
                tokio::task::spawn_blocking(move || {
                    let live: Vec<String> = store
                        .nodes(lease)
                        .map_err(super::BookError::from)?
                        .into_iter()
                        .map(|n| n.node)
                        .collect();
                    book::live_sessions_ended(&store, &live)
                }),
            )
            .await;
            if matches!(done, Ok(Ok(Ok(true)))) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::warn!(
            "other nodes did not finish within the stop's bound; reporting what the store holds now"
        );
    }

    /// Completes once every order of the run has its fate (the keeper saw it).
    pub async fn finished(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        while !self.state.finished.load(Relaxed) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_cover_every_order_once_in_order() {
        let n = 1000;
        let mut seen = vec![false; n as usize + 1];
        for part in 0..PARTITIONS {
            let len = partition_len(part, n);
            for k in 1..=len {
                let order = order_at(part, k);
                assert!(order <= n);
                assert_eq!(partition_of(order), part);
                assert_eq!(position_in(order), k);
                assert!(!std::mem::replace(&mut seen[order as usize], true));
            }
        }
        assert!(seen[1..].iter().all(|&s| s));
        assert_eq!(partition_len(15, 15), 0);
        assert_eq!(partition_len(14, 15), 1);
    }
}
