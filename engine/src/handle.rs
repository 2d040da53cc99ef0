//! [`PolicyHandle`]: the one way to decide. It holds the set in force behind one atomic
//! pointer, together with when and from where that set came ([`Status`]): a decision does
//! one `load()` and uses that whole set, a reload swaps in a new set without ever blocking a
//! decision or showing it half a set, and whoever reads the status (`GET /v1/rules`) reads
//! the very set that decisions use, never a copy kept elsewhere that could lag behind.

use crate::context::FailureContext;
use crate::decide::Explanation;
use crate::set::CompiledSet;
use crate::types::Decided;
use arc_swap::ArcSwap;
use rand::Rng;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

/// Where a set came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The rules directory: the set loaded at start-up, or one the watcher saw change.
    File,
    /// A push through the admin API.
    Push,
    /// The config-center pull client.
    Pull,
    /// A rollback to a previous accepted set.
    Rollback,
    /// The set of record of a fleet's shared store, adopted by this process.
    Fleet,
    /// A canary promoted to the current set (`docs/spec/release.md`, "Canary").
    Canary,
    /// A canary rolled back, by its guard or an operator's abort: recorded (as rejected),
    /// never swapped in.
    RolledBack,
}

impl Source {
    /// `file`, `push`, `pull`, `rollback`, `fleet`, `canary` or `rolled_back`: the names of
    /// the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Push => "push",
            Source::Pull => "pull",
            Source::Rollback => "rollback",
            Source::Fleet => "fleet",
            Source::Canary => "canary",
            Source::RolledBack => "rolled_back",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The set in force, with when and from where it came.
#[derive(Debug, Clone)]
pub struct Status {
    /// The current set.
    pub set: Arc<CompiledSet>,
    /// When it was swapped in.
    pub loaded_at: SystemTime,
    /// Where it came from.
    pub source: Source,
}

/// The current rule set, shared by every decider and swapped atomically by reloads.
///
/// ```
/// use rebound_engine::{FailureContext, PolicyHandle, SourceFile, compile};
/// use rand::SeedableRng;
///
/// let yaml = "version: 1\nrules:\n  - id: fast\n    match: { code: PAY_PROCESSING }\n    retry: { backoff: { fixed: 100ms } }\n";
/// let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
/// let handle = PolicyHandle::new(set);
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
/// let decided = handle.decide(&FailureContext::new("PAYMENT", "PAY_PROCESSING", 1), &mut rng);
/// assert_eq!(decided.report(1).delay_ms, Some(100));
/// ```
#[derive(Debug)]
pub struct PolicyHandle {
    current: ArcSwap<Status>,
}

impl PolicyHandle {
    /// A handle starting with `set`, loaded now from its files (source `file`).
    pub fn new(set: CompiledSet) -> Self {
        PolicyHandle {
            current: ArcSwap::from_pointee(Status {
                set: Arc::new(set),
                loaded_at: SystemTime::now(),
                source: Source::File,
            }),
        }
    }

    /// Decides a failure with the current set (one `load()`).
    pub fn decide<R: Rng + ?Sized>(&self, ctx: &FailureContext<'_>, rng: &mut R) -> Decided {
        self.current.load().set.decide(ctx, rng)
    }

    /// Decides like [`decide`](Self::decide) and records why each rule did or did not decide.
    pub fn explain<R: Rng + ?Sized>(&self, ctx: &FailureContext<'_>, rng: &mut R) -> Explanation {
        self.current.load().set.explain(ctx, rng)
    }

    /// Decides by a naive first-match scan of every rule, without the index. The reference
    /// that property tests compare the index with, and the benchmarks' baseline.
    pub fn decide_by_scan<R: Rng + ?Sized>(
        &self,
        ctx: &FailureContext<'_>,
        rng: &mut R,
    ) -> Decided {
        self.current.load().set.decide_by_scan(ctx, rng)
    }

    /// The current set.
    pub fn current(&self) -> Arc<CompiledSet> {
        Arc::clone(&self.current.load().set)
    }

    /// The current set with when and from where it came, read in the same `load()`.
    pub fn status(&self) -> Arc<Status> {
        self.current.load_full()
    }

    /// Makes `set` current, as pushed now (source `push`), and returns the one it replaced.
    /// Decisions in flight finish on the set they loaded.
    pub fn swap(&self, set: Arc<CompiledSet>) -> Arc<CompiledSet> {
        self.install(set, Source::Push, SystemTime::now())
    }

    /// Makes `set` current, as come from `source` at `at`, and returns the one it replaced.
    pub(crate) fn install(
        &self,
        set: Arc<CompiledSet>,
        source: Source,
        at: SystemTime,
    ) -> Arc<CompiledSet> {
        let status = Status {
            set,
            loaded_at: at,
            source,
        };
        Arc::clone(&self.current.swap(Arc::new(status)).set)
    }
}
