//! [`RetryGate`]: the process's budgets and breakers, as the rule set in force declares them,
//! between the rules' decision and the retry's firing. One per topology, shared by its spout
//! tasks (one owner: the state they must agree on lives here, behind one lock, touched only
//! when the set has budgets or breakers).
//!
//! - A first delivery counts toward every budget whose scope takes its biz.
//! - A retry the rules decided, without room in its budget, is dead-lettered at once when
//!   the budget says `exhausted: dead_letter` ([`RetryGate::retry_allowed`]).
//! - A due retry fires only if every breaker of its scope admits it and its budget has room
//!   ([`RetryGate::admit`]); otherwise the spout task holds it and asks again (never dropped).
//! - A finished tree is a sample of every breaker whose scope takes its biz; a failure with
//!   the breaker's codes is a failed one ([`RetryGate::finished`]).
//! - The configuration's fuse is the breaker for everything ([`Fuse`]): every finished tree
//!   is its sample ([`RetryGate::fuse_finished`]), and every due retry needs its admission
//!   first.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

pub use rebound_engine::NO_KEY;
use rebound_engine::{BreakerPolicy, BudgetPolicy, CompiledSet, Exhausted, FailureContext, PerKey};
use tokio::time::Instant;

use super::breaker::{Breaker, BreakerLimits, BreakerState, Opening};
use super::budget::{Budget, BudgetLimits};
use super::fuse::{FUSE, Fuse};
use super::gate_fleet::FleetSide;
use crate::time::TimeScale;
use crate::topology::{FuseConfig, Message, MessageId};

/// The most values of a breaker's `per` key kept apart; the rest share `other`.
pub const MAX_KEYS: usize = 100;

/// The shortest window a breaker counts over, in real time, whatever the time scale: a
/// window shorter than the time a tree takes to succeed sees its fast failures before its
/// successes, and opens on a healthy dependency.
pub const MIN_BREAKER_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

/// What the gate did, for the metrics and the report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GateSnapshot {
    /// Per budget: retries held for want of room, and retries dead-lettered for it.
    pub budgets: BTreeMap<String, (u64, u64)>,
    /// Per breaker and key (`""` without `per`, [`NO_KEY`] for failures without its `per`
    /// value). The fuse is the breaker `fuse`, key `""`, once it has been anything but closed.
    pub breakers: BTreeMap<(String, String), BreakerView>,
}

/// One breaker (one key) in a [`GateSnapshot`].
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerView {
    /// Where it stands now.
    pub state: BreakerState,
    /// The states it entered, in order (the first 100).
    pub history: Vec<BreakerState>,
    /// What it saw each time it opened (the first 100).
    pub openings: Vec<Opening>,
}

impl BreakerView {
    fn of(b: &mut Breaker, now: Instant) -> BreakerView {
        BreakerView {
            state: b.state(now),
            history: b.history().to_vec(),
            openings: b.openings().to_vec(),
        }
    }
}

#[derive(Debug)]
pub(super) struct BudgetState {
    pub(super) budget: Budget,
    /// The retries held now, each counted once in `held`.
    waiting: HashSet<MessageId>,
    held: u64,
    exhausted: u64,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) fuse: Fuse,
    pub(super) budgets: HashMap<String, BudgetState>,
    pub(super) breakers: HashMap<String, HashMap<String, Breaker>>,
    /// The fleet's side: what this node counted for it and the totals it read
    /// (`gate_fleet.rs`); [`Scope::Alone`](super::Scope::Alone) without a shared store.
    pub(super) fleet: FleetSide,
    /// Per `per` breaker: its scope's recent successes that carry no key (first deliveries
    /// that worked), so that a key seen for the first time starts with them and does not
    /// judge its dependency by its failures alone.
    unkeyed: HashMap<String, VecDeque<Instant>>,
}

/// The most keyless successes kept per breaker.
const MAX_UNKEYED: usize = 10_000;

/// The budgets and breakers of one topology; see the [module docs](self).
#[derive(Debug)]
pub struct RetryGate {
    pub(super) state: Mutex<State>,
}

/// Where the fuse stands, for a spout task's decision and its wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FuseView {
    /// Open or half-open (`signals.fuse_open`, `rebound_retry_fuse_open`).
    pub open: bool,
    /// Open: no retry fires at all (half-open ones are asked one by one).
    pub holding: bool,
    /// Failed / finished over its window (`signals.fail_rate`).
    pub fail_rate: f64,
}

/// The scope a message's retry is judged in: its biz, and its last failure's code and attrs.
fn retry_scope(message: &Message) -> Option<FailureContext<'_>> {
    let last = message.retry.last_failure()?;
    let mut ctx = FailureContext::new(&message.biz, &last.code, message.retry.attempt);
    ctx.attrs = &last.attrs;
    Some(ctx)
}

/// True if the set asks anything of the gate.
pub fn active(set: &CompiledSet) -> bool {
    !(set.budgets().is_empty() && set.breakers().is_empty())
}

pub(super) fn budget_limits(b: &BudgetPolicy, scale: TimeScale) -> BudgetLimits {
    BudgetLimits::new(b.ratio, b.min_per_s, b.window, scale.to_real(b.window))
}

pub(super) fn breaker_limits(b: &BreakerPolicy, scale: TimeScale) -> BreakerLimits {
    BreakerLimits {
        open_at: b.open_at,
        open_on_heat: b.open_on_heat,
        min_samples: b.min_samples,
        window: scale
            .to_real(b.window)
            .max(MIN_BREAKER_WINDOW.min(b.window)),
        cool_down: scale.to_real(b.cool_down),
        ramp: scale.to_real(b.ramp),
    }
}

impl State {
    pub(super) fn budget(&mut self, b: &BudgetPolicy, scale: TimeScale) -> &mut BudgetState {
        let limits = budget_limits(b, scale);
        let s = self
            .budgets
            .entry(b.id.clone())
            .or_insert_with(|| BudgetState {
                budget: Budget::new(limits),
                waiting: HashSet::new(),
                held: 0,
                exhausted: 0,
            });
        if s.budget.limits() != limits {
            s.budget.set_limits(limits);
        }
        s
    }

    /// The breaker of `b` for `key` (a new one closed), or `other` beyond [`MAX_KEYS`].
    pub(super) fn breaker(
        &mut self,
        b: &BreakerPolicy,
        key: &str,
        scale: TimeScale,
        now: Instant,
    ) -> (String, &mut Breaker) {
        let limits = breaker_limits(b, scale);
        let keys = self.breakers.entry(b.id.clone()).or_default();
        let key = if keys.contains_key(key) || keys.len() < MAX_KEYS {
            key.to_owned()
        } else {
            "other".to_owned()
        };
        let unkeyed = self.unkeyed.get(&b.id);
        let breaker = keys.entry(key.clone()).or_insert_with(|| {
            let mut fresh = Breaker::new(limits, now);
            let start = now.checked_sub(limits.window);
            for t in unkeyed.into_iter().flatten() {
                if start.is_none_or(|s| *t > s) {
                    fresh.record(false, *t);
                }
            }
            fresh
        });
        breaker.set_limits(limits);
        (key, breaker)
    }
}

/// The key of a breaker for `ctx`: `""` without `per`, else its `per` value, [`NO_KEY`] for a
/// failure without one.
fn key_of<'a>(per: Option<&PerKey>, ctx: &FailureContext<'a>) -> &'a str {
    per.map_or("", |p| p.key(ctx))
}

impl RetryGate {
    /// A gate with the fuse `fuse`, closed at `now`, and no budget or breaker state yet.
    pub fn new(fuse: &FuseConfig, now: Instant) -> RetryGate {
        RetryGate {
            state: Mutex::new(State {
                fuse: Fuse::new(fuse, now),
                budgets: HashMap::new(),
                breakers: HashMap::new(),
                unkeyed: HashMap::new(),
                fleet: FleetSide::default(),
            }),
        }
    }

    /// `acked` and `failed` finished trees at `now`, for the fuse.
    pub fn fuse_finished(&self, acked: u64, failed: u64, now: Instant) {
        let mut s = self.lock();
        let before = s.fuse.breaker().map(|b| b.transitions());
        s.fuse.record(now, acked, failed);
        let opened = s.fuse.breaker().is_some_and(|b| {
            Some(b.transitions()) != before && b.history().last() == Some(&BreakerState::Open)
        });
        if opened {
            s.fleet.opened(FUSE, "");
        }
    }

    /// Where the fuse stands at `now`.
    pub fn fuse(&self, now: Instant) -> FuseView {
        let mut s = self.lock();
        let state = s.fuse.state(now);
        FuseView {
            open: state != BreakerState::Closed,
            holding: state == BreakerState::Open,
            fail_rate: s.fuse.fail_rate(now),
        }
    }

    /// Whether the fuse lets the due retry `id` fire at `now` (with no budget or breaker to
    /// ask).
    pub fn fuse_admits(&self, id: &MessageId, now: Instant) -> bool {
        self.lock().fuse.admit(id, now)
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A first delivery of `biz` at `now`.
    pub fn first_delivery(&self, set: &CompiledSet, scale: TimeScale, biz: &str, now: Instant) {
        // Most first deliveries are of a biz no budget counts: no lock for them.
        let mut counting = set
            .budgets()
            .iter()
            .filter(|b| b.scope.matches_biz(biz))
            .peekable();
        if counting.peek().is_none() {
            return;
        }
        let mut s = self.lock();
        for b in counting {
            s.budget(b, scale).budget.first_delivery(now);
            s.fleet.first_delivery(&b.id);
        }
    }

    /// Whether a retry the rules decided for `ctx` may be scheduled: false when its budget
    /// has no room and says `dead_letter` (counted as exhausted; the caller dead-letters it
    /// with reason `budget`).
    pub fn retry_allowed(
        &self,
        set: &CompiledSet,
        scale: TimeScale,
        ctx: &FailureContext<'_>,
        now: Instant,
    ) -> bool {
        let Some(b) = set.budget_for(ctx) else {
            return true;
        };
        if b.exhausted != Exhausted::DeadLetter {
            return true;
        }
        let mut s = self.lock();
        if s.has_room(b, scale, now) {
            return true;
        }
        s.budget(b, scale).exhausted += 1;
        false
    }

    /// Whether the due retry of `message` may fire at `now`: the fuse first, then every
    /// breaker of its scope, then its budget (if so, the budget counts it).
    pub fn admit(
        &self,
        set: &CompiledSet,
        scale: TimeScale,
        message: &Message,
        now: Instant,
    ) -> bool {
        let mut s = self.lock();
        if !s.fuse.admit(&message.id, now) {
            return false;
        }
        let Some(ctx) = retry_scope(message) else {
            return true; // a replayed letter's fresh delivery: no failure to judge it by
        };
        for b in set.breakers_for(&ctx) {
            let key = key_of(b.per.as_ref(), &ctx);
            let (_, breaker) = s.breaker(b, key, scale, now);
            if !breaker.admit(&message.id, now) {
                return false;
            }
        }
        let Some(b) = set.budget_for(&ctx) else {
            return true;
        };
        if s.try_fire(b, scale, now) {
            s.budget(b, scale).waiting.remove(&message.id);
            return true;
        }
        let state = s.budget(b, scale);
        if state.waiting.insert(message.id.clone()) {
            state.held += 1;
        }
        false
    }

    /// A finished tree of `biz` at `now`: acked (`failure` `None`), or failed as `failure`.
    /// `last` is the message's last failure before, if any (an acked retry's breaker key).
    pub fn finished(
        &self,
        set: &CompiledSet,
        scale: TimeScale,
        biz: &str,
        failure: Option<&FailureContext<'_>>,
        last: Option<&FailureContext<'_>>,
        now: Instant,
    ) {
        if set.breakers().is_empty() {
            return;
        }
        let mut s = self.lock();
        for b in set.breakers() {
            if !b.scope.matches_biz(biz) {
                continue;
            }
            let failed = failure.is_some_and(|ctx| b.scope.matches(ctx));
            let keys: Vec<String> = match (failure.or(last), &b.per) {
                (Some(ctx), _) => vec![key_of(b.per.as_ref(), ctx).to_owned()],
                // A success with no key of its own: a sample of every key seen, and of the
                // keys still to come.
                (None, Some(_)) => {
                    let window = breaker_limits(b, scale).window;
                    let recent = s.unkeyed.entry(b.id.clone()).or_default();
                    if let Some(start) = now.checked_sub(window) {
                        while recent.front().is_some_and(|t| *t <= start) {
                            recent.pop_front();
                        }
                    }
                    if recent.len() == MAX_UNKEYED {
                        recent.pop_front();
                    }
                    recent.push_back(now);
                    s.breakers
                        .get(&b.id)
                        .map(|k| k.keys().cloned().collect())
                        .unwrap_or_default()
                }
                (None, None) => vec![String::new()],
            };
            for key in keys {
                let (key, breaker) = s.breaker(b, &key, scale, now);
                let before = breaker.transitions();
                let state = breaker.record(failed, now);
                if state == BreakerState::Open && breaker.transitions() != before {
                    s.fleet.opened(&b.id, &key);
                }
                s.fleet.sample(&b.id, &key, failed);
            }
        }
    }

    /// A failure `ctx` saw its biz's heat at `heat` (`signals.heat`) at `now`: opens each
    /// breaker of its scope whose `open_on_heat` that reaches.
    pub fn heat_seen(
        &self,
        set: &CompiledSet,
        scale: TimeScale,
        ctx: &FailureContext<'_>,
        heat: f64,
        now: Instant,
    ) {
        let mut hot = set
            .breakers_for(ctx)
            .filter(|b| b.open_on_heat.is_some_and(|at| heat >= at))
            .peekable();
        if hot.peek().is_none() {
            return;
        }
        let mut s = self.lock();
        for b in hot {
            let (key, breaker) = s.breaker(b, key_of(b.per.as_ref(), ctx), scale, now);
            if breaker.heat_seen(heat, now) {
                tracing::info!(breaker = %b.id, key = %key, heat, "breaker opened on its biz's heat");
                s.fleet.opened(&b.id, &key);
            }
        }
    }

    /// 1 while a breaker of `ctx`'s scope is open or half-open (`signals.breaker_open`).
    pub fn breaker_open(&self, set: &CompiledSet, ctx: &FailureContext<'_>, now: Instant) -> bool {
        if set.breakers().is_empty() {
            return false;
        }
        let mut s = self.lock();
        set.breakers_for(ctx).any(|b| {
            let key = key_of(b.per.as_ref(), ctx);
            s.breakers
                .get_mut(&b.id)
                .and_then(|k| k.get_mut(key))
                .is_some_and(|br| br.state(now) != BreakerState::Closed)
        })
    }

    /// What it did so far, and where each breaker stands at `now`.
    pub fn snapshot(&self, now: Instant) -> GateSnapshot {
        let mut s = self.lock();
        let budgets = s
            .budgets
            .iter()
            .map(|(id, b)| (id.clone(), (b.held, b.exhausted)))
            .collect();
        let mut breakers = BTreeMap::new();
        if let Some(fuse) = s.fuse.breaker() {
            let view = BreakerView::of(fuse, now);
            if !view.history.is_empty() {
                breakers.insert((FUSE.to_owned(), String::new()), view);
            }
        }
        for (id, keys) in s.breakers.iter_mut() {
            for (key, b) in keys.iter_mut() {
                breakers.insert((id.clone(), key.clone()), BreakerView::of(b, now));
            }
        }
        GateSnapshot { budgets, breakers }
    }
}
