//! The bundled order pipeline: the topology behind `rebound run` (and `rebound serve`).
//!
//! ```text
//!  orders (spout, 1) ──shuffle──▶ parse (2) ──fields(id)──▶ store (1, deferred) ──▶ pipeline.db
//!     │ order-000001…N, durable position            BAD_JSON,                 idempotent writes,
//!     │ (committed after ack / dead letter)          VALIDATION_FAILED         injected faults
//!     └── failures ──▶ rules (hot-reloaded) ──▶ retry queue (SQLite) / dead letters (SQLite)
//! ```
//!
//! - [`orders`]: the generated orders; [`faults`]: what the store bolt injects.
//! - [`bolts`]: `parse` and `store`; [`db`]: `pipeline.db` (orders, duplicates, the run and its
//!   sessions).
//! - [`report`]: the final report, from the durable state; [`progress`]: the progress bar.
//! - `handle.rs`: [`PipelineHandle`], what the admin API holds; [`lock`]: one process per
//!   data directory; `running.rs`: [`RunningPipeline`], from start to the report.
//! - [`book`]: where the run's own records live ([`RunBook`]: `pipeline.db`, or a fleet's store);
//!   [`fleet`]: the run across nodes on a shared store (partitions, the keeper).
//!
//! [`start`] opens (or resumes) the run in the data directory and returns a
//! [`RunningPipeline`]. Everything that must survive a `kill -9` is durable before it counts:
//! fates, dead letters and scheduled retries in the store (through the
//! [journal](rebound_runtime::durable::Journal)), the spout's position after the fates it covers, orders
//! and duplicates in `pipeline.db`. A restart resumes from the position, skips the messages
//! that already have a fate, recovers the scheduled retries, and the report covers the whole
//! run. A run that already finished is not started again: its report is read back.
//!
//! With `--time-scale F`, the rules' delays, the message timeout and the retry fuse's window
//! run F times faster (see [`policy`](rebound_runtime::policy)); the timeout never drops below
//! [`MIN_MESSAGE_TIMEOUT`] of real time ([`real_message_timeout`]), so a loaded machine does
//! not time out healthy trees.

pub mod alert_backlog;
pub mod bolts;
pub mod book;
pub mod db;
pub mod faults;
pub mod fleet;
mod handle;
pub mod lock;
pub mod orders;
pub mod other_run;
pub mod progress;
pub mod report;
mod running;
mod spout;

pub use book::{BookError, RunBook};
pub use db::{DbError, PipelineDb, RunRecord};
pub use faults::{Fault, Faults};
pub use fleet::{FleetLink, FleetOptions, StoreCheck};
pub use handle::PipelineHandle;
use handle::Shared;
pub use lock::{DataDirLock, LockError};
pub use other_run::{OtherRun, StartOverError};
pub use progress::{Progress, ProgressView};
pub use report::Report;
pub use running::{RunningPipeline, StopPlan, Stopped};
use running::{Session, checkpoint_loop};
pub use spout::Live;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rebound_engine::PolicyHandle;
use tokio::sync::watch;

use tokio::time::Instant;

use bolts::{OrdersWriter, PARSED_FIELDS, ParseBolt, StoreBolt};
use book::{OrderSink, SqliteOrders};
use orders::{OrderGen, SOURCE, message_id, position_of};

use rebound_runtime::durable::labels::{self, AlertSink, LetterKeeper};
use rebound_runtime::durable::{Durable, DurableOptions, SourcePosition};
use rebound_runtime::policy::RulePolicy;
use rebound_runtime::stats::Stats;
use rebound_runtime::store::{SqliteStore, Store, StoreError};
use rebound_runtime::time::{TimeScale, TimeSource, Timestamp, TokioTime};
use rebound_runtime::topology::Spout;
use rebound_runtime::topology::{BuildError, Config, FuseConfig, TopologyBuilder};
use spout::{OrderSpout, Pacer};

/// The shortest message timeout in real time, whatever the time scale: a short CPU stall of a
/// loaded machine (a second of two busy cores) must not turn healthy trees into `TIMEOUT`s.
/// At scale 100 the default 30 s would be 300 ms; it is this second instead.
pub const MIN_MESSAGE_TIMEOUT: Duration = Duration::from_secs(1);

/// The message timeout `rules` (in the rules' time) in real time at `scale`: divided by the
/// scale, never below [`MIN_MESSAGE_TIMEOUT`] (nor above what was asked for).
pub fn real_message_timeout(scale: TimeScale, rules: Duration) -> Duration {
    scale.to_real(rules).max(MIN_MESSAGE_TIMEOUT.min(rules))
}

/// The fuse of `fuse` (in the rules' time) in real time: its window scaled, never below
/// [`MIN_FUSE_WINDOW`] (nor above what was asked for). A window stretched past its scaled
/// length holds that many times the trees, so its `min_samples` is raised by the same factor:
/// the fuse judges as much traffic as its window would hold at its own length. (At x100 the
/// default 10 s is 0.1 s, stretched to 1 s: 500 samples become 5,000, and the tail of a run, a
/// few hundred trees a second that are mostly retries failing again, does not open it.)
pub fn real_fuse(scale: TimeScale, fuse: FuseConfig) -> FuseConfig {
    let scaled = scale.to_real(fuse.window);
    let window = scaled.max(MIN_FUSE_WINDOW.min(fuse.window));
    let min_samples = if window > scaled && !scaled.is_zero() {
        let stretch = window.as_secs_f64() / scaled.as_secs_f64();
        (fuse.min_samples as f64 * stretch).ceil() as u64
    } else {
        fuse.min_samples
    };
    FuseConfig {
        window,
        min_samples,
        ..fuse
    }
}

/// The shortest retry-fuse window in real time, whatever the time scale: as for a breaker
/// ([`MIN_BREAKER_WINDOW`](rebound_runtime::adaptive::gate::MIN_BREAKER_WINDOW)), a window
/// shorter than a tree's latency sees the fast failures before the slow successes, and opens
/// on a healthy run.
pub const MIN_FUSE_WINDOW: Duration = rebound_runtime::adaptive::gate::MIN_BREAKER_WINDOW;

/// Why the pipeline could not start, stop or report.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `pipeline.db` failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The run's book failed.
    #[error(transparent)]
    Book(#[from] BookError),
    /// The fleet refused this node (its name is taken by a live node, or the namespace holds
    /// a run with other parameters).
    #[error("{0}")]
    Refused(String),
    /// Another process runs in the data directory.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The data directory holds another run.
    #[error(transparent)]
    OtherRun(Box<OtherRun>),
    /// `--fresh` could not remove the run the data directory held.
    #[error(transparent)]
    StartOver(#[from] StartOverError),
    /// The topology could not be built (a bug in the pipeline's own settings).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A blocking task panicked or was cancelled.
    #[error("a background task failed: {0}")]
    Task(String),
}

/// How to run the pipeline. [`PipelineOptions::new`] gives `run`'s defaults except the time
/// scale (1, as for `serve`).
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// The rules, through the live handle (give the reloader's, so edits take effect).
    pub rules: Arc<PolicyHandle>,
    /// The data directory (`rebound.db` and `pipeline.db`).
    pub data_dir: PathBuf,
    /// Orders in the run (keyed: events); `None` generates orders until stopped.
    pub messages: Option<u64>,
    /// `--keyed`: each order has one to three events with its id as their key, and the store
    /// bolt checks them in sequence (`out_of_order`; see [`orders`]).
    pub keyed: bool,
    /// `--time-scale`.
    pub time_scale: TimeScale,
    /// New orders per second at most (`None`: as fast as the pipeline takes them).
    pub rate: Option<f64>,
    /// The injected faults.
    pub faults: Faults,
    /// The topology's config; its `message_timeout` is in the rules' time (it gets scaled).
    pub config: Config,
    /// Where the admin API is served next to the pipeline, if anywhere (see `app::serve_admin`).
    pub admin: Option<SocketAddr>,
    /// How often the session's counters are checkpointed.
    pub checkpoint_every: Duration,
    /// How long a store that refuses every write is retried before the pipeline gives up
    /// ([`PipelineHandle::store_failed`]; `--store-give-up`, default 30 s).
    pub store_give_up: Duration,
    /// On a shared store: the fleet this node joins (`--store redis://…`); `None`: the
    /// embedded store in `data_dir`.
    pub fleet: Option<FleetLink>,
    /// Where `alert:` labels send their letters (the configuration's receivers).
    pub alerts: Option<Arc<dyn AlertSink>>,
    /// A correlated outage of the payment gateway (`--outage`).
    pub outage: Option<faults::Outage>,
    /// `run --fresh`: the run the data directory holds is removed first, under its lock
    /// ([`other_run::start_over`]), and this one starts in its place.
    pub fresh: bool,
    /// The process's release state (the decision log, a shadow, a canary), which every
    /// decision consults; `None`: decisions by the rules alone, none logged.
    pub release: Option<Arc<rebound_runtime::release::Release>>,
}

impl PipelineOptions {
    /// 50,000 messages at time scale 1 in `data_dir`, default faults and config.
    pub fn new(rules: Arc<PolicyHandle>, data_dir: impl Into<PathBuf>) -> PipelineOptions {
        PipelineOptions {
            rules,
            data_dir: data_dir.into(),
            messages: Some(50_000),
            keyed: false,
            time_scale: TimeScale::REAL,
            rate: None,
            faults: Faults::default(),
            config: Config::default(),
            admin: None,
            checkpoint_every: Duration::from_millis(250),
            store_give_up: rebound_runtime::durable::JournalOptions::default().give_up_after,
            fleet: None,
            alerts: None,
            outage: None,
            fresh: false,
            release: None,
        }
    }
}

fn now_ms() -> u64 {
    Timestamp::now().as_millis()
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, PipelineError> + Send + 'static,
) -> Result<T, PipelineError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| PipelineError::Task(e.to_string()))?
}

struct Prepared {
    lock: Option<DataDirLock>,
    store: Arc<dyn Store>,
    book: Arc<dyn RunBook>,
    run: RunRecord,
    resume: Option<Resume>,
    /// On a shared store: the fleet's side of the node.
    fleet: Option<fleet::Joined>,
}

struct Resume {
    durable: Durable,
    /// The single source's position; a fleet's partitions come from its keeper.
    position: Option<SourcePosition>,
    session: i64,
}

/// Opens the store and `pipeline.db`, finds or creates the run, and (unless it finished)
/// recovers the retries and the source position. Blocking.
fn prepare(
    options: &PipelineOptions,
    time: Arc<dyn TimeSource>,
) -> Result<Prepared, PipelineError> {
    let dir = &options.data_dir;
    let lock = DataDirLock::acquire(dir)?;
    if options.fresh {
        let removed = other_run::start_over(dir, &lock)?;
        if !removed.files.is_empty() {
            let what = removed.run.map_or_else(
                || "the run it held".to_owned(),
                |r| {
                    format!(
                        "its run of {} at time scale {}",
                        other_run::describe(r.messages, r.keyed),
                        r.time_scale
                    )
                },
            );
            tracing::warn!("--fresh: started over in {}: removed {what}", dir.display());
        }
    }
    let store = Arc::new(SqliteStore::open(dir)?);
    let db = Arc::new(PipelineDb::open(dir)?);
    let scale = options.time_scale.factor();
    let run = match db.run()? {
        Some(run) => {
            if run.messages != options.messages
                || run.keyed != options.keyed
                || (run.time_scale - scale).abs() > 1e-9
            {
                return Err(PipelineError::OtherRun(Box::new(OtherRun {
                    dir: dir.clone(),
                    found: run,
                    messages: options.messages,
                    keyed: options.keyed,
                    time_scale: scale,
                })));
            }
            run
        }
        None => {
            db.create_run(options.messages, options.keyed, scale, now_ms())?;
            db.run()?
                .ok_or_else(|| PipelineError::Task("the run record vanished".into()))?
        }
    };
    if run.finished_ms.is_some() {
        return Ok(Prepared {
            lock: Some(lock),
            store,
            book: db,
            run,
            resume: None,
            fleet: None,
        });
    }
    let mut durable_options = DurableOptions::default();
    durable_options.journal.give_up_after = options.store_give_up;
    durable_options.ordered_letters = blocks_keys(&options.config);
    let durable = Durable::new(store.clone(), time, durable_options);
    let recovered = durable.recover()?;
    let owned: Vec<u64> = recovered
        .iter()
        .filter_map(|id| position_of(id.as_str()))
        .collect();
    let keyed = options.keyed;
    let position = durable.source_position(SOURCE, |n| message_id(keyed, n), owned)?;
    let session = db.begin_session(now_ms(), position.high())?;
    if !recovered.is_empty() || position.committed() > 0 {
        tracing::info!(
            position = position.committed(),
            known_above = position.known_at_start(),
            recovered_retries = recovered.len(),
            "resuming the run"
        );
    }
    Ok(Prepared {
        lock: Some(lock),
        store,
        book: db,
        run,
        resume: Some(Resume {
            durable,
            position: Some(position),
            session,
        }),
        fleet: None,
    })
}

/// The lives the run's orders had before this process (the store's letters, whatever their
/// status), so that an order replayed after a restart is in its next life. Blocking.
fn lives_before(store: &dyn Store) -> Result<faults::Lives, PipelineError> {
    let lives = faults::Lives::default();
    let mut filter = rebound_runtime::store::DeadLetterFilter {
        limit: rebound_runtime::store::MAX_PAGE,
        ..Default::default()
    };
    loop {
        let page = store.dead_letters(&filter)?;
        lives.seed(
            page.items
                .iter()
                .filter_map(|d| position_of(d.letter.id().as_str())),
        );
        match page.next {
            Some(next) => filter.before = Some(next),
            None => return Ok(lives),
        }
    }
}

/// True when the topology orders keys and blocks a key on its dead letter: the open letters
/// with a key are read at the start, so their keys stay blocked.
fn blocks_keys(config: &Config) -> bool {
    !config.ordering.ordered.is_none()
        && config.ordering.on_dead_letter == rebound_runtime::topology::OnDeadLetter::Block
}

/// Starts (or resumes) the pipeline's run in `options.data_dir`. A run that already finished
/// is not started again: the returned pipeline only reports.
///
/// Must be called inside a tokio runtime (it spawns the topology's tasks).
pub async fn start(options: PipelineOptions) -> Result<RunningPipeline, PipelineError> {
    let time: Arc<dyn TimeSource> = Arc::new(TokioTime::new());
    let prep_options = options.clone();
    let prep_time = time.clone();
    let prepared = blocking(move || match &prep_options.fleet {
        Some(f) => fleet::prepare(&prep_options, f, prep_time),
        None => prepare(&prep_options, prep_time),
    })
    .await?;
    let Prepared {
        lock,
        store,
        book,
        run,
        resume,
        fleet,
    } = prepared;
    let live = Arc::new(Live::default());
    let Some(Resume {
        durable,
        position,
        session,
    }) = resume
    else {
        let handle = PipelineHandle {
            shared: Arc::new(Shared {
                _lock: lock,
                store,
                book,
                durable: None,
                stats: Arc::new(Stats::default()),
                live,
                run,
                fleet: fleet.map(|f| f.view()),
                letters: None,
                time_scale: options.time_scale,
                gate: None,
                outage_retries: None,
            }),
        };
        return Ok(RunningPipeline {
            handle,
            topology: None,
            session: None,
            writer: None,
            keeper: None,
            letters: None,
        });
    };
    if let Some(position) = &position {
        live.settled
            .store(position.committed() + position.settled_above(), Relaxed);
        live.high.store(position.high(), Relaxed);
    }

    let scale = options.time_scale;
    let mut config = options.config.clone();
    config.message_timeout = real_message_timeout(scale, config.message_timeout);
    // The fuse's window is time too: unscaled, a tail of failing retries (all that is left
    // near the end of a run) would hold the fuse open for its full real window.
    config.fuse = real_fuse(scale, config.fuse);
    let slow = config.message_timeout * 2;

    // The orders writer: its own connection to pipeline.db (or the fleet's shared order
    // set), its own thread.
    let sink: Box<dyn OrderSink> = match &fleet {
        Some(f) => f.order_sink(),
        None => Box::new(SqliteOrders(db::connect(&options.data_dir)?)),
    };
    let writer = OrdersWriter::spawn(sink, time.clone(), live.duplicates.clone())
        .map_err(|e| PipelineError::Task(format!("cannot start the orders writer: {e}")))?;

    let faults = Arc::new(options.faults.clone());
    let orders = OrderGen::new(faults.seed, faults.malformed, faults.invalid).keyed(options.keyed);
    let spout: Box<dyn Spout> = match (position, &fleet) {
        (Some(position), _) => Box::new(OrderSpout {
            orders,
            next: position.committed() + 1,
            end: options.messages,
            position,
            journal: durable.journal().clone(),
            live: live.clone(),
            pacer: options.rate.map(|r| Pacer::new(r, time.now())),
        }),
        (None, Some(f)) => Box::new(f.spout(
            orders,
            options.messages,
            durable.journal().clone(),
            live.clone(),
            options.rate,
        )),
        (None, None) => return Err(PipelineError::Task("a run without a source".into())),
    };
    let spout = Mutex::new(Some(spout));
    let mut b = TopologyBuilder::new("orders");
    b.config(config);
    b.spout("orders", 1, move |_| {
        spout
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("the order spout has one task, made once")
    });
    b.bolt("parse", 2, |_| ParseBolt)
        .output(PARSED_FIELDS)
        .shuffle("orders");
    let bolt_faults = faults.clone();
    let bolt_writer = writer.clone();
    let outage = options.outage.map(|o| {
        let from = time.now() + scale.to_real(o.start);
        bolts::OutageWindow {
            from,
            until: from + scale.to_real(o.length),
            retries: Arc::default(),
        }
    });
    let outage_retries = outage.as_ref().map(|o| o.retries.clone());
    let store_for_lives = store.clone();
    let lives = Arc::new(blocking(move || lives_before(store_for_lives.as_ref())).await?);
    let bolt_lives = lives.clone();
    b.deferred_bolt("store", 1, move |_| StoreBolt {
        writer: bolt_writer.clone(),
        faults: bolt_faults.clone(),
        slow,
        outage: outage.clone(),
        lives: bolt_lives.clone(),
    })
    .fields("parse", ["id"]);
    let topology = b.build()?;
    let mut policy = RulePolicy::new(options.rules.clone(), scale);
    if let Some(release) = &options.release {
        policy = policy.with_release(Arc::clone(release));
        durable.log_decisions(release);
    }
    let mut seams = durable.seams(policy);
    if let Some(joined) = &fleet {
        seams = seams.with_fleet_state(joined.adaptive_state());
    }
    // Before the topology starts, so that it hears of every letter: the demo's faults heal
    // in an order's next life, and the labels' alerts go to the configuration's receivers.
    let alerting = options
        .alerts
        .clone()
        .map(|sink| labels::alerting(options.rules.clone(), sink));
    durable.on_dead_letters(move |letters| {
        for letter in letters {
            if let Some(n) = orders::position_of(letter.id().as_str()) {
                lives.dead_lettered(n);
            }
        }
        if let Some(alert) = &alerting {
            alert(letters);
        }
    });
    let letters = LetterKeeper::new(durable.clone(), options.rules.clone(), scale);
    let running = topology.start(seams);
    let letter_loop = letters.spawn();
    let stats = running.stats_handle();
    let keeper = fleet.map(|f| {
        let view = f.view();
        let stop = f.spawn_keeper(&durable, &live, &stats, running.retry_gate(), &options);
        (view, stop)
    });

    let handle = PipelineHandle {
        shared: Arc::new(Shared {
            _lock: lock,
            store,
            book,
            durable: Some(durable),
            stats,
            live,
            run,
            fleet: keeper.as_ref().map(|(view, _)| view.clone()),
            letters: Some(letters),
            time_scale: scale,
            gate: Some(running.retry_gate()),
            outage_retries,
        }),
    };
    let started = Instant::now();
    let (stop, stop_rx) = watch::channel(false);
    let checkpoints = tokio::spawn(checkpoint_loop(
        handle.clone(),
        session,
        started,
        options.checkpoint_every,
        stop_rx,
    ));
    Ok(RunningPipeline {
        handle,
        topology: Some(running),
        session: Some(Session {
            id: session,
            started,
            stop,
            checkpoints,
        }),
        writer: Some(writer),
        keeper: keeper.map(|(_, stop)| stop),
        letters: Some(letter_loop),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fuse_window_stretched_to_one_real_second_asks_as_many_times_the_samples() {
        let at = |f: f64, window_ms: u64| {
            let fuse = FuseConfig {
                window: Duration::from_millis(window_ms),
                ..FuseConfig::default()
            };
            let real = real_fuse(TimeScale::new(f).unwrap(), fuse);
            (real.window, real.min_samples)
        };
        // The default 10 s at x100 is 0.1 s, stretched to 1 s: ten times the samples.
        assert_eq!(at(100.0, 10_000), (Duration::from_secs(1), 5_000));
        // At x5 it is 2 s: not stretched, the samples as asked.
        assert_eq!(at(5.0, 10_000), (Duration::from_secs(2), 500));
        // Real time (serve) changes nothing.
        assert_eq!(at(1.0, 10_000), (Duration::from_secs(10), 500));
        // A window asked shorter than the floor is kept as asked.
        assert_eq!(at(1.0, 200), (Duration::from_millis(200), 500));
        // At x1000, 10 ms stretched to 1 s: a hundred times.
        assert_eq!(at(1000.0, 10_000), (Duration::from_secs(1), 50_000));
    }

    #[test]
    fn the_message_timeout_is_scaled_down_to_one_real_second_and_no_further() {
        let at = |f: f64, ms: u64| {
            real_message_timeout(TimeScale::new(f).unwrap(), Duration::from_millis(ms))
        };
        // The default 30 s at the default scale 100 would be 300 ms.
        assert_eq!(at(100.0, 30_000), Duration::from_secs(1));
        assert_eq!(at(1000.0, 30_000), Duration::from_secs(1));
        assert_eq!(at(10.0, 30_000), Duration::from_secs(3));
        assert_eq!(at(1.0, 30_000), Duration::from_secs(30));
        // A timeout asked for below the floor is kept as asked, not raised.
        assert_eq!(at(1.0, 400), Duration::from_millis(400));
        assert_eq!(at(100.0, 400), Duration::from_millis(400));
    }
}
