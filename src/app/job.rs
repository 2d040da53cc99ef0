//! The seam between the application and what it runs: a [`Job`] is started once everything
//! else is up (signals, the live rules, the admin listener, the alert dispatcher), and its
//! [`Running`] side is what the application serves, waits on and stops. The bundled pipeline
//! of `run` and `serve` is one job (`bundled.rs`); any topology an embedding builds is another
//! ([`TopologyJob`](super::TopologyJob)); `relay` is the next.

use std::sync::Arc;

use rebound_engine::PolicyHandle;
use rebound_runtime::durable::JournalFailure;
use rebound_runtime::durable::labels::AlertSink;
use rebound_runtime::fate::BoxFuture;
use rebound_runtime::store::{Store, StoreError};
use rebound_runtime::topology::BuildError;
use tokio::time::Instant;

use crate::admin::AdminState;
use crate::pipeline::{PipelineError, Progress, Report};

/// What the application hands a job when it starts it.
#[derive(Clone)]
pub struct Wiring {
    /// The rule set in force, reloaded live (a watched directory, a push, a pull, a fleet).
    pub rules: Arc<PolicyHandle>,
    /// Where the labels' `alert:` letters go: the configuration's receivers.
    pub alerts: Arc<dyn AlertSink>,
    /// On a shared store: the fleet this node joined, whose rule set of record it follows
    /// (the bundled pipeline runs its share of the fleet's run there).
    pub fleet: Option<crate::pipeline::FleetLink>,
    /// The process's release state: every decision of the job consults it (the decision
    /// log, a shadow set, a canary: `RulePolicy::with_release`).
    pub release: Arc<rebound_runtime::release::Release>,
}

/// Why a job did not start, or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The bundled pipeline failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The topology could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The store refused every write for its whole bound.
    #[error("{0}")]
    StoreFailed(Arc<JournalFailure>),
    /// The options name a fleet (`Options::fleet`), which only the bundled pipeline joins: a
    /// topology of one's own runs on the store it is given.
    #[error(
        "a fleet (--store redis://…) is joined only by the bundled pipeline; a TopologyJob runs on the store it is given"
    )]
    FleetUnsupported,
    /// The job refused to start: why, in one line.
    #[error("{0}")]
    Refused(String),
    /// A blocking task panicked or was cancelled.
    #[error("a background task failed: {0}")]
    Task(String),
    /// The stop ran out of time.
    #[error(
        "the stop did not finish within {0} s (is the store taking writes?); exiting without \
         it: what was committed is kept, and the next start continues"
    )]
    Late(u64),
}

/// What a job did, printed on stdout after its stop (`--json`: one JSON document).
pub trait Summary: Send {
    /// The report as text, for a person.
    fn text(&self) -> String;
    /// The report as one JSON document.
    fn json(&self) -> String;
    /// Messages the job lost (a report with any exits 1).
    fn lost(&self) -> u64 {
        0
    }
}

impl Summary for Report {
    fn text(&self) -> String {
        Report::text(self)
    }
    fn json(&self) -> String {
        Report::json(self)
    }
    fn lost(&self) -> u64 {
        self.lost
    }
}

/// Reads where a job stands, each time it is called.
pub type ReadProgress = Box<dyn Fn() -> Progress + Send + Sync>;

/// Something the application runs. Started once, on the application's async runtime.
pub trait Job: Send + 'static {
    /// Starts the work over `wiring`'s rules.
    fn start(
        self: Box<Self>,
        wiring: Wiring,
    ) -> BoxFuture<'static, Result<Box<dyn Running>, JobError>>;
}

/// A started job, as the application serves, waits on and stops it.
pub trait Running: Send {
    /// Gives the admin API the job's desks and the metrics its gauges (its counters, its dead
    /// letters, its gate).
    fn attach(&self, state: &mut AdminState);

    /// The store its dead letters are in (the alerts read letters back from it).
    fn store(&self) -> Arc<dyn Store>;

    /// Completes when the job has nothing left to do; never, for a service.
    fn finished(&self) -> BoxFuture<'_, ()>;

    /// Completes if the store refuses every write for its whole bound (it holds no borrow:
    /// the stop races it).
    fn store_failed(&self) -> BoxFuture<'static, Arc<JournalFailure>>;

    /// Where it stands, read for `run`'s progress bar (`None`: no bar).
    fn progress(&self) -> Option<ReadProgress> {
        None
    }

    /// True when the job found its work already done at the start (a finished run).
    fn already_finished(&self) -> bool {
        false
    }

    /// Stops gracefully by `by`: trees in flight get at most `drain`, the last writes are
    /// committed, and the report is read if `report` asks for it (the bundled pipeline's
    /// `serve` prints none) and the job has one.
    fn stop(
        self: Box<Self>,
        by: Instant,
        drain: std::time::Duration,
        report: bool,
    ) -> BoxFuture<'static, Result<Option<Box<dyn Summary>>, JobError>>;
}
