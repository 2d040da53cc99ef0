//! The application: the one wiring behind `rebound run` and `rebound serve`, which differ only
//! in their [`Options`] ([`Options::run`], [`Options::serve`]).
//!
//! [`run`] takes the checked options and the compiled rules, and then:
//!
//! 1. sets up the [`Console`] (logging, and for `run` the progress bar) and the live
//!    rules: a [`Reloader`] over the rules directory and the metrics that count its reloads;
//! 2. installs the signal handlers at once, so that a signal right after start-up still stops
//!    gracefully ([`lifecycle::Signals`]);
//! 3. binds the admin listener ([`AdminListen`]), starts the rules watcher and the
//!    config-center puller: all before the pipeline, so a failed start leaves no data behind;
//! 4. starts (or resumes) the bundled pipeline, announces the admin address and serves the
//!    admin API next to it;
//! 5. waits for every message's fate (bounded runs only), Ctrl-C / SIGTERM, a store that
//!    refuses every write (exit 2), or an admin API that fails (exit 2);
//! 6. stops gracefully within [`lifecycle::STOP_TIMEOUT`]: the admin API finishes its
//!    requests, trees in flight finish, the last writes commit and the report is read; a second
//!    signal stops at once. `run` then prints the report (exit 1 if messages were lost).

mod admin;
mod bundled;
mod console;
mod job;
pub mod lifecycle;
pub(crate) mod member;
pub mod relay;
pub mod shared_rules;
mod topology;

pub use admin::{AdminListen, TokenFrom};
use console::say_error;
pub use console::{Console, LogFormat};
pub use job::{Job, JobError, Running, Wiring};
pub use topology::{JobStore, TopologyJob};

use crate::Outcome;
use crate::admin::AdminState;
use crate::alerts::{AlertDispatcher, AlertOptions};
use crate::config::Receivers;
use crate::metrics::Metrics;
use crate::pipeline::{self, ProgressView};
use lifecycle::{Ending, Signals};
use rebound_engine::CompiledSet;
use rebound_engine::reload::pull::{PullOptions, Puller};
use rebound_engine::reload::{ReloadOptions, Reloader, WatchOptions, Watcher};
use rebound_runtime::policy::TimeScale;
use rebound_store_redis::RedisStore;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long the async runtime waits for its tasks once the command is done (the process exits
/// after it in any case); the last part of a stop's [`lifecycle::EXIT_SHARE`].
const RUNTIME_SHUTDOWN: Duration = Duration::from_millis(500);

/// How often `run`'s progress bar is redrawn from the pipeline's counters.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// How long the stop waits for the alerts still queued to be sent (less if the stop's
/// deadline comes first).
const ALERTS_SHUTDOWN: Duration = Duration::from_secs(2);

/// What the application runs, and how. The two constructors give the two commands' defaults;
/// the command then sets what its flags say.
#[derive(Debug)]
pub struct Options {
    /// The rule set directory (watched; pushes are written into it).
    pub rules: PathBuf,
    /// The data directory: the embedded SQLite store and `pipeline.db`.
    pub data: PathBuf,
    /// Orders in the run; `None` generates orders until stopped.
    pub messages: Option<u64>,
    /// Each order has one to three events with the same key, checked in sequence (`run
    /// --keyed`); `messages` counts events.
    pub keyed: bool,
    /// New orders per second at most; `None`: as fast as the pipeline takes them.
    pub rate: Option<f64>,
    /// The rules' delays and the message timeout run this many times faster.
    pub time_scale: TimeScale,
    /// A correlated outage of the bundled pipeline's payment gateway (`run --outage`).
    pub outage: Option<crate::pipeline::faults::Outage>,
    /// `run --fresh`: remove the run the data directory holds and start this one in its
    /// place.
    pub fresh: bool,
    /// How long a store that refuses every write is retried before the process stops with the
    /// cause (exit 2).
    pub store_give_up: Duration,
    /// Where the admin API listens, if anywhere.
    pub admin: Option<AdminListen>,
    /// The config center to pull rule sets from, if any.
    pub pull: Option<Pull>,
    /// Whether a rules directory that cannot be watched stops the start (else a warning).
    pub watch_required: bool,
    /// What the user sees: `run`'s progress bar and report, or `serve`'s logs and start-up
    /// line.
    pub console: Console,
    /// JSON on stdout: the report (`run`) or the start-up line (`serve`).
    pub json: bool,
    /// How log lines are written on stderr: text (the default) or JSON, one object a line.
    pub log_format: LogFormat,
    /// On a shared store: the fleet this node joins; `None`: the embedded store in `data`.
    pub fleet: Option<crate::pipeline::FleetOptions>,
    /// The bundled topology's runtime settings (`topology:` of the configuration file);
    /// `message_timeout` and the fuse window are in the rules' time (`--time-scale` divides
    /// them).
    pub topology: rebound_runtime::topology::Config,
    /// How long a graceful stop may take, and its trees in flight (`topology.drain`).
    pub stop: lifecycle::StopBounds,
    /// Where `alert:` labels send their dead letters (`receivers:` of the configuration
    /// file); empty without one. An [`crate::alerts::AlertDispatcher`] started on them is the
    /// job's alert sink.
    pub receivers: Receivers,
    /// The decision log's sample and bound (`decisions:`, release.md).
    pub decisions: rebound_runtime::release::LogOptions,
}

impl Options {
    /// `rebound run`'s defaults: 50,000 orders at time scale 100, as fast as the pipeline takes
    /// them, then the report; the progress bar; no admin API; a rules directory that cannot be
    /// watched is only a warning.
    pub fn run(rules: impl Into<PathBuf>, data: impl Into<PathBuf>) -> Options {
        Options {
            data: data.into(),
            messages: Some(50_000),
            time_scale: TimeScale::new(100.0).expect("100 is a valid time scale"),
            console: Console::Progress,
            ..Options::embedded(rules)
        }
    }

    /// `rebound serve`'s defaults: the admin API on `admin`, orders generated at 20 a second
    /// until stopped, time scale 1; logs and the start-up line; the rules directory must be
    /// watchable.
    pub fn serve(
        rules: impl Into<PathBuf>,
        data: impl Into<PathBuf>,
        admin: AdminListen,
    ) -> Options {
        Options {
            data: data.into(),
            rate: Some(20.0),
            admin: Some(admin),
            watch_required: true,
            ..Options::embedded(rules)
        }
    }

    /// An embedding's defaults for [`run_job`] (and the base of the two above): the rules in
    /// `rules` (watched if it can be, else a warning), logs on stderr and no progress bar, no
    /// admin API (set `admin`), real time. The bundled pipeline's fields (`data`, `messages`,
    /// `rate`, …) are unused by any other job.
    pub fn embedded(rules: impl Into<PathBuf>) -> Options {
        Options {
            rules: rules.into(),
            data: PathBuf::new(),
            messages: None,
            keyed: false,
            rate: None,
            time_scale: TimeScale::REAL,
            outage: None,
            fresh: false,
            store_give_up: rebound_runtime::durable::JournalOptions::default().give_up_after,
            admin: None,
            pull: None,
            watch_required: false,
            console: Console::Server,
            json: false,
            log_format: LogFormat::Text,
            fleet: None,
            topology: rebound_runtime::topology::Config::default(),
            stop: lifecycle::StopBounds::default(),
            receivers: Receivers::default(),
            decisions: rebound_runtime::release::LogOptions::default(),
        }
    }
}

/// Where rule sets are pulled from (`--rules-url`), and how often.
#[derive(Clone, Debug)]
pub struct Pull {
    /// An `http://` URL answering `{"files": {...}}`, with ETag / If-None-Match.
    pub url: String,
    /// The time between polls when the server answers at once.
    pub interval: Duration,
}

/// The live rules of a long-running command: a [`Reloader`] over `dir` starting with `set`
/// (publishing what it accepts to a fleet's shared store, if there is one), and the metrics
/// registry that counts its reloads.
fn live_rules(
    dir: &Path,
    set: CompiledSet,
    shared: Option<&Arc<RedisStore>>,
    receivers: &Receivers,
    changed: &pipeline::fleet::RulesChanged,
) -> (Arc<Reloader>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let observer = Arc::clone(&metrics);
    let receivers = receivers.clone();
    let changed = changed.clone();
    let mut options = ReloadOptions::default()
        .on_reload(move |entry| {
            observer.rules.observe(entry);
            // On a fleet, the node's row says the new version now, not at its next heartbeat.
            changed.notify_one();
        })
        .check(move |set| crate::config::undefined_receivers(set, &receivers));
    if let Some(store) = shared {
        options = options.record(Arc::new(shared_rules::StoreRecord(store.clone())));
    }
    let reloader = Arc::new(Reloader::new(dir, set, options));
    metrics.rule_errors.attach(reloader.handle().clone());
    (reloader, metrics)
}

/// The async runtime: two workers, one per core of the target machine.
fn async_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// Runs the application with the bundled pipeline (`run`, `serve`) on `set` (compiled from
/// `options.rules`) until it ends, and says how it ended. Errors are printed on stderr.
pub fn run(options: Options, set: CompiledSet) -> Outcome {
    let job = bundled::Bundled::new(&options);
    run_job(options, set, job)
}

/// Runs the application with `job` (any topology: [`TopologyJob`]) on `set` (compiled from
/// `options.rules`) until it ends, and says how it ended: the same live rules, admin API,
/// console, metrics, alerts, signals and bounded stop as `run` and `serve`. The options that
/// only the bundled pipeline reads (`data`, `messages`, `topology`, …) are ignored.
pub fn run_job(options: Options, set: CompiledSet, job: impl Job) -> Outcome {
    // Before any HTTP client is built (the rules puller's): an embedding's `main` may not.
    crate::outbound::use_ring_by_default();
    let view = options.console.view(options.messages);
    options.console.init_logging(&view, options.log_format);
    // A fleet's node checks and connects to the shared store first: the rules are published
    // there.
    let shared = match &options.fleet {
        None => None,
        Some(fleet) => match pipeline::fleet::connect(fleet) {
            Ok(store) => Some(Arc::new(store)),
            Err(e) => return trouble(&view, e),
        },
    };
    let rules_changed = pipeline::fleet::RulesChanged::default();
    let (reloader, metrics) = live_rules(
        &options.rules,
        set,
        shared.as_ref(),
        &options.receivers,
        &rules_changed,
    );
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(e) => {
            view.finish();
            say_error(format_args!("cannot start the async runtime: {e}"));
            return Outcome::Trouble;
        }
    };
    let outcome = runtime.block_on(wire(
        options,
        Box::new(job),
        reloader,
        metrics,
        view.clone(),
        shared,
        rules_changed,
    ));
    view.finish();
    // Whatever is still running (a blocking write on a store that hangs) is not waited for.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    outcome
}

/// Prints `error: {message}` once the bar is cleared, and says exit 2.
fn trouble(view: &ProgressView, message: impl std::fmt::Display) -> Outcome {
    view.finish();
    say_error(message);
    Outcome::Trouble
}

type AdminTask = JoinHandle<std::io::Result<()>>;

async fn wire(
    options: Options,
    job: Box<dyn Job>,
    reloader: Arc<Reloader>,
    metrics: Arc<Metrics>,
    view: ProgressView,
    shared: Option<Arc<RedisStore>>,
    rules_changed: pipeline::fleet::RulesChanged,
) -> Outcome {
    let console = options.console;
    let stop_bounds = options.stop;
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => return trouble(&view, format!("cannot install the signal handlers: {e}")),
    };

    // Everything but the pipeline first: a failed start leaves no data behind.
    let admin = match &options.admin {
        None => None,
        Some(listen) => match listen.bind().await {
            Ok(bound) => Some(bound),
            Err(e) => return trouble(&view, console.cannot_listen(listen, &e)),
        },
    };
    let watcher = match Watcher::spawn(Arc::clone(&reloader), WatchOptions::default()) {
        Ok(w) => Some(w),
        Err(e) if options.watch_required => {
            return trouble(
                &view,
                format!("cannot watch {}: {e}", options.rules.display()),
            );
        }
        Err(e) => {
            tracing::warn!(error = %e, rules = %options.rules.display(), "cannot watch the rules; edits will not be picked up");
            None
        }
    };
    let puller = match &options.pull {
        None => None,
        Some(pull) => {
            let pull_options = PullOptions {
                interval: pull.interval,
                ..PullOptions::default()
            };
            match Puller::spawn(Arc::clone(&reloader), &pull.url, pull_options) {
                Ok(p) => Some(p),
                Err(e) => return trouble(&view, format!("--rules-url: {e}")),
            }
        }
    };

    // On a shared store: the set of record first (seeded from here, or mirrored here), then
    // followed for as long as the node runs.
    let rules_errors = pipeline::fleet::RulesErrors::default();
    let (stop_following, following) = tokio::sync::watch::channel(false);
    let mut link = None;
    if let (Some(store), Some(fleet)) = (&shared, &options.fleet) {
        let (s, r, n, e) = (
            store.clone(),
            reloader.clone(),
            fleet.node.clone(),
            rules_errors.clone(),
        );
        let joined = tokio::task::spawn_blocking(move || shared_rules::join(&s, &r, &n, &e)).await;
        match joined {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return trouble(&view, format!("the shared rule set: {e}")),
            Err(e) => return trouble(&view, format!("the shared rule set: {e}")),
        }
        shared_rules::follow(
            store.clone(),
            fleet.redis.clone(),
            reloader.clone(),
            fleet.node.clone(),
            rules_errors.clone(),
            rules_changed.clone(),
            following,
        );
        link = Some(pipeline::FleetLink {
            options: fleet.clone(),
            store: store.clone(),
            rules_errors,
            rules_changed,
        });
    }

    // Alerts go out on their own tasks: a slow receiver never holds back the topology.
    let alerts = AlertDispatcher::start(&options.receivers, AlertOptions::default());
    metrics.alerts.attach(alerts.clone());
    // One per process: the decision log, a shadow set and a canary (release.md).
    let release = rebound_runtime::release::Release::new(options.decisions);
    // The shadow and the canary as the admin routes install them, and the canary's controller
    // (judged every 250 ms while one runs); their metrics read them at each scrape.
    let desks = Arc::new(crate::release::ReleaseDesk::new(
        Arc::clone(&release) as Arc<dyn crate::release::ReleaseSide>,
        Arc::clone(&reloader),
    ));
    metrics.release.attach(Arc::clone(&desks));
    let _canary_controller = crate::release::spawn_controller(Arc::clone(&desks));
    let wiring = Wiring {
        rules: Arc::clone(reloader.handle()),
        alerts: Arc::new(alerts.clone()),
        fleet: link,
        release: Arc::clone(&release),
    };
    let running = match job.start(wiring).await {
        Ok(r) => r,
        Err(e) => return trouble(&view, console.cannot_start(&e)),
    };
    // Letters past a receiver's queue are read back from the store once it answers again.
    alerts.read_back_from(Arc::new(pipeline::alert_backlog::StoreBacklog::new(
        running.store(),
        Arc::clone(reloader.handle()),
    )));
    if running.already_finished() {
        view.finish();
        tracing::info!("this run already finished; its report follows");
    }

    let mut admin_task: Option<AdminTask> = None;
    let (stop_admin, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some((listener, bound)) = admin {
        let token = options.admin.as_ref().and_then(|a| a.token.clone());
        let edges = options
            .admin
            .as_ref()
            .map(|a| a.edges.clone())
            .unwrap_or_default();
        let given = options.admin.as_ref().map_or("", |a| a.addr.as_str());
        let names = crate::admin::edges::OwnNames::new(given, bound, &edges.hosts);
        console.announce(&view, bound, &reloader, &options, token.is_some());
        let mut state = AdminState {
            reloader: Arc::clone(&reloader),
            metrics,
            token,
            dead_letters: None, // the running job's desk, attached below
            fleet: None,        // and its fleet
            shared_rules: shared.clone().map(|s| {
                Arc::new(shared_rules::SharedHistory(s))
                    as Arc<dyn crate::admin::rules::SharedRules>
            }),
            edges,
            names,
            release: Arc::clone(&release),
            desks: Arc::clone(&desks),
        };
        running.attach(&mut state);
        admin_task = Some(tokio::spawn(admin::serve_admin(listener, state, async {
            let _ = admin_stopped.await;
        })));
    }
    let read_progress = console
        .shows_progress()
        .then(|| running.progress())
        .flatten();
    let progress = read_progress.map(|read| {
        let bar = view.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PROGRESS_EVERY);
            loop {
                tick.tick().await;
                bar.update(&read());
            }
        })
    });
    let stop_progress = |progress: Option<JoinHandle<()>>| {
        if let Some(p) = progress {
            p.abort();
        }
        view.finish();
    };

    let ending = tokio::select! {
        () = running.finished() => Ending::Finished,
        ending = lifecycle::interrupted_or_failed(&mut signals, running.as_ref()) => ending,
        served = ended(&mut admin_task) => {
            stop_progress(progress);
            let e = admin_result(served).err().unwrap_or_else(|| "it stopped".into());
            say_error(format_args!("the admin API failed: {e}"));
            return Outcome::Trouble;
        }
    };
    match ending {
        Ending::Finished => {}
        Ending::Interrupted => console.stopping(&view),
        Ending::StoreFailed(failure) => {
            stop_progress(progress);
            say_error(failure);
            return Outcome::Trouble;
        }
    }
    // The whole stop, from here to the exit, within its bound (`topology.drain`).
    let deadline = tokio::time::Instant::now() + stop_bounds.total;
    // A signal during the stop stops at once.
    signals.exit_on_next();
    // The admin API finishes the requests in flight, the spouts stop, trees in flight finish,
    // and what is scheduled stays in the store for the next start. All of it within the stop
    // timeout.
    let _ = stop_admin.send(());
    let admin_done = async {
        match admin_task {
            None => Ok(()),
            Some(task) => tokio::time::timeout_at(deadline - lifecycle::EXIT_SHARE, task)
                .await
                .map_err(|_| "it did not finish its requests in time; stopping anyway".to_string())
                .and_then(admin_result),
        }
    };
    let stop = lifecycle::stop(running, deadline, stop_bounds, console.prints_report());
    let (stopped, served) = tokio::join!(stop, admin_done);
    // The last letters are committed: send what is queued, within a bound that leaves the
    // runtime its shutdown before the deadline.
    let counts = alerts.clone();
    let left = deadline.saturating_duration_since(tokio::time::Instant::now() + RUNTIME_SHUTDOWN);
    alerts.shutdown(ALERTS_SHUTDOWN.min(left)).await;
    for (receiver, c) in counts.counts() {
        if c.dropped > 0 {
            tracing::warn!(
                receiver,
                sent = c.sent,
                failed = c.failed,
                dropped = c.dropped,
                deferred = c.deferred,
                "alerts not delivered: letters for this receiver were dropped"
            );
        } else {
            tracing::info!(
                receiver,
                sent = c.sent,
                failed = c.failed,
                "alerts delivered"
            );
        }
    }
    for (receiver, d) in counts.deferred() {
        tracing::warn!(
            receiver,
            letters = d.letters,
            since_ms = d.from_ms,
            until_ms = d.to_ms,
            "alerts deferred and not sent: the receiver did not take them before the stop; the letters stay in the store (GET /v1/dead-letters lists them by label and time)"
        );
    }
    stop_progress(progress);
    if let Some(w) = watcher {
        w.stop();
    }
    if let Some(p) = puller {
        p.stop();
    }
    let _ = stop_following.send(true);
    match stopped {
        Err(e) => {
            say_error(console.cannot_stop(&e));
            Outcome::Trouble
        }
        Ok(report) => {
            let outcome = console.report(report.as_deref(), options.json);
            match served {
                Err(e) => {
                    say_error(format_args!("the admin API failed: {e}"));
                    Outcome::Trouble
                }
                Ok(()) => {
                    console.stopped();
                    outcome
                }
            }
        }
    }
}

/// Completes when the admin API's task ends (never, without an admin API).
async fn ended(
    task: &mut Option<AdminTask>,
) -> Result<std::io::Result<()>, tokio::task::JoinError> {
    match task {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

/// What the admin API's task ended with.
fn admin_result(joined: Result<std::io::Result<()>, tokio::task::JoinError>) -> Result<(), String> {
    match joined {
        Ok(served) => served.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}
