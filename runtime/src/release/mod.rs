//! Releasing a rule set safely (`docs/spec/release.md`), the runtime's part: what every
//! decision consults beyond the set in force.
//!
//! One [`Release`] per process, shared by the [`RulePolicy`](crate::policy::RulePolicy) of
//! every spout task and by whoever installs a candidate (the product's admin routes):
//!
//! - the **decision log** ([`DecisionLog`], `log.rs`): each decision, sampled, with its whole
//!   context and outcome, buffered for the store (the journal writes it behind:
//!   `Durable::log_decisions`);
//! - a **shadow** set (`shadow.rs`): decides every failure too, never acted on; counted and
//!   compared ([`ShadowReport`]);
//! - a **canary** (`canary.rs`): a candidate that decides for a [`Slice`] of the messages,
//!   with each arm's outcomes ([`CanaryFigures`]); judging, promoting and rolling back are the
//!   product's (they need the reloader and the history), from these figures.
//!
//! Nothing here blocks a decision: the set slots are atomic pointers, the counters atomics,
//! the log one short lock on a bounded buffer.

mod canary;
mod log;
mod log_buffer;
mod shadow;

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rebound_engine::CompiledSet;
use rebound_engine::release::{Arm, Slice};

pub use canary::CanaryFigures;
use canary::CanaryRun;
pub use log::{DecisionLog, LogOptions};
pub use rebound_engine::release::{ArmFigures, ShadowReport, ShadowRow};
pub use shadow::ROWS_AT_MOST;
use shadow::ShadowRun;

use crate::topology::Message;

/// What happened to a message, as a canary's arms count it (the spout task tells the policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// Delivered (its `retry.attempt` already counts this delivery: 1 is a first delivery).
    Delivered,
    /// Its tree completed at its `retry.attempt`.
    Acked,
    /// Dead-lettered.
    DeadLettered,
}

/// The process's release state: the decision log, the shadow slot, the canary slot.
#[derive(Debug)]
pub struct Release {
    log: Arc<DecisionLog>,
    shadow: ArcSwapOption<ShadowRun>,
    canary: ArcSwapOption<CanaryRun>,
}

impl Release {
    /// A release state whose decision log samples and keeps as `log` says.
    pub fn new(log: LogOptions) -> Arc<Release> {
        Arc::new(Release {
            log: Arc::new(DecisionLog::new(log)),
            shadow: ArcSwapOption::empty(),
            canary: ArcSwapOption::empty(),
        })
    }

    /// The decision log.
    pub fn log(&self) -> &DecisionLog {
        &self.log
    }

    /// The decision log, to hand to the journal that writes it
    /// ([`Journal::log_decisions`](crate::durable::Journal::log_decisions)).
    pub fn shared_log(&self) -> Arc<DecisionLog> {
        Arc::clone(&self.log)
    }

    /// Installs `set` as the shadow (replacing any), its counters from zero, since now.
    pub fn set_shadow(&self, set: Arc<CompiledSet>) {
        self.shadow.store(Some(Arc::new(ShadowRun::new(set))));
    }

    /// Removes the shadow; false when none was installed.
    pub fn clear_shadow(&self) -> bool {
        self.shadow.swap(None).is_some()
    }

    /// The shadow's figures, while one is installed.
    pub fn shadow(&self) -> Option<ShadowReport> {
        self.shadow.load().as_ref().map(|s| s.report())
    }

    /// Starts a canary: `set` decides for the messages of `slice`, its arms counted from zero
    /// (replacing any canary running).
    pub fn set_canary(&self, set: Arc<CompiledSet>, slice: Slice) {
        self.canary
            .store(Some(Arc::new(CanaryRun::new(set, slice))));
    }

    /// Ends the canary: the stable set decides for every message again. Its last figures, or
    /// `None` when none ran.
    pub fn clear_canary(&self) -> Option<CanaryFigures> {
        self.canary.swap(None).map(|c| c.figures())
    }

    /// The running canary's version.
    pub fn canary_version(&self) -> Option<rebound_engine::Version> {
        self.canary.load().as_ref().map(|c| *c.set().version())
    }

    /// The running canary's figures.
    pub fn canary(&self) -> Option<CanaryFigures> {
        self.canary.load().as_ref().map(|c| c.figures())
    }

    /// While a canary runs: the arm of `message` and the canary's set.
    pub(crate) fn canary_arm(&self, message: &Message) -> Option<(Arm, Arc<CompiledSet>)> {
        let guard = self.canary.load();
        let run = guard.as_ref()?;
        Some((run.arm(message), Arc::clone(run.set())))
    }

    /// The shadow run, if any (a guard: no reference count moved per decision).
    pub(crate) fn shadow_run(&self) -> arc_swap::Guard<Option<Arc<ShadowRun>>> {
        self.shadow.load()
    }

    /// Counts what happened to `message` in its canary arm (nothing without a canary).
    pub fn observe(&self, message: &Message, event: Observed) {
        if let Some(run) = self.canary.load().as_ref() {
            run.observe(message, event);
        }
    }
}

#[cfg(test)]
mod tests;
