//! Any topology as a [`Job`]: [`TopologyJob`].

use std::sync::Arc;
use std::time::Duration;

use rebound_engine::PolicyHandle;
use rebound_runtime::RunningTopology;
use rebound_runtime::durable::labels::{self, KeeperLoop, LetterKeeper};
use rebound_runtime::durable::{Durable, DurableOptions, JournalFailure, SharedOptions};
use rebound_runtime::fate::BoxFuture;
use rebound_runtime::policy::{RulePolicy, TimeScale};
use rebound_runtime::sources::SourceStats;
use rebound_runtime::stats::StatsSnapshot;
use rebound_runtime::store::Store;
use rebound_runtime::time::{TimeSource, TokioTime};
use rebound_runtime::topology::{MessageId, Topology};
use tokio::time::Instant;

use super::job::{Job, JobError, Running, Summary, Wiring};
use super::member::{self, FleetMember};
use crate::admin::AdminState;
use crate::admin::desks::DurableDesk;
use crate::metrics::handler::HandlerStats;
use crate::relay::publish::{Publisher, STOP_WITHIN};
use rebound_store_redis::RedisStore;

/// Builds the embedding's topology over the durable layer, told the ids of the retries it
/// recovered from the store (a source's position must not hand them out again), the rules
/// in force (a bolt that says which set decided, as a relay's handler requests do) and, on a
/// fleet, its shared store (a Redis stream on the store's server has its custody acks sent
/// by the store: `RedisStore::ack_custody_of`).
type Build = Box<
    dyn FnOnce(
            &Durable,
            &[MessageId],
            &Arc<PolicyHandle>,
            Option<&Arc<RedisStore>>,
        ) -> Result<Topology, JobError>
        + Send,
>;

/// Where a [`TopologyJob`] keeps its durable state.
#[derive(Clone)]
pub enum JobStore {
    /// A store of its own (the embedded SQLite store): the job runs alone on it, and refuses
    /// a fleet.
    Own(Arc<dyn Store>),
    /// The fleet's shared store (`--store redis://…`, `Options::fleet`): the job joins the
    /// fleet as its node, the store divides the retries (claims) and its sources divide the
    /// messages (a consumer group or a durable consumer).
    Fleet,
}

/// Reads the job's report at the stop, from the topology's last counters.
type Reporter = Box<dyn FnOnce(&StatsSnapshot) -> Box<dyn Summary> + Send + Sync>;

/// Any topology as a [`Job`]: an embedding builds its own spouts and bolts over the durable
/// layer the application makes on its store, and gets what `run` and `serve` have: the live
/// rules deciding its failures, the labels acting on its dead letters (redrive, expire,
/// alert), the admin API and console over its store, its counters in `/metrics`, the signals
/// and the bounded stop.
///
/// ```no_run
/// use rebound::app::{self, Options, TopologyJob};
/// use rebound_runtime::store::SqliteStore;
/// use rebound_runtime::topology::TopologyBuilder;
/// use std::sync::Arc;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Arc::new(SqliteStore::open("data")?);
/// let job = TopologyJob::new(store, |durable, recovered| {
///     let mut b = TopologyBuilder::new("mine");
///     // … b.spout(…), b.bolt(…), the source's position from `durable` (without `recovered`) …
///     # let _ = (durable, recovered);
///     Ok(b.build()?)
/// });
/// let set = rebound_engine::load_dir("rules".as_ref())?.expect("rules that compile");
/// let outcome = app::run_job(Options::embedded("rules"), set, job);
/// # let _ = outcome; Ok(()) }
/// ```
pub struct TopologyJob {
    store: JobStore,
    build: Build,
    scale: TimeScale,
    durable: DurableOptions,
    until_quiet: bool,
    sources: Vec<(String, Arc<SourceStats>)>,
    handler: Option<Arc<HandlerStats>>,
    publisher: Option<Publisher>,
    reporter: Option<Reporter>,
}

impl TopologyJob {
    /// The topology `build` makes over the durable layer on `store` (told the ids of the
    /// retries recovered from it). It runs until stopped (a signal); see
    /// [`TopologyJob::until_quiet`].
    pub fn new(
        store: Arc<dyn Store>,
        build: impl FnOnce(&Durable, &[MessageId]) -> Result<Topology, JobError> + Send + 'static,
    ) -> TopologyJob {
        TopologyJob::over_rules(JobStore::Own(store), move |durable, recovered, _, _| {
            build(durable, recovered)
        })
    }

    /// As [`TopologyJob::new`], with `build` also given the rules in force (live: read
    /// [`PolicyHandle::current`] when it is needed) and, on a fleet, the shared store.
    pub fn over_rules(
        store: JobStore,
        build: impl FnOnce(
            &Durable,
            &[MessageId],
            &Arc<PolicyHandle>,
            Option<&Arc<RedisStore>>,
        ) -> Result<Topology, JobError>
        + Send
        + 'static,
    ) -> TopologyJob {
        TopologyJob {
            store,
            build: Box::new(build),
            scale: TimeScale::REAL,
            durable: DurableOptions::default(),
            until_quiet: false,
            sources: Vec::new(),
            handler: None,
            publisher: None,
            reporter: None,
        }
    }

    /// The topology calls a handler over HTTP (`relay`): its answers in `/metrics`
    /// (`rebound_handler_requests_total{class}`, `rebound_handler_seconds`).
    pub fn handler(mut self, stats: Arc<HandlerStats>) -> TopologyJob {
        self.handler = Some(stats);
        self
    }

    /// Each stored dead letter is also published by `publisher` (`dead_letters.publish`):
    /// it is told of each after the labels' alerts are, started with the topology (its
    /// catch-up over the store first), given [`STOP_WITHIN`] at the stop for what is queued,
    /// and counted in `/metrics` (`rebound_dead_letters_published_total{result}`).
    pub fn publisher(mut self, publisher: Publisher) -> TopologyJob {
        self.publisher = Some(publisher);
        self
    }

    /// After the stop, `report` makes the job's report from the topology's last counters; it
    /// is printed on stdout (`--json`: as JSON).
    pub fn report(
        mut self,
        report: impl FnOnce(&StatsSnapshot) -> Box<dyn Summary> + Send + Sync + 'static,
    ) -> TopologyJob {
        self.reporter = Some(Box::new(report));
        self
    }

    /// A broker source of the topology, shown as `name`: its counters in `/metrics`
    /// (`rebound_source_*`), and `/readyz` 503 while its broker does not answer.
    pub fn source(mut self, name: impl Into<String>, stats: Arc<SourceStats>) -> TopologyJob {
        self.sources.push((name.into(), stats));
        self
    }

    /// The rules' delays (and the labels' durations) run `scale` times faster.
    pub fn time_scale(mut self, scale: TimeScale) -> TopologyJob {
        self.scale = scale;
        self
    }

    /// The durable layer's settings.
    pub fn durable_options(mut self, options: DurableOptions) -> TopologyJob {
        self.durable = options;
        self
    }

    /// The job ends by itself once its spouts are exhausted, no tree is in flight, no retry
    /// is scheduled and no label still owes a redrive (a batch job; `run` ends so).
    pub fn until_quiet(mut self) -> TopologyJob {
        self.until_quiet = true;
        self
    }
}

impl Job for TopologyJob {
    fn start(
        self: Box<Self>,
        wiring: Wiring,
    ) -> BoxFuture<'static, Result<Box<dyn Running>, JobError>> {
        Box::pin(async move {
            let time: Arc<dyn TimeSource> = Arc::new(TokioTime::new());
            let (durable, joined, shared) = match (self.store, &wiring.fleet) {
                (JobStore::Own(store), None) => {
                    (Durable::new(store, time, self.durable), None, None)
                }
                (JobStore::Own(_), Some(_)) => return Err(JobError::FleetUnsupported),
                (JobStore::Fleet, None) => {
                    return Err(JobError::Refused(
                        "this job runs on a fleet's shared store (--store redis://…), and none is given".into(),
                    ));
                }
                (JobStore::Fleet, Some(link)) => {
                    let l = link.clone();
                    let (member, store) = tokio::task::spawn_blocking(move || member::join(&l))
                        .await
                        .map_err(|e| JobError::Task(e.to_string()))??;
                    let mut options = self.durable;
                    // A shared store's outage is waited out (writes queue up), as the bundled
                    // pipeline's fleet does.
                    options.journal.give_up_after = options
                        .journal
                        .give_up_after
                        .max(crate::pipeline::fleet::FLEET_GIVE_UP);
                    let shared = SharedOptions::new(link.options.node.clone(), link.options.lease);
                    let durable = Durable::builder(store.clone(), time)
                        .options(options)
                        .shared(store.clone(), shared)
                        .build();
                    (durable, Some((link.clone(), member)), Some(store))
                }
            };
            let d = durable.clone();
            let recovered = tokio::task::spawn_blocking(move || d.recover())
                .await
                .map_err(|e| JobError::Task(e.to_string()))??;
            let topology = (self.build)(&durable, &recovered, &wiring.rules, shared.as_ref())?;
            let alerting = labels::alerting(wiring.rules.clone(), wiring.alerts);
            // The publisher is told after the alerts.
            durable.on_dead_letters(alerting);
            if let Some(publisher) = self.publisher.clone() {
                durable.on_dead_letters(move |letters| publisher.letters(letters));
            }
            if let Some(publisher) = &self.publisher {
                publisher.start(durable.store().clone());
            }
            let keeper = LetterKeeper::new(durable.clone(), wiring.rules.clone(), self.scale);
            durable.log_decisions(&wiring.release);
            let policy = RulePolicy::new(wiring.rules.clone(), self.scale)
                .with_release(Arc::clone(&wiring.release));
            let mut seams = durable.seams(policy);
            if let (Some((_, member)), Some(store)) = (&joined, &shared) {
                // On a fleet: one budget, one breaker state, one heat (operations.md).
                seams = seams.with_fleet_state(Arc::new(
                    rebound_store_redis::fleet::RedisFleetState::new(store, member),
                ));
            }
            let topology = topology.start(seams);
            let sweeping = keeper.spawn();
            let member = joined.map(|(link, member)| {
                let stats = topology.stats_handle();
                let pending = Arc::new(move || stats.snapshot().pending);
                let gate = topology.retry_gate();
                let breakers = Arc::new(move || crate::metrics::gate::node_breakers(&gate));
                FleetMember::start(
                    &link,
                    member,
                    durable.clone(),
                    wiring.rules.clone(),
                    pending,
                    breakers,
                    crate::pipeline::fleet::canary_version(Some(Arc::clone(&wiring.release))),
                )
            });
            Ok(Box::new(TopologyRunning {
                member,
                durable,
                topology,
                keeper,
                sweeping,
                scale: self.scale,
                until_quiet: self.until_quiet,
                sources: self.sources,
                handler: self.handler,
                publisher: self.publisher,
                reporter: self.reporter,
            }) as Box<dyn Running>)
        })
    }
}

struct TopologyRunning {
    member: Option<FleetMember>,
    durable: Durable,
    topology: RunningTopology,
    keeper: LetterKeeper,
    sweeping: KeeperLoop,
    scale: TimeScale,
    until_quiet: bool,
    sources: Vec<(String, Arc<SourceStats>)>,
    handler: Option<Arc<HandlerStats>>,
    publisher: Option<Publisher>,
    reporter: Option<Reporter>,
}

impl Running for TopologyRunning {
    fn attach(&self, state: &mut AdminState) {
        for (name, stats) in &self.sources {
            state.metrics.sources.attach(name.clone(), stats.clone());
        }
        if let Some(handler) = &self.handler {
            state.metrics.handler.attach(handler.clone());
        }
        if let Some(member) = &self.member {
            let view = member.view().clone();
            state
                .metrics
                .runtime
                .attach_fleet_depth(view.state.queue_depth.clone());
            state.fleet = Some(Arc::new(view));
        }
        if let Some(publisher) = &self.publisher {
            state.metrics.publish.attach(publisher.stats());
        }
        state.metrics.runtime.attach(self.topology.stats_handle());
        state.metrics.letters.attach(self.keeper.clone());
        state.metrics.gate.attach(self.topology.retry_gate());
        state.dead_letters = Some(Arc::new(DurableDesk::new(self.durable.clone(), self.scale)));
    }

    fn store(&self) -> Arc<dyn Store> {
        self.durable.store().clone()
    }

    fn finished(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if !self.until_quiet {
                return std::future::pending().await;
            }
            self.keeper.until_settled(&self.topology).await;
        })
    }

    fn store_failed(&self) -> BoxFuture<'static, Arc<JournalFailure>> {
        let journal = self.durable.journal().clone();
        Box::pin(async move { journal.failed().await })
    }

    fn stop(
        self: Box<Self>,
        by: Instant,
        drain: Duration,
        _report: bool,
    ) -> BoxFuture<'static, Result<Option<Box<dyn Summary>>, JobError>> {
        Box::pin(async move {
            self.sweeping.stop().await;
            let stats = self.topology.stats_handle();
            let left = by.saturating_duration_since(Instant::now());
            let report = self.topology.shutdown(drain.min(left)).await;
            if !report.drained {
                tracing::warn!(
                    abandoned = report.abandoned,
                    "trees still in flight at the stop: their messages get no fate now, and a durable source delivers them again"
                );
            }
            self.durable.journal().flush().await;
            if let Some(publisher) = &self.publisher {
                publisher.stop(STOP_WITHIN).await;
            }
            if let Some(member) = self.member {
                member.leave().await;
            }
            Ok(self.reporter.map(|report| report(&stats.snapshot())))
        })
    }
}
