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
use super::fleet::{CanaryFleet, FleetSpec, arms_of, counts};
use rebound_engine::release::{ArmFigures, Arms, Guard, Judgement, Slice, judge};
use rebound_engine::reload::{Actor, PushError, Reloader};
use rebound_engine::{CompiledSet, Version};
use rebound_store_redis::fleet::{CanaryRecord, CanaryStart};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    /// On a fleet: another node's canary (this epoch) is running or held.
    #[error(
        "a canary is running on the fleet (epoch {0}); abort it with DELETE /v1/rules/canary first"
    )]
    FleetActive(u64),
    /// On a fleet: the shared store did not answer.
    #[error("the shared store did not take the canary: {0}")]
    Fleet(String),
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
    /// On a fleet: the record's epoch, what this node's runtime had counted at its last
    /// sync, and the fleet's sums then.
    epoch: Option<u64>,
    sent: Arms,
    fleet_arms: Option<Arms>,
}

#[derive(Debug, Default)]
struct Desk {
    run: Option<Run>,
    /// Final figures of the canaries that ended, summed.
    retired: Arms,
    /// On a fleet: the epoch of a canary this node could not run (said once, not each tick).
    declined: Option<u64>,
}

/// The canary of one process.
#[derive(Debug)]
pub struct CanaryDesk {
    side: Arc<dyn ReleaseSide>,
    reloader: Arc<Reloader>,
    desk: Mutex<Desk>,
    /// On a shared store: the fleet's canary record (`fleet.rs`).
    fleet: Option<Arc<dyn CanaryFleet>>,
}

impl CanaryDesk {
    /// The desk over the runtime's release, promoting through `reloader`.
    pub fn new(side: Arc<dyn ReleaseSide>, reloader: Arc<Reloader>) -> CanaryDesk {
        CanaryDesk {
            side,
            reloader,
            desk: Mutex::new(Desk::default()),
            fleet: None,
        }
    }

    /// The same desk on a fleet: the canary lives in `fleet`'s record, every node runs it
    /// and judges it on the fleet's figures (`fleet.rs`).
    pub fn with_fleet(mut self, fleet: Arc<dyn CanaryFleet>) -> CanaryDesk {
        self.fleet = Some(fleet);
        self
    }

    /// Whether the controller must tick even without a canary of its own (on a fleet, to
    /// adopt one started on another node).
    pub fn follows_a_fleet(&self) -> bool {
        self.fleet.is_some()
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
        let (epoch, since) = match &self.fleet {
            None => (None, SystemTime::now()),
            Some(fleet) => {
                let spec = FleetSpec {
                    files: request.files.clone(),
                    percent: request.slice.percent(),
                    biz: request.slice.biz().to_vec(),
                    retry_ratio: request.guard.retry_ratio.percent(),
                    dead_letter_ratio: request.guard.dead_letter_ratio.percent(),
                    min_samples: request.guard.min_samples,
                    promote_after_ms: request.promote_after.as_millis() as u64,
                };
                let text = serde_json::to_string(&spec).expect("a spec serializes");
                match fleet.start(&text).map_err(StartError::Fleet)? {
                    CanaryStart::Started { epoch, since_ms } => {
                        (Some(epoch), UNIX_EPOCH + Duration::from_millis(since_ms))
                    }
                    CanaryStart::Active { epoch } => return Err(StartError::FleetActive(epoch)),
                }
            }
        };
        let view = CanaryView {
            version: *set.version(),
            stable_version,
            state: CanaryState::Running,
            since,
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
            epoch,
            sent: Arms::default(),
            fleet_arms: None,
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
            view.arms = match &run.fleet_arms {
                Some(fleet) => fleet.clone(),
                None => self.side.canary().unwrap_or_default(),
            };
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
            totals.add(&live);
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
        let mut live = self.side.canary().unwrap_or_else(|| run.view.arms.clone());
        if let (Some(fleet), Some(epoch)) = (&self.fleet, run.epoch) {
            live = run.fleet_arms.clone().unwrap_or(live);
            if let Err(e) = fleet.end(epoch, "rolled_back", &by.reason, &arms_json(&live)) {
                tracing::warn!("the fleet's canary record did not take the abort: {e}");
            }
        }
        self.roll_back(&mut desk, by, live)
    }

    /// Judges the running canary on its figures now, and acts: a rollback or a promotion
    /// ends it, a hold is kept with its reason (and judged again at the next tick).
    /// Answers the state after the tick (`None` when no canary is running). Blocking.
    pub fn tick(&self) -> Option<CanaryState> {
        let mut desk = self.lock();
        if self.fleet.is_some() {
            return self.tick_fleet(&mut desk);
        }
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

    /// A tick on a fleet: follow the record (adopt a canary started elsewhere, end one the
    /// record ended), add this node's counts to the fleet's, judge the fleet's figures, and
    /// act when this node is the first to end it.
    fn tick_fleet(&self, desk: &mut Desk) -> Option<CanaryState> {
        let fleet = self.fleet.as_ref()?;
        let record = match fleet.read() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("the fleet's canary record did not answer: {e}");
                return desk.run.as_ref().map(|r| r.view.state);
            }
        };
        let local = desk
            .run
            .as_ref()
            .filter(|r| r.view.state.is_active())
            .and_then(|r| r.epoch);
        match (&record, local) {
            (Some(rec), Some(epoch)) if rec.epoch == epoch && rec.is_active() => {}
            (Some(rec), Some(epoch)) if rec.epoch == epoch => {
                // Another node ended it: follow, without recording it again.
                let state = match rec.state.as_str() {
                    "promoted" => CanaryState::Promoted,
                    _ => CanaryState::RolledBack,
                };
                let last = self.side.clear_canary().unwrap_or_default();
                let arms = parse_arms(&rec.arms).unwrap_or(last);
                tracing::info!(
                    epoch,
                    state = state.as_str(),
                    "the fleet's canary ended: {}",
                    rec.reason
                );
                self.end(desk, state, rec.reason.clone(), arms);
                return Some(state);
            }
            (Some(rec), _) if rec.is_active() && desk.declined != Some(rec.epoch) => {
                self.adopt(desk, rec)
            }
            // Declined here: nothing runs (an older canary of this node's ends below).
            (Some(rec), None) if rec.is_active() => return None,
            (_, Some(epoch)) => {
                let last = self.side.clear_canary().unwrap_or_default();
                let why = format!("the fleet's canary record no longer holds epoch {epoch}");
                self.end(desk, CanaryState::RolledBack, why, last);
                return Some(CanaryState::RolledBack);
            }
            _ => return desk.run.as_ref().map(|r| r.view.state),
        }
        let run = desk.run.as_mut().filter(|r| r.view.state.is_active())?;
        let epoch = run.epoch?;
        let Some(live) = self.side.canary() else {
            return Some(run.view.state);
        };
        let delta = live.since(&run.sent);
        let attempts = live.stable.acked_by_attempt.len();
        match fleet.sync(epoch, &counts(&delta)) {
            Ok(Some(sums)) => {
                run.sent = live;
                run.fleet_arms = Some(arms_of(&sums, attempts));
            }
            Ok(None) => return Some(run.view.state),
            Err(e) => {
                tracing::warn!("the fleet's canary figures did not sync: {e}");
                return Some(run.view.state);
            }
        }
        let arms = run.fleet_arms.clone().unwrap_or_default();
        let elapsed = SystemTime::now()
            .duration_since(run.view.since)
            .unwrap_or_default();
        let judgement = judge(
            &run.view.guard,
            &arms.stable,
            &arms.canary,
            elapsed,
            run.view.promote_after,
        );
        let version = run.view.version;
        match judgement {
            Judgement::Running => self.hold(desk, CanaryState::Running, None),
            Judgement::Held { why } => {
                if run.view.state != CanaryState::Held {
                    tracing::info!(%version, "canary held: {why}");
                }
                self.hold(desk, CanaryState::Held, Some(why));
            }
            Judgement::RollBack { why, .. } => {
                match fleet.end(epoch, "rolled_back", &why, &arms_json(&arms)) {
                    Ok(true) => {
                        self.roll_back(desk, actor(&why), arms);
                    }
                    // Another node was first; the next tick follows the record.
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!("the fleet's canary record did not take the rollback: {e}")
                    }
                }
            }
            Judgement::Promote => match fleet.end(epoch, "promoted", "promoted", &arms_json(&arms))
            {
                Ok(true) => self.promote(desk, arms),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!("the fleet's canary record did not take the promotion: {e}")
                }
            },
        }
        desk.run.as_ref().map(|r| r.view.state)
    }

    /// Runs the fleet's canary of `record` here (started on another node, or before this
    /// node's restart): its spec compiled as a push's, installed in the runtime, its age the
    /// record's.
    fn adopt(&self, desk: &mut Desk, record: &CanaryRecord) {
        // Whatever stops it here stops it for this epoch: logged once, tried again only for
        // the next canary.
        desk.declined = Some(record.epoch);
        let spec: FleetSpec = match serde_json::from_str(&record.spec) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(
                    epoch = record.epoch,
                    "the fleet's canary does not read: {e}"
                );
                return;
            }
        };
        let Some(guard) = spec.guard() else {
            tracing::error!(epoch = record.epoch, "the fleet's canary has a bad guard");
            return;
        };
        let set = match self.reloader.compile_candidate(spec.files.clone()) {
            Ok(set) => set,
            Err(e) => {
                tracing::error!(
                    epoch = record.epoch,
                    "the fleet's canary does not compile here: {e}"
                );
                return;
            }
        };
        let slice = Slice::new(spec.percent, spec.biz.clone());
        let since = UNIX_EPOCH + Duration::from_millis(record.since_ms);
        let view = CanaryView {
            version: *set.version(),
            stable_version: *self.reloader.handle().current().version(),
            state: CanaryState::Running,
            since,
            slice: slice.clone(),
            guard,
            promote_after: Duration::from_millis(spec.promote_after_ms),
            arms: Arms::default(),
            reason: None,
        };
        self.side.set_canary(Arc::new(set), slice);
        desk.declined = None;
        tracing::info!(version = %view.version, epoch = record.epoch, "the fleet's canary runs here too");
        desk.run = Some(Run {
            files: spec.files,
            started: Instant::now(),
            view,
            epoch: Some(record.epoch),
            sent: Arms::default(),
            fleet_arms: None,
        });
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
                let last = self.final_figures(arms);
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
        let last = self.final_figures(live);
        let version = desk.run.as_ref().map(|r| r.view.version);
        if let Some(version) = version {
            self.reloader
                .record_rolled_back(version, by.clone(), last.clone());
        }
        self.end(desk, CanaryState::RolledBack, by.reason, last)
    }

    /// Clears the runtime's canary and answers the figures its ending keeps: the runtime's
    /// last (they may have moved since `judged`), or on a fleet `judged`, the fleet's sums
    /// (the runtime's are this node's share only).
    fn final_figures(&self, judged: Arms) -> Arms {
        let local = self.side.clear_canary();
        match local {
            Some(local) if self.fleet.is_none() => local,
            _ => judged,
        }
    }

    fn end(
        &self,
        desk: &mut Desk,
        state: CanaryState,
        reason: String,
        last: Arms,
    ) -> Option<CanaryView> {
        desk.retired.add(&last);
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

/// The figures as the fleet's record keeps an ending's.
fn arms_json(arms: &Arms) -> String {
    super::json::arms(arms).to_string()
}

/// The figures an ending's record kept, read back.
fn parse_arms(text: &str) -> Option<Arms> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let arm = |a: &serde_json::Value| -> Option<ArmFigures> {
        Some(ArmFigures {
            first_deliveries: a.get("first_deliveries")?.as_u64()?,
            retries: a.get("retries")?.as_u64()?,
            dead_letters: a.get("dead_letters")?.as_u64()?,
            acked_by_attempt: a
                .get("success_by_attempt")?
                .as_array()?
                .iter()
                .filter_map(|n| n.as_u64())
                .collect(),
        })
    };
    Some(Arms {
        stable: arm(v.get("stable")?)?,
        canary: arm(v.get("canary")?)?,
    })
}

fn actor(reason: &str) -> Actor {
    Actor {
        operator: CONTROLLER.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
#[path = "canary_tests.rs"]
mod tests;
