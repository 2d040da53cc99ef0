//! The canary of one process (`docs/spec/release.md`, "Canary"): what was asked (the files,
//! the slice, the guard, `promote_after`), how it stands (running, held, promoted, rolled
//! back; since when; why) and how it ended, kept until the next one starts.
//!
//! The desk is the canary's one owner. The admin routes start and abort through it, the
//! controller [`tick`](CanaryDesk::tick)s it; each of those holds the desk's lock for the
//! whole step, so a promotion and an abort never both happen to one canary. The figures live
//! in the runtime ([`ReleaseSide::canary`]); the desk reads them, judges them
//! ([`judge`]), and on an ending clears the runtime's canary, takes its final figures and
//! records the ending in the rule history (source `canary` for a promotion, `rolled_back`
//! for a rollback or an abort).
//!
//! `rebound_canary_*_total{arm}` are counters over the process's life: the desk adds each
//! ended canary's final figures to `retired`, and the live canary's figures on top.

use super::ReleaseSide;
use rebound_engine::release::{ArmFigures, Arms, Guard, Judgement, Slice, judge};
use rebound_engine::reload::{Actor, PushError, Reloader};
use rebound_engine::{CompiledSet, Version};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// The operator named in the history for what the controller does by itself.
pub const CONTROLLER: &str = "canary";

/// Where a canary stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanaryState {
    /// Deciding for its slice; not old enough to promote, nothing wrong seen.
    Running,
    /// Old enough, but an arm lacks samples: deciding on, not promoted.
    Held,
    /// Became the current set.
    Promoted,
    /// Rolled back by its guard or aborted by an operator.
    RolledBack,
}

impl CanaryState {
    /// `running`, `held`, `promoted` or `rolled_back`.
    pub fn as_str(self) -> &'static str {
        match self {
            CanaryState::Running => "running",
            CanaryState::Held => "held",
            CanaryState::Promoted => "promoted",
            CanaryState::RolledBack => "rolled_back",
        }
    }

    /// The value of `rebound_canary_state`: 1 running, 2 held, 3 promoted, 4 rolled back (0
    /// is no canary since the process started).
    pub fn gauge(self) -> i64 {
        match self {
            CanaryState::Running => 1,
            CanaryState::Held => 2,
            CanaryState::Promoted => 3,
            CanaryState::RolledBack => 4,
        }
    }

    /// Whether it still decides for its slice (running or held).
    pub fn is_active(self) -> bool {
        matches!(self, CanaryState::Running | CanaryState::Held)
    }
}

/// A canary as asked for, its fields checked.
#[derive(Debug, Clone)]
pub struct CanaryRequest {
    /// The candidate's files, name → content.
    pub files: BTreeMap<String, String>,
    /// Who is in it.
    pub slice: Slice,
    /// How far its ratios may exceed the stable arm's.
    pub guard: Guard,
    /// How long it runs before it may be promoted (real time).
    pub promote_after: Duration,
}

/// Why a canary did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another canary is running (or held).
    #[error("a canary is running (version {0}); abort it with DELETE /v1/rules/canary first")]
    Running(Version),
    /// The candidate's files were refused, as a push would refuse them.
    #[error(transparent)]
    Refused(PushError),
}

/// A canary's state as `GET /v1/rules/canary` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryView {
    /// The candidate's version.
    pub version: Version,
    /// The version it ran against (the stable arm's).
    pub stable_version: Version,
    /// Where it stands.
    pub state: CanaryState,
    /// When it started.
    pub since: SystemTime,
    /// Who is in it.
    pub slice: Slice,
    /// Its guard.
    pub guard: Guard,
    /// Its `promote_after`.
    pub promote_after: Duration,
    /// The arms' figures: live while it runs, final once it ended.
    pub arms: Arms,
    /// Why it is held, or how it ended.
    pub reason: Option<String>,
}

/// One canary, running or ended.
#[derive(Debug)]
struct Run {
    files: BTreeMap<String, String>,
    started: Instant,
    view: CanaryView,
}

#[derive(Debug, Default)]
struct Desk {
    run: Option<Run>,
    /// Final figures of the canaries that ended, summed.
    retired: Arms,
}

/// The canary of one process.
#[derive(Debug)]
pub struct CanaryDesk {
    side: Arc<dyn ReleaseSide>,
    reloader: Arc<Reloader>,
    desk: Mutex<Desk>,
}

impl CanaryDesk {
    /// The desk over the runtime's release, promoting through `reloader`.
    pub fn new(side: Arc<dyn ReleaseSide>, reloader: Arc<Reloader>) -> CanaryDesk {
        CanaryDesk {
            side,
            reloader,
            desk: Mutex::new(Desk::default()),
        }
    }

    /// Starts a canary of `request` against the set in force: its files validated and
    /// compiled as a push's, then installed in the runtime for its slice. Blocking
    /// (compiling).
    pub fn start(&self, request: CanaryRequest) -> Result<CanaryView, StartError> {
        let mut desk = self.lock();
        if let Some(run) = desk.run.as_ref().filter(|r| r.view.state.is_active()) {
            return Err(StartError::Running(run.view.version));
        }
        let set: CompiledSet = self
            .reloader
            .compile_candidate(request.files.clone())
            .map_err(StartError::Refused)?;
        let stable_version = *self.reloader.handle().current().version();
        let view = CanaryView {
            version: *set.version(),
            stable_version,
            state: CanaryState::Running,
            since: SystemTime::now(),
            slice: request.slice.clone(),
            guard: request.guard,
            promote_after: request.promote_after,
            arms: Arms::default(),
            reason: None,
        };
        self.side.set_canary(Arc::new(set), request.slice);
        tracing::info!(
            version = %view.version,
            stable = %stable_version,
            percent = view.slice.percent(),
            "canary started"
        );
        desk.run = Some(Run {
            files: request.files,
            started: Instant::now(),
            view: view.clone(),
        });
        Ok(view)
    }

    /// Whether a canary is running (or held).
    pub fn is_running(&self) -> bool {
        self.lock()
            .run
            .as_ref()
            .is_some_and(|r| r.view.state.is_active())
    }

    /// The last canary: the running one with its live figures, or how the last one ended.
    pub fn view(&self) -> Option<CanaryView> {
        let desk = self.lock();
        let run = desk.run.as_ref()?;
        let mut view = run.view.clone();
        if view.state.is_active() {
            view.arms = self.side.canary().unwrap_or_default();
        }
        Some(view)
    }

    /// The arms' totals over every canary of the process, the running one's so far included.
    pub fn totals(&self) -> Arms {
        let desk = self.lock();
        let mut totals = desk.retired.clone();
        if desk.run.as_ref().is_some_and(|r| r.view.state.is_active())
            && let Some(live) = self.side.canary()
        {
            add(&mut totals.stable, &live.stable);
            add(&mut totals.canary, &live.canary);
        }
        totals
    }

    /// The state `rebound_canary_state` reports: the last canary's, `None` before the first.
    pub fn state(&self) -> Option<CanaryState> {
        self.lock().run.as_ref().map(|r| r.view.state)
    }

    /// An operator's abort: the running canary is rolled back and recorded so, with `by`.
    /// `None` when no canary is running. Blocking (the history's listener).
    pub fn abort(&self, by: Actor) -> Option<CanaryView> {
        let mut desk = self.lock();
        let run = desk.run.as_ref().filter(|r| r.view.state.is_active())?;
        let live = self.side.canary().unwrap_or_else(|| run.view.arms.clone());
        self.roll_back(&mut desk, by, live)
    }

    /// Judges the running canary on its figures now, and acts: a rollback or a promotion
    /// ends it, a hold is kept with its reason (and judged again at the next tick).
    /// Answers the state after the tick (`None` when no canary is running). Blocking.
    pub fn tick(&self) -> Option<CanaryState> {
        let mut desk = self.lock();
        let run = desk.run.as_ref().filter(|r| r.view.state.is_active())?;
        let (version, last) = (run.view.version, run.view.arms.clone());
        let Some(arms) = self.side.canary() else {
            // The runtime has no canary any more (cleared by someone else): it ended unjudged.
            let by = actor("the runtime's canary was removed outside the canary's desk");
            return self.roll_back(&mut desk, by, last).map(|v| v.state);
        };
        let judgement = judge(
            &run.view.guard,
            &arms.stable,
            &arms.canary,
            run.started.elapsed(),
            run.view.promote_after,
        );
        match judgement {
            Judgement::Running => self.hold(&mut desk, CanaryState::Running, None),
            Judgement::Held { why } => {
                if run.view.state != CanaryState::Held {
                    tracing::info!(%version, "canary held: {why}");
                }
                self.hold(&mut desk, CanaryState::Held, Some(why));
            }
            // The history's record of it is the one WARN line (Reloader::record_rolled_back).
            Judgement::RollBack { why, .. } => {
                self.roll_back(&mut desk, actor(&why), arms);
            }
            Judgement::Promote => self.promote(&mut desk, arms),
        }
        desk.run.as_ref().map(|r| r.view.state)
    }

    /// Keeps the canary deciding, in `state` (running or held) with `reason`.
    fn hold(&self, desk: &mut Desk, state: CanaryState, reason: Option<String>) {
        if let Some(run) = desk.run.as_mut() {
            run.view.state = state;
            run.view.reason = reason;
        }
    }

    /// Promotes the running canary through the reloader (source `canary`), then clears the
    /// runtime's canary. A promotion the reloader refuses (the set in force changed under the
    /// canary, the fleet's record refused it) rolls the canary back instead, saying why.
    fn promote(&self, desk: &mut Desk, arms: Arms) {
        let Some(run) = desk.run.as_ref() else {
            return;
        };
        let view = run.view.clone();
        let why = format!(
            "promoted after {}: retry ratio {:.3} (stable {:.3}), dead-letter ratio {:.3} (stable {:.3}) within the guard (n={}/{})",
            rebound_engine::duration::format_duration(view.promote_after),
            arms.canary.retry_ratio(),
            arms.stable.retry_ratio(),
            arms.canary.dead_letter_ratio(),
            arms.stable.dead_letter_ratio(),
            arms.canary.first_deliveries,
            arms.stable.first_deliveries,
        );
        let promoted = self.reloader.promote_canary(
            run.files.clone(),
            &view.stable_version,
            actor(&why),
            arms.clone(),
        );
        match promoted {
            Ok(_) => {
                let last = self.side.clear_canary().unwrap_or(arms);
                tracing::info!(version = %view.version, "canary {why}");
                self.end(desk, CanaryState::Promoted, why, last);
            }
            Err(e) => {
                let why = format!("could not be promoted: {e}");
                self.roll_back(desk, actor(&why), arms);
            }
        }
    }

    /// Clears the runtime's canary, records the rollback in the history with its final
    /// figures, and ends the run.
    fn roll_back(&self, desk: &mut Desk, by: Actor, live: Arms) -> Option<CanaryView> {
        let last = self.side.clear_canary().unwrap_or(live);
        let version = desk.run.as_ref().map(|r| r.view.version);
        if let Some(version) = version {
            self.reloader
                .record_rolled_back(version, by.clone(), last.clone());
        }
        self.end(desk, CanaryState::RolledBack, by.reason, last)
    }

    fn end(
        &self,
        desk: &mut Desk,
        state: CanaryState,
        reason: String,
        last: Arms,
    ) -> Option<CanaryView> {
        add(&mut desk.retired.stable, &last.stable);
        add(&mut desk.retired.canary, &last.canary);
        let run = desk.run.as_mut()?;
        run.view.state = state;
        run.view.reason = Some(reason);
        run.view.arms = last;
        Some(run.view.clone())
    }

    fn lock(&self) -> MutexGuard<'_, Desk> {
        self.desk.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn actor(reason: &str) -> Actor {
    Actor {
        operator: CONTROLLER.to_owned(),
        reason: reason.to_owned(),
    }
}

fn add(total: &mut ArmFigures, more: &ArmFigures) {
    total.first_deliveries += more.first_deliveries;
    total.retries += more.retries;
    total.dead_letters += more.dead_letters;
    if total.acked_by_attempt.len() < more.acked_by_attempt.len() {
        total
            .acked_by_attempt
            .resize(more.acked_by_attempt.len(), 0);
    }
    for (t, m) in total
        .acked_by_attempt
        .iter_mut()
        .zip(&more.acked_by_attempt)
    {
        *t += m;
    }
}

#[cfg(test)]
#[path = "canary_tests.rs"]
mod tests;
