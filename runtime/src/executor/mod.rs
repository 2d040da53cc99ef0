//! Running a topology: wiring the channels, spawning the tasks, watching for quiescence, and
//! the graceful shutdown.
//!
//! Every task is spawned once: one per spout task (plus its dead-letter writer), one per bolt
//! task, one per acker. Channels carry batches and are bounded; see `acker::run_acker` for why
//! the fate channels can never block the ackers, which keeps the whole graph deadlock-free
//! (the builder rejects cycles between bolts).

pub(crate) mod bolt;
mod dead_letters;
mod gating;
mod ordering;
pub(crate) mod outbox;
mod pending;
pub(crate) mod spout;
mod stall;

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, PanicHookInfo, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::acker::run_acker;
use crate::adaptive::Heat;
use crate::fate::{FailurePolicy, RetryQueue, Seams};
use crate::stats::{Stats, StatsSnapshot};
use crate::topology::builder::BoltFactory;
use crate::topology::grouping::Route;
use crate::topology::{Fields, Grouping, ROOT_FIELDS, TaskInfo, Topology, Tuple};
use bolt::BoltParts;
use outbox::Outbox;
use spout::{SpoutParts, SpoutTask};

/// What spout tasks are told to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// Emit and handle fates.
    Run,
    /// Emit nothing more; handle fates until nothing is in flight, then stop.
    Drain,
    /// Stop now.
    Stop,
}

/// What a spout task reports about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SpoutStatus {
    pub(crate) exhausted: bool,
    pub(crate) in_flight: usize,
    pub(crate) queued: usize,
    pub(crate) exited: bool,
}

impl SpoutStatus {
    fn quiescent(&self) -> bool {
        self.exited || (self.exhausted && self.in_flight == 0 && self.queued == 0)
    }
}

thread_local! {
    /// Set while this thread runs user code under [`guarded`].
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// Where the last panic under [`guarded`] happened, as the panic hook saw it.
    static CAUGHT_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// For a process's panic hook: whether this panic happens inside a spout, bolt or policy call
/// that the executor catches. Those are logged by the executor itself, as one line with the
/// panic's message and (when the hook called this) its location, and the task carries on (a
/// bolt is restarted, its tuple fails with `PANIC`); so a hook that gets `true` need print
/// nothing. Any other panic gets `false`: print it as usual.
///
/// ```no_run
/// let default_hook = std::panic::take_hook();
/// std::panic::set_hook(Box::new(move |info| {
///     if !rebound_runtime::caught_panic(info) {
///         default_hook(info);
///     }
/// }));
/// ```
pub fn caught_panic(info: &PanicHookInfo<'_>) -> bool {
    if !GUARDED.with(Cell::get) {
        return false;
    }
    let at = info
        .location()
        .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
    CAUGHT_AT.with(|c| *c.borrow_mut() = at);
    true
}

/// A panic caught by [`guarded`]: its message, and where it happened if the panic hook told
/// ([`caught_panic`]).
pub(crate) struct Caught {
    pub(crate) message: String,
    pub(crate) location: Option<String>,
}

impl Caught {
    /// The location, or `unknown` when no hook told it.
    pub(crate) fn at(&self) -> &str {
        self.location.as_deref().unwrap_or("unknown")
    }
}

/// Runs user code, catching a panic (see [`caught_panic`]).
pub(crate) fn guarded<R>(f: impl FnOnce() -> R) -> Result<R, Caught> {
    let outer = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(outer));
    result.map_err(|payload| Caught {
        message: panic_message(&*payload),
        location: CAUGHT_AT.with(|c| c.borrow_mut().take()),
    })
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// A running topology.
///
/// Dropping it without [`shutdown`](RunningTopology::shutdown) stops the spouts at once
/// (in-flight trees are abandoned, to be redelivered by their sources).
pub struct RunningTopology {
    control: watch::Sender<Control>,
    statuses: Vec<watch::Receiver<SpoutStatus>>,
    spout_tasks: Vec<JoinHandle<()>>,
    other_tasks: Vec<JoinHandle<()>>,
    stats: Arc<Stats>,
    heat: Arc<Heat>,
    gate: Arc<crate::adaptive::RetryGate>,
    /// Syncing the gate and heat with the fleet's, on a shared store.
    fleet_sync: Option<crate::adaptive::FleetSync>,
}

/// How a shutdown went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// True if every in-flight tree finished before the drain timeout.
    pub drained: bool,
    /// Trees still in flight at the stop (their messages got no fate; a durable source
    /// redelivers them).
    pub abandoned: usize,
    /// Messages left in the retry queues (flushed by the queues).
    pub retry_queue_depth: usize,
}

impl Topology {
    /// Starts every task on the current tokio runtime.
    ///
    /// # Panics
    /// When called outside a tokio runtime.
    pub fn start(self, seams: Seams) -> RunningTopology {
        let cfg = Arc::new(self.config);
        let stats = Arc::new(Stats::for_topology(
            self.bolts.iter().map(|b| b.name),
            cfg.message_timeout,
        ));
        let Seams {
            policy,
            dead_letters,
            retry_queues,
            key_notices,
            custody,
            acked,
            time,
            fleet,
        } = seams;
        // One heat for every spout task: the failures of a biz heat it wherever decided.
        let heat = Arc::new(Heat::new(policy.heat_half_life()));
        let gate = Arc::new(crate::adaptive::RetryGate::new(&cfg.fuse, time.now()));
        let fleet_sync = fleet.map(|fleet| {
            crate::adaptive::FleetSync::start(crate::adaptive::SyncParts {
                fleet,
                gate: gate.clone(),
                heat: heat.clone(),
                policy: policy.clone(),
                time: time.clone(),
                every: crate::adaptive::SYNC_EVERY,
            })
        });

        // Bolt tasks are numbered globally, component after component.
        let mut first_task = Vec::with_capacity(self.bolts.len());
        let mut bolt_tasks = 0;
        for b in &self.bolts {
            first_task.push(bolt_tasks);
            bolt_tasks += b.parallelism;
        }
        let (mut inputs_tx, mut inputs_rx): (Vec<_>, Vec<_>) = (0..bolt_tasks)
            .map(|_| mpsc::channel::<Vec<Tuple>>(cfg.channel_capacity))
            .map(|(tx, rx)| (Some(tx), Some(rx)))
            .unzip();
        let (acker_tx, acker_rx): (Vec<_>, Vec<_>) = (0..cfg.ackers)
            .map(|_| mpsc::channel(cfg.channel_capacity * 4))
            .unzip();
        let acker_tx: Arc<[_]> = acker_tx.into();
        let spout_tasks: usize = self.spouts.iter().map(|s| s.parallelism).sum();
        let (fate_tx, fate_rx): (Vec<_>, Vec<_>) = (0..spout_tasks)
            .map(|_| mpsc::channel(cfg.max_spout_pending + 1))
            .unzip();
        let fate_tx: Arc<[_]> = fate_tx.into();

        // Each component's routes, compiled against its own output fields.
        let mut fields_of: BTreeMap<&str, Fields> = BTreeMap::new();
        for s in &self.spouts {
            fields_of.insert(s.name, Fields::new(ROOT_FIELDS));
        }
        for b in &self.bolts {
            fields_of.insert(b.name, b.fields);
        }
        let mut routes: BTreeMap<String, Vec<Route>> = BTreeMap::new();
        for (i, b) in self.bolts.iter().enumerate() {
            let tasks = first_task[i]..first_task[i] + b.parallelism;
            for (source, grouping) in &b.inputs {
                let source_fields = fields_of[source.as_str()];
                let route = match grouping {
                    Grouping::Shuffle => Route::shuffle(tasks.clone()),
                    Grouping::All => Route::all(tasks.clone()),
                    Grouping::Global => Route::global(tasks.clone()),
                    Grouping::Fields(keys) => Route::fields(
                        keys.iter().filter_map(|k| source_fields.index(k)).collect(),
                        tasks.clone(),
                    ),
                };
                routes.entry(source.clone()).or_default().push(route);
            }
        }
        let outbox_for = |name: &'static str, fields: Fields| {
            let my_routes = routes.get(name).cloned().unwrap_or_default();
            let mut senders: Vec<Option<mpsc::Sender<Vec<Tuple>>>> = vec![None; bolt_tasks];
            for (i, b) in self.bolts.iter().enumerate() {
                if b.inputs.iter().any(|(s, _)| s == name) {
                    let tasks = first_task[i]..first_task[i] + b.parallelism;
                    senders[tasks.clone()].clone_from_slice(&inputs_tx[tasks]);
                }
            }
            Outbox::new(
                name,
                fields,
                my_routes,
                senders,
                acker_tx.clone(),
                cfg.batch_size,
            )
        };

        let mut other_tasks = Vec::new();
        for rx in acker_rx {
            other_tasks.push(tokio::spawn(run_acker(
                rx,
                fate_tx.clone(),
                cfg.message_timeout,
            )));
        }
        for (i, b) in self.bolts.iter().enumerate() {
            for index in 0..b.parallelism {
                let Some(input) = inputs_rx[first_task[i] + index].take() else {
                    continue;
                };
                let parts = BoltParts {
                    info: TaskInfo {
                        component: b.name,
                        index,
                        parallelism: b.parallelism,
                    },
                    input,
                    outbox: outbox_for(b.name, b.fields),
                    stats: stats.clone(),
                    component: i,
                    arity: b.fields.len(),
                    tick: b.tick,
                };
                other_tasks.push(match &b.factory {
                    BoltFactory::Simple(make) => tokio::spawn(bolt::run_bolt(make.clone(), parts)),
                    BoltFactory::Deferred(make) => {
                        tokio::spawn(bolt::run_deferred(make.clone(), parts))
                    }
                });
            }
        }
        let (control, control_rx) = watch::channel(Control::Run);
        let mut statuses = Vec::new();
        let mut spout_handles = Vec::new();
        let mut fate_rx = fate_rx.into_iter();
        let mut global = 0u32;
        for s in &self.spouts {
            for index in 0..s.parallelism {
                let info = TaskInfo {
                    component: s.name,
                    index,
                    parallelism: s.parallelism,
                };
                let (status, status_rx) = watch::channel(SpoutStatus::default());
                statuses.push(status_rx);
                let queue: Box<dyn RetryQueue> = retry_queues(&info);
                let notices = key_notices(&info);
                let custody = custody(&info);
                let policy: Arc<dyn FailurePolicy> = policy.clone();
                let parts = SpoutParts {
                    global,
                    cfg: cfg.clone(),
                    outbox: outbox_for(s.name, Fields::new(ROOT_FIELDS)),
                    fates: fate_rx.next().expect("one fate channel per spout task"),
                    policy,
                    queue,
                    notices,
                    custody,
                    dead_letters: dead_letters.clone(),
                    acked: acked.clone(),
                    time: time.clone(),
                    stats: stats.clone(),
                    heat: heat.clone(),
                    control: control_rx.clone(),
                    status,
                    gate: gate.clone(),
                };
                let (task, batcher) = SpoutTask::new((s.factory)(&info), parts);
                spout_handles.push(tokio::spawn(task.run()));
                other_tasks.push(tokio::spawn(batcher.run()));
                global += 1;
            }
        }
        // Only the tasks hold senders now, so inputs close as their upstream tasks stop.
        inputs_tx.iter_mut().for_each(|tx| *tx = None);
        drop(inputs_tx);
        RunningTopology {
            control,
            statuses,
            spout_tasks: spout_handles,
            other_tasks,
            stats,
            heat,
            gate,
            fleet_sync,
        }
    }
}

impl RunningTopology {
    /// The counters now.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The live counters (for an exporter that reads them on its own schedule).
    pub fn stats_handle(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// The fault heat the spout tasks add their failures to (for an exporter, or a test).
    pub fn heat(&self) -> Arc<Heat> {
        self.heat.clone()
    }

    /// Syncs with the fleet's adaptive state that answered so far (`None` without a shared
    /// store's [`FleetState`](crate::adaptive::FleetState)).
    pub fn fleet_syncs(&self) -> Option<u64> {
        self.fleet_sync.as_ref().map(|s| s.syncs())
    }

    /// The budgets and breakers the topology's spout tasks keep (their state, for an
    /// exporter and a report).
    pub fn retry_gate(&self) -> Arc<crate::adaptive::RetryGate> {
        self.gate.clone()
    }

    /// Waits until every spout is exhausted and has nothing in flight and nothing waiting to
    /// be retried: every message it handed out has its fate.
    pub async fn wait_quiescent(&self) {
        // Quiescence is final (no new messages, nothing in flight, nothing queued), so the
        // tasks can be awaited one after the other.
        for rx in &self.statuses {
            let mut rx = rx.clone();
            let _ = rx.wait_for(SpoutStatus::quiescent).await;
        }
    }

    /// Stops the topology gracefully: spouts emit nothing more (new or retry); trees in flight
    /// finish — and their failures are still decided, retries going to the retry queue and
    /// dead letters to the sink — for up to `drain_timeout`; then the retry queues are flushed
    /// and every task stops.
    pub async fn shutdown(mut self, drain_timeout: Duration) -> ShutdownReport {
        let _ = self.control.send(Control::Drain);
        let spouts = std::mem::take(&mut self.spout_tasks);
        let mut join = tokio::spawn(async move {
            for h in spouts {
                let _ = h.await;
            }
        });
        let drained = tokio::time::timeout(drain_timeout, &mut join).await.is_ok();
        if !drained {
            let _ = self.control.send(Control::Stop);
            // A spout blocked on a full downstream cannot see the stop; give it a moment.
            if tokio::time::timeout(Duration::from_secs(1), &mut join)
                .await
                .is_err()
            {
                join.abort();
            }
        }
        let (abandoned, retry_queue_depth) = self.statuses.iter().fold((0, 0), |(a, q), rx| {
            let s = *rx.borrow();
            (a + s.in_flight, q + s.queued)
        });
        // With the spouts gone, inputs close in topological order and the ackers follow.
        let rest = std::mem::take(&mut self.other_tasks);
        let aborts: Vec<_> = rest.iter().map(JoinHandle::abort_handle).collect();
        let all = async {
            for h in rest {
                let _ = h.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(5), all)
            .await
            .is_err()
        {
            tracing::warn!("some bolt tasks did not stop in time; aborting them");
            aborts.iter().for_each(|a| a.abort());
        }
        ShutdownReport {
            drained,
            abandoned,
            retry_queue_depth,
        }
    }
}

impl Drop for RunningTopology {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Stop);
    }
}
