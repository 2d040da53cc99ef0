//! One circuit breaker's state (`operations.md`, "Breakers"): over a sliding window it counts
//! the finished trees of its scope and those that failed with its codes; at `min_samples` and a
//! failed share of `open_at` it opens, and due retries in its scope are held (never dropped)
//! while new messages keep flowing. After `cool_down` it is half-open: the share of held
//! retries it releases rises linearly from 10% to 100% over `ramp`; a failed share at or above
//! `open_at` during the ramp opens it again; when the ramp ends it is closed.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::topology::MessageId;

/// The most state changes a breaker remembers.
const MAX_HISTORY: usize = 100;

/// What a breaker does, from the rule set's `breakers:` entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerLimits {
    /// The failed share that opens it, 0 to 1 (`None`: the share never does).
    pub open_at: Option<f64>,
    /// The heat of a failure's biz that opens it (`None`: heat never does).
    pub open_on_heat: Option<f64>,
    /// The fewest finished trees in the window before it may open.
    pub min_samples: u64,
    /// The sliding window.
    pub window: Duration,
    /// Open this long before half-open.
    pub cool_down: Duration,
    /// Half-open this long before closed.
    pub ramp: Duration,
}

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Retries fire as due.
    Closed,
    /// Retries in its scope are held.
    Open,
    /// A rising share of held retries is released.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// What a breaker saw when it opened: the finished trees in its window and how many of them
/// failed (the failed share is their ratio), and the heat that opened it if heat did, under
/// the limits then in force.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Opening {
    /// Failed trees in the window.
    pub failed: u64,
    /// Finished trees in the window.
    pub samples: u64,
    /// The failed share that opens it (`open_at`, the fuse's `threshold`).
    pub open_at: Option<f64>,
    /// The fewest samples it opens at.
    pub min_samples: u64,
    /// Opened on heat: the heat the failure saw, and the `open_on_heat` it reached.
    pub heat: Option<(f64, f64)>,
}

impl Opening {
    /// `failed / samples`.
    pub fn failed_share(&self) -> f64 {
        self.failed as f64 / self.samples.max(1) as f64
    }
}

/// The share of held retries released this far into the ramp: 10% at its start, 100% at its
/// end.
pub fn ramp_share(into: Duration, ramp: Duration) -> f64 {
    if ramp.is_zero() {
        return 1.0;
    }
    (0.1 + 0.9 * into.as_secs_f64() / ramp.as_secs_f64()).min(1.0)
}

/// A half-open breaker's view of the fleet's ramp (`operations.md`, "One fleet, one budget"):
/// the retries the other nodes released in this ramp, as of the last totals, and the live
/// nodes. The ramp's share counts every node's releases against the retries asked: the
/// node's own held ones and those the others released. So the fleet releases into the
/// recovering dependency what one node would (whose released retries make room for more to
/// be asked), and between two totals a node releases at most `⌈left / N⌉` of what was left:
/// the fleet's first release of a ramp is one node's, not N of them at once. Alone (N = 1,
/// no others) it is the node's own ramp.
#[derive(Debug, Clone, Copy)]
struct RampShare {
    /// Live nodes (at least 1).
    nodes: u64,
    /// The other nodes' releases in this ramp, at the last totals.
    others: u64,
    /// This node's releases in this ramp when those totals arrived.
    mine_at_totals: u64,
    /// This node's releases in this ramp already sent to the fleet.
    sent: u64,
}

impl Default for RampShare {
    fn default() -> RampShare {
        RampShare {
            nodes: 1,
            others: 0,
            mine_at_totals: 0,
            sent: 0,
        }
    }
}

/// Trees finishing within this of the first of a run, with the same verdict, are kept as one
/// entry with a count: they leave the window together, at most this early. A breaker's
/// memory is then bounded by its window (two entries a grain at most), not by the trees it
/// saw: the fuse records every tree, hundreds of thousands a second.
const GRAIN: Duration = Duration::from_millis(1);

/// Finished trees of one verdict, the first at `at`, all within [`GRAIN`] of it.
#[derive(Debug, Clone, Copy)]
struct Finished {
    at: Instant,
    failed: bool,
    count: usize,
}

/// One breaker (one value of its `per` key).
#[derive(Debug)]
pub struct Breaker {
    limits: BreakerLimits,
    /// Finished trees in the window, oldest first: when, and whether they failed with its
    /// codes (runs of a verdict within a grain as one entry).
    outcomes: VecDeque<Finished>,
    /// Finished trees in the window, and how many of them failed.
    samples: usize,
    failed: usize,
    state: BreakerState,
    /// When the state began.
    since: Instant,
    /// Half-open: the retries asked since it began (each once, however often it is asked
    /// again), and how many were released.
    asked: HashSet<MessageId>,
    released: u64,
    /// On a fleet: the ramp's share counts the fleet's released retries ([`RampShare`]).
    fleet: RampShare,
    /// How many times it changed state.
    transitions: u64,
    /// The states it entered, in order (the first [`MAX_HISTORY`]).
    history: Vec<BreakerState>,
    /// What it saw each time it opened (the first [`MAX_HISTORY`]).
    openings: Vec<Opening>,
}

impl Breaker {
    /// A closed breaker under `limits`.
    pub fn new(limits: BreakerLimits, now: Instant) -> Breaker {
        Breaker {
            limits,
            outcomes: VecDeque::new(),
            samples: 0,
            failed: 0,
            state: BreakerState::Closed,
            since: now,
            asked: HashSet::new(),
            released: 0,
            fleet: RampShare::default(),
            transitions: 0,
            history: Vec::new(),
            openings: Vec::new(),
        }
    }

    /// The limits now in force (a reload may change them; the state stays).
    pub fn set_limits(&mut self, limits: BreakerLimits) {
        self.limits = limits;
    }

    /// A finished tree of its scope at `now`: `failed` if it failed with the breaker's codes.
    /// Returns the state after it (it may have opened).
    pub fn record(&mut self, failed: bool, now: Instant) -> BreakerState {
        self.record_sample(failed, now, true)
    }

    /// [`Breaker::record`], opening it only if `may_open` (a sample kept while too little
    /// time has passed to judge by, as the fuse's first window).
    pub fn record_sample(&mut self, failed: bool, now: Instant, may_open: bool) -> BreakerState {
        self.advance(now);
        self.prune(now);
        match self.outcomes.back_mut() {
            Some(run) if run.failed == failed && now.saturating_duration_since(run.at) < GRAIN => {
                run.count += 1;
            }
            _ => self.outcomes.push_back(Finished {
                at: now,
                failed,
                count: 1,
            }),
        }
        self.samples += 1;
        self.failed += usize::from(failed);
        let samples = self.samples as u64;
        let share = self.failed as f64 / samples as f64;
        if may_open
            && self.state != BreakerState::Open
            && samples >= self.limits.min_samples
            && self.limits.open_at.is_some_and(|at| share >= at)
        {
            if self.openings.len() < MAX_HISTORY {
                self.openings.push(Opening {
                    failed: self.failed as u64,
                    samples,
                    open_at: self.limits.open_at,
                    min_samples: self.limits.min_samples,
                    heat: None,
                });
            }
            self.enter(BreakerState::Open, now);
        }
        self.state
    }

    /// Opens it at `now` on what the fleet counted (`failed` of `samples` finished trees in
    /// the window, across the nodes), unless it is open already. True if it opened.
    pub fn open_on(&mut self, failed: u64, samples: u64, now: Instant) -> bool {
        self.advance(now);
        if self.state == BreakerState::Open {
            return false;
        }
        if self.openings.len() < MAX_HISTORY {
            self.openings.push(Opening {
                failed,
                samples,
                open_at: self.limits.open_at,
                min_samples: self.limits.min_samples,
                heat: None,
            });
        }
        self.enter(BreakerState::Open, now);
        true
    }

    /// A failure of its scope saw its biz's heat at `heat` (`signals.heat`, this failure
    /// counted): opens it at `now` if its `open_on_heat` is at or below that and it is not
    /// open already (half-open, it opens again: it stays open while the heat stays up). True
    /// if it opened.
    pub fn heat_seen(&mut self, heat: f64, now: Instant) -> bool {
        let Some(open_on) = self.limits.open_on_heat else {
            return false;
        };
        self.advance(now);
        if heat < open_on || self.state == BreakerState::Open {
            return false;
        }
        if self.openings.len() < MAX_HISTORY {
            self.openings.push(Opening {
                failed: self.failed as u64,
                samples: self.samples as u64,
                open_at: self.limits.open_at,
                min_samples: self.limits.min_samples,
                heat: Some((heat, open_on)),
            });
        }
        self.enter(BreakerState::Open, now);
        true
    }

    /// Adopts the fleet's opening at `at` (another node opened it first, or this node's own
    /// opening, timed by the store's clock): open from `at`, so its cool-down and ramp run on
    /// the fleet's clock. Already open, it only takes `at` as its start. True if it was not
    /// open before.
    pub fn adopt_open(&mut self, at: Instant, now: Instant) -> bool {
        self.advance(now);
        let opens = self.state != BreakerState::Open;
        if opens {
            self.enter(BreakerState::Open, at);
        } else {
            self.since = at;
        }
        self.advance(now);
        opens
    }

    /// Its limits.
    pub fn limits(&self) -> BreakerLimits {
        self.limits
    }

    /// Where it stands at `now` (open turns half-open after the cool-down, half-open closed
    /// after the ramp).
    pub fn state(&mut self, now: Instant) -> BreakerState {
        self.advance(now);
        self.state
    }

    /// Whether the due retry `id` of its scope may fire at `now`: always when closed, never
    /// when open, and half-open as long as the retries released stay within the ramp's share
    /// of the retries asked since it began (each counted once: a held retry asked again
    /// does not raise the share of the others).
    pub fn admit(&mut self, id: &MessageId, now: Instant) -> bool {
        match self.state(now) {
            BreakerState::Closed => true,
            BreakerState::Open => false,
            BreakerState::HalfOpen => {
                let share = ramp_share(now.saturating_duration_since(self.since), self.limits.ramp);
                if !self.asked.contains(id) {
                    self.asked.insert(id.clone());
                }
                // Each retry another node released is one the fleet asked: the fleet's ramp
                // grows with its releases as one node's does, not N times faster.
                let f = &self.fleet;
                let allowed = share * (self.asked.len() as u64 + f.others) as f64 + 1e-9;
                let within_ramp = (f.others + self.released + 1) as f64 <= allowed;
                // This node's part of what was left at the last totals.
                let left = (allowed - (f.others + f.mine_at_totals) as f64).max(0.0);
                let part = (left.floor() as u64).div_ceil(f.nodes.max(1));
                let within_part = self.released - f.mine_at_totals < part;
                let admit = within_ramp && within_part;
                self.released += u64::from(admit);
                admit
            }
        }
    }

    /// The live nodes of the fleet whose ramp this one shares (1: its own; the gate sets it
    /// at each sync, and back to 1 when the store does not answer).
    pub fn set_fleet_nodes(&mut self, nodes: usize) {
        self.fleet.nodes = nodes.max(1) as u64;
        if nodes <= 1 {
            self.fleet.others = 0;
            self.fleet.mine_at_totals = 0;
        }
    }

    /// Half-open (as last advanced): the ramp it is in (its transitions so far) and the
    /// retries it released in this ramp not yet sent to the fleet, now counted as sent.
    pub fn take_released(&mut self) -> Option<(u64, u64)> {
        if self.state != BreakerState::HalfOpen {
            return None;
        }
        let unsent = self.released - self.fleet.sent;
        self.fleet.sent = self.released;
        Some((self.transitions, unsent))
    }

    /// The fleet released `total` retries in the ramp `ramp` (as [`Breaker::take_released`]
    /// named it), this node's sent ones included: if it is still in that ramp, the others'
    /// part of it is what its ramp counts from now on.
    pub fn fleet_released(&mut self, ramp: u64, total: u64, now: Instant) {
        self.advance(now);
        if self.state != BreakerState::HalfOpen || self.transitions != ramp {
            return;
        }
        self.fleet.others = total.saturating_sub(self.fleet.sent);
        self.fleet.mine_at_totals = self.released;
    }

    /// How many times it changed state.
    pub fn transitions(&self) -> u64 {
        self.transitions
    }

    /// The states it entered, in order (the first 100).
    pub fn history(&self) -> &[BreakerState] {
        &self.history
    }

    /// What it saw each time it opened, in order (the first 100).
    pub fn openings(&self) -> &[Opening] {
        &self.openings
    }

    fn advance(&mut self, now: Instant) {
        let in_state = now.saturating_duration_since(self.since);
        if self.state == BreakerState::Open && in_state >= self.limits.cool_down {
            let at = self.since + self.limits.cool_down;
            self.enter(BreakerState::HalfOpen, at);
        }
        let in_state = now.saturating_duration_since(self.since);
        if self.state == BreakerState::HalfOpen && in_state >= self.limits.ramp {
            let at = self.since + self.limits.ramp;
            self.enter(BreakerState::Closed, at);
        }
    }

    fn enter(&mut self, state: BreakerState, at: Instant) {
        self.state = state;
        self.since = at;
        self.asked.clear();
        self.released = 0;
        self.fleet = RampShare {
            nodes: self.fleet.nodes,
            ..RampShare::default()
        };
        self.transitions += 1;
        if self.history.len() < MAX_HISTORY {
            self.history.push(state);
        }
        if state == BreakerState::Open {
            // The half-open that follows judges what happens after the cool-down.
            self.outcomes.clear();
            self.samples = 0;
            self.failed = 0;
        }
    }

    fn prune(&mut self, now: Instant) {
        let Some(start) = now.checked_sub(self.limits.window) else {
            return;
        };
        while let Some(&run) = self.outcomes.front() {
            if run.at > start {
                break;
            }
            self.outcomes.pop_front();
            self.samples -= run.count;
            if run.failed {
                self.failed -= run.count;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> BreakerLimits {
        BreakerLimits {
            open_at: Some(0.5),
            open_on_heat: None,
            min_samples: 10,
            window: Duration::from_secs(10),
            cool_down: Duration::from_secs(30),
            ramp: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_breaker_opens_on_heat_whatever_the_share_and_again_while_the_heat_stays_up() {
        let t0 = Instant::now();
        let hot = BreakerLimits {
            open_at: None,
            open_on_heat: Some(5.0),
            ..limits()
        };
        let mut b = Breaker::new(hot, t0);
        // No share opens it: every tree failed, well past min_samples.
        for _ in 0..50 {
            assert_eq!(b.record(true, t0), BreakerState::Closed);
        }
        assert!(!b.heat_seen(4.9, t0), "below the heat");
        assert!(b.heat_seen(5.0, t0), "at the heat");
        assert_eq!(b.state(t0), BreakerState::Open);
        assert!(!b.heat_seen(9.0, t0 + s(1)), "open already");
        assert_eq!(
            b.openings(),
            [Opening {
                failed: 50,
                samples: 50,
                open_at: None,
                min_samples: 10,
                heat: Some((5.0, 5.0)),
            }]
        );
        // Half-open after the cool-down: a failure still seeing the heat opens it again.
        assert_eq!(b.state(t0 + s(30)), BreakerState::HalfOpen);
        assert!(b.heat_seen(6.0, t0 + s(31)));
        assert_eq!(b.state(t0 + s(31)), BreakerState::Open);
        // A breaker without open_on_heat never opens on heat.
        let mut cool = Breaker::new(limits(), t0);
        assert!(!cool.heat_seen(1e9, t0));
        assert_eq!(cool.state(t0), BreakerState::Closed);
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn id(n: u32) -> MessageId {
        MessageId::from(format!("m{n}").as_str())
    }

    #[test]
    fn closed_open_half_open_ramp_reopen_and_closed_over_manual_time() {
        let t0 = Instant::now();
        let mut b = Breaker::new(limits(), t0);
        // Below min_samples it stays closed whatever fails.
        for _ in 0..9 {
            assert_eq!(b.record(true, t0), BreakerState::Closed);
        }
        // The tenth sample at a failed share of 100%: open.
        assert_eq!(b.record(true, t0), BreakerState::Open);
        assert!(!b.admit(&id(0), t0 + s(29)), "held while open");
        // After the cool-down: half-open, releasing 10% at first.
        assert_eq!(b.state(t0 + s(30)), BreakerState::HalfOpen);
        let released = (0..100).filter(|i| b.admit(&id(*i), t0 + s(30))).count();
        assert_eq!(released, 10, "10% at the ramp's start");
        // Halfway up the ramp: 55% of what is asked from then on (the counts carry over).
        let mut b2 = Breaker::new(limits(), t0);
        for _ in 0..10 {
            b2.record(true, t0);
        }
        let mid = t0 + s(30) + s(30);
        let released = (0..100).filter(|i| b2.admit(&id(*i), mid)).count();
        assert_eq!(released, 55);
        // Failures during the ramp open it again.
        let during = t0 + s(40);
        for _ in 0..9 {
            b.record(true, during);
        }
        assert_eq!(b.record(true, during), BreakerState::Open);
        assert!(!b.admit(&id(0), during));
        // Cool-down and the whole ramp with the dependency healthy: closed, everything fires.
        let healed = during + s(30);
        assert_eq!(b.state(healed), BreakerState::HalfOpen);
        for _ in 0..20 {
            b.record(false, healed);
        }
        assert_eq!(b.state(healed + s(60)), BreakerState::Closed);
        assert!(
            (0..1000).all(|i| b.admit(&id(i), healed + s(60))),
            "all held retries fire once closed"
        );
        assert_eq!(
            b.transitions(),
            5,
            "open, half-open, open, half-open, closed"
        );
    }

    #[test]
    fn a_flood_of_trees_is_kept_in_runs_a_grain_long_and_counted_whole() {
        let t0 = Instant::now();
        let mut b = Breaker::new(limits(), t0);
        // 100,000 successes and 60,000 failures, a millisecond's worth each: four runs.
        for _ in 0..100_000 {
            b.record(false, t0);
        }
        let t1 = t0 + Duration::from_millis(1);
        for _ in 0..100_000 {
            b.record(false, t1);
        }
        let t2 = t1 + Duration::from_millis(1);
        for i in 0..60_000 {
            let opened = b.record(true, t2 + Duration::from_micros(i % 900)) == BreakerState::Open;
            assert!(!opened, "60,000 of 260,000 failed is below 50%");
        }
        assert_eq!(b.outcomes.len(), 3, "{:?}", b.outcomes);
        assert_eq!((b.samples, b.failed), (260_000, 60_000));
        // Past the window the first two runs leave, whole: 60,000 of 60,000 failed.
        let later = t0 + s(10) + Duration::from_micros(1_500);
        assert_eq!(b.record(true, later), BreakerState::Open);
    }

    #[test]
    fn a_failed_share_below_open_at_keeps_it_closed_and_old_outcomes_leave_the_window() {
        let t0 = Instant::now();
        let mut b = Breaker::new(limits(), t0);
        for i in 0..40 {
            // 40% failed.
            assert_eq!(b.record(i % 5 >= 3, t0), BreakerState::Closed);
        }
        // Ten seconds on, the old successes are gone; ten failures alone reach 100%.
        let later = t0 + s(11);
        for _ in 0..9 {
            assert_eq!(b.record(true, later), BreakerState::Closed);
        }
        assert_eq!(b.record(true, later), BreakerState::Open);
    }

    #[test]
    fn held_retries_are_released_at_the_ramps_share_and_all_once_closed() {
        let t0 = Instant::now();
        let mut b = Breaker::new(limits(), t0);
        for _ in 0..10 {
            b.record(true, t0);
        }
        // 1,000 retries held; asked every second from the cool-down on, they are released
        // at a rising share and the rest once closed: none is dropped.
        let mut held: Vec<u32> = (0..1000).collect();
        let mut released_at = Vec::new();
        for sec in 0..=90 {
            let now = t0 + s(30 + sec);
            let before = held.len();
            held.retain(|i| !b.admit(&id(*i), now));
            released_at.push(before - held.len());
        }
        assert!(held.is_empty());
        assert_eq!(b.state(t0 + s(120)), BreakerState::Closed);
        assert!(
            released_at[0] >= 90 && released_at[0] <= 110,
            "{released_at:?}"
        );
    }

    #[test]
    fn held_retries_asked_again_and_again_are_released_as_the_ramp_rises_not_at_once() {
        let t0 = Instant::now();
        let mut b = Breaker::new(limits(), t0);
        for _ in 0..10 {
            b.record(true, t0);
        }
        // 100 retries held, each asked 50 times at the ramp's start: still 10 released.
        let start = t0 + s(30);
        let mut held: Vec<u32> = (0..100).collect();
        for _ in 0..50 {
            held.retain(|i| !b.admit(&id(*i), start));
        }
        assert_eq!(held.len(), 90);
        // Halfway: 55 in all; at the end of the ramp, the rest.
        held.retain(|i| !b.admit(&id(*i), start + s(30)));
        assert_eq!(held.len(), 45);
        held.retain(|i| !b.admit(&id(*i), start + s(60)));
        assert!(held.is_empty());
    }

    #[test]
    fn an_adopted_opening_runs_its_cool_down_and_ramp_from_the_fleets_time() {
        let t0 = Instant::now();
        let mut b = Breaker::new(limits(), t0);
        // Opened by another node 40 s before this node heard of it: half-open since 10 s.
        let now = t0 + s(100);
        b.adopt_open(now - s(40), now);
        assert_eq!(b.state(now), BreakerState::HalfOpen);
        assert_eq!(b.history(), [BreakerState::Open, BreakerState::HalfOpen]);
        // Open on its own a moment before the fleet's record, it takes the record's time.
        let mut c = Breaker::new(limits(), t0);
        for _ in 0..10 {
            c.record(true, t0 + s(1));
        }
        c.adopt_open(t0, t0 + s(1));
        assert_eq!(c.state(t0 + s(30)), BreakerState::HalfOpen);
        assert_eq!(
            c.transitions(),
            2,
            "opened once, then half-open: no second opening"
        );
        // Opened on the fleet's counts: once, with what the fleet saw.
        let mut d = Breaker::new(limits(), t0);
        assert!(d.open_on(12, 20, t0));
        assert!(!d.open_on(12, 20, t0), "already open");
        assert_eq!(d.openings()[0].failed_share(), 0.6);
    }

    /// Nodes holding 1,000 retries each, whose every released retry makes room for a new one
    /// to be asked (as a node's claims do), asked round after round at one time of the ramp;
    /// a fleet's breakers sync (each sends what it released, and reads the fleet's sum)
    /// between rounds. Returns the retries released in all after each round.
    fn ramp_rounds(nodes: usize, at: &[(Duration, usize)]) -> Vec<u64> {
        let t0 = Instant::now();
        let mut fleet: Vec<Breaker> = (0..nodes).map(|_| Breaker::new(limits(), t0)).collect();
        for b in &mut fleet {
            for _ in 0..10 {
                b.record(true, t0);
            }
            b.set_fleet_nodes(nodes);
        }
        // Per node: the next id to ask, and the ids held (asked, not released).
        let mut next = vec![0u32; nodes];
        let mut held: Vec<Vec<u32>> = vec![Vec::new(); nodes];
        let (mut store, mut released, mut out) = (0u64, 0u64, Vec::new());
        for &(into, rounds) in at {
            let now = t0 + s(30) + into;
            for _ in 0..rounds {
                for (n, b) in fleet.iter_mut().enumerate() {
                    while held[n].len() < 1000 {
                        held[n].push(n as u32 * 1_000_000 + next[n]);
                        next[n] += 1;
                    }
                    let before = held[n].len();
                    held[n].retain(|i| !b.admit(&id(*i), now));
                    released += (before - held[n].len()) as u64;
                }
                let ramps: Vec<(u64, u64)> = fleet
                    .iter_mut()
                    .map(|b| b.take_released().unwrap())
                    .collect();
                store += ramps.iter().map(|(_, n)| n).sum::<u64>();
                for (b, (ramp, _)) in fleet.iter_mut().zip(ramps) {
                    b.fleet_released(ramp, store, now);
                }
                out.push(released);
            }
        }
        out
    }

    /// The fleet's ramp is one node's: at its start the fleet releases what one node alone
    /// releases, not N times that, and as it rises the fleet follows one node (within a few
    /// retries a node), however the nodes' releases interleave with their syncs.
    #[test]
    fn on_a_fleet_the_ramp_counts_every_nodes_releases() {
        let start = [(Duration::ZERO, 1)];
        let one = ramp_rounds(1, &start)[0];
        assert_eq!(one, 100, "10% of one node's held, at once");
        let three = ramp_rounds(3, &start)[0];
        assert!(
            (one..=one + 3).contains(&three),
            "the fleet's first release {three}"
        );
        // Ten rounds at the start, ten halfway up the ramp.
        let at = [(Duration::ZERO, 10), (s(30), 10)];
        let (one, three) = (ramp_rounds(1, &at), ramp_rounds(3, &at));
        let (one_start, three_start) = (one[9], three[9]);
        assert!(
            three_start <= one_start + 10 && three_start + 10 >= one_start,
            "at the start: one node {one_start}, three {three_start}"
        );
        let (one_mid, three_mid) = (one[19], three[19]);
        assert!(
            three_mid * 10 <= one_mid * 11 && three_mid * 10 >= one_mid * 9,
            "halfway: one node {one_mid}, three {three_mid}"
        );
        // The store down: each node's own ramp again.
        let t0 = Instant::now();
        let mut b = Breaker::new(limits(), t0);
        for _ in 0..10 {
            b.record(true, t0);
        }
        b.set_fleet_nodes(3);
        b.set_fleet_nodes(1);
        let own = (0..1000).filter(|i| b.admit(&id(*i), t0 + s(30))).count();
        assert_eq!(own, 100);
    }

    #[test]
    fn the_ramp_share_rises_linearly_from_ten_percent() {
        assert_eq!(ramp_share(Duration::ZERO, s(60)), 0.1);
        assert!((ramp_share(s(30), s(60)) - 0.55).abs() < 1e-12);
        assert_eq!(ramp_share(s(60), s(60)), 1.0);
        assert_eq!(ramp_share(s(99), s(60)), 1.0);
    }
}
