//! [`PolicyHandle`]: the one way to decide. It holds the current [`CompiledSet`] behind an
//! atomic pointer: a decision does one `load()` and uses that whole set, and a reload swaps
//! in a new set without ever blocking a decision or showing it half a set.

use crate::context::FailureContext;
use crate::decide::Explanation;
use crate::set::CompiledSet;
use crate::types::Decided;
use arc_swap::ArcSwap;
use rand::Rng;
use std::sync::Arc;

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
    current: ArcSwap<CompiledSet>,
}

impl PolicyHandle {
    /// A handle starting with `set`.
    pub fn new(set: CompiledSet) -> Self {
        PolicyHandle {
            current: ArcSwap::from_pointee(set),
        }
    }

    /// Decides a failure with the current set (one `load()`).
    pub fn decide<R: Rng + ?Sized>(&self, ctx: &FailureContext<'_>, rng: &mut R) -> Decided {
        self.current.load().decide(ctx, rng)
    }

    /// Decides like [`decide`](Self::decide) and records why each rule did or did not decide.
    pub fn explain<R: Rng + ?Sized>(&self, ctx: &FailureContext<'_>, rng: &mut R) -> Explanation {
        self.current.load().explain(ctx, rng)
    }

    /// Decides by a naive first-match scan of every rule, without the index. The reference
    /// that property tests compare the index with, and the benchmarks' baseline.
    pub fn decide_by_scan<R: Rng + ?Sized>(
        &self,
        ctx: &FailureContext<'_>,
        rng: &mut R,
    ) -> Decided {
        self.current.load().decide_by_scan(ctx, rng)
    }

    /// The current set.
    pub fn current(&self) -> Arc<CompiledSet> {
        self.current.load_full()
    }

    /// Makes `set` current and returns the one it replaced. Decisions in flight finish on
    /// the set they loaded.
    pub fn swap(&self, set: Arc<CompiledSet>) -> Arc<CompiledSet> {
        self.current.swap(set)
    }
}
