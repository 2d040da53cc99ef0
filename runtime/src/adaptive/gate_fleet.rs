//! The [`RetryGate`]'s side of the fleet (`operations.md`, "One fleet, one budget"): what
//! this node counted for the fleet since its last sync, the fleet's totals it last read, and
//! the scope in force. The sync thread ([`FleetSync`](super::FleetSync)) is the only caller of
//! [`RetryGate::take_push`], [`RetryGate::apply`] and [`RetryGate::lost`]; decisions only read
//! what they left, under the gate's one lock.
//!
//! - Scope [`Alone`](Scope::Alone) (no shared store): nothing here is counted, and budgets
//!   admit on the process's own window, as ever.
//! - [`Fleet`](Scope::Fleet): a budget has room while this node's retries since the totals stay
//!   within its share ([`FleetBudget::has_room`]); a breaker also opens on the fleet's counts
//!   (while closed, and during its ramp when its cool-down outlasts its window), and adopts
//!   every record the fleet opened.
//! - [`Node`](Scope::Node) (the last sync failed): each budget's own window, its floor divided
//!   by the last known number of nodes ([`node_allowance`]); counts go on accumulating, to be
//!   pushed at the sync that rejoins.

use std::collections::HashMap;
use std::time::Duration;

use rebound_engine::{BudgetPolicy, CompiledSet};
use tokio::time::Instant;

use super::breaker::{Breaker, BreakerState};
use super::fleet::{Counter, CounterOf, Opening, Push, Scope, Totals};
use super::fuse::FUSE;
use super::gate::{RetryGate, State, breaker_limits, budget_limits};
use super::share::{FleetBudget, node_allowance};
use crate::time::TimeScale;

/// One budget's counts for the fleet.
#[derive(Debug, Clone, Copy, Default)]
struct BudgetCounts {
    view: FleetBudget,
    /// Counted since the last push taken (in `view`'s mine too).
    unsent_firsts: u64,
    unsent_fired: u64,
}

/// One breaker key's counts for the fleet.
#[derive(Debug, Clone, Copy, Default)]
struct BreakerCounts {
    samples_seen: u64,
    failed_seen: u64,
    unsent_samples: u64,
    unsent_failed: u64,
    /// The epoch of the fleet's record this node knows (0: none).
    epoch: u64,
}

/// The fleet's side of a gate's state.
#[derive(Debug)]
pub(super) struct FleetSide {
    scope: Scope,
    /// The live nodes at the last totals (at least 1).
    nodes: usize,
    seq: u64,
    budgets: HashMap<String, BudgetCounts>,
    breakers: HashMap<(String, String), BreakerCounts>,
    /// Breakers this node opened, to tell the fleet.
    openings: Vec<(String, String)>,
    /// The ramps the last push sent releases of: per breaker and key, the ramp it was in.
    ramps: HashMap<(String, String), u64>,
}

impl Default for FleetSide {
    fn default() -> FleetSide {
        FleetSide {
            scope: Scope::Alone,
            nodes: 1,
            seq: 0,
            budgets: HashMap::new(),
            breakers: HashMap::new(),
            openings: Vec::new(),
            ramps: HashMap::new(),
        }
    }
}

/// The window a ramp's releases are counted over: the ramp twice (the counter is the ramp's
/// own, named by its epoch, so a longer window only keeps its first releases in).
fn ramp_window(ramp: Duration) -> Duration {
    (ramp * 2).max(Duration::from_secs(1))
}

/// Sends what a half-open breaker released in its ramp and reads the fleet's total of it.
fn push_ramp(
    push: &mut Push,
    ramps: &mut HashMap<(String, String), u64>,
    (id, key, epoch): (&str, &str, u64),
    breaker: &mut Breaker,
) {
    let Some((ramp, unsent)) = breaker.take_released() else {
        return;
    };
    let counter = Counter {
        of: CounterOf::Released(id.to_owned(), key.to_owned(), epoch),
        window: ramp_window(breaker.limits().ramp),
    };
    if unsent > 0 {
        push.adds.push((counter.clone(), unsent));
    }
    push.reads.push(counter);
    ramps.insert((id.to_owned(), key.to_owned()), ramp);
}

impl FleetSide {
    fn counting(&self) -> bool {
        self.scope != Scope::Alone
    }

    /// A first delivery under budget `id`.
    pub(super) fn first_delivery(&mut self, id: &str) {
        if !self.counting() {
            return;
        }
        let c = self.budgets.entry(id.to_owned()).or_default();
        c.view.firsts_mine += 1;
        c.unsent_firsts += 1;
    }

    /// A finished tree of breaker `id`'s scope under `key`.
    pub(super) fn sample(&mut self, id: &str, key: &str, failed: bool) {
        if !self.counting() {
            return;
        }
        let c = self
            .breakers
            .entry((id.to_owned(), key.to_owned()))
            .or_default();
        c.unsent_samples += 1;
        c.unsent_failed += u64::from(failed);
    }

    /// Breaker `id` (key `key`) opened on this node.
    pub(super) fn opened(&mut self, id: &str, key: &str) {
        tracing::info!(breaker = %id, key = %key, "breaker opened on this node's samples");
        if self.counting() {
            self.openings.push((id.to_owned(), key.to_owned()));
        }
    }
}

impl State {
    /// True if a retry under `b` could fire at `now`, in the scope in force.
    pub(super) fn has_room(&mut self, b: &BudgetPolicy, scale: TimeScale, now: Instant) -> bool {
        let limits = budget_limits(b, scale);
        match self.fleet.scope {
            Scope::Alone => self.budget(b, scale).budget.has_room(now),
            Scope::Fleet => {
                let nodes = self.fleet.nodes;
                let c = self.fleet.budgets.entry(b.id.clone()).or_default();
                c.view.has_room(&limits, nodes)
            }
            Scope::Node => {
                let nodes = self.fleet.nodes;
                self.budget(b, scale)
                    .budget
                    .has_room_under(now, |f| node_allowance(&limits, f, nodes))
            }
        }
    }

    /// Fires one retry under `b` at `now` if it has room: true if it was counted.
    pub(super) fn try_fire(&mut self, b: &BudgetPolicy, scale: TimeScale, now: Instant) -> bool {
        if self.fleet.scope == Scope::Alone {
            return self.budget(b, scale).budget.try_fire(now);
        }
        if !self.has_room(b, scale, now) {
            return false;
        }
        self.budget(b, scale).budget.count_fired(now);
        let c = self.fleet.budgets.entry(b.id.clone()).or_default();
        c.view.fired_mine += 1;
        c.unsent_fired += 1;
        true
    }
}

impl RetryGate {
    /// The scope in force.
    pub fn scope(&self) -> Scope {
        self.lock().fleet.scope
    }

    /// The live nodes at the last totals (1 without a fleet).
    pub fn fleet_nodes(&self) -> usize {
        self.lock().fleet.nodes
    }

    /// What to send the fleet now: the counts since the last push (taken: the next push
    /// carries only what comes after), the counters of every budget of `set` and of every
    /// breaker key seen, and the breakers opened here. Joins the fleet's counting (a gate
    /// that was [`Scope::Alone`] counts from now on, in scope `node` until totals arrive).
    pub fn take_push(&self, rules: Option<(&CompiledSet, TimeScale)>) -> Push {
        let (budgets, breakers, scale) = match rules {
            Some((set, scale)) => (set.budgets(), set.breakers(), scale),
            None => (&[][..], &[][..], TimeScale::default()),
        };
        let mut s = self.lock();
        let f = &mut s.fleet;
        if f.scope == Scope::Alone {
            f.scope = Scope::Node;
        }
        f.seq += 1;
        let mut push = Push {
            seq: f.seq,
            ..Push::default()
        };
        for b in budgets {
            let window = budget_limits(b, scale).window;
            let c = f.budgets.entry(b.id.clone()).or_default();
            let firsts = Counter {
                of: CounterOf::Firsts(b.id.clone()),
                window,
            };
            let fired = Counter {
                of: CounterOf::Fired(b.id.clone()),
                window,
            };
            for (counter, n) in [(firsts, &mut c.unsent_firsts), (fired, &mut c.unsent_fired)] {
                if *n > 0 {
                    push.adds.push((counter.clone(), std::mem::take(n)));
                }
                push.reads.push(counter);
            }
        }
        for b in breakers {
            let window = breaker_limits(b, scale).window;
            for ((id, key), c) in f.breakers.iter_mut().filter(|((id, _), _)| *id == b.id) {
                let samples = Counter {
                    of: CounterOf::Samples(id.clone(), key.clone()),
                    window,
                };
                let failed = Counter {
                    of: CounterOf::Failed(id.clone(), key.clone()),
                    window,
                };
                for (counter, n) in [
                    (samples, &mut c.unsent_samples),
                    (failed, &mut c.unsent_failed),
                ] {
                    if *n > 0 {
                        push.adds.push((counter.clone(), std::mem::take(n)));
                    }
                    push.reads.push(counter);
                }
            }
        }
        for (breaker, key) in std::mem::take(&mut f.openings) {
            let known_epoch = f
                .breakers
                .get(&(breaker.clone(), key.clone()))
                .map_or(0, |c| c.epoch);
            push.openings.push(Opening {
                breaker,
                key,
                known_epoch,
            });
        }
        let State {
            fleet: f,
            breakers: local,
            fuse,
            ..
        } = &mut *s;
        f.ramps.clear();
        let epoch_of = |f: &FleetSide, id: &str, key: &str| {
            f.breakers
                .get(&(id.to_owned(), key.to_owned()))
                .map_or(0, |c| c.epoch)
        };
        for b in breakers {
            for (key, breaker) in local.get_mut(&b.id).into_iter().flatten() {
                let epoch = epoch_of(f, &b.id, key);
                push_ramp(&mut push, &mut f.ramps, (&b.id, key, epoch), breaker);
            }
        }
        if let Some(breaker) = fuse.breaker() {
            let epoch = epoch_of(f, FUSE, "");
            push_ramp(&mut push, &mut f.ramps, (FUSE, "", epoch), breaker);
        }
        push
    }

    /// The fleet's totals for `push` arrived at `now`: the scope is `fleet`; each budget's view
    /// is the totals plus what this node counted since the push; a closed breaker whose fleet
    /// counts reach its `min_samples` and `open_at` opens; every record newer than the epoch
    /// this node knew is adopted (the fuse's too), timed from its opening by the store's clock.
    pub fn apply(
        &self,
        rules: Option<(&CompiledSet, TimeScale)>,
        push: &Push,
        totals: &Totals,
        now: Instant,
    ) {
        let (breakers, scale) = match rules {
            Some((set, scale)) => (set.breakers(), scale),
            None => (&[][..], TimeScale::default()),
        };
        let mut s = self.lock();
        s.fleet.scope = Scope::Fleet;
        s.fleet.nodes = totals.nodes.max(1);
        s.set_fleet_nodes(totals.nodes.max(1));
        let mut released = Vec::new();
        for (counter, total) in push.reads.iter().zip(&totals.counts) {
            let f = &mut s.fleet;
            match &counter.of {
                CounterOf::Released(id, key, _) => {
                    if let Some(ramp) = f.ramps.get(&(id.clone(), key.clone())) {
                        released.push((id, key, *ramp, *total));
                    }
                }
                CounterOf::Firsts(id) => {
                    let c = f.budgets.entry(id.clone()).or_default();
                    c.view.firsts_seen = *total;
                    c.view.firsts_mine = c.unsent_firsts;
                }
                CounterOf::Fired(id) => {
                    let c = f.budgets.entry(id.clone()).or_default();
                    c.view.fired_seen = *total;
                    c.view.fired_mine = c.unsent_fired;
                }
                CounterOf::Samples(id, key) => {
                    f.breakers
                        .entry((id.clone(), key.clone()))
                        .or_default()
                        .samples_seen = *total;
                }
                CounterOf::Failed(id, key) => {
                    f.breakers
                        .entry((id.clone(), key.clone()))
                        .or_default()
                        .failed_seen = *total;
                }
            }
        }
        for (id, key, ramp, total) in released {
            let breaker = if id == FUSE {
                s.fuse.breaker()
            } else {
                s.breakers.get_mut(id).and_then(|k| k.get_mut(key))
            };
            if let Some(b) = breaker {
                b.fleet_released(ramp, total, now);
            }
        }
        // Breakers that the fleet's counts open: judged while closed, and while half-open when
        // the cool-down outlasts the window (what opened it has left the fleet's window; a
        // shorter cool-down leaves the ramp to the node's own samples).
        for b in breakers {
            let limits = breaker_limits(b, scale);
            let judges_ramp = limits.cool_down >= limits.window;
            let keys: Vec<(String, u64, u64)> = s
                .fleet
                .breakers
                .iter()
                .filter(|((id, _), _)| *id == b.id)
                .map(|((_, key), c)| {
                    (
                        key.clone(),
                        c.samples_seen + c.unsent_samples,
                        c.failed_seen + c.unsent_failed,
                    )
                })
                .collect();
            for (key, samples, failed) in keys {
                if samples == 0
                    || samples < limits.min_samples
                    || limits
                        .open_at
                        .is_none_or(|at| (failed as f64 / samples as f64) < at)
                {
                    continue;
                }
                let (key, breaker) = s.breaker(b, &key, scale, now);
                let judged = match breaker.state(now) {
                    BreakerState::Closed => true,
                    BreakerState::HalfOpen => judges_ramp,
                    BreakerState::Open => false,
                };
                if judged && breaker.open_on(failed, samples, now) {
                    tracing::info!(breaker = %b.id, key = %key, failed, samples, "breaker opened on the fleet's samples");
                    s.fleet.openings.push((b.id.clone(), key));
                }
            }
        }
        for r in &totals.breakers {
            let known = s
                .fleet
                .breakers
                .entry((r.breaker.clone(), r.key.clone()))
                .or_default();
            if r.epoch <= known.epoch {
                continue;
            }
            known.epoch = r.epoch;
            let at = now.checked_sub(r.opened_ago).unwrap_or(now);
            if r.breaker == FUSE {
                if let Some(fuse) = s.fuse.breaker()
                    && r.opened_ago < over(fuse.limits().cool_down, fuse.limits().ramp)
                    && fuse.adopt_open(at, now)
                {
                    tracing::info!(breaker = %FUSE, key = "", opened_ago = ?r.opened_ago, "breaker opened: the fleet's record");
                }
                continue;
            }
            let Some(b) = breakers.iter().find(|b| b.id == r.breaker) else {
                continue; // a breaker of another rule set: not this node's to follow
            };
            let limits = breaker_limits(b, scale);
            if r.opened_ago >= over(limits.cool_down, limits.ramp) {
                continue; // over: closed everywhere
            }
            if s.breaker(b, &r.key, scale, now).1.adopt_open(at, now) {
                tracing::info!(breaker = %r.breaker, key = %r.key, opened_ago = ?r.opened_ago, "breaker opened: the fleet's record");
            }
        }
        // Openings the loop above found but the push did not carry wait for the next one;
        // the epochs they name are those just learned.
    }

    /// The last sync failed: the node's own state from now on (until [`RetryGate::apply`]).
    /// True if the scope changed (the caller warns once).
    pub fn lost(&self) -> bool {
        let mut s = self.lock();
        let changed = s.fleet.scope == Scope::Fleet;
        s.fleet.scope = Scope::Node;
        s.set_fleet_nodes(1);
        changed
    }
}

impl State {
    /// Every breaker's and the fuse's ramp shares the fleet of `nodes` (1: its own).
    fn set_fleet_nodes(&mut self, nodes: usize) {
        if let Some(b) = self.fuse.breaker() {
            b.set_fleet_nodes(nodes);
        }
        for b in self.breakers.values_mut().flat_map(|k| k.values_mut()) {
            b.set_fleet_nodes(nodes);
        }
    }
}

/// How long after its opening a breaker is closed again.
fn over(cool_down: Duration, ramp: Duration) -> Duration {
    cool_down.saturating_add(ramp)
}
